// Suspension and regain (loss_policy::lease, docs/lease.md "Suspended, then regained or lost"),
// one test per verdict against real servers: regained after a leader failover that the session
// survives; lost for good when the session expires while suspended; lost for good when the node
// is broken while suspended; and the release of a suspended lock.
#include <zklock/inspect.hpp>
#include <zklock/mutex.hpp>
#include <zklock/reentrant_mutex.hpp>

#include "common.hpp"
#include "ensemble.hpp"
#include "proxy.hpp"

#include <boost/asio/as_tuple.hpp>

#include <cstdlib>
#include <thread>

using namespace zt;
using zklock::errc;
using clk = std::chrono::steady_clock;

namespace {

std::string env_str(const char* name) {
    const char* v = std::getenv(name);
    return v ? v : "";
}

/// What the holder's loss signal and verdict said, and when.
struct verdicts {
    bool told = false, decided = false;
    zklock::error_code told_ec, verdict_ec;
    clk::time_point told_at{}, decided_at{};
    bool suspended_when_told = false;
};

/// Starts the wait for the loss signal and then for the verdict on `g`.
std::shared_ptr<verdicts> watch_verdict(zklock::guard& g) {
    auto v = std::make_shared<verdicts>();
    g.async_wait_lost([v, &g](zklock::error_code ec) {
        if (ec == errc::lock_released) return;
        v->told = true;
        v->told_ec = ec;
        v->told_at = clk::now();
        v->suspended_when_told = g.is_suspended();
        g.async_wait_verdict([v](zklock::error_code ec2) {
            v->decided = true;
            v->verdict_ec = ec2;
            v->decided_at = clk::now();
        });
    });
    return v;
}

double secs(clk::duration d) { return std::chrono::duration<double>(d).count(); }

} // namespace

using Regain = zt::zk_test;

// The failover: the ensemble's leader SIGKILLed and a follower paused for 3 s at the same
// moment, so no quorum commits anything for about 3.5 s, longer than the lease lets a lock go
// unvouched at T = 4 s (about 0.3 T = 1.2 s after the last heartbeat). The holder's session
// survives (a new leader gives it a full T). The holder is told at once, as before; then its
// committed check finds the node it created: the lock is regained, with the same fencing token,
// and the waiter behind it was never granted.
TEST_F(Regain, ALockWhoseLeaseLapsedInALeaderFailoverIsRegainedWithItsToken) {
    const std::string connect_s = env_str("ZK_ENSEMBLE_CONNECT");
    const std::string dir = env_str("ZK_ENSEMBLE_DIR");
    const std::string scripts = env_str("ZKLOCK_SCRIPTS");
    if (connect_s.empty() || dir.empty() || scripts.empty())
        GTEST_SKIP() << "no ensemble (ZK_ENSEMBLE_CONNECT, ZK_ENSEMBLE_DIR, ZKLOCK_SCRIPTS: scripts/test.sh)";
    auto zk = [&](const std::string& what, int i) {
        return std::system(
            (scripts + "/zk.sh " + what + " " + dir + " " + std::to_string(i) + " >/dev/null").c_str());
    };
    int killed = 0, paused = 0;
    run_test(
        [&]() -> awaitable<void> {
            auto o = options(connect_s);
            o.session_timeout = 4000ms;
            auto a = co_await connect_session(o);
            auto b = co_await connect_session(o);
            const auto path = unique_path("regain-failover");
            zklock::mutex ma(*a, path), mb(*b, path);
            auto g = co_await ma.async_acquire(use_awaitable);
            const auto token = g.fencing_token();
            const auto node = g.node_path();
            auto waiter = in_background([&](auto h) { mb.async_acquire_for(60s, h); });
            co_await wait_for_children(*b, path, 2);
            auto v = watch_verdict(g);
            co_await eventually([&] { return ensemble_settled(dir); }, 30000ms);
            for (int i = 1; i <= 3; ++i) {
                const auto m = server_mode(dir, i);
                if (m == "leader")
                    killed = i;
                else if (m == "follower" && paused == 0)
                    paused = i;
            }
            CO_REQUIRE(killed != 0 && paused != 0);
            EXPECT_EQ(zk("kill", killed), 0);
            EXPECT_EQ(zk("pause", paused), 0);
            const auto fault_at = clk::now();
            co_await sleep_for(3000ms);
            EXPECT_EQ(zk("resume", paused), 0);
            co_await eventually([&] { return v->decided; }, 30000ms);
            std::printf("  leader %d killed, follower %d paused 3 s: told at +%.3f s (%s, suspended: %d), "
                        "verdict at +%.3f s (%s)\n",
                        killed, paused, v->told ? secs(v->told_at - fault_at) : -1.0,
                        v->told_ec.message().c_str(), v->suspended_when_told,
                        v->decided ? secs(v->decided_at - fault_at) : -1.0, v->verdict_ec.message().c_str());
            CO_REQUIRE(v->told);
            EXPECT_EQ(v->told_ec, errc::lease_expired) << v->told_ec.message();
            EXPECT_TRUE(v->suspended_when_told);
            CO_REQUIRE(v->decided);
            EXPECT_FALSE(v->verdict_ec) << v->verdict_ec.message();
            EXPECT_FALSE(g.is_lost());
            EXPECT_FALSE(g.is_suspended());
            EXPECT_EQ(g.fencing_token(), token);
            EXPECT_EQ(g.node_path(), node);
            auto st = a->statistics();
            EXPECT_GE(st.locks_suspended, 1u);
            EXPECT_GE(st.locks_regained, 1u);
            EXPECT_EQ(st.suspensions_lost, 0u);
            // Held again: the waiter still waits, a commit under the lock succeeds, and the lock
            // is vouched for by the lease as before (no new loss for a while).
            co_await sleep_for(2000ms);
            EXPECT_FALSE(waiter->done) << "the waiter was granted a lock that its holder regained";
            EXPECT_FALSE(g.is_lost());
            auto [cec, cres] = co_await g.async_commit(zklock::transaction{}.check(path, -1),
                                                       boost::asio::as_tuple(use_awaitable));
            EXPECT_FALSE(cec) << cec.message();
            co_await g.async_release(use_awaitable);
            co_await eventually([&] { return waiter->done; }, 10000ms);
            CO_REQUIRE(waiter->granted());
            EXPECT_GT(waiter->guard.fencing_token(), token);
            co_await waiter->guard.async_release(use_awaitable);
            co_await expect_no_leftovers(*b, path);
        },
        120s);
    if (paused) zk("resume", paused);
    if (killed) EXPECT_EQ(zk("restart", killed), 0);
}

