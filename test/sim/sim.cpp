// The deterministic simulator (first step of issue 50): N clients take and release one exclusive
// lock on a model ZooKeeper server (model_zk.hpp) while a seeded scheduler picks every delivery
// order the model allows and injects connection losses (a request applied or not, its reply
// lost) and session expiries. Every decision a client makes about the children is zklock's own
// pure protocol code (src/protocol/protocol.hpp: decide, the `alone` rule, release markers, node
// names, the guid recovery's lookup) and the acquire's steps that src/recipes/mutex.cpp runs
// (src/protocol/acquire_steps.hpp: after a listing, after a wake-up). The sequencing around them
// (create and list, the requests each step asks for, recover a lost create, release with the
// marker, the guaranteed deletes) mirrors mutex.cpp's coroutine, which is not yet a state machine
// of its own: that part is a model of the coroutine, not the coroutine.
//
// Checked at every step: at most one holder; a deletion makes at most one waiter act (herd-free).
// At the end: every client finished its cycles within the step bound (liveness), and the lock path
// holds no node once every client is idle (no leftover).
// Premise (tested elsewhere: test/unit/lease_model_test.cpp and the fault tests): a holder is told
// of its loss before the server expires its session, so an expiry here ends the hold first.
//
//   zklock_sim [--seeds N] [--seed S] [--first S] [--clients N] [--cycles N] [--trace]
//              [--bug no-guid-recovery|herd|always-alone]
// Exit 0 if every seed passes (with --bug: exit 0 if some seed finds the bug, and says which).
#include "protocol/acquire_steps.hpp"
#include "protocol/protocol.hpp"

#include "model_zk.hpp"

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

enum class bug { none, no_guid_recovery, herd, always_alone };

struct config {
    int clients = 3;
    int cycles = 4;
    bug b = bug::none;
    bool trace = false;
    std::uint64_t max_steps = 20000;
};

const std::string lock_path = "/lock";

enum class tag { create, list, pred, marker, herd_list, release, give_up, bg_delete };

struct client {
    enum class state { idle, creating, recovering, listing, waiting, held, releasing, done };
    int id = 0;
    std::int64_t session = 0;
    state st = state::idle;
    int cycles_left = 0;
    std::string guid, prefix, my_node, pred;
    bool waited = false, alone = false, create_unknown = false;
    std::deque<std::pair<std::uint64_t, tag>> outstanding; // sent, not yet answered (FIFO)
    std::deque<request> inbound;                           // sent, not yet applied by the server
    std::map<std::uint64_t, std::string> bg;               // background deletes in flight, by request
    std::vector<std::string> bg_retry;                     // ... lost with the connection: sent again
    int holds = 0;
};

