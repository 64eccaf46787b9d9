// One session that holds many locks (loss_policy::lease): the heartbeat stays the same size
// whatever the session holds, and a held node deleted by someone else is still reported, within
// the documented bound (docs/lease.md, "A deleted node").
#include <zklock/mutex.hpp>
#include <zklock/znode.hpp>

#include "common.hpp"
#include "raw_zk.hpp"

#include "session/lease.hpp"

#include <cmath>
#include <cstdio>

using namespace zt;
using zklock::errc;
using Scale = zt::zk_test;

namespace {

/// Acquires every mutex of `ms`, `batch` at a time; returns the guards (fails on any error).
awaitable<std::vector<zklock::guard>> acquire_each(std::vector<zklock::mutex>& ms, std::size_t batch) {
    std::vector<zklock::guard> out(ms.size());
    std::size_t next = 0, done = 0, failed = 0;
    zklock::error_code first_error;
    auto launch = [&](std::size_t i, auto& self) -> void {
        ms[i].async_acquire_for(30s, [&, i](zklock::error_code ec, zklock::guard g) {
            ++done;
            if (ec) {
                if (!failed++) first_error = ec;
            } else {
                out[i] = std::move(g);
            }
            if (next < ms.size()) self(next++, self);
        });
    };
    for (; next < std::min(batch, ms.size());) launch(next++, launch);
    co_await eventually([&] { return done == ms.size(); }, 120s);
    EXPECT_EQ(done, ms.size());
    EXPECT_EQ(failed, 0u) << "first error: " << first_error.message();
    co_return out;
}

/// Makes every lock path a persistent node first. zklock makes a missing lock path a CONTAINER,
/// which the server's reaper deletes once it is empty, at most 10,000 a minute (one every 6 ms,
/// even for one already gone): thousands of them, emptied at the end of a test, held up the
/// reaping of the other tests' paths that run beside it for half a minute, past their 5 s
/// no-leftover checks (seen: MixedRecipes.*, Semaphore.* failing with "leases locks" left).
awaitable<void> make_paths(zklock::session& s, const std::vector<std::string>& paths) {
    std::size_t made = 0;
    for (auto& p : paths)
        zklock::async_create_node(s, p, std::string(), [&](zklock::error_code ec) {
            EXPECT_FALSE(ec) << p << ": " << ec.message();
            ++made;
        });
    co_await eventually([&] { return made == paths.size(); }, 60s);
    EXPECT_EQ(made, paths.size());
}

/// Releases every guard, then deletes every lock path (make_paths).
awaitable<void> release_and_remove(zklock::session& s, std::vector<zklock::guard>& guards,
                                   const std::vector<std::string>& paths) {
    std::size_t released = 0, removed = 0;
    for (auto& g : guards)
        g.async_release([&](zklock::error_code ec) {
            EXPECT_FALSE(ec) << ec.message();
            ++released;
        });
    co_await eventually([&] { return released == guards.size(); }, 60s);
    EXPECT_EQ(released, guards.size());
    guards.clear();
    for (auto& p : paths)
        zklock::async_delete_node(s, p, -1, [&](zklock::error_code ec) {
            EXPECT_FALSE(ec && ec != zklock::zk_errc::no_node) << p << ": " << ec.message();
            ++removed;
        });
    co_await eventually([&] { return removed == paths.size(); }, 60s);
    EXPECT_EQ(removed, paths.size());
}

} // namespace