// The holder's link is cut for longer than T: its lease lapses (suspended: the node is kept), the
// server expires its session (the node goes with it) and the waiter is granted, after the holder
// was told. When the link comes back, the reconnect finds the session expired: lost for good.
TEST_F(Regain, ALockSuspendedWhenItsSessionExpiresIsLostForGood) {
    run_test([&]() -> awaitable<void> {
        tcp_proxy proxy(first_port(zk_connect()));
        auto oa = through(proxy);
        oa.session_timeout = 2000ms;
        oa.renew_after_expiry = false;
        auto a = co_await connect_session(oa);
        auto b = co_await connect_session();
        const auto path = lock_path("regain-expiry");
        zklock::mutex ma(*a, path), mb(*b, path);
        auto g = co_await ma.async_acquire(use_awaitable);
        auto waiter = in_background([&](auto h) { mb.async_acquire_for(30s, h); });
        co_await wait_for_children(*b, path, 2);
        auto v = watch_verdict(g);
        proxy.blackhole(true);
        co_await eventually([&] { return waiter->done; }, 15000ms);
        CO_REQUIRE(waiter->granted());
        CO_REQUIRE(v->told);
        EXPECT_EQ(v->told_ec, errc::lease_expired) << v->told_ec.message();
        EXPECT_TRUE(v->suspended_when_told);
        EXPECT_LT(v->told_at, waiter->at) << "the waiter was granted before the holder was told";
        EXPECT_TRUE(g.is_lost());
        EXPECT_FALSE(v->decided) << "a verdict before the holder could learn anything: "
                                 << v->verdict_ec.message();
        proxy.blackhole(false);
        co_await eventually([&] { return v->decided; }, 15000ms);
        CO_REQUIRE(v->decided);
        EXPECT_EQ(v->verdict_ec, errc::session_expired) << v->verdict_ec.message();
        EXPECT_TRUE(g.is_lost());
        EXPECT_FALSE(g.is_suspended());
        EXPECT_EQ(a->statistics().locks_regained, 0u);
        EXPECT_EQ(a->statistics().suspensions_lost, 1u);
        co_await g.async_release(use_awaitable);
        co_await waiter->guard.async_release(use_awaitable);
    });
}

