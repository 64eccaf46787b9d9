// The loss policy on a real server: the lease reports the loss before the server can hand the
// lock on (partition through the proxy), survives a short disconnect, and bounds releases.
// The frozen-follower case, which needs the ensemble, is in process_test.cpp.
#include <zklock/mutex.hpp>
#include <zklock/semaphore.hpp>

#include "common.hpp"
#include "session_faults.hpp"
#include "loss_race.hpp"
#include "proxy.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/detached.hpp>

#include <cstdio>

#include <sys/resource.h>
#include <unistd.h>

using namespace zt;
using zklock::errc;
using zklock::loss_policy;
using zklock::session_state;
using clk = std::chrono::steady_clock;

namespace {

/// Waits until the session has sent its next lease heartbeat (the phase reference of a fault),
/// after at least five since the call: the lease is then in its steady state, vouched for by
/// the heartbeats (early in a connection, its handshake vouches for it, for up to 0.7125 T after
/// the connect: see docs/lease.md).
awaitable<void> next_heartbeat(zklock::session& s) {
    auto n = s.statistics().heartbeats;
    co_await eventually([&] { return s.statistics().heartbeats >= n + 5; }, 10000ms);
    EXPECT_GE(s.statistics().heartbeats, n + 5) << "no heartbeats while holding a lock";
}

} // namespace

using Lease = zt::zk_test;

TEST_F(Lease, HeartbeatsRunOnlyWhileALockIsHeld) {
    run_test([&]() -> awaitable<void> {
        auto path = lock_path();
        auto o = options();
        o.session_timeout = 2000ms; // heartbeat every 200 ms
        auto a = co_await connect(o);
        co_await sleep_for(500ms);
        EXPECT_EQ(a->statistics().heartbeats, 0u) << "heartbeats without a lock";
        zklock::mutex m(*a, path);
        auto g = co_await m.async_acquire(use_awaitable);
        auto before = a->statistics().heartbeats;
        co_await sleep_for(1000ms);
        auto during = a->statistics().heartbeats - before;
        EXPECT_GE(during, 2u); // 5 expected; wide bounds: timers run late on a loaded machine
        EXPECT_LE(during, 8u);
        co_await g.async_release(use_awaitable);
        co_await sleep_for(100ms);
        auto after = a->statistics().heartbeats;
        co_await sleep_for(600ms);
        EXPECT_EQ(a->statistics().heartbeats, after) << "heartbeats went on after the release";
    });
}

/// A grant that starts the heartbeats moves them later (session_lease::first_heartbeat_at): in a
/// loop of lock cycles, every grant does. The timer armed for an earlier moment stays armed, and when it fires before the heartbeat is due it is armed again
/// for it: about a wake-up per heartbeat period. It was armed again at every grant before (a
/// timerfd_settime, a reactor wait and a cancelled wait per lock cycle: 200 arms for 200 cycles).
/// The heartbeats still go while the lock is held afterwards.
TEST_F(Lease, RepeatedGrantsMoveTheHeartbeatWithoutArmingItsTimerEachTime) {
    run_test([&]() -> awaitable<void> {
        auto path = lock_path();
        auto o = options();
        o.session_timeout = 2000ms; // a heartbeat period of 200 ms
        auto a = co_await connect(o);
        CO_REQUIRE(a->negotiated_timeout() == 2000ms);
        zklock::mutex m(*a, path);
        const auto arms = a->impl()->heartbeat_timer_arms();
        const auto start = std::chrono::steady_clock::now();
        constexpr int cycles = 200;
        for (int i = 0; i < cycles; ++i) {
            auto g = co_await m.async_acquire(use_awaitable);
            co_await g.async_release(use_awaitable);
        }
        const auto periods = (std::chrono::steady_clock::now() - start) / 200ms;
        const auto armed = a->impl()->heartbeat_timer_arms() - arms;
        // (a wake-up comes a period after the last commit sent, a little less than a period after
        // the previous wake-up: twice the periods is a loose bound, and far below one per cycle)
        EXPECT_LE(armed, 2 * static_cast<std::uint64_t>(periods) + 4)
            << cycles << " lock cycles in " << periods << " heartbeat periods armed the heartbeat timer "
            << armed << " times";
        auto g = co_await m.async_acquire(use_awaitable);
        const auto before = a->statistics().heartbeats;
        co_await sleep_for(1000ms);
        const auto during = a->statistics().heartbeats - before;
        // (5 expected; timers run late under load)
        EXPECT_GE(during, 2u) << "heartbeats while held: " << during;
        EXPECT_LE(during, 8u);
        co_await g.async_release(use_awaitable);
    });
}

