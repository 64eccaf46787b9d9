// The simulator's semaphore world (issue 50): N clients take and release leases of one counting
// semaphore of at most `leases` holders, each round run by zklock's own state machine
// (src/protocol/semaphore_fsm.hpp, the one semaphore.cpp's driver runs on a session), against the
// model server (model_zk.hpp), under every delivery order a seeded scheduler picks, with
// connection losses (each request not yet applied is applied, or not, or for a write later from the
// leader's pipeline while the session's reads may not see it yet; every reply lost), session
// expiries, cancellations, the loss of the internal lock while a round waits, and the container
// reaper taking an empty "leases".
//
// The internal lock ("<path>/locks") is the mutex's acquire, which sim.cpp explores on its own: here
// it is a service that grants one client at a time in order and can be lost (its node deleted, as
// an expiry or an operator would), so that a round that waits can find its internal lock gone.
//
// Checked at every step: at most `leases` holders; nobody is stuck (nothing in flight anywhere,
// and a client waits on the leases although at most N are at the server, or nobody holds one); no
// busy loop (a round lists the leases again only when their watch fired or the connection
// changed); no failure without a cause in this world (a lost create's reply is not one: the
// round finds its lease by its guid, or creates it again). At the end: every client finished its cycles; no lease left under
// "<path>/leases"; no watch left on the server.
//
//   zklock_sim_sem [--seeds N] [--seed S] [--first S] [--clients N] [--leases N] [--cycles N]
//                  [--trace] [--bug count-others|no-sweep|no-restart|no-recovery|no-barrier]
// Exit 0 if every seed passes (with --bug: exit 0 if some seed finds it, and says which).
#include "protocol/protocol.hpp"
#include "protocol/semaphore_fsm.hpp"

#include "cleanup_jobs.hpp"
#include "model_zk.hpp"
#include "runner.hpp"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <functional>
#include <map>
#include <optional>
#include <random>
#include <string>
#include <vector>

namespace zklock::sim {
namespace {

namespace zd = zklock::detail;

enum class bug { none, count_others, no_sweep, no_restart, no_recovery, no_barrier };
bug g_bug = bug::none;
// (over all seeds: lost creates looked for by their guid, and how many of them had been applied)
std::uint64_t g_looked_for = 0, g_found = 0;

/// The machine's decisions, with a defect re-introduced when asked (the simulator's copy).
struct sim_decisions {
    static zd::semaphore_count count(const std::vector<std::string>& children, std::string_view mine) {
        auto c = zd::semaphore_decisions::count(children, mine);
        if (g_bug == bug::count_others && c.present) --c.leases; // ours not counted
        return c;
    }
    static bool within(std::size_t leases, int max_leases) {
        return zd::semaphore_decisions::within(leases, max_leases);
    }
};
using fsm = zd::basic_semaphore_fsm<sim_decisions>;
using action = zd::semaphore_action;

struct config {
    int clients = 4;
    int leases = 2;
    int cycles = 3;
    bool trace = false;
    std::uint64_t max_steps = 20000;
};

const std::string sem_path = "/sem";
const std::string leases_path = sem_path + "/leases";

enum class tag {
    read,
    made,
    made_list,
    listing,
    make,
    abandon,
    cleanup, // a request of a release, a background delete or a sweep (cleanup_fsm)
    unwatch,
    barrier
};

struct client {
    enum class state { idle, queued, round, held, releasing, done };
    int id = 0;
    std::int64_t session = 0;
    state st = state::idle;
    int cycles_left = 0;
    std::string guid;
    std::optional<fsm> m;
    action act;
    zd::semaphore_input in;
    int due = 0;
    bool waiting = false;       // act is `wait`, not yet resolved
    bool stop = false;          // the user gave up
    bool internal_lost = false; // its internal lock was lost during this round
    bool recheck = false;       // the leases' watch fired
    bool watch_set = false;     // the last listing's watch is on the server (not fired)
    int listings = 0;           // listings of the leases since the last thing that could change them
    int drops = 0;              // connection losses during this round
    std::string node;           // held, or being released
    std::deque<std::pair<std::uint64_t, tag>> outstanding;
    std::deque<request> inbound;
    /// Writes of a dropped connection already in the leader's pipeline: applied later (their
    /// replies lost), before the session's next write; its reads may not see them yet (a follower
    /// that lags: reads are not synced). What the recovery's barrier is for.
    std::deque<request> limbo;
    cleanup_jobs jobs; // its release, background deletes and sweeps (cleanup_fsm), in flight or waiting
    int holds = 0;
};

const char* name(client::state s) {
    static const char* names[] = {"idle", "queued", "round", "held", "releasing", "done"};
    return names[static_cast<int>(s)];
}
const char* name(action::kind k) {
    static const char* names[] = {
        "flight",    "make_leases", "read_n", "create",      "list_for_guid", "read_node", "wait_connected",
        "list_path", "list_leases", "wait",   "check_lease", "grant",         "fail",      "restart"};
    return names[k];
}
zd::outcome outcome_of(int rc) {
    if (rc == ok) return zd::outcome::ok;
    if (rc == no_node) return zd::outcome::no_node;
    if (rc == connection_loss) return zd::outcome::connection;
    return zd::outcome::other;
}

class world {
public:
    world(std::uint64_t seed, const config& c) : rng_(seed), cfg_(c) {
        for (int i = 0; i < c.clients; ++i) {
            client cl;
            cl.id = i;
            cl.session = server_.open_session();
            cl.cycles_left = c.cycles;
            clients_.push_back(cl);
        }
        auto s = server_.open_session(); // the semaphore's path, made once (a persistent node)
        request r;
        r.path = sem_path;
        server_.apply(s, r);
        server_.outbox(s).clear();
        server_.end_session(s);
    }

