// zklock_sim_whole: the library itself, through its public API, on the simulated platform
// (sim_platform.hpp): several sessions take and release one mutex (each client its own session,
// or two clients sharing one; with or without the in-process hand-off), by plain, timed (that may
// time out) and try acquires, released by async_release or by the guard's destructor, in virtual
// time, each seed one run. Oracles, from the model's
// history: at most one holder at a time (no faults are injected yet, so the grant alone decides);
// fencing tokens increase; no lock is lost (there is no fault to lose it to); no session's state is
// held once every session closed and the library's bounded waits ran out; every client finishes (no stuck waiter); nothing left once every
// session has closed (no node under the lock path but its emptied container, no ephemeral node,
// no watch); the same seed gives the same run (--replay: each seed twice, traces compared).
//
// --faults: half the seeds drop connections (lost replies, requests applied or not, reconnects to
// the same session with the watches' events held for the reconnect) and let some stay down past
// the session timeout (an expiry, decided by the model's session tracker and told at the
// reconnect); then a holder may be granted over only once it has been told of its loss.
//
// Usage: zklock_sim_whole [--seeds N] [--seed S] [--replay] [--faults] [--verbose]
#include "sim_platform.hpp"

#include <zklock.hpp>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/use_awaitable.hpp>

#include "session/timer.hpp"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>