TEST_F(Lease, ShortDisconnectsReportNoLoss) {
    run_test([&]() -> awaitable<void> {
        tcp_proxy proxy(first_port(zk_connect()));
        auto path = lock_path();
        auto o = through(proxy);
        o.session_timeout = 4000ms; // lease 1.33 s
        auto a = co_await connect(o);
        auto b = co_await connect();
        zklock::mutex ma(*a, path), mb(*b, path);
        auto g = co_await ma.async_acquire(use_awaitable);
        auto id = a->session_id();
        for (int i = 0; i < 4; ++i) { // connection resets: the client reconnects at once
            proxy.drop();
            co_await sleep_for(500ms);
        }
        co_await sleep_for(1500ms); // past the lease since the first drop
        EXPECT_EQ(a->state(), session_state::connected);
        EXPECT_EQ(a->session_id(), id);
        EXPECT_FALSE(g.is_lost()) << g.loss_reason().message();
        auto [ec, none] = co_await mb.async_try_acquire(boost::asio::as_tuple(use_awaitable));
        EXPECT_EQ(ec, errc::lock_busy) << ec.message();
        co_await g.async_release(use_awaitable);
    });
}

TEST_F(Lease, PartitionReportsTheLossBeforeTheServerCanHandTheLockOn) {
    // The holder's connection stays open but carries nothing (a partition). Whatever the phase of
    // the partition against the holder's traffic, the lease must report the loss at least the
    // stated margin ((0.5875 - f) T, less an allowance for scheduling) before the waiter is granted.
    const auto T = 2000ms;
    // (a standalone server touches the session on every request; the follower case's bound,
    // (0.5875 - f) T, is below what it leaves)
    const double bound =
        zklock::detail::session_lease::guaranteed_margin(loss_policy::default_lease_fraction) *
        std::chrono::duration<double>(T).count();
    const double allowance = 0.1;
    run_test(
        [&]() -> awaitable<void> {
            auto b = co_await connect();
            for (int k = 0; k < 5; ++k) {
                tcp_proxy proxy(first_port(zk_connect()));
                auto path = lock_path("lock" + std::to_string(k));
                auto o = through(proxy);
                o.session_timeout = T;
                auto a = co_await connect(o);
                CO_REQUIRE(a->negotiated_timeout() == T);
                auto r = co_await race_loss_against_grant(*a, *b, path,
                                                          std::chrono::milliseconds(40 * k), // 5 phases
                                                          [&] { proxy.blackhole(true); });   // over T/10
                CO_REQUIRE(r.lost);
                CO_REQUIRE(r.granted);
                EXPECT_EQ(r.why, errc::lease_expired) << r.why.message();
                std::printf(
                    "  phase %d ms: loss at +%.3f s, other holder at +%.3f s, margin %.3f s (bound %.3f s)\n",
                    40 * k, r.loss_s, r.grant_s, r.margin(), bound);
                EXPECT_GE(r.margin(), bound - allowance);
                auto& g = r.holder;
                auto& gb = r.next;
                // after the loss, release completes at once although the partition goes on
                auto r0 = clk::now();
                co_await g.async_release(use_awaitable);
                EXPECT_LT(clk::now() - r0, 200ms) << "release after a loss waited";
                proxy.blackhole(false);
                co_await gb.async_release(use_awaitable);
                co_await a->async_close(use_awaitable);
                co_await expect_no_leftovers(*b, path);
            }
        },
        120s);
}