    std::string run() {
        for (std::uint64_t step = 0; step < cfg_.max_steps; ++step) {
            if (!violation_.empty()) return violation_;
            if (all_done()) return check_end();
            if (!do_one())
                return "deadlock: nothing is enabled and not every client is done (" + states() + ")";
            check_stuck();
        }
        return "liveness: not done within " + std::to_string(cfg_.max_steps) + " steps (" + states() + ")";
    }

    std::vector<std::string> trace;
    int holds() const {
        int n = 0;
        for (auto& c : clients_) n += c.holds;
        return n;
    }

private:
    void log(const std::string& line) {
        if (cfg_.trace) trace.push_back(line);
    }
    std::string who(const client& c) const {
        return "c" + std::to_string(c.id) + "/s" + std::to_string(c.session);
    }
    std::string states() const {
        std::string s;
        for (auto& c : clients_)
            s += who(c) + ":" + name(c.st) +
                 (c.st == client::state::round ? std::string("/") + name(c.act.what) : "") + " ";
        return s;
    }
    bool all_done() const {
        for (auto& c : clients_)
            if (c.st != client::state::done || !c.outstanding.empty() || !c.limbo.empty()) return false;
        return true;
    }
    std::size_t leases_at_server() const {
        std::size_t n = 0;
        for (auto& k : server_.children(leases_path)) n += zd::is_semaphore_lease(k) ? 1 : 0;
        return n;
    }