const char* name(client::state s) {
    switch (s) {
    case client::state::idle:
        return "idle";
    case client::state::creating:
        return "creating";
    case client::state::recovering:
        return "recovering";
    case client::state::listing:
        return "listing";
    case client::state::waiting:
        return "waiting";
    case client::state::held:
        return "held";
    case client::state::releasing:
        return "releasing";
    case client::state::done:
        return "done";
    }
    return "?";
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
        make_path(); // the lock path exists (persistent), as a path shared with kazoo must
    }

    /// Runs to the end; returns the violation, or an empty string.
    std::string run() {
        for (std::uint64_t step = 0; step < cfg_.max_steps; ++step) {
            if (!violation_.empty()) return violation_;
            if (all_done()) return check_end();
            if (!do_one())
                return "deadlock: no action is enabled and not every client is done (" + states() + ")";
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
        // a persistent node, made through a throwaway session's request
        auto s = server_.open_session();
        request r;
        r.path = lock_path;
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
        for (auto& c : clients_) s += who(c) + ":" + name(c.st) + " ";
        return s;
    }
    bool all_done() const {
        for (auto& c : clients_)
            if (c.st != client::state::done || !c.outstanding.empty()) return false;
        return true;
    }

    std::string check_end() {
        auto left = server_.children(lock_path);
        if (!left.empty()) {
            std::string names;
            for (auto& n : left)
                names += n + " (owner s" + std::to_string(server_.owner(lock_path + "/" + n)) + ") ";
            return "leftover: every client is done and the lock path still holds " + names;
        }
        return {};
    }

    std::uint64_t send(client& c, request r, tag t) {
        r.id = ++next_id_;
        c.outstanding.emplace_back(r.id, t);
        c.inbound.push_back(r);
        return r.id;
    }
    void send_create(client& c) {
        request r;
        r.kind = op::create;
        r.path = c.prefix;
        r.ephemeral = r.sequential = true;
        send(c, r, tag::create);
        request l;
        l.kind = op::get_children;
        l.path = lock_path;
        send(c, l, tag::list); // pipelined: create_and_list
        c.st = client::state::creating;
    }
    void send_list(client& c, client::state next) {
        request l;
        l.kind = op::get_children;
        l.path = lock_path;
        send(c, l, tag::list);
        c.st = next;
    }
    void send_remove(client& c, tag t) {
        request r;
        r.kind = op::remove;
        r.path = c.my_node;
        send(c, r, t);
    }

    /// The guaranteed delete (session_impl::delete_in_background): sent again after every
    /// connection loss until the server says the node is gone.
    void delete_in_background(client& c, const std::string& path) {
        request r;
        r.kind = op::remove;
        r.path = path;
        c.bg[send(c, r, tag::bg_delete)] = path;
        log(who(c) + " deletes in the background " + path);
    }

    std::string random_guid() {
        static const char* hex = "0123456789abcdef";
        std::string g(36, '-');
        for (std::size_t i = 0; i < g.size(); ++i)
            if (i != 8 && i != 13 && i != 18 && i != 23) g[i] = hex[rng_() % 16];
        return g;
    }

    // ---- the client's steps (mirroring src/recipes/mutex.cpp's acquire and release)

    void start(client& c) {
        c.guid = random_guid();
        // The defect re-introduced: names without the guid (Curator before its "protection"), so a
        // create whose reply was lost can be neither found nor told apart.
        c.prefix = cfg_.b == bug::no_guid_recovery ? lock_path + "/lock-"
                                                   : zd::protected_node_prefix(lock_path, c.guid);
        c.my_node.clear();
        c.waited = c.alone = c.create_unknown = false;
        send_create(c);
        log(who(c) + " acquire: create " + c.prefix);
    }

    /// After a listing: zklock's own step (src/protocol/acquire_steps.hpp), then its requests.
    void decide(client& c, std::vector<std::string> children, std::int32_t cv) {
        const std::string mine(zd::last_segment(c.my_node));
        zd::acquire_shape shape;
        shape.watch_children = cfg_.b == bug::herd; // (the herd-prone variant, a strategy of its own)
        auto step = zd::after_listing(std::move(children), mine,
                                      cfg_.b == bug::no_guid_recovery ? "" : c.guid, shape, cv);
        for (auto& dup : step.duplicates) delete_in_background(c, lock_path + "/" + dup);
        if (step.what == zd::listing_step::fail)
            return fail(c, step.why == zd::listing_step::node_missing ? "its node is gone" : "refused");
        if (step.what == zd::listing_step::grant) return grant(c, "lowest");
        c.waited = true;
        c.pred = lock_path + "/" + step.predecessor;
        c.alone = cfg_.b == bug::always_alone ? true : step.alone; // (the defect: alone on every wait)
        c.st = client::state::waiting;
        if (shape.watch_children) {
            request w;
            w.kind = op::get_children;
            w.path = lock_path;
            w.watch = true;
            send(c, w, tag::herd_list);
            log(who(c) + " waits: watches the children (herd)");
            return;
        }
        if (step.watch_marker && cfg_.b != bug::always_alone) {
            request m;
            m.kind = op::exists;
            m.path = zd::release_marker(c.pred);
            m.watch = true;
            send(c, m, tag::marker);
        }
        request g;
        g.kind = op::get_data;
        g.path = c.pred;
        g.watch = true;
        send(c, g, tag::pred);
        log(who(c) + " waits behind " + step.predecessor + (c.alone ? " (alone)" : ""));
    }

    void grant(client& c, const std::string& why) {
        c.st = client::state::held;
        ++c.holds;
        log(who(c) + " GRANTED (" + why + ") " + c.my_node);
        int holders = 0;
        std::string names;
        for (auto& o : clients_)
            if (o.st == client::state::held) {
                ++holders;
                names += who(o) + " " + o.my_node + " ";
            }
        if (holders > 1 && violation_.empty())
            violation_ = "mutual exclusion: " + std::to_string(holders) + " holders: " + names;
    }

    void fail(client& c, const std::string& why) {
        log(who(c) + " acquire failed: " + why);
        c.my_node.clear();
        finish_cycle(c);
    }

    void finish_cycle(client& c) { c.st = --c.cycles_left > 0 ? client::state::idle : client::state::done; }

    void release(client& c) {
        const bool marks = c.waited && zd::may_mark_release(zd::last_segment(c.my_node),
                                                            zd::lock_family::mutex, lock_dialect::curator);
        log(who(c) + " releases " + c.my_node + (marks ? " with its marker" : ""));
        if (marks) {
            request r;
            r.kind = op::release_with_marker;
            r.path = c.my_node;
            r.marker = zd::release_marker(c.my_node);
            send(c, r, tag::release);
        } else {
            send_remove(c, tag::release);
        }
        c.st = client::state::releasing;
    }

    /// A watch event reaches client `c`.
    void on_event(client& c, const event& e) {
        log(who(c) + " event " + std::to_string(e.type) + " " + e.path);
        if (c.st != client::state::waiting) return; // stale: that wait is over
        if (cfg_.b == bug::herd) {
            if (e.type == child_event && e.path == lock_path) {
                acted("change " + std::to_string(e.zxid), c);
                send_list(c, client::state::listing);
            }
            return;
        }
        zd::wake w = zd::wake::other;
        if (e.path == zd::release_marker(c.pred) && e.type == created_event)
            w = zd::wake::marker_created;
        else if (e.path == c.pred)
            w = e.type == deleted_event ? zd::wake::predecessor_deleted : zd::wake::other;
        else
            return; // (a watch of an earlier wait: forgotten)
        acted(c.pred, c);
        if (zd::after_wake(w, c.alone) == zd::wake_step::grant)
            return grant(c, w == zd::wake::marker_created ? "marker" : "predecessor gone, alone");
        send_list(c, client::state::listing);
    }

    /// A deletion made client `c` act: at most one client per deleted node (herd-free).
    void acted(const std::string& deleted, client& c) {
        auto& n = actors_[deleted];
        n.insert(c.id);
        if (n.size() > 1 && violation_.empty())
            violation_ =
                "herd: " + std::to_string(n.size()) + " waiters woke and acted on one change of " + deleted;
    }

    /// A reply reaches client `c`.
    void on_reply(client& c, const reply& r) {
        if (c.outstanding.empty() || c.outstanding.front().first != r.id) {
            violation_ = "model: reply out of order for " + who(c);
            return;
        }
        const tag t = c.outstanding.front().second;
        c.outstanding.pop_front();
        if (t == tag::bg_delete) {
            auto path = c.bg[r.id];
            c.bg.erase(r.id);
            if (r.rc == connection_loss) c.bg_retry.push_back(path);
            if (r.rc == connection_loss) return on_lost(c, t);
            return;
        }
        if (r.rc == connection_loss) return on_lost(c, t);
        if (r.rc == session_expired) return; // (the expiry path handles the client)
        switch (t) {
        case tag::create:
            if (r.rc == ok) {
                c.my_node = r.path;
                log(who(c) + " created " + r.path);
            }
            break;
        case tag::list:
            if (c.st == client::state::recovering) {
                auto found = zd::find_by_guid(r.children, c.guid);
                if (found) {
                    c.my_node = lock_path + "/" + *found;
                    log(who(c) + " recovered its node by its guid: " + *found);
                    decide(c, r.children, r.cversion);
                } else {
                    log(who(c) + " recovery: no node with its guid: create again");
                    send_create(c);
                }
                break;
            }
            if ((c.st == client::state::creating || c.st == client::state::listing) && !c.my_node.empty())
                decide(c, r.children, r.cversion);
            break;
        case tag::pred:
            if (c.st == client::state::waiting && r.rc == no_node) {
                if (zd::after_wake(zd::wake::predecessor_missing, c.alone) == zd::wake_step::grant)
                    return grant(c, "predecessor already gone, alone");
                send_list(c, client::state::listing);
            }
            break;
        case tag::herd_list:
        case tag::marker:
        case tag::bg_delete:
            break;
        case tag::release:
            if (c.st == client::state::releasing && c.outstanding.empty()) {
                log(who(c) + " released");
                c.my_node.clear();
                finish_cycle(c);
            }
            break;
        case tag::give_up:
            if (c.st == client::state::releasing && c.outstanding.empty()) {
                log(who(c) + " gave up; its node is gone");
                c.my_node.clear();
                finish_cycle(c);
            }
            break;
        }
    }

    /// The reply to a request of tag `t` was lost with the connection.
    void on_lost(client& c, tag t) {
        if (t == tag::create) c.create_unknown = true;
        if (!c.outstanding.empty()) return; // act once every answer of the flight is in
        for (auto& p : std::exchange(c.bg_retry, {})) delete_in_background(c, p);
        switch (c.st) {
        case client::state::recovering:
            if (c.my_node.empty()) { // recover_create: list again, looking for the guid
                send_list(c, client::state::recovering);
                break;
            }
            [[fallthrough]];
        case client::state::creating:
            if (c.create_unknown && c.my_node.empty()) {
                c.create_unknown = false;
                if (cfg_.b == bug::no_guid_recovery) {
                    log(who(c) + " lost a create's reply: creates again (no guid recovery)");
                    send_create(c);
                } else {
                    log(who(c) + " lost a create's reply: looks for its guid");
                    send_list(c, client::state::recovering);
                }
            } else if (!c.my_node.empty()) {
                send_list(c, client::state::listing);
            } else {
                send_create(c);
            }
            break;
        case client::state::listing:
        case client::state::waiting:
            send_list(c, client::state::listing); // wait_connected, then list again
            break;
        case client::state::releasing:
            send_remove(c, tag::release); // the guaranteed delete: again until it is gone
            break;
        default:
            break;
        }
    }

    // ---- faults

    /// The connection of `c` drops: of its requests not yet applied, each is applied or not; every
    /// reply queued for it is lost (its requests fail with connection loss); watch events stay
    /// (the client's reconnect re-arms them with the last zxid it saw).
    void drop_connection(client& c) {
        log(who(c) + " CONNECTION LOST (" + std::to_string(c.inbound.size()) + " unsent, " +
            std::to_string(c.outstanding.size()) + " unanswered)");
        for (auto& r : c.inbound)
            if (rng_() % 2) server_.apply(c.session, r);
        c.inbound.clear();
        auto& box = server_.outbox(c.session);
        std::deque<message> kept;
        for (auto& m : box)
            if (std::holds_alternative<event>(m)) kept.push_back(m);
        box.swap(kept);
        auto lost = c.outstanding;
        for (auto& [id, t] : lost) {
            reply r;
            r.id = id;
            r.rc = connection_loss;
            on_reply(c, r);
        }
    }

    /// The session of `c` expires. The lease's premise: the holder was told first.
    void expire(client& c) {
        log(who(c) + " SESSION EXPIRED in state " + name(c.st));
        if (c.st == client::state::held) log(who(c) + " lost its lock (told before the expiry)");
        server_.end_session(c.session);
        c.session = server_.open_session();
        c.inbound.clear();
        c.outstanding.clear();
        c.bg.clear(); // (its nodes went with it)
        c.bg_retry.clear();
        c.my_node.clear();
        if (c.st != client::state::idle && c.st != client::state::done) finish_cycle(c);
    }

    // ---- the scheduler

    bool do_one() {
        struct action {
            int weight;
            std::function<void()> run;
        };
        std::vector<action> enabled;
        for (auto& c : clients_) {
            if (!c.inbound.empty())
                enabled.push_back({10, [&] {
                                       auto r = c.inbound.front();
                                       c.inbound.pop_front();
                                       server_.apply(c.session, r);
                                   }});
            if (!server_.outbox(c.session).empty())
                enabled.push_back({10, [&] {
                                       auto m = server_.outbox(c.session).front();
                                       server_.outbox(c.session).pop_front();
                                       if (auto* r = std::get_if<reply>(&m))
                                           on_reply(c, *r);
                                       else
                                           on_event(c, std::get<event>(m));
                                   }});
            if (c.st == client::state::idle) enabled.push_back({3, [&] { start(c); }});
            if (c.st == client::state::held) enabled.push_back({2, [&] { release(c); }});
            if (c.st == client::state::waiting)
                enabled.push_back({1, [&] {
                                       log(who(c) + " gives up waiting");
                                       c.st = client::state::releasing;
                                       send_remove(c, tag::give_up);
                                   }});
            if (faults_left_ > 0 && c.st != client::state::done) {
                enabled.push_back({1, [&] {
                                       --faults_left_;
                                       drop_connection(c);
                                   }});
                if (c.st == client::state::held || c.st == client::state::waiting)
                    enabled.push_back({1, [&] {
                                           --faults_left_;
                                           expire(c);
                                       }});
            }
        }
        if (enabled.empty()) return false;
        int total = 0;
        for (auto& a : enabled) total += a.weight;
        int pick = static_cast<int>(rng_() % static_cast<std::uint64_t>(total));
        for (auto& a : enabled) {
            if (pick < a.weight) {
                a.run();
                return true;
            }
            pick -= a.weight;
        }
        return true;
    }

    std::mt19937_64 rng_;
    config cfg_;
    model_server server_;
    std::vector<client> clients_;
    std::uint64_t next_id_ = 0;
    int faults_left_ = 6;
    std::string violation_;
    std::map<std::string, std::set<int>> actors_;
};