TEST_F(Lease, ALockGrantedByAWatchRightAfterAReconnectIsStillToldOfALapse) {
    // The phase the whole-library simulation found (seed 14,440 with --faults). Session a takes
    // and gives back a lock: its lease timer stays armed for the deadline its handshake vouches
    // for. It queues for a second lock, then its connection drops and comes back while it holds
    // nothing (the reconnect re-arms the lease timer for no lock: a cancel). The holder releases
    // and a is granted by the watch, with no write of its own since the reconnect: the lease's
    // vouched time has not moved, and the grant wants the very deadline the cancelled wait had.
    // arm_lease_timer skips a re-arm whose deadline is already the timer's; the platform seam's
    // first timer kept its deadline through cancel(), so no wait was left at all, and a,
    // partitioned, was told nothing until its session had expired. All this within the first
    // second of a's session (before a request answered G = 5T/16 earlier could move the vouched
    // time, docs/lease.md's rule (b)).
    using clk = std::chrono::steady_clock;
    const auto T = 4000ms;
    // told at the lease's deadline, v + (0.4125 + f) T, v before the cut; 0.3 s for scheduling
    const auto told_by = std::chrono::duration_cast<std::chrono::milliseconds>(
                             (0.4125 + loss_policy::default_lease_fraction) * T) +
                         300ms;
    run_test(
        [&]() -> awaitable<void> {
            tcp_proxy proxy(first_port(zk_connect()));
            auto path = lock_path(), first = lock_path("first");
            auto b = co_await connect();
            zklock::mutex mb(*b, path);
            auto gb = co_await mb.async_acquire(use_awaitable);
            auto o = through(proxy);
            o.session_timeout = T;
            auto a = co_await connect(o);
            CO_REQUIRE(a->negotiated_timeout() == T);
            const auto connected_at = clk::now();
            {
                zklock::mutex m(*a, first);
                auto g = co_await m.async_acquire(use_awaitable);
                co_await g.async_release(use_awaitable);
            }
            struct shared_state {
                zklock::guard g;
                zklock::error_code ec, why;
                bool granted = false;
                clk::time_point lost_at{};
            };
            auto st = std::make_shared<shared_state>();
            zklock::mutex ma(*a, path);
            ma.async_acquire_for(20s, [st](zklock::error_code ec, zklock::guard g) {
                st->ec = ec;
                st->g = std::move(g);
                st->granted = true;
            });
            co_await wait_for_children(*b, path, 2); // (a's node is made before the drop)
            const auto reconnects = a->metrics().reconnects;
            proxy.drop(); // (the client reconnects at once)
            co_await eventually(
                [&] {
                    return a->metrics().reconnects > reconnects && a->state() == session_state::connected;
                },
                3000ms);
            CO_REQUIRE(a->state() == session_state::connected);
            co_await gb.async_release(use_awaitable);
            co_await eventually([&] { return st->granted; }, 3000ms);
            CO_REQUIRE(st->granted);
            EXPECT_FALSE(st->ec) << st->ec.message();
            const auto setup = clk::now() - connected_at;
            EXPECT_LT(setup, 1000ms) << "the set-up took too long for the phase it aims at";
            proxy.blackhole(true);
            const auto cut = clk::now();
            st->g.async_wait_lost([st](zklock::error_code why) {
                st->why = why;
                st->lost_at = clk::now();
            });
            co_await eventually([&] { return st->lost_at != clk::time_point{}; }, T + 2000ms);
            EXPECT_NE(st->lost_at, clk::time_point{})
                << "the holder, partitioned, was never told of the lapse";
            if (st->lost_at != clk::time_point{}) {
                EXPECT_EQ(st->why, errc::lease_expired) << st->why.message();
                EXPECT_LE(st->lost_at - cut, told_by)
                    << "told " << std::chrono::duration<double>(st->lost_at - cut).count()
                    << " s after the cut";
                std::printf("  set-up %.3f s; told %.3f s after the cut (by %.3f s)\n",
                            std::chrono::duration<double>(setup).count(),
                            std::chrono::duration<double>(st->lost_at - cut).count(),
                            std::chrono::duration<double>(told_by).count());
            }
            co_await st->g.async_release(boost::asio::as_tuple(use_awaitable));
            proxy.blackhole(false);
            co_await a->async_close(use_awaitable);
            co_await expect_no_leftovers(*b, path);
            co_await expect_no_leftovers(*b, first);
        },
        60s);
}

TEST_F(Lease, ReleaseDuringAPartitionIsBoundedByTheLease) {
    run_test([&]() -> awaitable<void> {
        tcp_proxy proxy(first_port(zk_connect()));
        auto path = lock_path();
        auto o = through(proxy);
        o.session_timeout = 3000ms; // lease 1 s
        auto a = co_await connect(o);
        zklock::mutex ma(*a, path);
        auto g = co_await ma.async_acquire(use_awaitable);
        co_await next_heartbeat(*a);
        proxy.blackhole(true);
        proxy.drop(); // the client notices at once, and cannot reconnect
        co_await eventually([&] { return a->state() == session_state::suspended; }, 2000ms);
        auto r0 = clk::now();
        auto [ec] = co_await g.async_release(boost::asio::as_tuple(use_awaitable));
        auto took = clk::now() - r0;
        EXPECT_FALSE(ec) << ec.message();
        EXPECT_LT(took, 1500ms) << "the release waited past the lease for a reconnect";
        EXPECT_EQ(a->state(), session_state::suspended) << "the test meant to release while disconnected";
        proxy.blackhole(false);
        // the node goes: deleted after the reconnect, or with the expired session
    });
}

TEST_F(Lease, PerLockPolicyOverridesTheSession) {
    run_test([&]() -> awaitable<void> {
        tcp_proxy proxy(first_port(zk_connect()));
        auto path = lock_path();
        auto o = through(proxy);
        o.session_timeout = 3000ms;
        o.loss = loss_policy::on_expiry();
        auto a = co_await connect(o);
        auto b = co_await connect();
        zklock::mutex_options lease_opts;
        lease_opts.loss = loss_policy::lease();
        zklock::mutex plain(*a, path + "-a"), leased(*a, path + "-b", lease_opts);
        auto g1 = co_await plain.async_acquire(use_awaitable);
        auto g2 = co_await leased.async_acquire(use_awaitable);
        proxy.blackhole(true);
        auto [ec] = co_await g2.async_wait_lost(boost::asio::as_tuple(use_awaitable));
        EXPECT_EQ(ec, errc::lease_expired) << ec.message();
        EXPECT_TRUE(g2.is_lost());
        EXPECT_FALSE(g1.is_lost()) << "the session's on_expiry lock reported a loss before the expiry";
        zklock::mutex_options bad;
        bad.loss = loss_policy::lease(0.55); // would leave 0.0375 T: refused (at most 0.45)
        zklock::mutex invalid(*b, path + "-c", bad);
        auto [ec2, none] = co_await invalid.async_acquire(boost::asio::as_tuple(use_awaitable));
        EXPECT_EQ(ec2, errc::invalid_lease_fraction) << ec2.message();
        proxy.blackhole(false);
        g1.release_in_background();
        g2.release_in_background();
        co_await expect_no_leftovers(*b, path + "-a");
        co_await expect_no_leftovers(*b, path + "-b");
        co_await expect_no_leftovers(*b, path + "-c");
    });
}