namespace {

namespace asio = boost::asio;
using asio::awaitable;
using asio::use_awaitable;
using namespace zklock::sim;

struct outcome {
    bool ok = true;
    std::string why;
    std::uint64_t trace = 0;
    int grants = 0;
};

outcome run_seed(std::uint64_t seed, bool verbose, bool with_faults) {
    outcome out;
    model_server m; // (first: it outlives the coroutines that io's destructor destroys, and their sessions)
    scheduler s(seed);
    auto plat = std::make_shared<sim_platform>(s, m);
    const int sessions = 2 + static_cast<int>(s.rng() % 3);       // 2..4
    const int clients = sessions + static_cast<int>(s.rng() % 2); // one session may have two
    const int cycles = 3;
    const std::string path = "/locks/whole";
    std::vector<std::unique_ptr<zklock::session>> ss;
    for (int i = 0; i < sessions; ++i) {
        zklock::session_options o;
        o.connect = "127.0.0.1:2181";
        o.session_timeout = std::chrono::milliseconds(4'000 + static_cast<int>(s.rng() % 6'000));
        ss.push_back(std::make_unique<zklock::session>(s.io.get_executor(), o, plat));
    }
    const bool handoff = s.rng() % 2 == 0; // the in-process hand-off, for every client
    const bool faults = with_faults && s.rng() % 2 == 0;
    int holder = -1, finished = 0, closed = 0, drops = 0;
    const zklock::guard* holder_g = nullptr;
    std::shared_ptr<bool> holder_told; // the holder's loss signal (async_wait_lost) has fired
    std::int64_t last_token = 0;
    auto fail = [&](std::string why) {
        if (out.ok) out.why = std::move(why);
        out.ok = false;
    };
    for (int c = 0; c < clients; ++c) {
        auto& sess = *ss[static_cast<std::size_t>(c % sessions)];
        asio::co_spawn(
            s.io,
            [&, c]() -> awaitable<void> {
                if (sess.state() != zklock::session_state::connected) {
                    auto [ec] = co_await sess.async_connect(asio::as_tuple(use_awaitable));
                    if (ec && sess.state() != zklock::session_state::connected) {
                        ++finished; // (its session ended before it was up: a fault)
                        co_return;
                    }
                }
                // (every client of a session alike: the hand-off queues a session's acquires of a path)
                zklock::mutex_options mo;
                if (handoff) mo.local_handoff = 3;
                zklock::mutex mx(sess, path, mo);
                zklock::detail::timer pause(plat, s.io.get_executor());
                auto gone = [&] {
                    return sess.state() == zklock::session_state::expired ||
                           sess.state() == zklock::session_state::closed;
                };
                for (int i = 0; i < cycles && !gone(); ++i) {
                    zklock::error_code ec;
                    zklock::guard g;
                    switch (s.rng() % 4) {
                    case 0: { // a timed acquire, which may give up: its node goes, the queue closes up
                        auto [e, gg] = co_await mx.async_acquire_for(
                            std::chrono::microseconds(s.draw(1'000, 40'000'000) / 1000),
                            asio::as_tuple(use_awaitable));
                        if (e == zklock::errc::acquire_timeout) continue;
                        ec = e;
                        g = std::move(gg);
                        break;
                    }
                    case 1: { // a try, which fails while another holds
                        auto [e, gg] = co_await mx.async_try_acquire(asio::as_tuple(use_awaitable));
                        if (e == zklock::errc::lock_busy) continue;
                        ec = e;
                        g = std::move(gg);
                        break;
                    }
                    default: {
                        auto [e, gg] = co_await mx.async_acquire(asio::as_tuple(use_awaitable));
                        ec = e;
                        g = std::move(gg);
                    }
                    }
                    if (ec) {
                        if (!faults) throw boost::system::system_error(ec);
                        continue; // (a fault: the loop ends if the session is gone)
                    }
                    // Mutual exclusion. With faults, a holder not released yet must have been told
                    // of its loss (its loss signal fired) before anyone else is granted (the lease's
                    // promise, here with equal clocks and no pause: the margin is the lease's own).
                    if (holder != -1 && !(faults && holder_told && *holder_told))
                        fail("client " + std::to_string(c) + " granted while client " +
                             std::to_string(holder) + " holds");
                    if (g.fencing_token() <= last_token)
                        fail("fencing token did not increase: " + std::to_string(last_token) + " then " +
                             std::to_string(g.fencing_token()) + " (client " + std::to_string(c) + ")");
                    last_token = g.fencing_token();
                    holder = c;
                    holder_g = &g;
                    holder_told = std::make_shared<bool>(false);
                    g.async_wait_lost([told = holder_told](zklock::error_code e) {
                        if (e != zklock::errc::lock_released) *told = true;
                    });
                    ++out.grants;
                    s.note(static_cast<std::uint64_t>(c) * 1000 + static_cast<std::uint64_t>(i));
                    // mostly short holds; one in eight past the session timeout (the heartbeat must
                    // keep the lease, and the node, for the holder)
                    const auto hold =
                        s.rng() % 8 == 0 ? s.draw(1'000'000'000, 12'000'000'000) : s.draw(0, 30'000'000);
                    pause.expires_after(std::chrono::nanoseconds(hold));
                    co_await pause.async_wait(asio::as_tuple(use_awaitable));
                    // with no fault injected, a lock is never lost
                    if (!faults && g.is_lost())
                        fail("client " + std::to_string(c) +
                             " lost its lock with no fault: " + g.loss_reason().message());
                    if (holder == c) {
                        holder = -1;
                        holder_g = nullptr;
                        holder_told.reset();
                    }
                    if (s.rng() % 4 == 0)
                        g = zklock::guard(); // released by its destructor: the node goes in the background
                    else
                        co_await g.async_release(asio::as_tuple(use_awaitable)); // (after a loss: an error)
                }
                ++finished;
            },
            [&](std::exception_ptr e) {
                if (!e) return;
                try {
                    std::rethrow_exception(e);
                } catch (const std::exception& x) {
                    fail(std::string("a client failed: ") + x.what());
                }
            });
    }
    // The faults: connection drops of a random session, each down for a drawn time (past the
    // session timeout sometimes: an expiry, told at the reconnect); and the leader's session
    // tracker, which expires an untouched session every 100 ms of virtual time.
    std::function<void()> tracker = [&] {
        m.expire_due(s.now);
        if (finished < clients) s.at(s.now + 100'000'000, tracker);
    };
    s.at(s.now + 100'000'000, tracker);
    std::function<void()> fault = [&] {
        if (finished == clients) return;
        std::vector<std::shared_ptr<sim_link>> up;
        for (auto& w : plat->links)
            if (auto l = w.lock(); l && l->connected()) up.push_back(l);
        if (!up.empty()) {
            ++drops;
            up[s.rng() % up.size()]->drop(s.rng() % 5 == 0 ? s.draw(5'000'000'000, 15'000'000'000)
                                                           : s.draw(10'000'000, 3'000'000'000));
        }
        s.at(s.now + s.draw(100'000'000, 3'000'000'000), fault);
    };
    if (faults) s.at(s.now + s.draw(1'000'000, 500'000'000), fault);
    const std::int64_t limit = s.now + 600'000'000'000; // 10 virtual minutes
    if (!s.run([&] { return finished == clients || !out.ok; }, limit))
        fail("stuck: " + std::to_string(finished) + " of " + std::to_string(clients) +
             " clients finished by " + std::to_string((s.now) / 1'000'000) + " ms");
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
            return true;
        },
        s.now + 120'000'000'000);
    for (auto& w : impls)
        if (!w.expired()) fail("a closed session's state is still held (a wait of the library never ended)");
    for (auto& n : m.under(path)) fail("left at the end: " + n);
    if (m.ephemeral_count() != 0) fail("ephemeral nodes left: " + std::to_string(m.ephemeral_count()));
    if (m.watch_count() != 0) fail("watches left at the server: " + std::to_string(m.watch_count()));
    out.trace = s.trace_hash;
    if (verbose)
        std::printf("seed %llu: %d sessions, %d clients, %d grants, %d drops, %d expiries, %.1f s virtual, "
                    "trace %016llx\n",
                    static_cast<unsigned long long>(seed), sessions, clients, out.grants, drops, m.expired(),
                    static_cast<double>(s.now) / 1e9, static_cast<unsigned long long>(out.trace));
    return out;
}

} // namespace

int main(int argc, char** argv) {
    std::uint64_t seeds = 100, first = 1;
    bool replay = false, verbose = false, one = false, with_faults = false;
    for (int i = 1; i < argc; ++i) {
        if (!std::strcmp(argv[i], "--seeds") && i + 1 < argc)
            seeds = std::strtoull(argv[++i], nullptr, 10);
        else if (!std::strcmp(argv[i], "--seed") && i + 1 < argc)
            first = std::strtoull(argv[++i], nullptr, 10), one = true;
        else if (!std::strcmp(argv[i], "--replay"))
            replay = true;
        else if (!std::strcmp(argv[i], "--verbose"))
            verbose = true;
        else if (!std::strcmp(argv[i], "--faults"))
            with_faults = true;
        else {
            std::fprintf(
                stderr, "usage: zklock_sim_whole [--seeds N] [--seed S] [--replay] [--faults] [--verbose]\n");
            return 2;
        }
    }
    if (one) seeds = 1;
    long grants = 0;
    for (std::uint64_t seed = first; seed < first + seeds; ++seed) {
        auto r = run_seed(seed, verbose, with_faults);
        grants += r.grants;
        if (!r.ok) {
            std::printf("seed %llu FAILED: %s (replay: zklock_sim_whole --seed %llu --verbose)\n",
                        static_cast<unsigned long long>(seed), r.why.c_str(),
                        static_cast<unsigned long long>(seed));
            return 1;
        }
        if (replay) {
            auto again = run_seed(seed, false, with_faults);
            if (again.trace != r.trace) {
                std::printf("seed %llu ran differently the second time (trace %016llx, then %016llx)\n",
                            static_cast<unsigned long long>(seed), static_cast<unsigned long long>(r.trace),
                            static_cast<unsigned long long>(again.trace));
                return 1;
            }
        }
    }
    std::printf("whole-library simulation: %llu seeds passed, %ld grants%s\n",
                static_cast<unsigned long long>(seeds), grants,
                replay ? ", each seed replayed identically" : "");
    return 0;
}
