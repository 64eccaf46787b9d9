// One session that holds many locks (loss_policy::lease): the heartbeat stays the same size
// whatever the session holds, and a held node deleted by someone else is still reported, within
// the documented bound (docs/lease.md, "A deleted node").
#include <zklock/mutex.hpp>

#include "common.hpp"
#include "raw_zk.hpp"

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

} // namespace

TEST_F(Scale, ASessionKeepsMoreLocksThanOneHeartbeatCouldOnceCheck) {
    // The heartbeat used to be one multi with a check of every held node: past about 1 MiB (the
    // server's jute.maxbuffer) the server dropped the connection at every heartbeat, and the
    // leases lapsed (12,000 locks with short paths; here 4,000 paths of 250 bytes, 1.2 MB of
    // checks). It checks at most session_impl::heartbeat_checks nodes now, a slice in turn.
    // Seen failing with every node in one heartbeat: the connection dropped and every lock lost.
    constexpr std::size_t n = 4000;
    const std::string pad(200, 'p');
    run_test(
        [&]() -> awaitable<void> {
            auto s = co_await connect();
            std::vector<zklock::mutex> ms;
            ms.reserve(n);
            std::vector<std::string> paths;
            for (std::size_t i = 0; i < n; ++i) {
                paths.push_back(lock_path(pad + std::to_string(i)));
                ms.emplace_back(*s, paths.back());
            }
            const auto t0 = std::chrono::steady_clock::now();
            auto guards = co_await acquire_each(ms, 256);
            std::printf("  %zu locks acquired in %.1f s (paths of %zu bytes)\n", n,
                        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(),
                        paths.front().size());
            const auto before = s->statistics();
            const auto reconnects = s->metrics().reconnects;
            const auto checks = s->impl()->heartbeat_checks_sent();
            co_await sleep_for(4000ms); // T: ten heartbeat periods
            const auto after = s->statistics();
            std::size_t lost = 0;
            for (auto& g : guards) lost += g.is_lost() ? 1 : 0;
            EXPECT_EQ(lost, 0u) << "locks reported lost while held";
            EXPECT_EQ(s->metrics().reconnects, reconnects) << "the connection dropped while holding";
            EXPECT_EQ(s->state(), zklock::session_state::connected);
            const auto beats = after.heartbeats - before.heartbeats;
            EXPECT_GE(beats, 5u) << "heartbeats while holding";
            const auto per_beat = static_cast<double>(s->impl()->heartbeat_checks_sent() - checks) /
                                  static_cast<double>(std::max<std::uint64_t>(beats, 1));
            std::printf("  held for 4 s: %llu heartbeats, %.1f checks each, %zu lost\n",
                        static_cast<unsigned long long>(beats), per_beat, lost);
            EXPECT_LE(per_beat, static_cast<double>(zklock::detail::session_impl::heartbeat_checks));
            for (auto& g : guards) g.release_in_background();
            guards.clear();
            // (the fixture checks each of the n paths for leftovers)
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
            for (std::size_t i = 0; i < n; ++i) ms.emplace_back(*s, lock_path("held" + std::to_string(i)));
            auto guards = co_await acquire_each(ms, 128);
            co_await sleep_for(500ms);
            auto lost_at = std::make_shared<std::chrono::steady_clock::time_point>();
            auto why = std::make_shared<zklock::error_code>();
            const std::size_t victim = 137;
            guards[victim].async_wait_lost([lost_at, why](zklock::error_code ec) {
                *why = ec;
                *lost_at = std::chrono::steady_clock::now();
            });
            {
                raw_zk other; // someone else deletes the node (an operator's break)
                EXPECT_EQ(other.remove(guards[victim].node_path()), ZOK);
            }
            const auto deleted = std::chrono::steady_clock::now();
            const auto periods = static_cast<long>(
                std::ceil(static_cast<double>(n) /
                          static_cast<double>(zklock::detail::session_impl::heartbeat_checks)));
            const auto bound = (periods + 1) * T / 10 + 200ms; // (+ the round trip, a loaded machine)
            co_await eventually([&] { return *lost_at != std::chrono::steady_clock::time_point{}; }, 10s);
            CO_REQUIRE(*lost_at != std::chrono::steady_clock::time_point{});
            const auto took = std::chrono::duration_cast<std::chrono::milliseconds>(*lost_at - deleted);
            std::printf(
                "  deleted node among %zu held reported after %lld ms (bound %lld ms)\n", n,
                static_cast<long long>(took.count()),
                static_cast<long long>(std::chrono::duration_cast<std::chrono::milliseconds>(bound).count()));
            EXPECT_EQ(*why, errc::lock_node_deleted) << why->message();
            EXPECT_LE(took, bound);
            std::size_t others_lost = 0;
            for (std::size_t i = 0; i < n; ++i) others_lost += i != victim && guards[i].is_lost() ? 1 : 0;
            EXPECT_EQ(others_lost, 0u) << "the other locks stay held";
            for (auto& g : guards) g.release_in_background();
            guards.clear();
        },
        120s);
}