TEST_F(Lease, AReleaseWhoseDeleteIsCutOffIsBoundedByTheLease) {
    // The connection is up when the release starts, and goes before the delete's reply: the
    // release must not wait for a reconnect that may never come.
    run_test([&]() -> awaitable<void> {
        tcp_proxy proxy(first_port(zk_connect()));
        auto path = lock_path();
        auto o = through(proxy);
        o.session_timeout = 3000ms; // lease 1 s
        auto a = co_await connect(o);
        auto b = co_await connect();
        zklock::mutex ma(*a, path);
        auto g = co_await ma.async_acquire(use_awaitable);
        co_await next_heartbeat(*a);
        auto r0 = clk::now();
        bool released = false;
        zklock::error_code rec;
        g.async_release([&](zklock::error_code ec) {
            rec = ec;
            released = true;
        });
        proxy.blackhole(true); // before the strand sends the delete: it is swallowed
        co_await eventually([&] { return released; }, 5000ms);
        auto took = clk::now() - r0;
        EXPECT_TRUE(released) << "the release waited for a reconnect";
        EXPECT_FALSE(rec) << rec.message();
        EXPECT_LT(took, 2000ms);
        proxy.blackhole(false);
        co_await expect_no_leftovers(*b, path); // deleted after the reconnect, or with the session
    });
}

TEST_F(Lease, ALapseNoTimerSawIsStillALoss) {
    // The lease timer fires late (a busy strand, a suspended machine: injected), the connection
    // carries nothing for longer than the lease, then comes back and a heartbeat renews the
    // lease. Nobody looked while it had lapsed, and now it is current again: the holder must
    // still be told (the lapse is reported). The renewal itself reveals the gap, long before the
    // late timer. Without regains the loss is final; with them (the default) the lock is
    // suspended, and regained once its committed check finds the node (the session survived).
    const auto T = 2000ms; // lease 0.6 s
    for (bool regains : {false, true}) {
        SCOPED_TRACE(regains ? "the default policy (regains)" : "no regain");
        run_test([&]() -> awaitable<void> {
            tcp_proxy proxy(first_port(zk_connect()));
            auto path = lock_path();
            auto o = through(proxy);
            o.session_timeout = T;
            if (!regains) o.loss = zklock::loss_policy::lease().with_regain_window(0ms);
            auto a = co_await connect(o);
            CO_REQUIRE(a->negotiated_timeout() == T);
            zt::faults(*a).lease_timer_late_ms = 30000;
            zklock::mutex m(*a, path);
            auto g = co_await m.async_acquire(use_awaitable);
            const auto token = g.fencing_token();
            auto lost = std::make_shared<std::optional<zklock::error_code>>();
            g.async_wait_lost([lost](zklock::error_code ec) { *lost = ec; });
            co_await next_heartbeat(*a);
            proxy.blackhole(true);
            co_await sleep_for(1000ms); // past the lease (0.6 s), short of the session (2 s)
            EXPECT_FALSE(lost->has_value()) << "the late timer fired early";
            proxy.blackhole(false); // the client reconnects at once; the heartbeat renews the lease
            co_await eventually([&] { return lost->has_value(); }, 3000ms);
            CO_REQUIRE(lost->has_value());
            EXPECT_EQ(**lost, errc::lease_expired) << (*lost)->message();
            EXPECT_EQ(a->state(), session_state::connected) << "the session survived: only the lease lapsed";
            auto [verdict] = co_await g.async_wait_verdict(boost::asio::as_tuple(use_awaitable));
            if (regains) {
                EXPECT_FALSE(verdict) << verdict.message();
                EXPECT_FALSE(g.is_lost());
                EXPECT_EQ(g.fencing_token(), token);
                EXPECT_EQ(a->statistics().locks_regained, 1u);
            } else {
                EXPECT_EQ(verdict, errc::lease_expired) << verdict.message();
                EXPECT_TRUE(g.is_lost());
                EXPECT_EQ(a->statistics().locks_suspended, 0u);
            }
            zt::faults(*a).lease_timer_late_ms = 0;
            co_await g.async_release(use_awaitable);
        });
    }
}