bug parse_bug(const std::string& s) {
    if (s == "no-guid-recovery") return bug::no_guid_recovery;
    if (s == "herd") return bug::herd;
    if (s == "always-alone") return bug::always_alone;
    std::fprintf(stderr, "zklock_sim: unknown --bug %s (no-guid-recovery, herd, always-alone)\n", s.c_str());
    std::exit(2);
}

} // namespace
} // namespace zklock::sim

int main(int argc, char** argv) {
    using namespace zklock::sim;
    config cfg;
    std::uint64_t seeds = 1000, first = 1;
    std::optional<std::uint64_t> only;
    std::string bug_name;
    for (int i = 1; i < argc; ++i) {
        std::string a = argv[i];
        auto next = [&]() -> std::string {
            if (i + 1 >= argc) {
                std::fprintf(stderr, "zklock_sim: %s needs a value\n", a.c_str());
                std::exit(2);
            }
            return argv[++i];
        };
        if (a == "--seeds")
            seeds = std::stoull(next());
        else if (a == "--seed")
            only = std::stoull(next());
        else if (a == "--first")
            first = std::stoull(next());
        else if (a == "--clients")
            cfg.clients = std::stoi(next());
        else if (a == "--cycles")
            cfg.cycles = std::stoi(next());
        else if (a == "--trace")
            cfg.trace = true;
        else if (a == "--bug")
            cfg.b = parse_bug(bug_name = next());
        else {
            std::fprintf(stderr,
                         "usage: zklock_sim [--seeds N] [--seed S] [--first S] [--clients N] [--cycles N] "
                         "[--trace] [--bug no-guid-recovery|herd|always-alone]\n");
            return 2;
        }
    }
    if (only) {
        first = *only;
        seeds = 1;
    }
    const auto t0 = std::chrono::steady_clock::now();
    std::uint64_t failed = 0, holds = 0;
    std::optional<std::uint64_t> first_failure;
    for (std::uint64_t s = first; s < first + seeds; ++s) {
        world w(s, cfg);
        auto v = w.run();
        holds += static_cast<std::uint64_t>(w.holds());
        if (only && cfg.trace)
            for (auto& l : w.trace) std::printf("  %s\n", l.c_str());
        if (v.empty()) continue;
        ++failed;
        if (!first_failure) {
            first_failure = s;
            std::printf(
                "seed %llu: %s\n  replay: zklock_sim --seed %llu --clients %d --cycles %d --trace%s%s\n",
                static_cast<unsigned long long>(s), v.c_str(), static_cast<unsigned long long>(s),
                cfg.clients, cfg.cycles, bug_name.empty() ? "" : " --bug ", bug_name.c_str());
        }
        if (!only && cfg.b != bug::none) break; // a bug hunt stops at its first find
    }
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    const auto ran = first_failure && cfg.b != bug::none ? *first_failure - first + 1 : seeds;
    std::printf("zklock_sim: %llu seed(s) from %llu, %d clients x %d cycles: %llu failed; %llu holds; %.2f s "
                "(%.0f lock cycles per CPU second)\n",
                static_cast<unsigned long long>(ran), static_cast<unsigned long long>(first), cfg.clients,
                cfg.cycles, static_cast<unsigned long long>(failed), static_cast<unsigned long long>(holds),
                secs, secs > 0 ? static_cast<double>(holds) / secs : 0.0);
    if (cfg.b != bug::none) {
        if (first_failure) {
            std::printf("zklock_sim: the re-introduced defect was found at seed %llu, after %llu seed(s)\n",
                        static_cast<unsigned long long>(*first_failure),
                        static_cast<unsigned long long>(ran));
            return 0;
        }
        std::printf("zklock_sim: the re-introduced defect was NOT found in %llu seeds\n",
                    static_cast<unsigned long long>(seeds));
        return 1;
    }
    return failed == 0 ? 0 : 1;
}
