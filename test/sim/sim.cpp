// The deterministic simulator (issue 50): N clients take and release one exclusive lock on a model
// ZooKeeper server (model_zk.hpp) while a seeded scheduler picks every delivery order the model
// allows and injects faults: connection losses (each request in flight applied, not, or, a write,
// later from the leader's pipeline while the next server's reads lag; every reply lost), session
// expiries, cancellations at any step; and the container reaper takes the empty lock path.
//
// Each client's acquire is zklock's own state machine (src/protocol/acquire_fsm.hpp), the one that
// src/recipes/mutex.cpp's driver runs on a real session: this file only performs its actions on the
// model, as the driver does on the C client (requests, watches and their removal, the guaranteed
// deletes). The release (with its marker), the background deletes and the sweeps by guid are the
// library's own machine too (src/session/cleanup_fsm.hpp), the one session_cleanup.cpp drives.
//
// Checked at every step: at most one holder; fencing tokens increase; a deletion makes at most one
// waiter act (herd-free);
// nobody is stuck (nothing in flight, nobody holds, someone waits); no acquire fails without a
// cause this world has (a give-up, an expiry, the reaper's races, lost creates). At the end: every client
// finished its cycles within the step bound (liveness); the lock path holds no node once every
// client is idle (no leftover); no watch of a client is left on the server.
// Premise (tested elsewhere: test/unit/lease_model_test.cpp and the fault tests): a holder is told
// of its loss before the server expires its session, so an expiry here ends the hold first.
//
//   zklock_sim [--seeds N] [--seed S] [--first S] [--clients N] [--cycles N] [--rw] [--trace]
//              [--bug no-guid-recovery|herd|always-alone|unwatch-once|no-barrier]
// Exit 0 if every seed passes (with --bug: exit 0 if some seed finds the bug, and says which).
#include "protocol/acquire_fsm.hpp"
#include "protocol/handoff_fsm.hpp"
#include "protocol/protocol.hpp"

#include "cleanup_jobs.hpp"
#include "model_zk.hpp"
#include "runner.hpp"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <optional>
#include <random>
#include <string>
#include <utility>
#include <vector>