TEST_F(Lease, ALockLostByItsLeaseKeepsItsNodeUntilTheHolderCanHaveStopped) {
    // The lease lapses (partition) but the session survives (the connection comes back within
    // T). The holder has only just been told: the next holder must not get the lock before the
    // release or s + 0.5875 T (s: the last renewing send), whichever comes first. With regains
    // off: the default policy would regain the lock instead (regain_test.cpp); this is the
    // deferred delete of a loss that is final (also the end of a regain window).
    const auto T = 2000ms;
    const double f = loss_policy::default_lease_fraction;
    const double hold_back = zklock::detail::session_lease::guaranteed_margin(f) * 2.0; // 0.575 s
    const double allowance = 0.15;
    run_test([&]() -> awaitable<void> {
        auto b = co_await connect();
        for (bool release_at_once : {false, true}) {
            tcp_proxy proxy(first_port(zk_connect()));
            auto path = lock_path(release_at_once ? "released" : "kept");
            auto o = through(proxy);
            o.session_timeout = T;
            o.loss = zklock::loss_policy::lease().with_regain_window(0ms);
            auto a = co_await connect(o);
            CO_REQUIRE(a->negotiated_timeout() == T);
            zklock::mutex ma(*a, path), mb(*b, path);
            auto g = co_await ma.async_acquire(use_awaitable);
            auto st = std::make_shared<std::pair<clk::time_point, clk::time_point>>(); // loss, grant
            auto next = std::make_shared<zklock::guard>();
            g.async_wait_lost([st](zklock::error_code) { st->first = clk::now(); });
            mb.async_acquire_for(10s, [st, next](zklock::error_code ec, zklock::guard x) {
                EXPECT_FALSE(ec) << ec.message();
                st->second = clk::now();
                *next = std::move(x);
            });
            co_await wait_for_children(*b, path, 2);
            co_await next_heartbeat(*a);
            proxy.blackhole(true);
            co_await eventually([&] { return st->first != clk::time_point{}; }, 3000ms);
            CO_REQUIRE(st->first != clk::time_point{});
            proxy.blackhole(false); // back at once: the session lives on
            clk::time_point released{};
            if (release_at_once) {
                co_await g.async_release(use_awaitable);
                released = clk::now();
            }
            co_await eventually([&] { return st->second != clk::time_point{}; }, 5000ms);
            CO_REQUIRE(st->second != clk::time_point{});
            const double after_loss = std::chrono::duration<double>(st->second - st->first).count();
            if (release_at_once) {
                const double after_release = std::chrono::duration<double>(st->second - released).count();
                std::printf(
                    "  released at once: next grant %.3f s after the loss, %.3f s after the release\n",
                    after_loss, after_release);
                EXPECT_LT(after_release, 0.5) << "a released node must go at once";
                EXPECT_LT(after_loss, hold_back) << "the release did not hand the lock on";
            } else {
                std::printf("  never released: next grant %.3f s after the loss (held back %.3f s)\n",
                            after_loss, hold_back);
                EXPECT_GE(after_loss, hold_back - allowance)
                    << "the lock went on before the holder could stop";
                EXPECT_EQ(a->state(), session_state::connected) << "the session survived";
                co_await g.async_release(use_awaitable);
            }
            co_await next->async_release(use_awaitable);
            co_await a->async_close(use_awaitable);
        }
    });
}

TEST_F(Lease, AWaiterThatWaitedLongerThanTheLeaseIsGrantedAValidLock) {
    // A session that holds nothing sends no heartbeats, and its reads (the listings and watches
    // of the wait) renew nothing: after a wait longer than the lease, the lease has lapsed when
    // the lock comes. The acquire renews it with a sync before the grant; without that, the grant
    // would be reported lost at once. Mutex and semaphore, each waiter on a session of its own
    // (a semaphore's waiter holds its path's internal lock while it waits, whose heartbeats keep
    // its session's lease: only the mutex's waiter needs the sync).
    const auto T = 2000ms; // lease 0.6 s
    run_test([&]() -> awaitable<void> {
        auto o = options();
        o.session_timeout = T;
        auto a = co_await connect(o);
        auto b = co_await connect(o);
        auto c = co_await connect(o);
        const auto mpath = lock_path("mutex");
        const auto spath = semaphore_path("sem");
        zklock::mutex ma(*a, mpath), mb(*b, mpath);
        zklock::semaphore sa(*a, spath, 1), sb(*c, spath, 1);
        auto ga = co_await ma.async_acquire(use_awaitable);
        auto la = co_await sa.async_acquire(use_awaitable);
        auto gm = in_background([&](auto h) { mb.async_acquire_for(10s, h); });
        auto gs = in_background([&](auto h) { sb.async_acquire_for(10s, h); });
        co_await sleep_for(1500ms); // b waits 2.5 x its lease
        const auto renewals = b->statistics().lease_renewals;
        co_await ga.async_release(use_awaitable);
        co_await la.async_release(use_awaitable);
        co_await eventually([&] { return gm->done && gs->done; }, 5000ms);
        CO_REQUIRE(gm->granted());
        CO_REQUIRE(gs->granted());
        EXPECT_FALSE(gm->guard.is_lost()) << gm->guard.loss_reason().message();
        EXPECT_FALSE(gs->guard.is_lost()) << gs->guard.loss_reason().message();
        EXPECT_GE(b->statistics().lease_renewals, renewals + 1) << "nothing renewed the lapsed lease";
        co_await sleep_for(300ms); // still held: the heartbeats now keep the lease
        EXPECT_FALSE(gm->guard.is_lost()) << gm->guard.loss_reason().message();
        EXPECT_FALSE(gs->guard.is_lost()) << gs->guard.loss_reason().message();
        co_await gm->guard.async_release(use_awaitable);
        co_await gs->guard.async_release(use_awaitable);
    });
}