    /// Liveness, at every step: nothing in flight anywhere, and a client waits on the leases
    /// although fewer than N are at the server, or although nobody holds one (nobody could ever
    /// release one to wake it: only a give-up would end the wait).
    void check_stuck() {
        bool waiter = false, holder = false;
        for (auto& c : clients_) {
            if (!c.inbound.empty() || !c.limbo.empty() || !c.outstanding.empty() ||
                !server_.outbox(c.session).empty())
                return;
            waiter = waiter || (c.waiting && !c.stop && !lost_seen(c));
            holder = holder || c.st == client::state::held || c.st == client::state::releasing;
        }
        const auto n = leases_at_server();
        if (waiter && (n <= static_cast<std::size_t>(cfg_.leases) || !holder) && violation_.empty())
            violation_ = "stuck: nothing in flight, " + std::to_string(n) + " leases at the server, " +
                         (holder ? "" : "nobody holds one, ") + "and a client waits on them (" + states() +
                         ")";
    }
    std::string check_end() {
        if (auto left = server_.children(leases_path); !left.empty()) {
            std::string names;
            for (auto& n : left) names += n + " ";
            return "leftover: every client is done and the leases hold " + names;
        }
        if (auto w = server_.watches(); !w.empty()) {
            std::string names;
            for (auto& n : w) names += n + "; ";
            return "watch left: every client is done and the server still holds " + names;
        }
        return {};
    }

    std::uint64_t send(client& c, request r, tag t) {
        r.id = ++next_id_;
        log(who(c) + " sends #" + std::to_string(r.id) + " " + r.path + (r.watch ? " (watch)" : ""));
        c.outstanding.emplace_back(r.id, t);
        c.inbound.push_back(r);
        return r.id;
    }
    std::uint64_t send(client& c, op kind, const std::string& path, tag t, bool watch = false) {
        request r;
        r.kind = kind;
        r.path = path;
        r.watch = watch;
        return send(c, r, t);
    }
    void delete_in_background(client& c, const std::string& path) {
        c.jobs.start({zd::cleanup_fsm::of_node(path)}, jobs_io(c));
    }
    void sweep_by_guid(client& c, const std::string& guid) {
        log(who(c) + " sweeps the leases for its guid");
        c.jobs.start({zd::cleanup_fsm::of_guid(leases_path, guid)}, jobs_io(c));
    }
    /// How the cleanup machine's requests go out for `c` (cleanup_jobs.hpp).
    cleanup_jobs::io jobs_io(client& c) {
        return {[this, &c](const request& r) { return send(c, r, tag::cleanup); },
                [this, &c](const std::string& path) {
                    if (g_bug != bug::no_barrier) send(c, op::check, path, tag::barrier);
                },
                [this, &c] {
                    log(who(c) + " released");
                    finish_cycle(c);
                },
                [this](const std::string& why) {
                    if (violation_.empty()) violation_ = why;
                }};
    }
    std::string random_guid() { return sim::random_guid(rng_); }

    // ---- the internal lock: one holder at a time, in order; it can be lost
    void grant_internal() {
        const int id = queue_.front();
        queue_.pop_front();
        internal_ = id;
        auto& c = clients_[static_cast<std::size_t>(id)];
        log(who(c) + " holds the internal lock");
        start_round(c);
    }
    void release_internal(client& c) {
        if (internal_ == c.id) internal_ = -1;
    }