TEST_F(Scale, ASessionKeepsMoreLocksThanOneHeartbeatCouldOnceCheck) {
    // The heartbeat used to be one multi with a check of every held node: past about 1 MiB (the
    // server's jute.maxbuffer) the server dropped the connection at every heartbeat, and the
    // leases lapsed (12,000 locks with short paths; here 4,000 paths of 250 bytes, 1.2 MB of
    // checks). It checks at most session_impl::heartbeat_checks nodes now, a slice in turn.
    // Seen failing with every node in one heartbeat: the connection dropped and every lock lost.
    // T = 10 s: 256 acquires in flight queue the heartbeats behind them at the server, and on a
    // loaded machine (a ThreadSanitizer suite beside other builds) their round trips passed the
    // lease's liveness premise at T = 4 s, ((f - 0.1) T - T/64) / 2 = 368 ms: locks were reported
    // lost that nothing threatened (1 and 189 of 4,000, in two runs of the full suite under load;
    // docs/lease.md, premise 5). That premise is not what this test is about.
    constexpr std::size_t n = 4000;
    const std::string pad(200, 'p');
    const auto T = 10000ms;
    run_test(
        [&]() -> awaitable<void> {
            auto o = options();
            o.session_timeout = T;
            auto s = co_await connect(o);
            std::vector<zklock::mutex> ms;
            ms.reserve(n);
            std::vector<std::string> paths;
            for (std::size_t i = 0; i < n; ++i) {
                paths.push_back(lock_path(pad + std::to_string(i)));
                ms.emplace_back(*s, paths.back());
            }
            co_await make_paths(*s, paths);
            const auto t0 = std::chrono::steady_clock::now();
            auto guards = co_await acquire_each(ms, 256);
            std::printf("  %zu locks acquired in %.1f s (paths of %zu bytes)\n", n,
                        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(),
                        paths.front().size());
            const auto before = s->statistics();
            const auto reconnects = s->metrics().reconnects;
            const auto checks = s->impl()->heartbeat_checks_sent();
            co_await sleep_for(T / 2); // five heartbeat periods
            const auto after = s->statistics();
            std::size_t lost = 0;
            for (auto& g : guards) lost += g.is_lost() ? 1 : 0;
            const double bound_ms =
                zklock::detail::session_lease::liveness_bound(zklock::loss_policy::default_lease_fraction) *
                std::chrono::duration<double, std::milli>(s->negotiated_timeout()).count();
            EXPECT_EQ(lost, 0u) << "locks reported lost while held; the slowest write took "
                                << after.slowest_write.count() / 1000
                                << " ms (the liveness premise: " << bound_ms << " ms)";
            EXPECT_EQ(s->metrics().reconnects, reconnects) << "the connection dropped while holding";
            EXPECT_EQ(s->state(), zklock::session_state::connected);
            const auto beats = after.heartbeats - before.heartbeats;
            EXPECT_GE(beats, 3u) << "heartbeats while holding";
            const auto per_beat = static_cast<double>(s->impl()->heartbeat_checks_sent() - checks) /
                                  static_cast<double>(std::max<std::uint64_t>(beats, 1));
            std::printf(
                "  held for T/2: %llu heartbeats, %.1f checks each, %zu lost; slowest write %lld ms\n",
                static_cast<unsigned long long>(beats), per_beat, lost,
                static_cast<long long>(after.slowest_write.count() / 1000));
            EXPECT_LE(per_beat, static_cast<double>(zklock::detail::session_impl::heartbeat_checks));
            co_await release_and_remove(*s, guards, paths); // (and the fixture checks each path)
        },
        240s);
}

TEST_F(Scale, AHeldNodeDeletedAmongManyIsReportedWithinTheBound) {
    // N held locks: each heartbeat checks 64 of them in turn, so a deleted node is found within
    // ceil(N / 64) heartbeat periods (docs/lease.md, "A deleted node"), plus the period in which
    // it was deleted and the heartbeat's round trip.
    constexpr std::size_t n = 300;
    const auto T = 2000ms;
    run_test(
        [&]() -> awaitable<void> {
            auto o = options();
            o.session_timeout = T;
            auto s = co_await connect(o);
            std::vector<zklock::mutex> ms;
            ms.reserve(n);
            std::vector<std::string> paths;
            for (std::size_t i = 0; i < n; ++i) {
                paths.push_back(lock_path("held" + std::to_string(i)));
                ms.emplace_back(*s, paths.back());
            }
            co_await make_paths(*s, paths);
            auto guards = co_await acquire_each(ms, 128);
            co_await sleep_for(500ms);
            const std::size_t victim = 137;
            const auto beats = s->statistics().heartbeats;
            {
                raw_zk other; // someone else deletes the node (an operator's break)
                EXPECT_EQ(other.remove(guards[victim].node_path()), ZOK);
            }
            const auto deleted = std::chrono::steady_clock::now();
            // (polled: async_wait_lost would arm a watch on the node, which would see the delete at
            // once; this is the heartbeat's finding)
            co_await eventually([&] { return guards[victim].is_lost(); }, 10s);
            const auto took = std::chrono::duration_cast<std::chrono::milliseconds>(
                std::chrono::steady_clock::now() - deleted);
            CO_REQUIRE(guards[victim].is_lost());
            const auto periods = static_cast<long>(
                std::ceil(static_cast<double>(n) /
                          static_cast<double>(zklock::detail::session_impl::heartbeat_checks)));
            const auto bound = (periods + 1) * T / 10 + 100ms; // (+ the round trip, a loaded machine)
            std::printf(
                "  deleted node among %zu held reported after %lld ms, %llu heartbeats (bound %lld ms)\n", n,
                static_cast<long long>(took.count()),
                static_cast<unsigned long long>(s->statistics().heartbeats - beats),
                static_cast<long long>(std::chrono::duration_cast<std::chrono::milliseconds>(bound).count()));
            EXPECT_EQ(guards[victim].loss_reason(), errc::lock_node_deleted)
                << guards[victim].loss_reason().message();
            EXPECT_LE(took, bound);
            EXPECT_LE(s->statistics().heartbeats - beats, static_cast<std::uint64_t>(periods + 1))
                << "found by the heartbeats within ceil(N/64) of them after the delete";
            std::size_t others_lost = 0;
            for (std::size_t i = 0; i < n; ++i) others_lost += i != victim && guards[i].is_lost() ? 1 : 0;
            EXPECT_EQ(others_lost, 0u) << "the other locks stay held";
            co_await release_and_remove(*s, guards, paths);
        },
        120s);
}
