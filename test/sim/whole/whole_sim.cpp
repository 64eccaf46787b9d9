// zklock_sim_whole: the library itself, through its public API, on the simulated platform
// (sim_platform.hpp), in virtual time, each seed one run.
//
// The world (swarm: each seed draws its own). One recipe on one path, taken and given back by 2
// to 5 clients over 2 to 4 sessions (some sessions shared by two clients):
//   - mutex: predecessor, watch_children or unique_node strategy; Curator's or kazoo's naming;
//     with or without the in-process hand-off;
//   - shared_mutex: reads and writes, a write sometimes downgraded to a read while held;
//   - semaphore: N of 1 to 3;
//   - election: campaigns in Curator's selector, latch or kazoo's naming, the leader proclaiming;
//   - reentrant_mutex: each hold with a nested acquire of the same owner;
//   - multi-lock: one or both of two paths, all or nothing (a lock of the set lost while later
//     ones were acquired comes back with is_lost() true, as multi_lock.hpp says);
// by plain, timed (that may time out), try and cancelled (at a drawn time) acquires, released by
// async_release or by the guard's destructor; the exclusive holders commit a guarded write
// (guard::async_commit) to "/data" now and then; one hold in eight is longer than the session
// timeout. The model's container reaper runs every second.
//
// The ensemble (sim_platform.hpp), drawn too: one server, or a leader and two followers with a
// drawn commit lag, learner-link delay and ping jitter.
//
// --faults: half the seeds drop connections, at a rate and with a share of long outages drawn
// per seed (lost replies, requests reaching their server or not, a receive timeout's
// ZOPERATIONTIMEOUT, requests queued in the client while an outage hangs, reconnects to the same
// session on any server not behind the client, with SetWatches, outages past the session
// timeout: an expiry, decided by the leader's session tracker and told at the reconnect, with
// ZSESSIONEXPIRED for what waited in the client's queue); with followers, half of those seeds
// also cut a follower off from the leader now and then (sometimes past syncLimit), and a third
// replace the leader now and then (a crash, or a cut from both followers); in a third of the
// fault seeds, an operator's delete of a lock node now and then (out of the lock's premise: that
// hold leaves the conflict oracles; a guarded write must still not land after it).
//
// Oracles. From the model ensemble's history (the leader's: its expiries, its commits):
//   - when the server expires a session, each of its holds still kept by its client was told
//     (its loss signal fired) at least (0.5875 - f) T before the server's earliest expiry, the
//     session's last news plus T, before any rounding (docs/lease.md's bound; f = 0.3);
//   - a guarded write lands only while its lock node exists, is its session's, and no node of
//     the lock is ahead of it;
//   - no herd: a waiter of the exclusive lock watches only the node just ahead of one of its own;
//   - once every client stopped, with the sessions still alive, no lock node and no watch is
//     left 30 virtual seconds later; once every session has closed, no node under the lock path
//     but emptied containers, no ephemeral node, no watch.
// From the grants, against the holds not yet given back: at most one exclusive holder and no
// reader with it (shared), at most N (semaphore), unless the earlier holder was told of its
// loss; fencing tokens increase (exclusive recipes); a nested reentrant grant has its outer's
// token; a guarded write or a proclaim sent while is_lost() never succeeds; every operation's
// handler runs exactly once (each handler the world gives the library is counted: acquires,
// releases, commits, proclaims, downgrades, loss signals, verdicts). And: no lock is lost and no acquire fails
// without a fault; every client finishes (no stuck waiter); no session's state is held once
// every session closed and the library's bounded waits ran out; a seed replays to the same trace
// (--replay).
//
// Usage: zklock_sim_whole [--seeds N | --minutes M] [--seed S] [--first S] [--replay] [--faults]
//                         [--recipe mutex|shared|semaphore|election|reentrant|multi] [--verbose]
#include "sim_platform.hpp"

#include <zklock.hpp>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/use_awaitable.hpp>

#include "protocol/coverage.hpp"
#include "protocol/protocol.hpp"
#include "session/session_impl.hpp"
#include "session/timer.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <tuple>
#include <type_traits>