#if defined(__SANITIZE_THREAD__)
#define ZT_UNDER_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define ZT_UNDER_TSAN 1
#endif
#endif

/// A free lock acquired at four phases of the idle session's touches, through the test proxy with
/// `one_way` delay each way (T = 2 s), then held for 1 s (five heartbeat periods). Liveness
/// (docs/lease.md, "Liveness"): a grant leaves its first heartbeat room to renew the lease (two
/// heartbeat periods, at most f/2), and while round trips stay under the liveness bound,
/// ((f - 0.1) T - T/64) / 2 (184 ms here), the heartbeats keep it: the lock is not lost by its own slowness. Guards against the schedule in
/// which an idle session touched T/10 to T/5 apart and the first heartbeat went a period after
/// the grant: at round trips of T/10 it lost the lock within 1 s of the grant at 2 phases of 6
/// (and CI, under ASan, failed with "no heartbeats while holding a lock"). (Under the earlier rule the
/// bound was twice as large, and the cases ran at round trips of T/20, T/10 and 3T/20.)
class LeaseGrant : public zt::zk_test {
protected:
    void grant_at_every_touch_phase(std::chrono::milliseconds one_way);
};

/// How late a 10 ms timer on the test's io_context (the session's too) fires, at most, while it
/// runs: the process's own stalls (a loaded machine descheduling it), which delay the heartbeats'
/// sends as a slow round trip would, but which slowest_write does not see.
struct stall_probe {
    std::shared_ptr<std::atomic<std::int64_t>> worst = std::make_shared<std::atomic<std::int64_t>>(0);
    std::shared_ptr<std::atomic<bool>> stop = std::make_shared<std::atomic<bool>>(false);
    explicit stall_probe(const asio::any_io_executor& ex) {
        asio::co_spawn(
            ex,
            [w = worst, s = stop, ex]() -> awaitable<void> {
                asio::steady_timer t(ex);
                while (!*s) {
                    const auto due = clk::now() + 10ms;
                    t.expires_at(due);
                    co_await t.async_wait(asio::as_tuple(use_awaitable));
                    const auto late = std::chrono::nanoseconds(clk::now() - due).count();
                    if (late > *w) *w = late;
                }
            },
            asio::detached);
    }
    ~stall_probe() { *stop = true; }
    std::int64_t ns() const { return *worst; }
};