namespace zklock::sim {
namespace {

namespace zd = zklock::detail;

enum class bug { none, no_guid_recovery, herd, always_alone, unwatch_once, no_barrier };
bug g_bug = bug::none;

/// The machine's decisions, with a past defect re-introduced when asked (the simulator's copy:
/// the library's decisions are acquire_decisions, untouched).
struct sim_decisions {
    static zd::listing_step after_listing(std::vector<std::string> children, std::string_view mine,
                                          std::string_view guid, const zd::acquire_shape& shape,
                                          zd::parent_cversion cv) {
        auto s = zd::acquire_decisions::after_listing(std::move(children), mine, guid, shape, cv);
        if (g_bug == bug::always_alone && s.what == zd::listing_step::wait) { // alone on every wait
            s.alone = true;
            s.watch_marker = false;
        }
        return s;
    }
    static zd::wake_step after_wake(zd::wake w, bool alone) {
        return zd::acquire_decisions::after_wake(w, alone);
    }
};
using fsm = zd::basic_acquire_fsm<sim_decisions>;
using action = zd::acquire_action;

struct config {
    int clients = 3;
    int cycles = 4;
    bool rw = false; ///< the read/write lock: each acquire is a reader or a writer (seeded)
    /// The in-process hand-off: this many local acquirers per session queue behind one node
    /// (handoff_fsm), `cycles` each, at most `handoff_bound` grants under one node. 0: off.
    int handoff = 0;
    std::uint32_t handoff_bound = 2;
    bool trace = false;
    std::uint64_t max_steps = 20000;
};

const std::string lock_path = "/lock";

enum class tag {
    create,
    create_list,
    parents,
    list,
    read,
    leases,
    marker,
    pred,
    unwatch,
    abandon,
    cleanup, // a request of a release, a background delete or a sweep (cleanup_fsm)
    barrier
};

struct client {
    enum class state { idle, acquiring, held, releasing, done };
    int id = 0;
    std::int64_t session = 0;
    state st = state::idle;
    int cycles_left = 0;
    std::string guid;
    std::optional<fsm> m; // the acquire in progress
    action act;           // its action being performed
    zd::acquire_input in; // ... whose result is being assembled
    int due = 0;          // ... replies still due for it
    bool waiting = false; // act is `wait`, not yet resolved
    bool stop = false;    // the user gave up (cancellation)
    // the watches of the last `watch` action, as the driver's callbacks see them
    std::string watched_pred, watched_marker;
    bool watching_children = false, pred_read_ok = false, recheck = false, pred_fired = false;
    bool pred_deleted = false, marked = false;
    std::string woke_by; // what fired the watch that ended a wait (the herd check)
    std::string node;    // held or being released
    bool waited = false;
    bool reader = false;                                   // this acquire is a read/write lock's reader
    std::deque<std::pair<std::uint64_t, tag>> outstanding; // sent, not yet answered (FIFO)
    std::deque<request> inbound;                           // sent, not yet applied by the server
    /// Requests of a dropped connection already in the leader's pipeline: applied later (their
    /// replies lost), before the session's next write, while its reads on the next connection's
    /// server may not see them yet (a follower that lags: reads are not synced).
    std::deque<request> limbo;
    cleanup_jobs jobs; // its release, background deletes and sweeps (cleanup_fsm), in flight or waiting
    std::map<std::uint64_t, std::string> unwatches; // a marker's watch removals in flight
    std::vector<std::string> unwatch_retry;         // ... lost with the connection: sent again
    int holds = 0;
    // The in-process hand-off (config::handoff): the session's queue and its local acquirers.
    struct local {
        enum class state { idle, queued, holding, done } st = state::idle;
        int cycles_left = 0;
        std::uint64_t id = 0; // the queue's id for its current acquire
    };
    std::optional<zd::handoff_fsm> queue;
    std::vector<local> locals;
    int lent = -1; // the local that holds now
    std::uint64_t next_local = 1;
};

const char* name(client::state s) {
    switch (s) {
    case client::state::idle:
        return "idle";
    case client::state::acquiring:
        return "acquiring";
    case client::state::held:
        return "held";
    case client::state::releasing:
        return "releasing";
    case client::state::done:
        return "done";
    }
    return "?";
}

const char* name(action::kind k) {
    static const char* names[] = {"wait_connected", "create_and_list", "make_parents", "list",
                                  "read_node",      "list_leases",     "watch",        "wait",
                                  "check_lease",    "grant",           "fail"};
    return names[k];
}

const char* op_name(op k) {
    static const char* names[] = {"create",         "remove", "get_children",
                                  "get_data",       "exists", "release_with_marker",
                                  "remove_watches", "check"};
    return names[static_cast<int>(k)];
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
            if (c.handoff > 0) {
                cl.queue.emplace(c.handoff_bound);
                cl.locals.resize(static_cast<std::size_t>(c.handoff));
                for (auto& l : cl.locals) l.cycles_left = c.cycles;
            }
            clients_.push_back(cl);
        }
        make_path();
    }