    // ---- the driver (semaphore.cpp's, on the model)
    void start_round(client& c) {
        c.guid = random_guid();
        // (--bug no-recovery: the machine without the guid, as before session 42: a lost create fails the round)
        c.m.emplace(fsm::config{sem_path, leases_path + "/_c_" + c.guid + "-lease-", cfg_.leases, false,
                                g_bug == bug::no_recovery ? std::string() : c.guid});
        c.st = client::state::round;
        c.internal_lost = false;
        c.recheck = false;
        c.listings = 0;
        c.drops = 0;
        run(c, c.m->start());
    }
    /// The driver learns that its internal lock was lost (its loss signal); `--bug no-restart`
    /// ignores it.
    static bool lost_seen(const client& c) { return c.internal_lost && g_bug != bug::no_restart; }
    void end_watch(client& c, const action& a) {
        if (!c.watch_set) return;
        c.watch_set = false;
        if (a.unwatch_at_server) send(c, op::remove_watches, leases_path, tag::unwatch);
    }
    void run(client& c, action a) {
        for (;;) {
            if (a.what != action::wait) end_watch(c, a);
            c.act = a;
            c.in = {};
            c.due = 0;
            switch (a.what) {
            case action::flight: {
                send(c, op::get_data, leases_path, tag::read);
                request r;
                r.kind = op::create;
                r.path = a.node;
                r.ephemeral = r.sequential = true;
                send(c, r, tag::made);
                send(c, op::get_children, sem_path, tag::made_list);
                c.recheck = false;
                send(c, op::get_children, leases_path, tag::listing, true);
                c.due = 4;
                return;
            }
            case action::make_leases: {
                request r;
                r.kind = op::create;
                r.path = leases_path;
                r.container = true;
                r.data = std::to_string(cfg_.leases);
                send(c, r, tag::make);
                c.due = 1;
                return;
            }
            case action::read_n:
                send(c, op::get_data, leases_path, tag::read);
                c.due = 1;
                return;
            case action::create: {
                request r;
                r.kind = op::create;
                r.path = a.node;
                r.ephemeral = r.sequential = true;
                send(c, r, tag::made);
                send(c, op::get_children, sem_path, tag::made_list);
                c.due = 2;
                return;
            }
            case action::list_for_guid: // (a barrier, then the listing: a lost create is found)
                log(who(c) + " looks for its lease by its guid");
                ++g_looked_for;
                if (g_bug != bug::no_barrier) send(c, op::check, leases_path, tag::barrier);
                send(c, op::get_children, leases_path, tag::listing);
                c.due = 1;
                return;
            case action::read_node:
                ++g_found;
                send(c, op::exists, a.node, tag::read);
                c.due = 1;
                return;
            case action::wait_connected: // (a reconnect is immediate here)
                break;
            case action::list_path:
                send(c, op::get_children, sem_path, tag::listing);
                c.due = 1;
                return;
            case action::list_leases:
                // A round lists the leases again only for a cause: their watch fired, the
                // connection changed, or its first listing was not usable. More is a busy loop.
                if (++c.listings > 2 && violation_.empty())
                    violation_ = "busy loop: " + who(c) + " lists the leases again with nothing changed";
                c.recheck = false;
                send(c, op::get_children, leases_path, tag::listing, true);
                c.due = 1;
                return;
            case action::wait:
                if (!c.recheck && !c.stop && !lost_seen(c)) {
                    c.waiting = true;
                    return;
                }
                break;
            case action::check_lease: // (the lease's premise is the clocked world's: lease_sim.cpp)
                c.in.rc = zd::semaphore_codes::ok;
                break;
            case action::grant:
                return grant(c);
            case action::fail:
                return abandon(c, a);
            case action::restart:
                return restart(c, a);
            }
            c.in.stop = c.stop;
            c.in.internal_lost = lost_seen(c);
            a = c.m->resume(std::move(c.in));
        }
    }
    void resume(client& c) {
        c.in.stop = c.stop;
        c.in.internal_lost = lost_seen(c);
        run(c, c.m->resume(std::move(c.in)));
    }
    void wake(client& c) {
        c.waiting = false;
        resume(c);
    }