void LeaseGrant::grant_at_every_touch_phase(std::chrono::milliseconds one_way) {
    const auto T = 2000ms;
    const double f = loss_policy::default_lease_fraction;
    const double T_ns = static_cast<double>(std::chrono::nanoseconds(T).count());
    run_test([&]() -> awaitable<void> {
        tcp_proxy proxy(first_port(zk_connect()));
        auto o = through(proxy);
        o.session_timeout = T;
        auto a = co_await connect(o);
        CO_REQUIRE(a->negotiated_timeout() == T);
        proxy.delay(one_way);
        stall_probe stalls(co_await asio::this_coro::executor);
        for (int k = 0; k < 4; ++k) {
            const auto path = lock_path("phase" + std::to_string(k));
            co_await sleep_for(
                std::chrono::milliseconds(600 + 50 * k)); // idle: touches only (a period: 200 ms)
            zklock::mutex m(*a, path);
            const auto beats = a->statistics().heartbeats;
            auto g = co_await m.async_acquire(use_awaitable);
            // (what is left of the lease now: its deadline, v + (0.4125 + f) T, less now)
            const auto& impl = *a->impl();
            const auto left = impl.lease_handover_at() -
                              static_cast<std::int64_t>(
                                  (zklock::detail::session_lease::expiry_after_reference - f) * T_ns) -
                              zklock::detail::real_platform()->boot_now();
            const double room = std::min(2.0 * zklock::detail::session_lease::heartbeat, f / 2);
            const auto headroom = static_cast<std::int64_t>(room * T_ns);
            // The grant's headroom is sought for T/2 and is reachable only while a renewal's reply
            // leaves it: round trips under ((f - room) T - T/64) / 2 (a renewal sent at k keeps the
            // lease to k + f T - T/64 less a round trip). The writes measured beyond that (the proxy queues, a loaded
            // machine: 708 ms once at 300 ms injected), the grant takes a lease that has not lapsed,
            // by design: reported, not asserted.
            const auto slowest_ns = std::chrono::nanoseconds(a->statistics().slowest_write).count();
            const bool reachable = static_cast<double>(slowest_ns) < (f - room - 1.0 / 64) / 2 * T_ns;
            if (reachable)
                EXPECT_GE(left, headroom - 20'000'000)
                    << "phase " << k << ": granted with " << left / 1'000'000 << " ms of lease, less than "
                    << headroom / 1'000'000 << " ms";
            else if (left < headroom - 20'000'000)
                std::printf("  phase %d: granted with %lld ms of lease (writes up to %lld ms: the headroom "
                            "was out of reach)\n",
                            k, static_cast<long long>(left / 1'000'000),
                            static_cast<long long>(slowest_ns / 1'000'000));
            co_await sleep_for(1000ms);
            EXPECT_GE(a->statistics().heartbeats, beats + 1)
                << "phase " << k << ": no heartbeat while holding it";
            if (g.is_lost()) {
                EXPECT_EQ(g.loss_reason(), errc::lease_expired)
                    << "phase " << k << ": " << g.loss_reason().message();
                // The liveness premise: writes under ((f - 0.1) T - T/64) / 2 (184 ms here). The proxy
                // queues (writes of 1.5 x the injected round trip), and a loaded machine adds its
                // own: beyond the premise a loss that did not happen may be reported, by design
                // (docs/lease.md, "Liveness"). Reported, not asserted, as the grant's headroom
                // above. (Seen once in CI at 300 ms injected: lost with writes of 450 ms.)
                // A stall of this process delays a heartbeat's send as much as a slow reply, and
                // slowest_write does not count it: the premise is 2 r + the stall < 2 x the bound.
                // (Seen once in a full suite run: lost at round trips of 50 ms, writes of 63 ms.)
                const auto slowest =
                    std::chrono::nanoseconds(a->statistics().slowest_write).count() + stalls.ns() / 2;
                const double bound = zklock::detail::session_lease::liveness_bound(f) * T_ns;
#ifdef ZT_UNDER_TSAN
                // (ThreadSanitizer's own slowness adds to the injected round trips: reported only)
                std::printf("  phase %d: lost within 1 s under ThreadSanitizer (%s)\n", k,
                            g.loss_reason().message().c_str());
#else
                if (static_cast<double>(slowest) < bound)
                    ADD_FAILURE() << "phase " << k << ", round trips " << 2 * one_way.count()
                                  << " ms: the heartbeats did not keep the lease: "
                                  << g.loss_reason().message()
                                  << " (slowest write plus half the longest stall " << slowest / 1'000'000
                                  << " ms (stall " << stalls.ns() / 1'000'000 << " ms), under the premise's "
                                  << static_cast<long long>(bound / 1e6) << " ms)";
                else
                    std::printf("  phase %d: lost within 1 s with writes plus half the longest stall of "
                                "%lld ms (stall %lld ms), beyond the liveness premise (%lld ms): reported, "
                                "not asserted\n",
                                k, static_cast<long long>(slowest / 1'000'000),
                                static_cast<long long>(stalls.ns() / 1'000'000),
                                static_cast<long long>(bound / 1e6));
#endif
            } else {
                EXPECT_GE(a->statistics().heartbeats, beats + 3) << "phase " << k;
            }
            co_await g.async_release(use_awaitable);
            co_await expect_no_leftovers(*a, path);
        }
        std::printf(
            "  round trips %lld ms: slowest write %lld ms, longest stall %lld ms, %llu heartbeats, %llu "
            "touches\n",
            static_cast<long long>(2 * one_way.count()),
            static_cast<long long>(a->statistics().slowest_write.count() / 1000),
            static_cast<long long>(stalls.ns() / 1'000'000),
            static_cast<unsigned long long>(a->statistics().heartbeats),
            static_cast<unsigned long long>(a->statistics().touches));
        proxy.delay(0ms);
    });
}

TEST_F(LeaseGrant, LeavesItsHeartbeatsTimeToKeepTheLeaseAtRoundTripsOfAFortiethOfT) {
    grant_at_every_touch_phase(25ms);
}
TEST_F(LeaseGrant, LeavesItsHeartbeatsTimeToKeepTheLeaseAtRoundTripsOfATwentiethOfT) {
    grant_at_every_touch_phase(50ms);
}
TEST_F(LeaseGrant, LeavesItsHeartbeatsTimeToKeepTheLeaseAtRoundTripsOfThreeFortiethsOfT) {
    grant_at_every_touch_phase(75ms);
}