// The holder's link is cut for long enough that its lease lapses but not its session; meanwhile an
// operator breaks the lock (deletes the holder's node) and the waiter is granted. When the link
// comes back, the committed check finds no node: lost for good, never regained, and nothing of
// ours is deleted (the path is checked for leftovers after the test).
TEST_F(Regain, ALockBrokenWhileSuspendedIsLostForGood) {
    run_test([&]() -> awaitable<void> {
        tcp_proxy proxy(first_port(zk_connect()));
        auto oa = through(proxy);
        oa.session_timeout = 6000ms;
        auto a = co_await connect_session(oa);
        auto b = co_await connect_session();
        const auto path = lock_path("regain-break");
        zklock::mutex ma(*a, path), mb(*b, path);
        auto g = co_await ma.async_acquire(use_awaitable);
        const auto node = g.node_path();
        auto waiter = in_background([&](auto h) { mb.async_acquire_for(30s, h); });
        co_await wait_for_children(*b, path, 2);
        // No loss waiter here: it would arm a watch on the node, whose delete event could end
        // the suspension first; this test is about the committed check finding the node gone.
        bool decided = false;
        zklock::error_code verdict;
        proxy.blackhole(true);
        co_await eventually([&] { return g.is_suspended(); }, 10000ms);
        CO_REQUIRE(g.is_suspended());
        EXPECT_TRUE(g.is_lost());
        EXPECT_EQ(g.loss_reason(), errc::lease_expired) << g.loss_reason().message();
        g.async_wait_verdict([&](zklock::error_code ec) {
            verdict = ec;
            decided = true;
        });
        co_await zklock::async_break_lock(*b, node, use_awaitable);
        co_await eventually([&] { return waiter->done; }, 5000ms);
        CO_REQUIRE(waiter->granted());
        EXPECT_FALSE(decided);
        proxy.blackhole(false); // well inside T: the session lives
        co_await eventually([&] { return decided; }, 15000ms);
        CO_REQUIRE(decided);
        EXPECT_EQ(verdict, errc::lock_node_deleted) << verdict.message();
        EXPECT_EQ(a->state(), zklock::session_state::connected);
        EXPECT_TRUE(g.is_lost());
        EXPECT_FALSE(g.is_suspended());
        EXPECT_EQ(a->statistics().locks_regained, 0u);
        co_await g.async_release(use_awaitable);
        co_await waiter->guard.async_release(use_awaitable);
    });
}

// A link cut briefly (lease lapsed, session alive, node intact) ends in a regain on a single
// server too. And a suspended lock released by its holder: its node goes with the first
// reconnect (the waiter is granted without waiting for a handover time), and the verdict is
// lock_released.
TEST_F(Regain, ASuspendedLockIsRegainedAfterABriefCutAndItsReleaseDeletesTheNodeAtOnce) {
    run_test([&]() -> awaitable<void> {
        tcp_proxy proxy(first_port(zk_connect()));
        auto oa = through(proxy);
        oa.session_timeout = 6000ms;
        auto a = co_await connect_session(oa);
        auto b = co_await connect_session();
        const auto path = lock_path("regain-release");
        zklock::mutex ma(*a, path), mb(*b, path);
        auto g = co_await ma.async_acquire(use_awaitable);
        const auto token = g.fencing_token();
        auto waiter = in_background([&](auto h) { mb.async_acquire_for(30s, h); });
        co_await wait_for_children(*b, path, 2);
        // 1. Cut, lapse, heal: regained.
        auto v = watch_verdict(g);
        proxy.blackhole(true);
        co_await eventually([&] { return v->told; }, 10000ms);
        CO_REQUIRE(v->told && v->suspended_when_told);
        {
            // while suspended, a guarded write fails before anything is sent
            auto [cec, cres] = co_await g.async_commit(zklock::transaction{}.check(path, -1),
                                                       boost::asio::as_tuple(use_awaitable));
            EXPECT_EQ(cec, errc::lock_lost) << cec.message();
        }
        proxy.blackhole(false);
        co_await eventually([&] { return v->decided; }, 10000ms);
        CO_REQUIRE(v->decided);
        EXPECT_FALSE(v->verdict_ec) << v->verdict_ec.message();
        EXPECT_FALSE(g.is_lost());
        EXPECT_EQ(g.fencing_token(), token);
        EXPECT_FALSE(waiter->done);
        // 2. Cut again, and release while suspended (still cut off): the release completes at
        // once, the verdict is lock_released, and the delete goes with the first reconnect,
        // without waiting for a handover time.
        auto v2 = watch_verdict(g);
        proxy.blackhole(true);
        co_await eventually([&] { return v2->told; }, 10000ms);
        CO_REQUIRE(v2->told && g.is_suspended());
        zklock::error_code verdict_after_release;
        bool got = false;
        g.async_wait_verdict([&](zklock::error_code ec) {
            verdict_after_release = ec;
            got = true;
        });
        co_await g.async_release(use_awaitable);
        co_await eventually([&] { return got; }, 2000ms);
        EXPECT_EQ(verdict_after_release, errc::lock_released) << verdict_after_release.message();
        EXPECT_FALSE(waiter->done);
        proxy.blackhole(false);
        const auto healed_at = clk::now();
        co_await eventually([&] { return waiter->done; }, 10000ms);
        CO_REQUIRE(waiter->granted());
        EXPECT_LT(secs(waiter->at - healed_at), 2.0) << "the suspended node was not deleted at the release";
        co_await waiter->guard.async_release(use_awaitable);
    });
}