namespace {

namespace asio = boost::asio;
using asio::awaitable;
using asio::use_awaitable;
using namespace zklock::sim;

enum class recipe { mutex, shared, semaphore, election, reentrant, multi, count };
constexpr const char* recipe_names[] = {"mutex", "shared", "semaphore", "election", "reentrant", "multi"};

struct outcome {
    bool ok = true;
    std::string why;
    std::uint64_t trace = 0;
    int grants = 0, commits = 0, expiries_with_holds = 0, gave_up = 0, reaped = 0, operator_deletes = 0;
    int observed = 0;        // leaders an election's observer saw
    int revoked = 0;         // holders told of a revocation request
    double min_margin = 1e9; // the smallest margin measured, in T
};

/// A hold, from its grant until its client gives it back (or drops it).
struct hold {
    int client = 0;
    std::int64_t session = 0;
    std::string node;          // its lock node
    std::string lock_path;     // the lock it holds
    bool downgrading = false;  // a downgrade in flight: its read node is not known yet
    bool operator_hit = false; // an operator deleted a node it may stand on (out of the premise)
    enum kind_t { exclusive, shared, lease } kind = exclusive;
    std::int64_t told = -1;        // when its loss signal fired (virtual ns), or -1 (or regained since)
    bool kept = true;              // not given back yet
    zklock::guard* gd = nullptr;   // the client's guard (valid while kept)
    std::int64_t revoked_at = -1;  // when a revocation request naming its node succeeded, or -1
    std::int64_t revoke_told = -1; // when its holder was told of one, or -1
    std::int64_t czxid = 0;        // its node's incarnation when it was granted (the model's; 0: gone)
    std::function<void(hold&)> on_regain; // (the world's oracle for a regain)
};

/// Every operation's handler runs exactly once (issue 62's oracle): each handler the world gives
/// the library is wrapped, its calls counted; a second call of one is a failure, and once every
/// session has closed and the library's bounded waits ran out, every handler has run.
struct ledger {
    long started = 0, completed = 0;
    std::string twice; // the first operation whose handler ran a second time
    template <class Fn>
    auto wrap(std::string what, Fn fn) {
        ++started;
        return [this, what = std::move(what), fn = std::move(fn),
                called = std::make_shared<bool>(false)](auto&&... a) mutable {
            if (*called) {
                if (twice.empty()) twice = what;
                return;
            }
            *called = true;
            ++completed;
            fn(std::forward<decltype(a)>(a)...);
        };
    }
};

/// Starts an operation through `init(handler)` with a counted handler and awaits its result.
template <class... Args, class Init>
asio::awaitable<std::tuple<Args...>> once(ledger& L, std::string what, Init init) {
    co_return co_await asio::async_initiate<const asio::use_awaitable_t<>&, void(std::tuple<Args...>)>(
        [&L, &what, &init](auto handler) {
            auto h = std::make_shared<decltype(handler)>(std::move(handler));
            init(L.wrap(std::move(what),
                        [h](Args... a) { std::move (*h)(std::tuple<Args...>(std::move(a)...)); }));
        },
        use_awaitable);
}

bool is_loss(zklock::error_code e) { // (a loss reason; not lock_released, nor not_held or a cancel)
    return e == zklock::errc::lease_expired || e == zklock::errc::lock_lost_suspended ||
           e == zklock::errc::lock_node_deleted || e == zklock::errc::session_expired ||
           e == zklock::errc::session_closed;
}

/// Notes when `h`'s loss signal fires; a suspended lock that is regained (the default policy
/// regains one whose node survived) is held again, and listened to again.
void listen(const std::shared_ptr<hold>& h, scheduler& s, const std::function<void(const std::string&)>& log,
            ledger& L) {
    h->gd->async_wait_lost(L.wrap("async_wait_lost", [&s, &log, &L, h](zklock::error_code e) {
        log("client " + std::to_string(h->client) + "'s loss signal: " + e.message());
        if (!is_loss(e) || !h->kept) return;
        if (h->told < 0) h->told = s.now;
        if (!h->gd->is_suspended()) return; // (lost for good)
        h->gd->async_wait_verdict(L.wrap("async_wait_verdict", [&s, &log, &L, h](zklock::error_code v) {
            if (v || !h->kept) return;
            log("client " + std::to_string(h->client) + " regained its lock");
            h->told = -1;
            if (h->on_regain) h->on_regain(*h);
            listen(h, s, log, L);
        }));
    }));
}

/// The sequence number of a sequential node's name (its last 10 digits), or -1 (the protocol's
/// own parse_sequence).
long long sequence_of(const std::string& name) {
    if (name.size() < 10) return -1;
    return zklock::detail::parse_sequence(std::string_view(name).substr(name.size() - 10)).value_or(-1);
}

int pinned_recipe = -1; // (--recipe, for the replay command a failure prints)

/// The class of an oracle's violation, printed with each failure: a mutant of the library names
/// the class it must be found by (scripts/sim_whole_mutants.py), so a hunt that finds some other
/// violation has not found its own.
const char* violation_class(const std::string& why) {
    auto has = [&](const char* s) { return why.find(s) != std::string::npos; };
    if (has("a herd:")) return "herd";
    if (has("the observer saw")) return "observe";
    if (has("revocation no one asked for") || has("to let go of")) return "revoke";
    if (has("ran twice") || has("never ran their handler")) return "handler";
    if (has("with no fault") || has("outer hold was lost by the inner release")) return "spurious";
    if (has("fencing token") || has("nested acquire has another token")) return "token";
    if (has("on a node that is not its grant's")) return "regain";
    if (has("guarded write") || has("proclaim, sent while")) return "write";
    if (has("was told of its loss") || has("which holds and was not told") ||
        has("granted on a session the server has expired"))
        return "lease";
    if (has(" while ") && has(" granted ")) return "overlap";
    if (has("stuck:") || has("did not complete") || has("is still held")) return "stuck";
    if (has(" left")) return "left";
    return "other";
}

void report_failure(std::uint64_t seed, const std::string& why, bool with_faults) {
    const std::string recipe_arg =
        pinned_recipe >= 0 ? std::string(" --recipe ") + recipe_names[pinned_recipe] : std::string();
    std::printf("seed %llu FAILED [%s]: %s (replay: zklock_sim_whole --seed %llu%s%s --verbose)\n",
                static_cast<unsigned long long>(seed), violation_class(why), why.c_str(),
                static_cast<unsigned long long>(seed), with_faults ? " --faults" : "", recipe_arg.c_str());
    std::fflush(stdout);
}

/// A seed that failed while its clients still run: the world is abandoned, not torn down (its
/// coroutines hold references into sessions in whatever state the failure left them; a
/// destruction in that state can crash and hide the report). The failure is reported and the
/// process ends, as it would after the first failing seed anyway.
[[noreturn]] outcome abandon(std::uint64_t seed, const outcome& out, bool with_faults) {
    report_failure(seed, out.why, with_faults);
    std::_Exit(1);
}

outcome run_seed(std::uint64_t seed, bool verbose, bool with_faults, int only_recipe) {
    outcome out;
    model_server m; // (first: it outlives the coroutines that io's destructor destroys, and their sessions)
    ledger ledger;  // (and the handlers it counts)
    scheduler s(seed);
    // -- the world, drawn (swarm) --
    const auto what = only_recipe >= 0 ? static_cast<recipe>(only_recipe)
                                       : static_cast<recipe>(s.rng() % static_cast<int>(recipe::count));
    const int sessions = 2 + static_cast<int>(s.rng() % 3);       // 2..4
    const int clients = sessions + static_cast<int>(s.rng() % 2); // one session may have two
    const int cycles = 3;
    const std::string path = "/locks/whole";
    const std::string data_path = "/data";
    const std::string path_b = "/locks/whole-b"; // (the multi-lock's second path)
    // the ensemble: one server, or a leader and two followers (then a follower's lag, the learner
    // links' delay and the leader's ping jitter are drawn too; the jitter stays within premise 1
    // of docs/lease.md: answers at most 5T/16 apart, 1.25 s at the smallest T, 4 s; an answer
    // comes tickTime/2 plus the jitter after the one before, give or take two learner-link hops,
    // and half the ensembles use the whole budget)
    model_server::config ens;
    ens.servers = s.rng() % 3 == 0 ? 1 : 3;
    ens.forward_hi = s.draw(100'000, 5'000'000);
    ens.lag_hi = s.rng() % 4 == 0 ? s.draw(10'000'000, 300'000'000) : s.draw(100'000, 5'000'000);
    const std::int64_t jitter_room = 250'000'000 - 2 * ens.forward_hi;
    ens.ping_jitter_hi = s.rng() % 2 == 0 ? jitter_room : s.draw(0, jitter_room);
    m.start(s, ens);
    m.seed_node(data_path);
    zklock::mutex_options mo;
    const auto strategy = s.rng() % 4; // (the recipe's strategy twice as often)
    mo.strategy = strategy == 0   ? zklock::lock_strategy::watch_children
                  : strategy == 1 ? zklock::lock_strategy::unique_node
                                  : zklock::lock_strategy::predecessor;
    mo.dialect = s.rng() % 3 == 0 ? zklock::lock_dialect::kazoo : zklock::lock_dialect::curator;
    if (s.rng() % 2 == 0) mo.local_handoff = 3; // (every client of a session alike)
    const int max_leases = 1 + static_cast<int>(s.rng() % 3);
    zklock::election_options eo;
    const auto ed = s.rng() % 3;
    eo.dialect = ed == 0   ? zklock::election_dialect::curator_selector
                 : ed == 1 ? zklock::election_dialect::curator_latch
                           : zklock::election_dialect::kazoo;
    const bool commits = s.rng() % 2 == 0;
    const bool faults = with_faults && s.rng() % 2 == 0;
    const std::int64_t fault_gap_hi = s.draw(300'000'000, 6'000'000'000); // the drops' rate
    const int long_drop_in = 2 + static_cast<int>(s.rng() % 8);           // one drop in this many is long
    // a third of the faulty seeds: one fault in four is an operator's delete of a lock node
    // (out of the lock's premise: a hold whose node an operator deleted is out of the
    // conflict oracles from that moment; a guarded write must still never land after it)
    const bool operator_deletes = faults && s.rng() % 3 == 0;
    // with followers, half the faulty seeds cut one off from the leader now and then (one fault
    // in four), sometimes past syncLimit (it then gives up its leader and its clients)
    const bool cuts = faults && ens.servers > 1 && s.rng() % 2 == 0;
    // a third of the faulty seeds also drop a connection at a write's worst phase: one write in
    // 3 to 30 is followed within 4 ms by its connection's drop (the write on its way, applied or
    // not, or its reply on its way: lost; a retry after it must not take what it did for its own)
    const bool write_drops = faults && s.rng() % 3 == 0;
    const auto write_drop_in = 3 + s.rng() % 28;
    // with followers, a third of the faulty seeds replace the leader now and then (one fault in
    // six): it crashes and restarts, or it is cut off from both followers, past syncLimit or not.
    // (Drawn from a stream of its own: a seed without it runs as it ran before this fault came.)
    std::mt19937_64 frng(seed * 0x9E3779B97F4A7C15ULL + 0x5EEDULL);
    const bool failovers = faults && ens.servers > 1 && frng() % 3 == 0;
    // half the mutex worlds make their locks revocable, and a revoker asks the holder to let go
    // now and then (zklock::async_revoke); the holder lets go when told (guard::async_wait_revoked)
    // (not with unique_node: a revocation written into <path>/lock before its creator read it back
    // after a lost create reply erases the guid it knows it by; docs/guarantees.md, a limit)
    const bool revocations =
        what == recipe::mutex && frng() % 2 == 0 && mo.strategy != zklock::lock_strategy::unique_node;
    mo.revocable = revocations;
    // ACLs (a stream of their own): a third of the mutex and reentrant worlds protect the lock
    // with acl::creator_all_world_read(), every session presenting the same digest credentials;
    // in half of those with faults, one session has the wrong password (a misconfigured client:
    // ZooKeeper accepts any digest at connect, and refuses its creates under the lock path with
    // NOAUTH; once the path's container is reaped, its own create of the path locks the others
    // out instead, until it is reaped again). Its failures are expected; nothing may hang or stay.
    std::mt19937_64 arng(seed * 0x94D049BB133111EBULL + 0xAC1ULL);
    const bool acls = (what == recipe::mutex || what == recipe::reentrant) && arng() % 3 == 0;
    const bool intruder = acls && faults && arng() % 2 == 0;
    if (acls) mo.node_acl = zklock::acl::creator_all_world_read();
    // Mixed paths (a stream of their own): in a third of the semaphore worlds with faults, the
    // last client takes a mutex on the semaphore's path. One path, one lock: whichever is there
    // first makes the other's acquires fail (path_used_by_lock, or the mutex's refusal of a
    // semaphore's leases), and no lease is ever granted beside a mutex holder.
    std::mt19937_64 xrng(seed * 0xBF58476D1CE4E5B9ULL + 0x313DULL);
    const bool mixed = what == recipe::semaphore && faults && xrng() % 3 == 0;
    std::set<std::string> deleted_by_operator;
    // a lease's margin at the server's expiry: at least (0.5875 - f) T (docs/lease.md)
    const double margin_bound = 0.5875 - zklock::loss_policy::default_lease_fraction;

    // each session in a process of its own (its pauses are its own), on a platform of its own
    std::vector<std::unique_ptr<zklock::session>> ss;
    std::vector<process*> procs;
    std::vector<std::shared_ptr<sim_platform>> plats;
    std::vector<std::int64_t> timeouts; // (each session's T, ns)
    for (int i = 0; i < sessions; ++i) {
        zklock::session_options o;
        o.connect = "127.0.0.1:2181";
        // (T from 4 to 10 s, a third of them 4 s: where premise 1's jitter budget is tightest)
        o.session_timeout =
            std::chrono::milliseconds(s.rng() % 3 == 0 ? 4'000 : 4'000 + static_cast<int>(s.rng() % 6'000));
        timeouts.push_back(std::chrono::nanoseconds(o.session_timeout).count());
        if (acls) o.auth = {zklock::digest("svc", intruder && i == sessions - 1 ? "wrong" : "secret")};
        procs.push_back(&s.add_process());
        plats.push_back(std::make_shared<sim_platform>(s, m, procs.back()));
        ss.push_back(std::make_unique<zklock::session>(procs.back()->io.get_executor(), o, plats.back()));
    }
    int finished = 0, closed = 0, drops = 0, operator_deleted = 0;
    std::vector<std::shared_ptr<hold>> holds;
    std::int64_t last_token = 0;
    std::map<std::string, std::int64_t> last_tokens; // (the multi-lock's, per path)
    auto under_both = [&] {
        auto v = m.under(path);
        for (auto& n : m.under(path_b)) v.push_back(n);
        return v;
    };
    auto fail = [&](std::string why) {
        if (out.ok) out.why = std::move(why) + " (at " + std::to_string(s.now / 1'000'000) + " ms)";
        out.ok = false;
    };
    auto name = [](int c) { return "client " + std::to_string(c); };
    // A spawned coroutine's completion: an exception it let out fails the seed, prefixed by `who`.
    auto ended_by = [&](const char* who) {
        return [&fail, who](std::exception_ptr e) {
            if (!e) return;
            try {
                std::rethrow_exception(e);
            } catch (const std::exception& x) {
                fail(who + std::string(x.what()));
            }
        };
    };
    std::function<void(const std::string&)> log = [&](const std::string& line) {
        if (verbose)
            std::printf("  %9.3f ms  %s\n", static_cast<double>(s.now - 1'000'000'000) / 1e6, line.c_str());
    };

    // -- oracles on the model server's history --
    m.on_expire = [&](std::int64_t id, std::int64_t earliest, std::int64_t timeout) {
        bool any = false;
        log("the server expires session " + std::to_string(id));
        for (auto& h : holds) {
            if (!h->kept || h->session != id) continue;
            any = true;
            if (h->told < 0) {
                fail("the server expired the session of " + name(h->client) +
                     ", which holds and was not told");
                continue;
            }
            const double margin = static_cast<double>(earliest - h->told) / static_cast<double>(timeout);
            out.min_margin = std::min(out.min_margin, margin);
            if (margin < margin_bound)
                fail(name(h->client) + " was told of its loss " + std::to_string(margin) +
                     " T before the server's earliest expiry (the bound is " + std::to_string(margin_bound) +
                     " T)");
        }
        out.expiries_with_holds += any;
    };
    m.on_set = [&](std::int64_t id, const std::string& p, const std::string& data) {
        if (p != data_path) return;
        ++out.commits;
        const auto* n = m.find(data);
        if (!n) return fail("a guarded write landed after its lock node " + data + " was gone");
        // (unique_node reuses its node's name: after an operator's delete another session may
        // make <path>/lock again, and a check, which compares only the data version, cannot tell
        // the two apart; docs/recipes.md says so. Out of the premise, and only there.)
        if (n->owner != id && !deleted_by_operator.count(data))
            return fail("a guarded write landed on a lock node not its session's: " + data);
        const auto parent = data.substr(0, data.rfind('/'));
        const auto mine = sequence_of(data);
        if (const auto* par = m.find(parent); par && mine >= 0)
            for (auto& c : par->children)
                if (auto q = sequence_of(c); q >= 0 && q < mine)
                    return fail("a guarded write landed while " + parent + "/" + c + " was ahead of " + data);
    };

    // No herd: a waiter of the exclusive lock (the predecessor strategy) watches only the node
    // just ahead of one of its own, or its own node (the holder's loss watch), as the server that
    // set the watch saw the lock path then. (Nothing can come between two nodes once both are
    // made; out of the premise, an operator's delete of a waiter's node, it is not checked.)
    const bool herd_checked = mo.strategy == zklock::lock_strategy::predecessor && !operator_deletes &&
                              (what == recipe::mutex || what == recipe::reentrant || what == recipe::multi);
    m.on_watch = [&](const replica& rp, std::int64_t id, const std::string& p) {
        if (!herd_checked) return;
        const auto parent = p.substr(0, p.rfind('/'));
        const auto q = sequence_of(p);
        const auto it = rp.nodes.find(p);
        const auto par = rp.nodes.find(parent);
        if ((parent != path && parent != path_b) || q < 0 || it == rp.nodes.end() || par == rp.nodes.end() ||
            it->second.owner == id)
            return;
        for (auto& c : par->second.children) {
            const auto mine = sequence_of(c);
            if (mine <= q || rp.nodes.at(parent + "/" + c).owner != id) continue;
            if (std::none_of(par->second.children.begin(), par->second.children.end(),
                             [&](const std::string& d) {
                                 const auto x = sequence_of(d);
                                 return x > q && x < mine;
                             }))
                return; // (p is just ahead of c, a node of id's)
        }
        fail("a herd: session " + std::to_string(id) + " watches " + p +
             ", which is just ahead of none of its nodes at server " + std::to_string(rp.index));
    };

    // An election's observer (half its worlds; drawn from the fault stream, so that other worlds
    // run as before): async_observe in a loop on a drawn session while the candidates run, then
    // its pending observe cancelled. Each leader it sees has a value the world published, and a
    // fencing token no lower than the last one it saw (the lowest node's czxid only grows: a
    // session never sees an older tree than it has seen).
    std::set<std::string> published;
    asio::cancellation_signal observer_stop;
    bool observer_done = true;
    if (what == recipe::election && frng() % 2 == 0) {
        observer_done = false;
        const auto oi = static_cast<std::size_t>(frng() % static_cast<std::uint64_t>(sessions));
        auto& osess = *ss[oi];
        asio::co_spawn(
            procs[oi]->io,
            [&, oi]() -> awaitable<void> {
                zklock::election el(osess, path, eo);
                zklock::detail::timer pause(plats[oi], procs[oi]->io.get_executor());
                std::optional<zklock::leader_info> last;
                std::int64_t last_token = 0;
                while (!observer_done) {
                    auto [e, li] = co_await once<zklock::error_code, std::optional<zklock::leader_info>>(
                        ledger, "async_observe", [&](auto h) {
                            el.async_observe(
                                last, asio::bind_cancellation_slot(observer_stop.slot(), std::move(h)));
                        });
                    if (e == asio::error::operation_aborted || observer_done) break;
                    if (e) { // (a fault: the session ended, or a request failed; look again later)
                        if (osess.state() == zklock::session_state::expired ||
                            osess.state() == zklock::session_state::closed)
                            break;
                        pause.expires_after(std::chrono::milliseconds(100));
                        co_await pause.async_wait(asio::as_tuple(use_awaitable));
                        continue;
                    }
                    std::optional<zklock::leader_info> seen =
                        li; // (clang 14: no structured binding in a lambda)
                    if (seen) {
                        ++out.observed;
                        log("the observer sees the leader " + seen->node_path + ": " + seen->value);
                        if (!published.count(seen->value))
                            fail("the observer saw a leader's value no candidate published: " + seen->value);
                        if (seen->fencing_token < last_token)
                            fail("the observer saw an older leader: token " +
                                 std::to_string(seen->fencing_token) + " after " +
                                 std::to_string(last_token));
                        last_token = std::max(last_token, seen->fencing_token);
                    }
                    last = seen;
                }
                observer_done = true;
            },
            ended_by("the observer failed: "));
    }

    // The revoker (revocable worlds): on a drawn session, now and then, asks the holder of the
    // lock to let go (zklock::async_revoke), while the clients run.
    if (revocations) {
        const auto ri = static_cast<std::size_t>(frng() % static_cast<std::uint64_t>(sessions));
        auto& rsess = *ss[ri];
        asio::co_spawn(
            procs[ri]->io,
            [&, ri]() -> awaitable<void> {
                zklock::detail::timer pause(plats[ri], procs[ri]->io.get_executor());
                while (finished < clients) {
                    pause.expires_after(std::chrono::nanoseconds(s.draw(50'000'000, 800'000'000)));
                    co_await pause.async_wait(asio::as_tuple(use_awaitable));
                    if (rsess.state() != zklock::session_state::connected) continue;
                    auto [e, node] =
                        co_await once<zklock::error_code, std::string>(ledger, "async_revoke", [&](auto h) {
                            zklock::async_revoke(rsess, path, std::move(h));
                        });
                    if (e) continue;
                    std::string named = node; // (clang 14: no structured binding in a lambda)
                    log("the revoker asks the holder of " + named + " to let go");
                    for (auto& h : holds)
                        if (h->kept && h->node == named && h->revoked_at < 0) h->revoked_at = s.now;
                }
            },
            ended_by("the revoker failed: "));
    }

    // A regain (the default loss policy: a suspended lock is held again once its lease is
    // vouched again and its node is read back) stands on the very node it was granted: the same
    // incarnation (czxid) and owner in the leader's tree, unless that node is gone since (its
    // delete after the regain's read: the hold is then lost, and told so) or an operator deleted
    // it (out of the premise).
    std::function<void(hold&)> regain_check = [&](hold& h) {
        ++counts().regains;
        if (h.czxid == 0 || deleted_by_operator.count(h.node)) return;
        const auto* n = m.find(h.node);
        if (n && (n->czxid != h.czxid || n->owner != h.session))
            fail(name(h.client) + " regained " + h.node + " on a node that is not its grant's (czxid " +
                 std::to_string(n->czxid) + ", owner " + std::to_string(n->owner) + "; granted on czxid " +
                 std::to_string(h.czxid) + ")");
    };
    // (the stream of the pauses, stalls and freezes below; drawn here, before the clients)
    std::mt19937_64 prng(seed * 0xD1B54A32D192ED03ULL + 0x9A05EULL);
    const bool pauses = faults && prng() % 3 == 0;
    // Monitors (a third of the fault seeds, a stream of their own): on a drawn session, now and
    // then, a dashboard lists the lock's contenders (zklock::async_list_contenders: reads only),
    // while the clients run. A holder's session that reads through a follower cut off from its
    // leader gets answers that vouch for nothing (docs/lease.md): its lease must lapse all the same.
    std::mt19937_64 mrng(seed * 0xA24BAED4963EE407ULL + 0x3017ULL);
    const bool monitors = faults && mrng() % 3 == 0;
    for (int k = 0; monitors && k < 1 + static_cast<int>(mrng() % 2); ++k) {
        const auto mi = static_cast<std::size_t>(mrng() % static_cast<std::uint64_t>(sessions));
        const std::int64_t every = 20'000'000 + static_cast<std::int64_t>(mrng() % 400'000'000);
        asio::co_spawn(
            procs[mi]->io,
            [&, mi, every]() -> awaitable<void> {
                zklock::detail::timer pause(plats[mi], procs[mi]->io.get_executor());
                auto& msess = *ss[mi];
                while (finished < clients) {
                    pause.expires_after(std::chrono::nanoseconds(every));
                    co_await pause.async_wait(asio::as_tuple(use_awaitable));
                    if (msess.state() == zklock::session_state::expired ||
                        msess.state() == zklock::session_state::closed)
                        break;
                    if (msess.state() != zklock::session_state::connected) continue;
                    co_await once<zklock::error_code, std::vector<zklock::contender_info>>(
                        ledger, "async_list_contenders",
                        [&](auto h) { zklock::async_list_contenders(msess, path, std::move(h)); });
                    ++counts().monitor_reads;
                }
            },
            ended_by("a monitor failed: "));
    }

    // Holds are mostly short, one in eight 1 to 12 s (past the session timeout: the heartbeat
    // must keep the lease); one in three where pauses or monitors are drawn, so that their
    // faults meet holders.
    const std::uint64_t long_hold_in = pauses || monitors ? 3 : 8;

    for (int c = 0; c < clients; ++c) {
        const auto si = static_cast<std::size_t>(c % sessions);
        auto& sess = *ss[si];
        asio::co_spawn(
            procs[si]->io,
            [&, c, si]() -> awaitable<void> {
                if (sess.state() != zklock::session_state::connected) {
                    auto [ec] = co_await sess.async_connect(asio::as_tuple(use_awaitable));
                    if (ec && sess.state() != zklock::session_state::connected) {
                        log(name(c) + "'s session did not come up: " + ec.message());
                        if (!faults)
                            fail(name(c) + "'s session did not come up with no fault: " + ec.message());
                        ++finished; // (its session ended before it was up: a fault)
                        co_return;
                    }
                }
                zklock::mutex mx(sess, path, mo);
                zklock::shared_mutex rw(sess, path);
                zklock::semaphore sem(sess, path, max_leases);
                zklock::election el(sess, path, eo);
                zklock::reentrant_mutex rm(sess, path, mo);
                const std::uint64_t owner = 100 + static_cast<std::uint64_t>(c); // (one owner per client)
                zklock::detail::timer pause(plats[si], procs[si]->io.get_executor());
                auto gone = [&] {
                    return sess.state() == zklock::session_state::expired ||
                           sess.state() == zklock::session_state::closed;
                };
                auto timeout = [&] { return std::chrono::microseconds(s.draw(1'000, 40'000'000) / 1000); };
                auto value = [&](int i) {
                    auto v = name(c) + " cycle " + std::to_string(i);
                    published.insert(v);
                    return v;
                };
                for (int i = 0; i < cycles && !gone(); ++i) {
                    zklock::error_code ec;
                    zklock::guard g;
                    zklock::leadership lead;
                    auto kind = hold::exclusive;
                    // 0 timed, 1 try, 2 plain cancelled after a drawn time (per-operation
                    // cancellation: terminal), else plain
                    const auto form = s.rng() % 5;
                    auto cancel = std::make_shared<asio::cancellation_signal>();
                    if (form == 2)
                        s.at_in(procs[si], s.now + s.draw(0, 60'000'000),
                                [cancel] { cancel->emit(asio::cancellation_type::terminal); });
                    if (what == recipe::multi) {
                        // a multi-lock of one or both of two paths, all or nothing (in path order)
                        const auto pick = s.rng() % 3;
                        std::vector<zklock::mutex> ms;
                        if (pick != 1) ms.emplace_back(sess, path, mo);
                        if (pick != 0) ms.emplace_back(sess, path_b, mo);
                        auto [e, gs] = co_await once<zklock::error_code, std::vector<zklock::guard>>(
                            ledger, "async_acquire_all", [&](auto h) {
                                if (form == 0)
                                    zklock::async_acquire_all_for(std::move(ms), timeout(), std::move(h));
                                else if (form == 2)
                                    zklock::async_acquire_all(
                                        std::move(ms),
                                        asio::bind_cancellation_slot(cancel->slot(), std::move(h)));
                                else
                                    zklock::async_acquire_all(std::move(ms), std::move(h));
                            });
                        if (e) {
                            log(name(c) + "'s multi-lock ended: " + e.message());
                            if (e == zklock::errc::acquire_timeout ||
                                (form == 2 && e == asio::error::operation_aborted))
                                ++out.gave_up;
                            else if (!faults)
                                fail(name(c) + "'s multi-lock failed with no fault: " + e.message());
                            continue;
                        }
                        std::vector<std::shared_ptr<hold>> mine;
                        for (auto& gd : gs) {
                            const auto lp = gd.node_path().substr(0, gd.node_path().rfind('/'));
                            // (a lock of the set lost while later ones were still being acquired
                            // comes back in the set, is_lost() true: multi_lock.hpp says so)
                            const bool md = deleted_by_operator.count(gd.node_path()) != 0 || gd.is_lost();
                            for (auto& h : holds)
                                if (h->kept && h->told < 0 && !md && !h->operator_hit &&
                                    !deleted_by_operator.count(h->node) && h->lock_path == lp)
                                    fail(name(c) + " granted " + lp + " while " + name(h->client) +
                                         " holds it");
                            if (!md) {
                                auto& last = last_tokens[lp];
                                if (gd.fencing_token() <= last)
                                    fail("fencing token of " + lp +
                                         " did not increase: " + std::to_string(last) + " then " +
                                         std::to_string(gd.fencing_token()) + " (" + name(c) + ")");
                                last = gd.fencing_token();
                            }
                            log(name(c) + " (session " + std::to_string(sess.session_id()) + ") granted " +
                                gd.node_path());
                            auto h = std::make_shared<hold>();
                            h->client = c;
                            h->session = sess.session_id();
                            h->on_regain = regain_check;
                            h->node = gd.node_path();
                            if (const auto* n = m.find(h->node); n && n->owner == h->session)
                                h->czxid = n->czxid;
                            h->lock_path = lp;
                            h->gd = &gd;
                            if (gd.is_lost()) h->told = s.now;
                            holds.push_back(h);
                            mine.push_back(h);
                            listen(h, s, log, ledger);
                            if (!m.alive(h->session))
                                fail(name(c) + " granted on a session the server has expired");
                        }
                        ++out.grants;
                        const auto hold_for = s.rng() % long_hold_in == 0
                                                  ? s.draw(1'000'000'000, 12'000'000'000)
                                                  : s.draw(0, 30'000'000);
                        pause.expires_after(std::chrono::nanoseconds(hold_for));
                        co_await pause.async_wait(asio::as_tuple(use_awaitable));
                        for (auto& gd : gs)
                            if (!faults && gd.is_lost())
                                fail(name(c) + " lost " + gd.node_path() +
                                     " with no fault: " + gd.loss_reason().message());
                        for (auto& h : mine) h->kept = false;
                        log(name(c) + " gives back its multi-lock");
                        for (auto& gd : gs)
                            co_await once<zklock::error_code>(
                                ledger, "async_release", [&](auto h) { gd.async_release(std::move(h)); });
                        continue;
                    }
                    // (no co_await inside a conditional expression: GCC 12 miscompiles it)
                    auto take = [&](auto&& r) {
                        ec = std::get<0>(r);
                        if constexpr (std::is_same_v<std::decay_t<decltype(std::get<1>(r))>,
                                                     zklock::leadership>)
                            lead = std::move(std::get<1>(r));
                        else
                            g = std::move(std::get<1>(r));
                    };
                    switch (mixed && c == clients - 1 ? recipe::mutex : what) {
                    case recipe::mutex:
                        if (form == 0)
                            take(co_await once<zklock::error_code, zklock::guard>(
                                ledger, "async_acquire_for",
                                [&](auto h) { mx.async_acquire_for(timeout(), std::move(h)); }));
                        else if (form == 1)
                            take(co_await once<zklock::error_code, zklock::guard>(
                                ledger, "async_try_acquire",
                                [&](auto h) { mx.async_try_acquire(std::move(h)); }));
                        else if (form == 2)
                            take(co_await once<zklock::error_code, zklock::guard>(
                                ledger, "async_acquire", [&](auto h) {
                                    mx.async_acquire(
                                        asio::bind_cancellation_slot(cancel->slot(), std::move(h)));
                                }));
                        else
                            take(co_await once<zklock::error_code, zklock::guard>(
                                ledger, "async_acquire", [&](auto h) { mx.async_acquire(std::move(h)); }));
                        break;
                    case recipe::reentrant:
                        if (form == 0)
                            take(co_await once<zklock::error_code, zklock::guard>(
                                ledger, "async_acquire_for",
                                [&](auto h) { rm.async_acquire_for(owner, timeout(), std::move(h)); }));
                        else if (form == 1)
                            take(co_await once<zklock::error_code, zklock::guard>(
                                ledger, "async_try_acquire",
                                [&](auto h) { rm.async_try_acquire(owner, std::move(h)); }));
                        else if (form == 2)
                            take(co_await once<zklock::error_code, zklock::guard>(
                                ledger, "async_acquire", [&](auto h) {
                                    rm.async_acquire(
                                        owner, asio::bind_cancellation_slot(cancel->slot(), std::move(h)));
                                }));
                        else
                            take(co_await once<zklock::error_code, zklock::guard>(
                                ledger, "async_acquire",
                                [&](auto h) { rm.async_acquire(owner, std::move(h)); }));
                        break;
                    case recipe::shared:
                        if (s.rng() % 2 == 0) {
                            kind = hold::shared;
                            if (form == 0)
                                take(co_await once<zklock::error_code, zklock::guard>(
                                    ledger, "async_acquire_shared_for",
                                    [&](auto h) { rw.async_acquire_shared_for(timeout(), std::move(h)); }));
                            else if (form == 1)
                                take(co_await once<zklock::error_code, zklock::guard>(
                                    ledger, "async_try_acquire_shared",
                                    [&](auto h) { rw.async_try_acquire_shared(std::move(h)); }));
                            else if (form == 2)
                                take(co_await once<zklock::error_code, zklock::guard>(
                                    ledger, "async_acquire_shared", [&](auto h) {
                                        rw.async_acquire_shared(
                                            asio::bind_cancellation_slot(cancel->slot(), std::move(h)));
                                    }));
                            else
                                take(co_await once<zklock::error_code, zklock::guard>(
                                    ledger, "async_acquire_shared",
                                    [&](auto h) { rw.async_acquire_shared(std::move(h)); }));
                        } else {
                            if (form == 0)
                                take(co_await once<zklock::error_code, zklock::guard>(
                                    ledger, "async_acquire_for",
                                    [&](auto h) { rw.async_acquire_for(timeout(), std::move(h)); }));
                            else if (form == 1)
                                take(co_await once<zklock::error_code, zklock::guard>(
                                    ledger, "async_try_acquire",
                                    [&](auto h) { rw.async_try_acquire(std::move(h)); }));
                            else if (form == 2)
                                take(co_await once<zklock::error_code, zklock::guard>(
                                    ledger, "async_acquire", [&](auto h) {
                                        rw.async_acquire(
                                            asio::bind_cancellation_slot(cancel->slot(), std::move(h)));
                                    }));
                            else
                                take(co_await once<zklock::error_code, zklock::guard>(
                                    ledger, "async_acquire",
                                    [&](auto h) { rw.async_acquire(std::move(h)); }));
                        }
                        break;
                    case recipe::semaphore:
                        kind = hold::lease;
                        if (form == 0)
                            take(co_await once<zklock::error_code, zklock::guard>(
                                ledger, "async_acquire_for",
                                [&](auto h) { sem.async_acquire_for(timeout(), std::move(h)); }));
                        else if (form == 1)
                            take(co_await once<zklock::error_code, zklock::guard>(
                                ledger, "async_try_acquire",
                                [&](auto h) { sem.async_try_acquire(std::move(h)); }));
                        else if (form == 2)
                            take(co_await once<zklock::error_code, zklock::guard>(
                                ledger, "async_acquire", [&](auto h) {
                                    sem.async_acquire(
                                        asio::bind_cancellation_slot(cancel->slot(), std::move(h)));
                                }));
                        else
                            take(co_await once<zklock::error_code, zklock::guard>(
                                ledger, "async_acquire", [&](auto h) { sem.async_acquire(std::move(h)); }));
                        break;
                    default:
                        if (form == 0)
                            take(co_await once<zklock::error_code, zklock::leadership>(
                                ledger, "async_campaign_for",
                                [&](auto h) { el.async_campaign_for(value(i), timeout(), std::move(h)); }));
                        else if (form == 1)
                            take(co_await once<zklock::error_code, zklock::leadership>(
                                ledger, "async_try_campaign",
                                [&](auto h) { el.async_try_campaign(value(i), std::move(h)); }));
                        else if (form == 2)
                            take(co_await once<zklock::error_code, zklock::leadership>(
                                ledger, "async_campaign", [&](auto h) {
                                    el.async_campaign(
                                        value(i), asio::bind_cancellation_slot(cancel->slot(), std::move(h)));
                                }));
                        else
                            take(co_await once<zklock::error_code, zklock::leadership>(
                                ledger, "async_campaign",
                                [&](auto h) { el.async_campaign(value(i), std::move(h)); }));
                        break;
                    }
                    if (ec)
                        log(name(c) + "'s " +
                            (form == 0   ? "timed"
                             : form == 1 ? "try"
                             : form == 2 ? "cancelled"
                                         : "plain") +
                            " acquire ended: " + ec.message());
                    if (ec == zklock::errc::acquire_timeout || ec == zklock::errc::lock_busy ||
                        (form == 2 && ec == asio::error::operation_aborted)) {
                        ++out.gave_up;
                        continue;
                    }
                    if (ec) {
                        if (!faults) fail(name(c) + "'s acquire failed with no fault: " + ec.message());
                        continue; // (a fault: the loop ends if the session is gone)
                    }
                    zklock::guard& held = what == recipe::election ? static_cast<zklock::guard&>(lead) : g;
                    // The grant, against the holds not given back: a conflicting one must have
                    // been told of its loss (the lease's promise; its margin is checked at the
                    // server's expiry).
                    int leases = 0;
                    const bool mine_deleted = deleted_by_operator.count(held.node_path()) != 0;
                    for (auto& h : holds) {
                        if (!h->kept || h->told >= 0 || mine_deleted || h->operator_hit ||
                            deleted_by_operator.count(h->node) || h->lock_path != path)
                            continue;
                        if (kind == hold::lease && h->kind == hold::exclusive) {
                            fail(name(c) + " granted a lease while " + name(h->client) + " holds the lock");
                        } else if (kind == hold::lease) {
                            if (++leases >= max_leases)
                                fail(name(c) + " granted a lease while " + std::to_string(leases) +
                                     " are held (N = " + std::to_string(max_leases) + ")");
                        } else if (kind == hold::exclusive || h->kind == hold::exclusive) {
                            fail(name(c) + " granted while " + name(h->client) + " holds");
                        }
                    }
                    // (a grant of a node an operator deleted while it waited is out of the premise:
                    // the alone waiter is granted without a new listing, and told at once by its
                    // node's watch; its token is the old node's)
                    if (kind == hold::exclusive && !mine_deleted) {
                        if (held.fencing_token() <= last_token)
                            fail("fencing token did not increase: " + std::to_string(last_token) + " then " +
                                 std::to_string(held.fencing_token()) + " (" + name(c) + ")");
                        last_token = held.fencing_token();
                    }
                    log(name(c) + " (session " + std::to_string(sess.session_id()) + ") granted " +
                        (kind == hold::shared  ? "a read"
                         : kind == hold::lease ? "a lease"
                                               : "the lock") +
                        ": " + held.node_path());
                    auto h = std::make_shared<hold>();
                    h->client = c;
                    h->session = sess.session_id();
                    h->on_regain = regain_check;
                    h->node = held.node_path();
                    if (const auto* n = m.find(h->node); n && n->owner == h->session) h->czxid = n->czxid;
                    h->lock_path = path;
                    h->kind = kind;
                    holds.push_back(h);
                    h->gd = &held;
                    listen(h, s, log, ledger);
                    if (revocations) // the holder lets go early when asked to (its pause ends)
                        held.async_wait_revoked(
                            ledger.wrap("async_wait_revoked", [&, h, p = &pause](zklock::error_code e) {
                                if (e != zklock::errc::revocation_requested) return;
                                if (h->revoke_told < 0) h->revoke_told = s.now;
                                ++out.revoked;
                                log(name(h->client) + " is asked to let go of " + h->node);
                                if (const auto* n = m.find(h->node);
                                    n && n->data != "__REVOKE__" && n->data != "unlock")
                                    fail(name(h->client) +
                                         " was told of a revocation no one asked for: " + h->node);
                                if (h->kept) p->cancel();
                            }));
                    if (!m.alive(h->session)) fail(name(c) + " granted on a session the server has expired");
                    if (what == recipe::reentrant) {
                        // a nested acquire of the same owner: granted at once, the same grant
                        // (an outer hold lost for good holds nothing: the acquire is a new one)
                        const bool outer_lost = held.is_lost() && !held.is_suspended();
                        auto [e, inner] = co_await once<zklock::error_code, zklock::guard>(
                            ledger, "nested async_acquire",
                            [&](auto h) { rm.async_acquire(owner, std::move(h)); });
                        if (e && !faults)
                            fail(name(c) + "'s nested acquire failed with no fault: " + e.message());
                        if (!e && !outer_lost && inner.fencing_token() != held.fencing_token())
                            fail(name(c) + "'s nested acquire has another token: " +
                                 std::to_string(inner.fencing_token()) + ", the outer's " +
                                 std::to_string(held.fencing_token()));
                        zklock::guard& nested = inner; // (clang 14: no structured binding in a lambda)
                        if (!e)
                            co_await once<zklock::error_code>(ledger, "nested async_release", [&](auto h) {
                                nested.async_release(std::move(h));
                            });
                        if (!faults && held.is_lost())
                            fail(name(c) + "'s outer hold was lost by the inner release: " +
                                 held.loss_reason().message());
                    }
                    ++out.grants;
                    s.note(static_cast<std::uint64_t>(c) * 1000 + static_cast<std::uint64_t>(i));
                    // mostly short holds; one in eight past the session timeout (the heartbeat must
                    // keep the lease, and the node, for the holder)
                    const auto hold_for = s.rng() % long_hold_in == 0 ? s.draw(1'000'000'000, 12'000'000'000)
                                                                      : s.draw(0, 30'000'000);
                    pause.expires_after(std::chrono::nanoseconds(hold_for / 2));
                    co_await pause.async_wait(asio::as_tuple(use_awaitable));
                    if (commits && kind == hold::exclusive && s.rng() % 2 == 0) {
                        const bool told_before = held.is_lost();
                        auto [e, r] = co_await once<zklock::error_code, zklock::commit_result>(
                            ledger, "async_commit", [&](auto h) {
                                held.async_commit(zklock::transaction{}.set_data(data_path, held.node_path()),
                                                  std::move(h));
                            });
                        if (e && !faults)
                            fail(name(c) + "'s guarded write failed with no fault: " + e.message());
                        if (!e && told_before)
                            fail(name(c) + "'s guarded write, sent while its lock was lost, succeeded");
                    }
                    if (what == recipe::election && s.rng() % 2 == 0) {
                        const bool told_before = held.is_lost();
                        published.insert(value(i) + " proclaimed");
                        auto [e] = co_await once<zklock::error_code>(ledger, "async_proclaim", [&](auto h) {
                            lead.async_proclaim(value(i) + " proclaimed", std::move(h));
                        });
                        if (e && !faults) fail(name(c) + "'s proclaim failed with no fault: " + e.message());
                        if (!e && told_before)
                            fail(name(c) + "'s proclaim, sent while its lock was lost, succeeded");
                    }
                    if (what == recipe::shared && kind == hold::exclusive && s.rng() % 3 == 0) {
                        // a downgrade: from here on this client only reads (a reader may be granted
                        // once the server has the read node, before the reply reaches us)
                        h->kind = hold::shared;
                        h->downgrading = true;
                        log(name(c) + " downgrades " + g.node_path());
                        auto [e, gg] = co_await once<zklock::error_code, zklock::guard>(
                            ledger, "async_downgrade",
                            [&](auto h) { rw.async_downgrade(std::move(g), std::move(h)); });
                        if (e == zklock::errc::lock_busy)
                            h->kind = hold::exclusive; // (handed back, a write)
                        else if (e && !faults)
                            fail(name(c) + "'s downgrade failed with no fault: " + e.message());
                        g = std::move(gg);
                        h->downgrading = false;
                        log(name(c) + " downgraded: " + (e ? e.message() : g.node_path()));
                        if (g.owns_lock()) {
                            h->node = g.node_path();
                            h->czxid = 0;
                            if (const auto* n = m.find(h->node); n && n->owner == h->session)
                                h->czxid = n->czxid;
                            listen(h, s, log, ledger);
                        } else
                            h->kept = false; // (failed: the write lock goes too, in the background)
                    }
                    pause.expires_after(std::chrono::nanoseconds(hold_for - hold_for / 2));
                    co_await pause.async_wait(asio::as_tuple(use_awaitable));
                    // with no fault injected, a lock is never lost
                    if (!faults && held.is_lost())
                        fail(name(c) + " lost its lock with no fault: " + held.loss_reason().message());
                    // with no fault, a holder asked to let go is told within a second
                    if (revocations && !faults && h->revoked_at >= 0 && h->revoke_told < 0 &&
                        s.now - h->revoked_at > 1'000'000'000)
                        fail(name(c) + " was asked to let go of " + h->node + " " +
                             std::to_string((s.now - h->revoked_at) / 1'000'000) +
                             " ms ago, and was not told");
                    h->kept = false;
                    log(name(c) + " gives back " + held.node_path());
                    if (s.rng() % 4 == 0)
                        held = zklock::guard(); // released by its destructor: the node goes in the background
                    else if (what == recipe::election && (c + i) % 2 == 0)
                        co_await once<zklock::error_code>(ledger, "async_resign",
                                                          [&](auto h) { lead.async_resign(std::move(h)); });
                    else
                        co_await once<zklock::error_code>(ledger, "async_release", [&](auto h) {
                            held.async_release(std::move(h)); // (after a loss: an error)
                        });
                }
                ++finished;
            },
            ended_by("a client failed: "));
    }
    // The faults: connection drops of a random session, each down for a drawn time (past the
    // session timeout sometimes: an expiry, told at the reconnect); and the leader's session
    // tracker, which expires an untouched session every 100 ms of virtual time, to the end of the
    // run (a session revived by a new leader after its client was told of its expiry is expired
    // by it T later, the clients stopped or not), and its container reaper, while clients run.
    int ticks = 0;
    std::function<void()> tracker = [&] {
        m.expire_due(s.now);
        if (finished < clients && ++ticks % 10 == 0 && m.reap_containers() > 0)
            log("the container reaper deleted empty containers");
        s.at(s.now + 100'000'000, tracker);
    };
    s.at(s.now + 100'000'000, tracker);
    std::function<void()> fault = [&] {
        if (finished == clients) return;
        std::vector<std::shared_ptr<sim_link>> up;
        for (auto& p : plats)
            for (auto& w : p->links)
                if (auto l = w.lock(); l && l->connected()) up.push_back(l);
        if (failovers && frng() % 6 == 0) {
            const auto kind = frng() % 3;
            // a crash, the restart within 15 s; or a cut of the leader past syncLimit (the
            // followers notice within 2 s more; healed within 10 s of that); or a shorter cut
            // (it leads on: what it held back commits when the cut heals)
            const std::int64_t notice =
                kind == 0 ? 0 : 10'000'000'000 + static_cast<std::int64_t>(frng() % 2'000'000'000);
            const std::int64_t down =
                kind == 0   ? 1'000'000'000 + static_cast<std::int64_t>(frng() % 14'000'000'000)
                : kind == 1 ? notice + 1'000'000 + static_cast<std::int64_t>(frng() % 10'000'000'000)
                            : 50'000'000 + static_cast<std::int64_t>(frng() % 6'000'000'000);
            const int was = m.leader();
            if (m.fail_leader(notice, down))
                log(std::string("the leader, server ") + std::to_string(was) +
                    (kind == 0 ? " crashes; it restarts in " : " is cut off from both followers for ") +
                    std::to_string(down / 1'000'000) + " ms");
        } else if (cuts && s.rng() % 4 == 0) {
            const int f = (std::max(m.leader(), 0) + 1 + static_cast<int>(s.rng() % 2)) % 3; // (a follower)
            const auto d =
                s.rng() % 4 == 0 ? s.draw(10'000'000'000, 14'000'000'000) : s.draw(50'000'000, 6'000'000'000);
            log("follower " + std::to_string(f) + " is cut off from the leader for " +
                std::to_string(d / 1'000'000) + " ms");
            m.cut(f, d);
        } else if (operator_deletes && s.rng() % 4 == 0) {
            // an operator deletes a lock node (any ephemeral node under the lock path)
            std::vector<std::string> lock_nodes;
            for (auto& n : under_both())
                if (const auto* x = m.find(n); x && x->owner != 0) lock_nodes.push_back(n);
            if (!lock_nodes.empty()) {
                const auto& n = lock_nodes[s.rng() % lock_nodes.size()];
                log("an operator deletes " + n);
                // (a downgrade in flight of that session may stand on it)
                if (const auto* x = m.find(n))
                    for (auto& h : holds)
                        if (h->kept && h->downgrading && h->session == x->owner) h->operator_hit = true;
                if (m.operator_delete(n)) deleted_by_operator.insert(n), ++operator_deleted;
            }
        } else if (!up.empty()) {
            ++drops;
            auto& l = up[s.rng() % up.size()];
            const auto down = s.rng() % static_cast<std::uint64_t>(long_drop_in) == 0
                                  ? s.draw(5'000'000'000, 15'000'000'000)
                                  : s.draw(10'000'000, 3'000'000'000);
            // (one in three a receive timeout: what was in flight fails with ZOPERATIONTIMEOUT)
            const int rc = s.rng() % 3 == 0 ? ZOPERATIONTIMEOUT : ZCONNECTIONLOSS;
            log("session " + std::to_string(l->session()) + " (T = " + std::to_string(l->timeout_ms()) +
                " ms) drops its connection for " + std::to_string(down / 1'000'000) + " ms" +
                (rc == ZOPERATIONTIMEOUT ? " (a receive timeout)" : ""));
            l->drop(down, rc);
        }
        s.at(s.now + s.draw(100'000'000, fault_gap_hi), fault);
    };
    if (faults) s.at(s.now + s.draw(1'000'000, 500'000'000), fault);
    // A third of the faulty seeds (a stream of its own) pause a client's process now and then, or
    // stall its connection one way or both, for T/20 to 2T/3 - 50 ms (under the C client's receive
    // timeout: nobody drops the connection for it; docs/lease.md), mostly a holder's. While its
    // process is paused, a holder learns of its loss when is_lost() turns true (the lease is read
    // on the clock, docs/lease.md): the world reads it every 2 ms, as the holder's code would the
    // moment it runs, and the oracles take that moment for the moment it was told.
    const auto pause_gap_hi = static_cast<std::int64_t>(1'000'000'000 + prng() % 8'000'000'000);
    auto session_of = [&](std::int64_t id) {
        for (std::size_t j = 0; j < ss.size(); ++j)
            if (ss[j]->session_id() == id) return static_cast<int>(j);
        return -1;
    };
    // (a hold whose downgrade is in flight has handed its guard to the library: its session's
    // lease, read on the clock, is what it holds by)
    auto reads_lost = [&](const hold& h, std::size_t i) {
        if (!h.downgrading) return h.gd->is_lost();
        const auto v = ss[i]->impl()->lease_view();
        return zklock::detail::session_lease::lapsed(v.vouched, s.now, v.timeout,
                                                     zklock::loss_policy::default_lease_fraction);
    };
    // (the holds of session i that read as lost now are told now)
    auto read_holds = [&](std::size_t i) {
        for (auto& h : holds)
            if (h->kept && h->told < 0 && h->gd && session_of(h->session) == static_cast<int>(i) &&
                reads_lost(*h, i)) {
                h->told = s.now;
                ++counts().told_paused;
                log(name(h->client) + "'s lock reads as lost, its process paused");
            }
    };
    std::function<void(std::size_t)> probe = [&](std::size_t i) {
        read_holds(i);
        if (s.paused(procs[i]))
            s.at(std::min(s.now + 2'000'000, procs[i]->paused_until), [&, i] { probe(i); });
    };
    // (and once at the moment the lease's deadline passes, by the session's lease as it stands:
    // frozen while the process is paused; a probe like the others, so the grid's 2 ms do not
    // count against the margin)
    auto probe_at_deadline = [&](std::size_t i) {
        const auto v = ss[i]->impl()->lease_view();
        if (v.vouched == 0) return;
        const auto at = zklock::detail::session_lease::deadline(v.vouched, v.timeout,
                                                                zklock::loss_policy::default_lease_fraction) +
                        1;
        if (at > s.now && at < procs[i]->paused_until) s.at(at, [&, i] { read_holds(i); });
    };
    // A server freezes (a long GC, a stopped VM): it answers nobody and hears from nobody, its
    // learner link held both ways (past syncLimit the others give it up, or elect another
    // leader); its clients' connections stall, and each one's receive timeout (2T/3 after its
    // last read, a ping's answer at most T/3 before) drops it if the freeze lasts longer.
    auto freeze = [&](int srv, std::int64_t fd) {
        const bool frozen =
            srv == m.leader()
                ? m.fail_leader(10'000'000'000 + static_cast<std::int64_t>(prng() % 2'000'000'000), fd)
                : m.cut(srv, fd);
        if (!frozen) return;
        ++counts().freezes;
        log("server " + std::to_string(srv) + " freezes for " + std::to_string(fd / 1'000'000) + " ms");
        for (std::size_t j = 0; j < plats.size(); ++j)
            for (auto& w : plats[j]->links)
                if (auto l = w.lock(); l && l->connected() && l->server() == srv) {
                    const std::int64_t T = timeouts[j];
                    const auto rto =
                        2 * T / 3 - static_cast<std::int64_t>(prng() % static_cast<std::uint64_t>(T / 3));
                    l->stall(true, true, std::min(fd, rto));
                    if (fd > rto)
                        s.at(s.now + rto, [&, w] {
                            if (auto l = w.lock(); l && l->connected()) {
                                log("session " + std::to_string(l->session()) +
                                    "'s receive timeout: its server is frozen");
                                l->drop(s.draw(10'000'000, 100'000'000), ZOPERATIONTIMEOUT);
                            }
                        });
                }
    };
    // The phase of docs/lease.md's rule (b): a session's server freezes right after it answered
    // one of the session's writes, before its next ping answer carries what the session sent
    // just before (armed, half the time, at each pause, stall or freeze, for the next 1 to 8
    // writes or heartbeats answered with ZOK).
    std::vector<int> freeze_after(static_cast<std::size_t>(sessions), 0);
    if (pauses && ens.servers > 1)
        for (auto& p : plats)
            p->on_write_answered = [&](sim_link& l) {
                const int i = session_of(l.session());
                if (i < 0 || freeze_after[static_cast<std::size_t>(i)] == 0 ||
                    --freeze_after[static_cast<std::size_t>(i)] != 0 || finished == clients)
                    return;
                const int srv = l.server();
                const std::int64_t fd =
                    prng() % 3 != 0 ? 10'000'000'000 + static_cast<std::int64_t>(prng() % 4'000'000'000)
                                    : 1'000'000'000 + static_cast<std::int64_t>(prng() % 5'000'000'000);
                s.at(s.now + static_cast<std::int64_t>(prng() % 20'000'000), [&, srv, fd] {
                    log("(right after a write's answer)");
                    const auto before = counts().freezes;
                    freeze(srv, fd);
                    counts().freezes_at_answer += counts().freezes - before;
                });
            };
    std::function<void()> pauser = [&] {
        if (finished == clients) return;
        auto i = static_cast<std::size_t>(prng() % static_cast<std::uint64_t>(sessions));
        std::vector<std::size_t> holding;
        for (auto& h : holds)
            if (const int j = session_of(h->session); h->kept && j >= 0)
                holding.push_back(static_cast<std::size_t>(j));
        if (!holding.empty() && prng() % 4 != 0) i = holding[prng() % holding.size()];
        // (and, half the time, its server freezes right after its 1st to 8th commit answered)
        if (freeze_after[i] == 0 && prng() % 2 == 0) freeze_after[i] = 1 + static_cast<int>(prng() % 8);
        const std::int64_t T = timeouts[i];
        const std::int64_t d =
            T / 20 +
            static_cast<std::int64_t>(prng() % static_cast<std::uint64_t>(2 * T / 3 - 50'000'000 - T / 20));
        const auto kind = prng() % (ens.servers > 1 ? 5 : 4);
        // (one pause, one stall of a process at a time: back to back they would make one longer
        // than the C client's receive timeout, and a pause longer than the margin is outside
        // every lease: docs/lease.md)
        if (kind == 4) {
            const std::int64_t fd = prng() % 4 == 0
                                        ? 10'000'000'000 + static_cast<std::int64_t>(prng() % 4'000'000'000)
                                        : 50'000'000 + static_cast<std::int64_t>(prng() % 6'000'000'000);
            freeze(static_cast<int>(prng() % 3), fd);
        } else if (kind == 0 && !s.paused(procs[i])) {
            ++counts().pauses;
            log("session " + std::to_string(ss[i]->session_id()) + "'s process pauses for " +
                std::to_string(d / 1'000'000) + " ms");
            s.pause(*procs[i], d);
            probe_at_deadline(i);
            probe(i);
        } else if (!plats[i]->links.empty()) {
            if (auto l = plats[i]->links.back().lock(); l && l->connected() && !l->stalled() && kind != 0) {
                ++counts().stalls;
                log("session " + std::to_string(ss[i]->session_id()) + "'s connection stalls " +
                    (kind == 1   ? "to the server"
                     : kind == 2 ? "to the client"
                                 : "both ways") +
                    " for " + std::to_string(d / 1'000'000) + " ms");
                l->stall(kind != 2, kind != 1, d);
            }
        }
        s.at(s.now + static_cast<std::int64_t>(prng() % static_cast<std::uint64_t>(pause_gap_hi)) + 1,
             pauser);
    };
    if (pauses) s.at(s.now + static_cast<std::int64_t>(prng() % 2'000'000'000) + 1, pauser);
    if (write_drops)
        for (auto& p : plats)
            p->on_write = [&](sim_link& l) {
                if (s.rng() % write_drop_in != 0 || finished == clients) return;
                s.at(s.now + s.draw(0, 4'000'000), [&, w = l.weak_from_this()] {
                    auto l = w.lock();
                    if (!l || !l->connected()) return;
                    ++drops;
                    const auto down = s.rng() % static_cast<std::uint64_t>(long_drop_in) == 0
                                          ? s.draw(5'000'000'000, 15'000'000'000)
                                          : s.draw(10'000'000, 3'000'000'000);
                    log("session " + std::to_string(l->session()) + " drops its connection for " +
                        std::to_string(down / 1'000'000) + " ms, just after a write");
                    l->drop(down, s.rng() % 3 == 0 ? ZOPERATIONTIMEOUT : ZCONNECTIONLOSS);
                });
            };
    const std::int64_t limit = s.now + 600'000'000'000; // 10 virtual minutes
    if (!s.run([&] { return finished == clients || !out.ok; }, limit) && out.ok)
        fail("stuck: " + std::to_string(finished) + " of " + std::to_string(clients) + " clients finished");
    if (!out.ok) return abandon(seed, out, with_faults);
    for (auto* p : procs) // (a pause under way ends before the world acts on its sessions)
        if (s.paused(p)) s.run([&] { return !s.paused(p); }, p->paused_until);
    if (!observer_done) { // (the candidates are done: the observer's wait is cancelled)
        observer_done = true;
        observer_stop.emit(asio::cancellation_type::terminal);
    }
    // Quiet: every client has given its holds back and stopped; what the library deletes in the
    // background and the watches it gives up must be gone at the server within 30 virtual
    // seconds, while the sessions still live (their close would delete and drop them anyway).
    s.run([] { return false; }, s.now + 30'000'000'000);
    for (auto& n : under_both())
        if (const auto* x = m.find(n); x && x->owner != 0)
            fail("a lock node is left once every client stopped: " + n + " (session " +
                 std::to_string(x->owner) + ")");
    if (m.watch_count() != 0)
        fail("watches left at the server once every client stopped: " + std::to_string(m.watch_count()) +
             m.describe_watches());
    if (!out.ok) return abandon(seed, out, with_faults);
    for (auto& sess : ss) sess->async_close([&](zklock::error_code) { ++closed; });
    s.run([&] { return closed == sessions; }, s.now + 60'000'000'000);
    if (closed != sessions) fail("a close did not complete");
    std::vector<std::weak_ptr<zklock::detail::session_impl>> impls;
    for (auto& sess : ss) impls.push_back(sess->impl());
    ss.clear();
    // (what the library still has scheduled ends within its own bounds: a grace, a back-off)
    s.run(
        [&] {
            for (auto& w : impls)
                if (!w.expired()) return false;
            return m.settled();
        },
        s.now + 120'000'000'000);
    for (auto& w : impls)
        if (!w.expired()) fail("a closed session's state is still held (a wait of the library never ended)");
    if (!ledger.twice.empty()) fail("the handler of an operation ran twice: " + ledger.twice);
    if (ledger.completed != ledger.started)
        fail(std::to_string(ledger.started - ledger.completed) + " of " + std::to_string(ledger.started) +
             " operations never ran their handler");
    for (auto& n : under_both())
        if (const auto* x = m.find(n); !(x && x->container && x->children.empty()))
            fail("left at the end: " + n);
    if (m.ephemeral_count() != 0) fail("ephemeral nodes left: " + std::to_string(m.ephemeral_count()));
    if (m.watch_count() != 0)
        fail("watches left at the server: " + std::to_string(m.watch_count()) + m.describe_watches());
    out.trace = s.trace_hash;
    out.reaped = m.reaped();
    out.operator_deletes = operator_deleted;
    if (verbose)
        std::printf("seed %llu: %s, %d sessions, %d clients, %d grants, %d commits, %d drops, %d expiries "
                    "(%d with holds), %.1f s virtual, trace %016llx\n",
                    static_cast<unsigned long long>(seed), recipe_names[static_cast<int>(what)], sessions,
                    clients, out.grants, out.commits, drops, m.expired(), out.expiries_with_holds,
                    static_cast<double>(s.now) / 1e9, static_cast<unsigned long long>(out.trace));
    return out;
}

/// Every transition of the library's state machines reached in this process, with its count:
/// "machine from -> to" (coverage.hpp; a machine instantiated twice is summed).
std::map<std::string, std::uint64_t> reached_transitions() {
    std::map<std::string, std::uint64_t> out;
    for (const auto* t : zklock::detail::transition_table::all()) {
        const auto n = t->states().size();
        for (std::size_t f = 0; f < n; ++f)
            for (std::size_t to = 0; to < n; ++to)
                if (auto c = t->count(f, to))
                    out[std::string(t->machine()) + " " + t->states()[f] + " -> " + t->states()[to]] += c;
    }
    return out;
}

/// The transitions `file` lists (one a line; # comments) that this run reached no more: the suite
/// fails on them. Prints how many of the machines' transitions the run reached, and those it
/// reached that the file does not list.
bool transitions_still_reached(const std::string& file) {
    const auto reached = reached_transitions();
    std::FILE* f = std::fopen(file.c_str(), "r");
    if (!f) {
        std::printf("zklock_sim_whole: cannot read %s\n", file.c_str());
        return false;
    }
    std::set<std::string> listed;
    char line[512];
    while (std::fgets(line, sizeof line, f)) {
        std::string l(line);
        while (!l.empty() && (l.back() == '\n' || l.back() == '\r')) l.pop_back();
        if (!l.empty() && l[0] != '#') listed.insert(l);
    }
    std::fclose(f);
    bool ok = true;
    for (auto& t : listed)
        if (!reached.count(t)) {
            std::printf("transition no longer reached: %s (listed in %s)\n", t.c_str(), file.c_str());
            ok = false;
        }
    std::size_t fresh = 0;
    for (auto& [t, c] : reached)
        if (!listed.count(t)) {
            ++fresh;
            std::printf("transition reached, not listed (%llu times): %s\n",
                        static_cast<unsigned long long>(c), t.c_str());
        }
    std::printf("transitions: %zu reached, %zu listed, %zu listed and not reached\n", reached.size(),
                listed.size(),
                static_cast<std::size_t>(std::count_if(
                    listed.begin(), listed.end(), [&](const std::string& t) { return !reached.count(t); })));
    (void)fresh;
    return ok;
}

/// Writes the transitions reached at least `min` times to `file` (the list the suite checks).
void write_transitions(const std::string& file, std::uint64_t min, const std::string& how) {
    std::FILE* f = std::fopen(file.c_str(), "w");
    if (!f) return;
    std::fprintf(
        f,
        "# The library's state machines' transitions that the suite's fault seeds reach, each at least %llu\n"
        "# times (src/protocol/coverage.hpp). sim.WholeLibraryUnderFaultsSeedsPass fails when one is "
        "reached\n"
        "# no more. Written by: zklock_sim_whole %s\n",
        static_cast<unsigned long long>(min), how.c_str());
    for (auto& [t, c] : reached_transitions())
        if (c >= min) std::fprintf(f, "%s\n", t.c_str());
    std::fclose(f);
}

} // namespace

int main(int argc, char** argv) {
    std::uint64_t seeds = 100, first = 1;
    bool replay = false, verbose = false, one = false, with_faults = false;
    int only = -1;
    double minutes = 0; // (--minutes: as many seeds as fit, for long runs by hand)
    std::string check_transitions, write_transitions_to;
    for (int i = 1; i < argc; ++i) {
        if (!std::strcmp(argv[i], "--seeds") && i + 1 < argc)
            seeds = std::strtoull(argv[++i], nullptr, 10);
        else if (!std::strcmp(argv[i], "--seed") && i + 1 < argc)
            first = std::strtoull(argv[++i], nullptr, 10), one = true;
        else if (!std::strcmp(argv[i], "--first") && i + 1 < argc)
            first = std::strtoull(argv[++i], nullptr, 10);
        else if (!std::strcmp(argv[i], "--minutes") && i + 1 < argc)
            minutes = std::strtod(argv[++i], nullptr), seeds = ~0ULL / 2;
        else if (!std::strcmp(argv[i], "--replay"))
            replay = true;
        else if (!std::strcmp(argv[i], "--verbose"))
            verbose = true;
        else if (!std::strcmp(argv[i], "--faults"))
            with_faults = true;
        else if (!std::strcmp(argv[i], "--transitions") && i + 1 < argc)
            check_transitions = argv[++i];
        else if (!std::strcmp(argv[i], "--write-transitions") && i + 1 < argc)
            write_transitions_to = argv[++i];
        else if (!std::strcmp(argv[i], "--recipe") && i + 1 < argc) {
            const std::string r = argv[++i];
            for (int k = 0; k < static_cast<int>(recipe::count); ++k)
                if (r == recipe_names[k]) only = k;
            if (only < 0) {
                std::fprintf(stderr, "zklock_sim_whole: no recipe named %s\n", r.c_str());
                return 2;
            }
        } else {
            std::fprintf(
                stderr, "usage: zklock_sim_whole [--seeds N | --minutes M] [--seed S] [--first S] [--replay] "
                        "[--faults] [--recipe mutex|shared|semaphore|election|reentrant|multi] [--verbose] "
                        "[--transitions FILE] [--write-transitions FILE]\n");
            return 2;
        }
    }
    if (one) seeds = 1;
    pinned_recipe = only;
    long grants = 0, commits = 0, expiries = 0, gave_up = 0, reaped = 0, operator_deletes = 0, observed = 0,
         revoked = 0;
    double min_margin = 1e9;
    const auto started = std::chrono::steady_clock::now();
    std::uint64_t seed = first;
    for (; seed < first + seeds; ++seed) {
        if (minutes > 0 && std::chrono::steady_clock::now() - started >
                               std::chrono::duration<double, std::ratio<60>>(minutes)) {
            seeds = seed - first;
            break;
        }
        auto r = run_seed(seed, verbose, with_faults, only);
        grants += r.grants;
        commits += r.commits;
        expiries += r.expiries_with_holds;
        gave_up += r.gave_up;
        reaped += r.reaped;
        operator_deletes += r.operator_deletes;
        observed += r.observed;
        revoked += r.revoked;
        min_margin = std::min(min_margin, r.min_margin);
        if (!r.ok) {
            report_failure(seed, r.why, with_faults);
            return 1;
        }
        if (replay) {
            const auto counted = counts(); // (the summary counts each seed once)
            auto again = run_seed(seed, false, with_faults, only);
            counts() = counted;
            if (again.trace != r.trace) {
                std::printf("seed %llu ran differently the second time (trace %016llx, then %016llx)\n",
                            static_cast<unsigned long long>(seed), static_cast<unsigned long long>(r.trace),
                            static_cast<unsigned long long>(again.trace));
                return 1;
            }
        }
    }
    std::printf("whole-library simulation: %llu seeds passed, %ld grants, %ld guarded writes, %ld expiries "
                "of a holder's session",
                static_cast<unsigned long long>(seeds), grants, commits, expiries);
    if (expiries) std::printf(" (smallest margin %.3f T)", min_margin);
    std::printf(
        ", %ld acquires given up (timed out, busy or cancelled), %ld containers reaped, %ld leaders seen "
        "by an election's observer, %ld holders told of a revocation",
        gave_up, reaped, observed, revoked);
    if (with_faults)
        std::printf(", %ld drops by a receive timeout, %ld requests queued while disconnected (%ld of them "
                    "failed with SESSIONEXPIRED), %ld lock nodes deleted by an operator",
                    counts().timeouts, counts().queued, counts().expired_replies, operator_deletes);
    std::printf(
        ", %ld reads answered from a follower behind the leader, %ld writes that reached a server after "
        "their connection dropped, %ld refused as SESSIONMOVED, %ld watch events fired by SetWatches, %ld "
        "followers cut off (%ld past syncLimit), %ld leaders replaced, %ld listings by a follower without a "
        "node of the session that the leader had, %ld pauses of a client's process (%ld holders' locks "
        "read as lost while paused), %ld stalls of a connection, %ld servers frozen (%ld right after "
        "answering a write), %ld listings by a monitor, %ld regains, %ld ACL checks refused with NOAUTH (a "
        "write: once per server)",
        counts().stale_reads, counts().late_writes, counts().moved, counts().setwatch_fired, counts().cuts,
        counts().gave_up, counts().failovers, counts().own_missing, counts().pauses, counts().told_paused,
        counts().stalls, counts().freezes, counts().freezes_at_answer, counts().monitor_reads,
        counts().regains, counts().noauth);
    std::printf("%s\n", replay ? ", each seed replayed identically" : "");
    if (!write_transitions_to.empty())
        write_transitions(write_transitions_to, 5,
                          "--seeds " + std::to_string(seeds) + " --first " + std::to_string(first) +
                              (with_faults ? " --faults" : "") + " --write-transitions FILE");
    if (!check_transitions.empty() && !transitions_still_reached(check_transitions)) return 1;
    return 0;
}