    void grant(client& c) {
        c.node = c.m->node();
        c.m.reset();
        release_internal(c);
        c.st = client::state::held;
        ++c.holds;
        log(who(c) + " GRANTED " + c.node);
        int holders = 0;
        std::string names;
        for (auto& o : clients_)
            if (o.st == client::state::held) {
                ++holders;
                names += who(o) + " " + o.node + " ";
            }
        if (holders > cfg_.leases && violation_.empty())
            violation_ = "semaphore: " + std::to_string(holders) + " holders of at most " +
                         std::to_string(cfg_.leases) + ": " + names;
    }
    void abandon(client& c, const action& a) {
        c.node = c.m->node();
        log(who(c) + " round failed (" + std::to_string(a.why) + ")" +
            (c.node.empty() ? "" : ", deletes " + c.node));
        // Causes this world has: the user gave up (or the session ended), the reaper's races, our
        // lease gone with an expiry, and more than five creates whose replies were lost in one
        // round (a lost create is looked for by its guid and made again, five times at most).
        const bool caused = a.why == action::stop || a.why == action::node_deleted ||
                            (a.why == action::request_failed &&
                             (a.rc == no_node || (a.rc == connection_loss && c.drops > 5)));
        if (!caused && violation_.empty())
            violation_ = "spurious failure: " + who(c) + "'s round failed (reason " + std::to_string(a.why) +
                         ", rc " + std::to_string(a.rc) + ")";
        if (a.delete_by_guid && g_bug != bug::no_sweep) sweep_by_guid(c, c.guid);
        c.m.reset();
        release_internal(c);
        if (c.node.empty()) return finish_cycle(c);
        c.st = client::state::releasing;
        send(c, op::remove, c.node, tag::abandon);
    }
    void restart(client& c, const action& a) {
        c.node = c.m->node();
        log(who(c) + " starts over (its internal lock was lost)");
        if (a.delete_by_guid && g_bug != bug::no_sweep) sweep_by_guid(c, c.guid); // (a create's fate unknown)
        c.m.reset();
        if (!c.node.empty()) delete_in_background(c, c.node);
        c.node.clear();
        c.st = client::state::queued;
        queue_.push_back(c.id);
    }
    void finish_cycle(client& c) {
        c.node.clear();
        c.st = --c.cycles_left > 0 ? client::state::idle : client::state::done;
    }
    void release(client& c) {
        log(who(c) + " releases " + c.node);
        c.st = client::state::releasing;
        c.jobs.start({zd::cleanup_fsm::of_node(c.node), true}, jobs_io(c));
    }

    void on_event(client& c, const event& e) {
        log(who(c) + " event " + std::to_string(e.type) + " " + e.path);
        if (e.path != leases_path || e.type != child_event) return;
        c.watch_set = false;
        c.listings = 0;
        c.recheck = true;
        if (c.waiting) wake(c);
    }

    void on_reply(client& c, const reply& r) {
        if (c.outstanding.empty() || c.outstanding.front().first != r.id) {
            violation_ = "model: reply out of order for " + who(c);
            return;
        }
        const tag t = c.outstanding.front().second;
        c.outstanding.pop_front();
        switch (t) {
        case tag::cleanup: // the library's own machine (session/cleanup_fsm.hpp)
            return c.jobs.on_reply(r, r.rc != connection_loss, jobs_io(c)); // (lost: the connection is down)
        case tag::unwatch:
        case tag::barrier:
            return;
        case tag::abandon:
            if (r.rc != ok && r.rc != no_node) delete_in_background(c, c.node);
            return finish_cycle(c);
        default:
            break;
        }
        if (c.st != client::state::round) {
            violation_ = "model: a reply for a round that is over, " + who(c);
            return;
        }
        switch (t) {
        case tag::read:
            c.in.read.result = outcome_of(r.rc);
            c.in.read.rc = r.rc;
            c.in.read.data = r.data;
            c.in.read.owner = r.owner;
            c.in.read.czxid = r.czxid;
            c.in.session = c.session;
            break;
        case tag::made:
            c.in.made.result = outcome_of(r.rc);
            c.in.made.rc = r.rc;
            c.in.made.path = r.path;
            c.in.made.czxid = r.czxid;
            if (r.rc == ok) log(who(c) + " created " + r.path);
            break;
        case tag::made_list:
            c.in.made.listed = outcome_of(r.rc);
            c.in.made.list_rc = r.rc;
            c.in.made.children = r.children;
            break;
        case tag::listing:
            c.in.listing.result = outcome_of(r.rc);
            c.in.listing.rc = r.rc;
            c.in.listing.children = r.children;
            if ((c.act.what == action::flight || c.act.what == action::list_leases) && r.rc == ok)
                c.watch_set = true;
            break;
        case tag::make:
            c.in.made.result = outcome_of(r.rc);
            c.in.made.rc = r.rc;
            c.in.made.exists = r.rc == node_exists;
            break;
        default:
            break;
        }
        if (--c.due == 0) resume(c);
    }