// A reentrant owner whose hold is suspended: a nested acquire fails with the loss at once (no
// node of its own behind its own); after the regain, nested acquires share the node again.
TEST_F(Regain, ANestedAcquireOfASuspendedReentrantHoldFailsAndWorksAgainAfterTheRegain) {
    run_test([&]() -> awaitable<void> {
        tcp_proxy proxy(first_port(zk_connect()));
        auto oa = through(proxy);
        oa.session_timeout = 6000ms;
        auto a = co_await connect_session(oa);
        const auto path = lock_path("regain-reentrant");
        zklock::reentrant_mutex m(*a, path);
        constexpr std::uint64_t owner = 7;
        auto outer = co_await m.async_acquire(owner, use_awaitable);
        const auto token = outer.fencing_token();
        auto v = watch_verdict(outer);
        proxy.blackhole(true);
        co_await eventually([&] { return v->told; }, 10000ms);
        CO_REQUIRE(v->told && outer.is_suspended());
        auto [ec, nested] = co_await m.async_acquire(owner, boost::asio::as_tuple(use_awaitable));
        EXPECT_EQ(ec, errc::lease_expired) << ec.message();
        EXPECT_FALSE(nested.owns_lock());
        proxy.blackhole(false);
        co_await eventually([&] { return v->decided; }, 10000ms);
        CO_REQUIRE(v->decided);
        EXPECT_FALSE(v->verdict_ec) << v->verdict_ec.message();
        auto again = co_await m.async_acquire(owner, use_awaitable);
        EXPECT_EQ(again.fencing_token(), token);
        EXPECT_EQ(again.node_path(), outer.node_path());
        co_await again.async_release(use_awaitable);
        co_await outer.async_release(use_awaitable);
    });
}

// is_lost() can turn true before the loss is reported (the lease's deadline passed while the
// io_context was busy): a verdict asked for then is no "held" answer; it waits for the
// suspension's end, and its success comes with is_lost() false.
TEST_F(Regain, AVerdictAskedBeforeTheLapseIsReportedWaitsForTheSuspensionsEnd) {
    run_test([&]() -> awaitable<void> {
        tcp_proxy proxy(first_port(zk_connect()));
        auto oa = through(proxy);
        oa.session_timeout = 6000ms;
        auto a = co_await connect_session(oa);
        const auto path = lock_path("regain-early-verdict");
        zklock::mutex m(*a, path);
        auto g = co_await m.async_acquire(use_awaitable);
        // (the lease's steady state: a few heartbeats after the grant's renewal)
        const auto n = a->statistics().heartbeats;
        co_await eventually([&] { return a->statistics().heartbeats >= n + 5; }, 10000ms);
        proxy.blackhole(true);
        // the io_context's only thread is busy past the lease's deadline (in the steady state at
        // most f T + T/10 = 2.4 s after the cut) and short of the session's expiry (6 s)
        std::this_thread::sleep_for(3500ms);
        CO_REQUIRE(g.is_lost()); // (on the clock; nothing reported yet)
        bool decided = false, lost_at_verdict = true;
        zklock::error_code verdict;
        g.async_wait_verdict([&](zklock::error_code ec) {
            verdict = ec;
            lost_at_verdict = g.is_lost();
            decided = true;
        });
        // (a lapse seen this late may be past the earliest expiry: the loss then waits up to T/10
        // for its cause, and only then suspends)
        co_await eventually([&] { return g.is_suspended(); }, 3000ms);
        EXPECT_TRUE(g.is_suspended());
        EXPECT_FALSE(decided) << "a verdict while the lock was lost and cut off: " << verdict.message();
        proxy.blackhole(false);
        co_await eventually([&] { return decided; }, 10000ms);
        CO_REQUIRE(decided);
        EXPECT_FALSE(verdict) << verdict.message();
        EXPECT_FALSE(lost_at_verdict) << "the verdict said held while is_lost() was true";
        co_await g.async_release(use_awaitable);
    });
}