TEST_F(Lease, ABlockedIoContextMakesTheLeaseLookOlderNeverYounger) {
    // The C client runs only when the strand does: a handler that blocks the io_context longer
    // than the lease stops the heartbeats and the reading of replies. The lease then lapses on
    // the client's clock while the server still has the session and the node: the lock is
    // reported lost as soon as the io_context runs again, earlier than the server could let go,
    // never later.
    const auto T = 4000ms; // lease 1.33 s
    run_test([&]() -> awaitable<void> {
        auto path = lock_path();
        auto o = options();
        o.session_timeout = T;
        auto a = co_await connect(o);
        CO_REQUIRE(a->negotiated_timeout() == T);
        zklock::mutex m(*a, path);
        auto g = co_await m.async_acquire(use_awaitable);
        const std::string node = g.node_path();
        auto lost = std::make_shared<std::optional<zklock::error_code>>();
        g.async_wait_lost([lost](zklock::error_code ec) { *lost = ec; });
        co_await next_heartbeat(*a);
        std::this_thread::sleep_for(2000ms); // blocks the io_context: past the lease, short of T
        const auto unblocked = clk::now();
        co_await eventually([&] { return lost->has_value(); }, 3000ms);
        CO_REQUIRE(lost->has_value());
        const auto after_ms =
            std::chrono::duration_cast<std::chrono::milliseconds>(clk::now() - unblocked).count();
        std::printf("  loss reported %lld ms after the io_context ran again\n",
                    static_cast<long long>(after_ms));
        EXPECT_EQ(**lost, errc::lease_expired) << (*lost)->message();
        EXPECT_LT(after_ms, 1000) << "the lapse went unnoticed after the io_context ran again";
        EXPECT_EQ(a->state(), session_state::connected) << "the session should have survived";
        // The server never let go: the node is still there, its session alive.
        auto b = co_await connect_session();
        auto kids = co_await children_of(*b, path);
        const std::string name = node.substr(node.rfind('/') + 1);
        EXPECT_NE(std::find(kids.begin(), kids.end(), name), kids.end())
            << "the node went before the client reported the loss";
        co_await g.async_release(use_awaitable);
        co_await b->async_close(use_awaitable);
    });
}

TEST_F(Lease, ALossAtTheDescriptorLimitIsReportedWithoutACrash) {
    // A lock lost by its lease keeps its node until the holder can have stopped, on a
    // CLOCK_BOOTTIME timer: a timerfd, made at the loss. A process at its descriptor limit could
    // not make it, and the exception left io_context::run (seen: bench/scale.sh, 5,000 sessions in
    // one process, "terminate called ... timerfd_create(CLOCK_BOOTTIME): Too many open files").
    // Now an Asio steady timer (no descriptor) stands in. The lease lapses while the io_context
    // is blocked (as in ABlockedIoContextMakesTheLeaseLookOlderNeverYounger), with every
    // descriptor taken, short of the handover (v + T).
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__) || defined(ZT_UNDER_TSAN)
    // (The sanitizers' runtimes need descriptors of their own: UBSan checks a vptr through a pipe,
    // and with none left it reported a valid listener as "invalid vptr" in the ASan+UBSan build.
    // The release suite runs this test.)
    GTEST_SKIP() << "needs every descriptor taken, which the sanitizers' runtimes cannot work under";
#endif
    run_test([&]() -> awaitable<void> {
        auto a = co_await connect(); // (T = 4 s: the lease lapses about 1.2 s after a heartbeat)
        auto path = lock_path();
        zklock::mutex m(*a, path);
        auto g = co_await m.async_acquire(use_awaitable);
        co_await next_heartbeat(*a);
        rlimit old{};
        ::getrlimit(RLIMIT_NOFILE, &old);
        const int top = ::dup(0);
        CO_REQUIRE(top >= 0);
        rlimit low = old;
        low.rlim_cur = static_cast<rlim_t>(top + 8);
        CO_REQUIRE(::setrlimit(RLIMIT_NOFILE, &low) == 0);
        std::vector<int> fds{top};
        for (int fd; (fd = ::dup(0)) >= 0;) fds.push_back(fd);
        std::this_thread::sleep_for(1600ms); // blocks the io_context: past the lease, short of v + T
        co_await eventually([&] { return g.is_lost(); }, 1000ms);
        co_await sleep_for(100ms); // (the loss's handling: the handover's timer)
        const bool lost = g.is_lost();
        const bool connected = a->state() == session_state::connected;
        for (int fd : fds) ::close(fd);
        ::setrlimit(RLIMIT_NOFILE, &old);
        EXPECT_TRUE(lost);
        EXPECT_EQ(g.loss_reason(), errc::lease_expired) << g.loss_reason().message();
        EXPECT_TRUE(connected) << "the session should have survived";
        co_await g.async_release(use_awaitable); // (deletes the node at once)
        co_await expect_no_leftovers(*a, path);
    });
}