    // ---- faults
    void drop_connection(client& c) {
        log(who(c) + " CONNECTION LOST");
        c.listings = 0;
        ++c.drops;
        for (auto& r : c.inbound) {
            const auto fate = rng_() % 3;
            if (fate == 0) {
                server_.apply(c.session, r);
            } else if (fate == 1 && is_write(r.kind)) {
                log(who(c) + " ... #" + std::to_string(r.id) + " is in the leader's pipeline: applied later");
                c.limbo.push_back(r);
            }
        }
        c.inbound.clear();
        auto& box = server_.outbox(c.session);
        std::deque<message> kept;
        for (auto& m : box)
            if (std::holds_alternative<event>(m)) kept.push_back(m);
        box.swap(kept);
        const auto lost = c.outstanding.size(); // (what the machine sends next goes on the new connection)
        for (std::size_t i = 0; i < lost && !c.outstanding.empty(); ++i) {
            reply r;
            r.id = c.outstanding.front().first;
            r.rc = connection_loss;
            on_reply(c, r);
        }
        if (c.waiting) wake(c); // (a reconnect wakes the wait: the driver lists again)
        c.jobs.reconnected(jobs_io(c));
    }
    static bool is_write(op k) { return k == op::create || k == op::remove || k == op::check; }
    /// A write of a dropped connection is applied now; its reply was lost with the connection.
    void apply_limbo(client& c) {
        auto r = c.limbo.front();
        c.limbo.pop_front();
        log(who(c) + " ... #" + std::to_string(r.id) + " applied late (from the leader's pipeline)");
        server_.apply_late(c.session, r);
    }
    void expire(client& c) {
        log(who(c) + " SESSION EXPIRED in state " + name(c.st));
        c.limbo.clear(); // (never applied: the session is gone)
        server_.end_session(c.session);
        c.session = server_.open_session();
        c.inbound.clear();
        c.outstanding.clear();
        c.jobs.clear(); // (its nodes went with it)
        c.m.reset();
        c.waiting = false;
        c.watch_set = false;
        release_internal(c);
        for (auto it = queue_.begin(); it != queue_.end();) it = *it == c.id ? queue_.erase(it) : it + 1;
        if (c.st != client::state::idle && c.st != client::state::done) finish_cycle(c);
    }