    /// Runs to the end; returns the violation, or an empty string.
    std::string run() {
        for (std::uint64_t step = 0; step < cfg_.max_steps; ++step) {
            if (!violation_.empty()) return violation_;
            if (all_done()) return check_end();
            if (!do_one())
                return "deadlock: no action is enabled and not every client is done (" + states() + ")";
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
    void make_path() {
        // a container, as the library makes it, through a throwaway session's request (the
        // reaper takes it once it was used and is empty: the clients make it again, make_parents)
        auto s = server_.open_session();
        request r;
        r.path = lock_path;
        r.container = true;
        server_.apply(s, r);
        server_.outbox(s).clear();
        server_.end_session(s);
    }

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
                 (c.st == client::state::acquiring ? std::string("/") + name(c.act.what) : "") + " ";
        return s;
    }
    bool all_done() const {
        for (auto& c : clients_)
            if (c.st != client::state::done || !c.outstanding.empty() || !c.limbo.empty()) return false;
        return true;
    }

    /// Liveness, at every step: nothing in flight anywhere, nobody holds the lock, and yet someone
    /// waits. Nothing but a fault or a give-up could wake it: a waiter must be granted once the
    /// lock is free and the network quiet.
    void check_stuck() {
        bool waiter = false;
        for (auto& c : clients_) {
            if (!c.inbound.empty() || !c.limbo.empty() || !c.outstanding.empty() ||
                !server_.outbox(c.session).empty() || c.st == client::state::held)
                return;
            waiter = waiter || (c.waiting && !c.stop);
            // a local acquirer queued behind a queue that acquires nothing
            for (auto& l : c.locals)
                waiter = waiter || (l.st == client::local::state::queued &&
                                    c.queue->state() == zd::handoff_fsm::phase::idle);
        }
        if (waiter && violation_.empty())
            violation_ =
                "stuck: nothing in flight, nobody holds the lock, and a client waits (" + states() + ")";
    }

    std::string check_end() {
        auto left = server_.children(lock_path);
        if (!left.empty()) {
            std::string names;
            for (auto& n : left)
                names += n + " (owner s" + std::to_string(server_.owner(lock_path + "/" + n)) + ") ";
            return "leftover: every client is done and the lock path still holds " + names;
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
        if (cfg_.trace)
            log(who(c) + " sends #" + std::to_string(r.id) + " " + op_name(r.kind) + " " + r.path +
                (r.watch ? " (watch)" : ""));
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

    /// The guaranteed delete (session_impl::delete_in_background): sent again after every
    /// connection loss until the server says the node is gone.
    void delete_in_background(client& c, const std::string& path) {
        log(who(c) + " deletes in the background " + path);
        start_job(c, {zd::cleanup_fsm::of_node(path)});
    }
    /// delete_by_guid_in_background: list the path, delete the node with our guid.
    void sweep_by_guid(client& c, const std::string& guid) {
        log(who(c) + " sweeps the path for its guid");
        start_job(c, {zd::cleanup_fsm::of_guid(lock_path, guid)});
    }
    /// How the cleanup machine's requests go out for `c` (cleanup_jobs.hpp).
    cleanup_jobs::io jobs_io(client& c) {
        return {[this, &c](const request& r) { return send(c, r, tag::cleanup); },
                [this, &c](const std::string& path) {
                    if (g_bug != bug::no_barrier) send(c, op::check, path, tag::barrier); // (its barrier)
                },
                [this, &c] {
                    log(who(c) + " released");
                    finish_cycle(c);
                },
                [this](const std::string& why) {
                    if (violation_.empty()) violation_ = why;
                }};
    }
    void start_job(client& c, cleanup_jobs::job j) { c.jobs.start(std::move(j), jobs_io(c)); }

    std::string random_guid() { return sim::random_guid(rng_); }

    // ---- the driver: performs the machine's actions on the model (as mutex.cpp's on a session)

    void start(client& c) {
        c.guid = random_guid();
        zd::acquire_shape shape;
        shape.watch_children = g_bug == bug::herd; // (the herd-prone variant, a strategy of its own)
        c.reader = cfg_.rw && rng_() % 2 == 0;
        if (cfg_.rw) shape.family = zd::lock_family::rw;
        // The defect re-introduced: names without the guid (Curator before its "protection"), so a
        // create whose reply was lost can be neither found nor told apart.
        const bool no_guid = g_bug == bug::no_guid_recovery;
        c.m.emplace(fsm::config{lock_path,
                                no_guid ? lock_path + "/lock-"
                                        : zd::protected_node_prefix(lock_path, c.guid, lock_dialect::curator,
                                                                    shape.family, c.reader),
                                no_guid ? std::string() : c.guid, shape});
        c.st = client::state::acquiring;
        c.stop = false;
        log(who(c) + (cfg_.rw ? c.reader ? " acquire (reader)" : " acquire (writer)" : " acquire"));
        run(c, c.m->start(false));
    }

    /// Performs `a` and those that follow at once, until one waits for the server (or the end).
    void run(client& c, action a) {
        for (;;) {
            if (a.what != action::wait) end_watches(c);
            for (auto& n : a.delete_nodes) delete_in_background(c, n);
            if (a.delete_by_guid) sweep_by_guid(c, c.guid);
            c.act = a;
            c.in = {};
            c.due = 0;
            switch (a.what) {
            case action::wait_connected: // (a reconnect is immediate here)
                c.in.ok = !c.stop;
                break;
            case action::create_and_list: {
                request r;
                r.kind = op::create;
                r.path = a.node;
                r.ephemeral = r.sequential = true;
                send(c, r, tag::create);
                send(c, op::get_children, lock_path, tag::create_list); // pipelined: one flight
                c.due = 2;
                log(who(c) + " creates " + a.node);
                return;
            }
            case action::make_parents: {
                request r;
                r.kind = op::create;
                r.path = lock_path;
                r.container = true;
                send(c, r, tag::parents);
                c.due = 1;
                return;
            }
            case action::list:
                if (a.barrier && g_bug != bug::no_barrier) send(c, op::check, lock_path, tag::barrier);
                send(c, op::get_children, lock_path, tag::list);
                c.due = 1;
                return;
            case action::read_node:
                send(c, op::exists, a.node, tag::read);
                c.due = 1;
                return;
            case action::list_leases:
                send(c, op::get_children, lock_path + "/leases", tag::leases);
                c.due = 1;
                return;
            case action::watch:
                c.recheck = c.pred_deleted = c.marked = c.pred_fired = c.pred_read_ok = false;
                c.watched_pred = a.watch_children ? lock_path : a.node;
                c.watching_children = a.watch_children;
                if (a.watch_marker) {
                    c.watched_marker = zd::release_marker(a.node);
                    send(c, op::exists, c.watched_marker, tag::marker, true);
                }
                send(c, a.watch_children ? op::get_children : op::get_data, c.watched_pred, tag::pred, true);
                c.due = 1;
                log(who(c) + " waits behind " + a.node + (a.watch_marker ? " and its marker" : ""));
                return;
            case action::wait:
                if (!c.recheck && !c.stop) {
                    c.waiting = true;
                    return;
                }
                if (c.recheck) acted(c);
                c.in.pred_deleted = c.pred_deleted;
                c.in.marked = c.marked;
                break;
            case action::check_lease: // (the lease's premise is tested on its own: see the top)
                c.in.result = zd::outcome::ok;
                break;
            case action::grant:
                return grant(c);
            case action::fail:
                return abandon(c);
            }
            c.in.stop = c.stop;
            a = c.m->resume(std::move(c.in));
        }
    }

    /// The result of the action in progress is in: on to the next.
    void resume(client& c) {
        c.in.stop = c.stop;
        auto a = c.m->resume(std::move(c.in));
        run(c, std::move(a));
    }

    /// session_impl::unwatch_everywhere: sent again on the reconnect if lost with the connection.
    void unwatch_marker(client& c, const std::string& marker) {
        c.unwatches[send(c, op::remove_watches, marker, tag::unwatch)] = marker;
    }

    /// The driver's end_watches: a watch not fired is removed from the server too.
    void end_watches(client& c) {
        if (!c.watched_marker.empty()) unwatch_marker(c, c.watched_marker);
        if (!c.watched_pred.empty() && c.pred_read_ok && !c.pred_fired && !c.marked)
            send(c, op::remove_watches, c.watched_pred, tag::unwatch);
        c.watched_marker.clear();
        c.watched_pred.clear();
        c.watching_children = false;
    }

    void grant(client& c) {
        c.st = client::state::held;
        c.node = c.m->node();
        c.waited = c.m->waited();
        const auto token = zd::fencing_token(c.m->czxid(), 0); // (guard::fencing_token)
        c.m.reset();
        ++c.holds;
        log(who(c) + " GRANTED " + c.node + " (fencing token " + std::to_string(token) + ")");
        // Fencing tokens increase: a writer's above every earlier grant's, any grant's above every
        // earlier writer's (readers granted together may come in any order among themselves).
        if ((token <= (c.reader ? max_writer_token_ : max_token_)) && violation_.empty())
            violation_ = "fencing: " + who(c) + " granted with token " + std::to_string(token) +
                         ", not above an earlier grant's " +
                         std::to_string(c.reader ? max_writer_token_ : max_token_);
        max_token_ = std::max(max_token_, token);
        if (!c.reader) max_writer_token_ = std::max(max_writer_token_, token);
        // Exclusion: a writer holds alone; readers share (the read/write lock).
        int holders = 0, writers = 0;
        std::string names;
        for (auto& o : clients_)
            if (o.st == client::state::held) {
                ++holders;
                writers += o.reader ? 0 : 1;
                names += who(o) + (o.reader ? " (reader) " : " ") + o.node + " ";
            }
        if (writers > 0 && holders > 1 && violation_.empty())
            violation_ = "mutual exclusion: " + std::to_string(holders) + " holders, " +
                         std::to_string(writers) + " writer(s): " + names;
        if (c.queue) perform_queue(c, c.queue->on_node(zd::handoff_fsm::node_result::granted, true, false));
    }

    // ---- the in-process hand-off (config::handoff): the queue's effects, as handoff.cpp's

    void perform_queue(client& c, const zd::handoff_fsm::effects& fx) {
        using e = zd::handoff_effect;
        for (const auto& f : fx) {
            switch (f.what) {
            case e::start_node:
                if (c.st != client::state::idle) {
                    if (violation_.empty())
                        violation_ = "hand-off: a node acquire started while " + who(c) + " is " + name(c.st);
                    return;
                }
                start(c);
                break;
            case e::cancel_node:
                log(who(c) + " cancels the queue's node acquire (its last waiter left)");
                c.stop = true;
                if (c.waiting) wake(c);
                break;
            case e::grant: {
                auto& l = local_of(c, f.id);
                if (c.st != client::state::held && violation_.empty())
                    violation_ = "hand-off: " + who(c) + " granted a local acquirer without holding the node";
                int holding = 0;
                for (auto& o : clients_)
                    for (auto& x : o.locals) holding += x.st == client::local::state::holding ? 1 : 0;
                if (holding > 0 && violation_.empty())
                    violation_ = "mutual exclusion (hand-off): " + who(c) +
                                 " grants while another local acquirer holds";
                l.st = client::local::state::holding;
                c.lent = static_cast<int>(&l - c.locals.data());
                ++c.holds;
                log(who(c) + " hands the lock to local " + std::to_string(c.lent) + " (grant " +
                    std::to_string(f.index) + " under " + c.node + ")");
                break;
            }
            case e::fail:
                local_done(c, local_of(c, f.id), "fails");
                break;
            case e::keep_node:
            case e::release_done:
            case e::forget:
                break;
            case e::drop_result:
            case e::release_node:
                release_queue_node(c);
                break;
            case e::drop_result_then_complete:
                release_queue_node(c);
                for (auto& [id, why] : f.leavers) local_done(c, local_of(c, id), "left");
                break;
            }
        }
        maybe_done(c);
    }
    client::local& local_of(client& c, std::uint64_t id) {
        for (auto& l : c.locals)
            if (l.id == id && l.st != client::local::state::done) return l;
        if (violation_.empty()) violation_ = "hand-off: an effect for an unknown local acquirer";
        return c.locals.front();
    }
    /// A local acquire ends (a failure, a give-up, or its release): a cycle spent.
    void local_done(client& c, client::local& l, const char* how) {
        log(who(c) + " local " + std::to_string(&l - c.locals.data()) + " " + how);
        l.st = --l.cycles_left > 0 ? client::local::state::idle : client::local::state::done;
    }
    /// The queue lets go of its node: a release in the background, as held_lock's.
    void release_queue_node(client& c) {
        if (c.st != client::state::held) return; // (gone with the session, or never held)
        const bool marks = c.waited && zd::may_mark_release(zd::last_segment(c.node), zd::lock_family::mutex,
                                                            lock_dialect::curator);
        log(who(c) + " releases the queue's node " + c.node + (marks ? " with its marker" : ""));
        start_job(c, {zd::cleanup_fsm::of_node(c.node, 0, marks)});
        c.node.clear();
        c.st = client::state::idle;
    }
    void maybe_done(client& c) {
        if (c.st != client::state::idle || !c.queue->idle()) return;
        for (auto& l : c.locals)
            if (l.st != client::local::state::done) return;
        c.st = client::state::done;
    }

    /// The acquire failed: its node (if any) goes, waited for; in the background if that is lost.
    void abandon(client& c) {
        c.node = c.m->node();
        log(who(c) + " acquire failed (" + std::to_string(c.act.why) + ")" +
            (c.node.empty() ? "" : ", deletes " + c.node));
        // Why an acquire may fail here: the user gave up (or the session ended), the container
        // reaper won the race for the path five times, or six creates in a row lost their replies.
        // Nothing else in this world is a reason (no errors, no other recipe, no hand-made node).
        if (c.act.why != action::stop && c.act.why != action::no_parent &&
            c.act.why != action::create_retries_exhausted && violation_.empty())
            violation_ = "spurious failure: " + who(c) + "'s acquire failed (reason " +
                         std::to_string(c.act.why) + ") with nothing in this world to cause it";
        c.m.reset();
        if (c.node.empty()) return finish_cycle(c);
        c.st = client::state::releasing;
        send(c, op::remove, c.node, tag::abandon);
    }

    void finish_cycle(client& c) {
        c.node.clear();
        if (c.queue) { // the queue's node acquire has ended without a node
            c.st = client::state::idle;
            using r = zd::handoff_fsm::node_result;
            return perform_queue(
                c, c.queue->on_node(c.act.why == action::stop ? r::cancelled : r::failed, true, false));
        }
        c.st = --c.cycles_left > 0 ? client::state::idle : client::state::done;
    }

    void release(client& c) {
        // (held_lock::marks_release: a write node that waited; a reader never marks)
        const bool marks =
            c.waited && zd::may_mark_release(zd::last_segment(c.node),
                                             cfg_.rw ? zd::lock_family::rw : zd::lock_family::mutex,
                                             lock_dialect::curator);
        log(who(c) + " releases " + c.node + (marks ? " with its marker" : ""));
        c.st = client::state::releasing;
        start_job(c, {zd::cleanup_fsm::of_node(c.node, 0, marks), true});
    }

    /// A watch event reaches client `c`: the driver's watch callbacks.
    void on_event(client& c, const event& e) {
        const bool pred = !c.watched_pred.empty() && e.path == c.watched_pred &&
                          (c.watching_children ? e.type == child_event : e.type != child_event);
        const bool marker =
            !c.watched_marker.empty() && e.path == c.watched_marker && e.type == created_event;
        log(who(c) + " event " + std::to_string(e.type) + " " + e.path +
            (pred || marker ? "" : " (not watched now)"));
        if (!pred && !marker) return;
        c.recheck = true;
        if (pred) {
            c.pred_fired = true;
            c.pred_deleted = e.type == deleted_event;
        }
        if (marker) c.marked = true;
        c.woke_by =
            c.watching_children ? "change " + std::to_string(e.zxid) : c.watched_pred; // (a marker: its node)
        if (c.waiting) wake(c);
    }

    /// A wait ends: a watch fired, the connection came back, or the user gave up.
    void wake(client& c) {
        c.waiting = false;
        if (c.recheck) acted(c);
        c.in.pred_deleted = c.pred_deleted;
        c.in.marked = c.marked;
        resume(c);
    }

    /// A change made client `c` act: at most one client per deleted node or change (herd-free).
    void acted(client& c) {
        if (c.woke_by.empty()) return;
        const auto key = c.woke_by;
        auto& n = actors_[key];
        n.insert(c.reader ? c.id : -1 - c.id); // (a writer counted as negative)
        c.woke_by.clear();
        // Readers behind one writer all act on its release (they are granted together); anything
        // else that makes two act on one change is a herd.
        const bool writer_acted = *n.begin() < 0;
        if (n.size() > 1 && writer_acted && violation_.empty())
            violation_ =
                "herd: " + std::to_string(n.size()) + " waiters woke and acted on one change of " + key;
    }

    /// A reply reaches client `c`.
    void on_reply(client& c, const reply& r) {
        if (c.outstanding.empty() || c.outstanding.front().first != r.id) {
            violation_ = "model: reply out of order for " + who(c);
            return;
        }
        const tag t = c.outstanding.front().second;
        c.outstanding.pop_front();
        const bool lost = r.rc == connection_loss;
        switch (t) {
        case tag::cleanup: // the library's own machine (session/cleanup_fsm.hpp)
            return c.jobs.on_reply(r, !lost, jobs_io(c)); // (a lost reply: the connection is down)
        case tag::barrier:
            return;
        case tag::unwatch: {
            auto it = c.unwatches.find(r.id);
            if (it == c.unwatches.end()) return; // (a predecessor's: fire and forget)
            if (lost && g_bug != bug::unwatch_once) c.unwatch_retry.push_back(it->second);
            c.unwatches.erase(it);
            return;
        }
        case tag::marker:
            return;
        case tag::abandon: // the driver's abandon: awaited, then in the background if not gone
            if (r.rc != ok && r.rc != no_node) delete_in_background(c, c.node);
            log(who(c) + " gave up; its node is deleted");
            return finish_cycle(c);
        default:
            break;
        }
        if (c.st != client::state::acquiring) {
            violation_ = "model: a reply for an acquire that is over, " + who(c);
            return;
        }
        switch (t) {
        case tag::create:
            c.in.result = outcome_of(r.rc);
            c.in.rc = r.rc;
            c.in.path = r.path;
            c.in.czxid = r.czxid;
            if (r.rc == ok) log(who(c) + " created " + r.path);
            break;
        case tag::create_list:
            c.in.listed = outcome_of(r.rc);
            c.in.children = r.children;
            c.in.cv = r.cversion;
            break;
        case tag::parents:
            c.in.result = outcome_of(r.rc == node_exists ? ok : r.rc);
            c.in.rc = r.rc;
            break;
        case tag::list:
        case tag::leases:
            c.in.result = outcome_of(r.rc);
            c.in.rc = r.rc;
            c.in.children = r.children;
            c.in.cv = r.cversion;
            break;
        case tag::read:
            c.in.result = outcome_of(r.rc);
            c.in.rc = r.rc;
            c.in.owner = r.owner;
            c.in.czxid = r.czxid;
            c.in.session = c.session;
            if (r.rc == ok)
                log(who(c) + " found its node by its guid: " + c.act.node + " (owner s" +
                    std::to_string(r.owner) + ")");
            break;
        case tag::pred:
            c.pred_read_ok = r.rc == ok;
            c.in.result = outcome_of(r.rc);
            c.in.rc = r.rc;
            c.in.marked = c.marked;
            c.in.children = r.children;
            c.in.cv = r.cversion;
            if (c.marked) acted(c);
            break;
        default:
            break;
        }
        if (--c.due == 0) resume(c);
    }

    // ---- faults

    /// The connection of `c` drops: of its requests not yet applied, each is applied or not; every
    /// reply queued for it is lost (its requests fail with connection loss); watch events stay
    /// (the client's reconnect re-arms them with the last zxid it saw); a wait ends (the driver
    /// looks again once reconnected).
    void drop_connection(client& c) {
        log(who(c) + " CONNECTION LOST (" + std::to_string(c.inbound.size()) + " unsent, " +
            std::to_string(c.outstanding.size()) + " unanswered)");
        for (auto& r : c.inbound) {
            const auto fate = rng_() % 3;
            if (fate == 0) {
                log(who(c) + " ... #" + std::to_string(r.id) + " was applied");
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
        const auto lost = c.outstanding.size();
        for (std::size_t i = 0; i < lost && !c.outstanding.empty(); ++i) {
            reply r;
            r.id = c.outstanding.front().first;
            r.rc = connection_loss;
            on_reply(c, r);
        }
        if (c.waiting) wake(c);
        c.jobs.reconnected(jobs_io(c));
        for (auto& m : std::exchange(c.unwatch_retry, {})) unwatch_marker(c, m);
    }

    /// A write goes through the leader's pipeline. Reads, and removeWatches (which acts on the
    /// connection's own watches, at its server), do not: of a dropped connection they were
    /// applied at its server or not at all.
    static bool is_write(op k) {
        return k == op::create || k == op::remove || k == op::release_with_marker || k == op::check;
    }

    /// A request of a dropped connection is applied now; its reply was lost with the connection.
    void apply_limbo(client& c) {
        auto r = c.limbo.front();
        c.limbo.pop_front();
        log(who(c) + " ... #" + std::to_string(r.id) + " applied late (from the leader's pipeline)");
        server_.apply_late(c.session, r);
    }

    /// The session of `c` expires. The lease's premise: the holder was told first.
    void expire(client& c) {
        log(who(c) + " SESSION EXPIRED in state " + name(c.st));
        if (c.st == client::state::held) log(who(c) + " lost its lock (told before the expiry)");
        server_.end_session(c.session);
        c.session = server_.open_session();
        c.inbound.clear();
        c.limbo.clear();
        c.outstanding.clear();
        c.jobs.clear(); // (its nodes went with it)
        c.unwatches.clear();
        c.unwatch_retry.clear();
        c.m.reset();
        c.waiting = false;
        c.watched_marker.clear();
        c.watched_pred.clear();
        if (c.queue) {
            // The session's end: the local holder was told first (the premise), the queue fails
            // its waiters and lets go; then the node acquire in flight ends with the expiry.
            if (c.lent >= 0) local_done(c, c.locals[static_cast<std::size_t>(c.lent)], "lost its grant");
            c.lent = -1;
            const bool acquiring = c.st == client::state::acquiring || c.st == client::state::releasing;
            c.st = client::state::idle;
            c.node.clear();
            perform_queue(c, c.queue->session_ended());
            if (acquiring && c.queue->state() == zd::handoff_fsm::phase::acquiring)
                perform_queue(c, c.queue->on_node(zd::handoff_fsm::node_result::failed, true, false));
            return;
        }
        if (c.st != client::state::idle && c.st != client::state::done) finish_cycle(c);
    }

    // ---- the scheduler

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
            if (c.queue) { // the local acquirers act; the queue drives the node
                for (auto& l : c.locals) {
                    if (l.st == client::local::state::idle)
                        enabled.push_back({3, [&] {
                                               l.st = client::local::state::queued;
                                               l.id = c.next_local++;
                                               log(who(c) + " local " + std::to_string(&l - c.locals.data()) +
                                                   " acquire");
                                               perform_queue(c, c.queue->enqueue(l.id, false, false, false));
                                           }});
                    if (l.st == client::local::state::queued)
                        enabled.push_back(
                            {1, [&] {
                                 log(who(c) + " local " + std::to_string(&l - c.locals.data()) + " gives up");
                                 perform_queue(c, c.queue->leave(l.id, zd::handoff_reason::cancelled));
                             }});
                    if (l.st == client::local::state::holding)
                        enabled.push_back({2, [&] {
                                               c.lent = -1;
                                               local_done(c, l, "releases");
                                               perform_queue(c, c.queue->local_release(
                                                                    true, c.st == client::state::held, true));
                                           }});
                }
            }
            if (!c.queue && c.st == client::state::idle) enabled.push_back({3, [&] { start(c); }});
            if (!c.queue && c.st == client::state::held) enabled.push_back({2, [&] { release(c); }});
            if (!c.queue && c.st == client::state::acquiring && !c.stop)
                enabled.push_back({1, [&] {
                                       log(who(c) + " gives up (cancels) during " + name(c.act.what));
                                       c.stop = true;
                                       if (c.waiting) wake(c);
                                   }});
            if (faults_left_ > 0 && c.st != client::state::done) {
                enabled.push_back({1, [&] {
                                       --faults_left_;
                                       drop_connection(c);
                                   }});
                if (c.st == client::state::held || c.st == client::state::acquiring)
                    enabled.push_back({1, [&] {
                                           --faults_left_;
                                           expire(c);
                                       }});
            }
        }
        if (server_.reapable())
            enabled.push_back({1, [&] {
                                   log("the container reaper deletes the empty lock path");
                                   server_.reap();
                               }});
        return run_one(enabled, rng_);
    }

    std::mt19937_64 rng_;
    config cfg_;
    model_server server_;
    std::vector<client> clients_;
    std::uint64_t next_id_ = 0;
    int faults_left_ = 6;
    std::string violation_;
    std::map<std::string, std::set<int>> actors_;
    std::int64_t max_token_ = 0, max_writer_token_ = 0; // the largest fencing tokens granted so far
};

bug parse_bug(const std::string& s) {
    if (s == "no-guid-recovery") return bug::no_guid_recovery;
    if (s == "herd") return bug::herd;
    if (s == "always-alone") return bug::always_alone;
    if (s == "unwatch-once") return bug::unwatch_once;
    if (s == "no-barrier") return bug::no_barrier;
    std::fprintf(
        stderr,
        "zklock_sim: unknown --bug %s (no-guid-recovery, herd, always-alone, unwatch-once, no-barrier)\n",
        s.c_str());
    std::exit(2);
}

} // namespace
} // namespace zklock::sim

int main(int argc, char** argv) {
    using namespace zklock::sim;
    config cfg;
    seed_runner r{"zklock_sim"};
    r.parse(
        argc, argv,
        [&](const std::string& a, auto& next) {
            if (a == "--clients")
                cfg.clients = std::stoi(next());
            else if (a == "--cycles")
                cfg.cycles = std::stoi(next());
            else if (a == "--rw")
                cfg.rw = true;
            else if (a == "--handoff")
                cfg.handoff = std::stoi(next());
            else if (a == "--bound")
                cfg.handoff_bound = static_cast<std::uint32_t>(std::stoul(next()));
            else
                return false;
            return true;
        },
        [](const std::string& name) { g_bug = parse_bug(name); },
        "[--seeds N] [--seed S] [--first S] [--clients N] [--cycles N] [--rw | --handoff L [--bound B]] "
        "[--trace] "
        "[--bug no-guid-recovery|herd|always-alone|unwatch-once|no-barrier]");
    cfg.trace = r.trace;
    if (cfg.handoff > 0 && cfg.rw) {
        std::fprintf(
            stderr, "zklock_sim: --handoff is the mutex's (local_handoff is refused for read/write locks)\n");
        return 2;
    }
    return r.run(
        [&](std::uint64_t s) {
            world w(s, cfg);
            auto v = w.run();
            return seed_runner::outcome{v, static_cast<std::uint64_t>(w.holds()), std::move(w.trace)};
        },
        [&](std::uint64_t s) {
            return "--seed " + std::to_string(s) + " --clients " + std::to_string(cfg.clients) +
                   " --cycles " + std::to_string(cfg.cycles) + (cfg.rw ? " --rw" : "") +
                   (cfg.handoff > 0 ? " --handoff " + std::to_string(cfg.handoff) + " --bound " +
                                          std::to_string(cfg.handoff_bound)
                                    : "");
        },
        std::to_string(cfg.clients) + " clients x " + std::to_string(cfg.cycles) + " cycles" +
            (cfg.handoff > 0 ? " x " + std::to_string(cfg.handoff) + " local acquirers each" : ""));
}