    bool do_one() {
        std::vector<choice> enabled;
        for (auto& c : clients_) {
            if (!c.inbound.empty())
                enabled.push_back({10, [&] {
                                       auto r = c.inbound.front();
                                       c.inbound.pop_front();
                                       if (is_write(r.kind))
                                           while (!c.limbo.empty()) apply_limbo(c); // (the leader's order)
                                       server_.apply(c.session, r);
                                   }});
            if (!c.limbo.empty()) enabled.push_back({3, [&] { apply_limbo(c); }});
            if (!server_.outbox(c.session).empty())
                enabled.push_back({10, [&] {
                                       auto m = server_.outbox(c.session).front();
                                       server_.outbox(c.session).pop_front();
                                       if (auto* r = std::get_if<reply>(&m))
                                           on_reply(c, *r);
                                       else
                                           on_event(c, std::get<event>(m));
                                   }});
            if (c.st == client::state::idle)
                enabled.push_back({3, [&] {
                                       c.st = client::state::queued;
                                       c.stop = false;
                                       queue_.push_back(c.id);
                                       log(who(c) + " acquire");
                                   }});
            if (c.st == client::state::held) enabled.push_back({2, [&] { release(c); }});
            if (c.st == client::state::round && !c.stop)
                enabled.push_back({1, [&] {
                                       log(who(c) + " gives up during " + std::string(name(c.act.what)));
                                       c.stop = true;
                                       if (c.waiting) wake(c);
                                   }});
            if (faults_left_ > 0 && c.st != client::state::done) {
                enabled.push_back({1, [&] {
                                       --faults_left_;
                                       drop_connection(c);
                                   }});
                if (c.st == client::state::held || c.st == client::state::round)
                    enabled.push_back({1, [&] {
                                           --faults_left_;
                                           expire(c);
                                       }});
            }
        }
        if (internal_ < 0 && !queue_.empty()) enabled.push_back({5, [&] { grant_internal(); }});
        if (internal_ >= 0 && faults_left_ > 0)
            enabled.push_back({1, [&] {
                                   --faults_left_;
                                   auto& c = clients_[static_cast<std::size_t>(internal_)];
                                   log(who(c) + " LOSES its internal lock");
                                   c.internal_lost = true;
                                   internal_ = -1;
                                   if (c.waiting) wake(c);
                               }});
        if (server_.reapable())
            enabled.push_back({1, [&] {
                                   log("the container reaper deletes the empty leases");
                                   server_.reap();
                               }});
        return run_one(enabled, rng_);
    }

    std::mt19937_64 rng_;
    config cfg_;
    model_server server_;
    std::vector<client> clients_;
    std::deque<int> queue_; // waiting for the internal lock, in order
    int internal_ = -1;     // its holder (-1: free)
    std::uint64_t next_id_ = 0;
    int faults_left_ = 6;
    std::string violation_;
};

bug parse_bug(const std::string& s) {
    if (s == "count-others") return bug::count_others;
    if (s == "no-sweep") return bug::no_sweep;
    if (s == "no-restart") return bug::no_restart;
    if (s == "no-recovery") return bug::no_recovery;
    if (s == "no-barrier") return bug::no_barrier;
    std::fprintf(stderr,
                 "zklock_sim_sem: unknown --bug %s (count-others, no-sweep, no-restart, no-recovery, "
                 "no-barrier)\n",
                 s.c_str());
    std::exit(2);
}

} // namespace
} // namespace zklock::sim

int main(int argc, char** argv) {
    using namespace zklock::sim;
    config cfg;
    seed_runner r{"zklock_sim_sem"};
    r.parse(
        argc, argv,
        [&](const std::string& a, auto& next) {
            if (a == "--clients")
                cfg.clients = std::stoi(next());
            else if (a == "--leases")
                cfg.leases = std::stoi(next());
            else if (a == "--cycles")
                cfg.cycles = std::stoi(next());
            else
                return false;
            return true;
        },
        [](const std::string& name) { g_bug = parse_bug(name); },
        "[--seeds N] [--seed S] [--first S] [--clients N] [--leases N] [--cycles N] [--trace] "
        "[--bug count-others|no-sweep|no-restart|no-recovery|no-barrier]");
    cfg.trace = r.trace;
    const int rc = r.run(
        [&](std::uint64_t s) {
            world w(s, cfg);
            auto v = w.run();
            return seed_runner::outcome{v, static_cast<std::uint64_t>(w.holds()), std::move(w.trace)};
        },
        [&](std::uint64_t s) {
            return "--seed " + std::to_string(s) + " --clients " + std::to_string(cfg.clients) +
                   " --leases " + std::to_string(cfg.leases) + " --cycles " + std::to_string(cfg.cycles);
        },
        std::to_string(cfg.clients) + " clients x " + std::to_string(cfg.cycles) + " cycles, at most " +
            std::to_string(cfg.leases) + " leases");
    std::printf("zklock_sim_sem: lost creates looked for by their guid: %llu; found (applied): %llu\n",
                static_cast<unsigned long long>(g_looked_for), static_cast<unsigned long long>(g_found));
    return rc;
}
