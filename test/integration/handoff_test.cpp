// In-process hand-off (mutex_options::local_handoff) against a real ZooKeeper.
#include <zklock/inspect.hpp>
#include <zklock/mutex.hpp>
#include <zklock/shared_mutex.hpp>

#include "common.hpp"
#include "proxy.hpp"

#include "session/lease.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/detached.hpp>

#include <algorithm>
#include <map>
#include <set>

using namespace zt;
using zklock::errc;

namespace {

zklock::mutex_options handoff(std::uint32_t n) {
    zklock::mutex_options o;
    o.local_handoff = n;
    return o;
}

struct hold_log {
    using tp = std::chrono::steady_clock::time_point;
    struct hold {
        tp start, end;
        std::int64_t token;
        std::string who;
    };
    std::vector<hold> holds; // in grant order (single-threaded io_context)
    int inside = 0, max_inside = 0;

    awaitable<void> critical(const zklock::guard& g, std::string who, std::chrono::milliseconds d = {}) {
        hold h{std::chrono::steady_clock::now(), {}, g.fencing_token(), std::move(who)};
        max_inside = std::max(max_inside, ++inside);
        if (d.count())
            co_await sleep_for(d);
        else
            co_await asio::post(co_await asio::this_coro::executor, use_awaitable); // let others run
        --inside;
        h.end = std::chrono::steady_clock::now();
        holds.push_back(std::move(h));
    }

    void check() const {
        EXPECT_EQ(max_inside, 1);
        for (std::size_t i = 1; i < holds.size(); ++i) {
            EXPECT_LT(holds[i - 1].token, holds[i].token) << "fencing tokens not increasing at grant " << i;
            EXPECT_LE(holds[i - 1].end, holds[i].start) << "holds " << i - 1 << " and " << i << " overlap";
        }
    }
};

} // namespace

using Handoff = zt::zk_test;

TEST_F(Handoff, LocalWaitersShareOneNodeAndTokensStillIncrease) {
    constexpr int coroutines = 40, rounds = 3, bound = 8;
    hold_log log;
    run_test([&]() -> awaitable<void> {
        auto s = co_await connect();
        auto path = lock_path();
        auto ex = co_await asio::this_coro::executor;
        int finished = 0;
        std::size_t most_nodes = 0;
        std::set<std::string> nodes;
        std::uint32_t max_index = 0;
        for (int c = 0; c < coroutines; ++c)
            asio::co_spawn(
                ex,
                [&]() -> awaitable<void> {
                    zklock::mutex m(*s, path, handoff(bound));
                    for (int r = 0; r < rounds; ++r) {
                        auto g = co_await m.async_acquire(use_awaitable);
                        nodes.insert(g.node_path());
                        max_index = std::max(max_index, g.local_grant());
                        EXPECT_EQ(g.fencing_token(), g.node_czxid() * 4096 + g.local_grant());
                        co_await log.critical(g, "local");
                        co_await g.async_release(use_awaitable);
                    }
                    ++finished;
                },
                asio::detached);
        while (finished < coroutines) {
            most_nodes = std::max(most_nodes, (co_await children_of(*s, path)).size());
            co_await sleep_for(2ms);
        }
        const auto grants = static_cast<std::size_t>(coroutines * rounds);
        CO_REQUIRE(log.holds.size() == grants);
        EXPECT_LE(most_nodes, 1u) << "the local queue must stand behind a single node";
        EXPECT_EQ(max_index, bound - 1u) << "the bound is reached, not exceeded";
        // ceil(120 / 8) = 15 nodes when the queue never runs dry; each node costs one create
        EXPECT_GE(nodes.size(), (grants + bound - 1) / bound);
        EXPECT_LE(s->statistics().creates, nodes.size() + 3) << "(+ the lock path's parents)";
    });
    log.check();
}

TEST_F(Handoff, BoundLetsAnotherProcessIn) {
    // A remote contender (its own session, no hand-off) queued behind a hand-off queue gets the
    // lock after at most `bound` local grants.
    constexpr int local = 10, bound = 4;
    hold_log log;
    run_test([&]() -> awaitable<void> {
        auto path = lock_path();
        auto a = co_await connect();
        auto b = co_await connect();
        auto ex = co_await asio::this_coro::executor;
        bool stop = false;
        int finished = 0;
        for (int c = 0; c < local; ++c)
            asio::co_spawn(
                ex,
                [&]() -> awaitable<void> {
                    zklock::mutex m(*a, path, handoff(bound));
                    while (!stop) {
                        auto g = co_await m.async_acquire(use_awaitable);
                        co_await log.critical(g, "local", 1ms);
                        co_await g.async_release(use_awaitable);
                    }
                    ++finished;
                },
                asio::detached);
        co_await eventually([&] { return log.holds.size() >= 3; });
        zklock::mutex remote(*b, path);
        for (int round = 0; round < 5; ++round) {
            auto g = co_await remote.async_acquire_for(10s, use_awaitable); // throws if starved
            co_await log.critical(g, "remote", 1ms);
            co_await g.async_release(use_awaitable);
            co_await sleep_for(10ms);
        }
        stop = true;
        co_await eventually([&] { return finished == local; }, 5000ms);
        CO_REQUIRE(finished == local);
        // Grants follow node creation order: no local grant made under a node created after
        // the remote node may come before the remote grant. So the remote contender waited at
        // most for the rest of the local node that was in line before it: <= bound grants.
        int remote_holds = 0;
        for (std::size_t i = 0; i < log.holds.size(); ++i) {
            if (log.holds[i].who != "remote") continue;
            ++remote_holds;
            const auto remote_czxid = log.holds[i].token >> 12;
            std::size_t waited = 0; // local grants since the previous remote one
            for (std::size_t j = i; j-- > 0 && log.holds[j].who == "local";) {
                EXPECT_LT(log.holds[j].token >> 12, remote_czxid) << "a later local node was served first";
                ++waited;
            }
            EXPECT_GT(waited, 0u) << "(the local queue was never empty)";
        }
        std::map<std::int64_t, int> grants_per_node;
        for (auto& h : log.holds) grants_per_node[h.token >> 12] += h.who == "local";
        for (auto& [czxid, n] : grants_per_node) EXPECT_LE(n, bound) << "node " << czxid;
        EXPECT_EQ(remote_holds, 5);
    });
    log.check();
}

TEST_F(Handoff, WaitersGiveUpWithoutLeavingNodes) {
    run_test([&]() -> awaitable<void> {
        auto path = lock_path();
        auto a = co_await connect();
        auto b = co_await connect();
        zklock::mutex remote(*b, path);
        auto held_remotely = co_await remote.async_acquire(use_awaitable);

        // The local queue's node waits behind the remote holder; its waiters time out, are
        // cancelled, or try: none of it may leave a node.
        zklock::mutex m(*a, path, handoff(16));
        // the queue is idle: a try goes to ZooKeeper, finds the remote holder, leaves no node
        auto [zk_try, none] = co_await m.async_try_acquire(asio::as_tuple(use_awaitable));
        EXPECT_EQ(zk_try, errc::lock_busy);
        EXPECT_EQ((co_await children_of(*b, path)).size(), 1u) << "the refused try left its node";
        auto ex = co_await asio::this_coro::executor;
        constexpr int n = 200;
        std::vector<asio::cancellation_signal> cancel(n);
        std::map<std::string, int> outcomes;
        int done = 0;
        for (int i = 0; i < n; ++i)
            asio::co_spawn(
                ex,
                [&, i]() -> awaitable<void> {
                    zklock::error_code ec;
                    zklock::guard g;
                    if (i % 2 == 0) {
                        std::tie(ec, g) = co_await m.async_acquire_for(std::chrono::milliseconds(100 + i),
                                                                       asio::as_tuple(use_awaitable));
                    } else {
                        std::tie(ec, g) = co_await m.async_acquire(
                            asio::bind_cancellation_slot(cancel[i].slot(), asio::as_tuple(use_awaitable)));
                    }
                    EXPECT_FALSE(g.owns_lock());
                    ++outcomes[ec.message()];
                    ++done;
                },
                asio::detached);
        co_await wait_for_children(*b, path, 2); // the queue's node is in line
        auto [try_ec, try_g] = co_await m.async_try_acquire(asio::as_tuple(use_awaitable));
        EXPECT_EQ(try_ec, errc::lock_busy);
        for (int i = 1; i < n; i += 2) cancel[i].emit(asio::cancellation_type::terminal);
        co_await eventually([&] { return done == n; }, 5000ms);
        CO_REQUIRE(done == n);
        EXPECT_EQ(outcomes[zklock::make_error_code(errc::acquire_timeout).message()], n / 2);
        EXPECT_EQ(outcomes[zklock::error_code(asio::error::operation_aborted).message()], n / 2);
        // the queue's node went before its last waiter completed, while the remote holder holds
        auto left = co_await children_of(*b, path);
        EXPECT_EQ(left.size(), 1u) << "a waiter completed while the queue's node was still there";
        auto [idle_try, none2] = co_await m.async_try_acquire(asio::as_tuple(use_awaitable));
        EXPECT_EQ(idle_try, errc::lock_busy); // (from ZooKeeper again: the queue is idle)
        EXPECT_EQ((co_await children_of(*b, path)).size(), 1u);
        co_await held_remotely.async_release(use_awaitable);

        // and the queue works again afterwards
        auto g = co_await m.async_acquire_for(5s, use_awaitable);
        EXPECT_TRUE(g.owns_lock());
        auto [busy, g2] = co_await m.async_try_acquire(asio::as_tuple(use_awaitable));
        EXPECT_EQ(busy, errc::lock_busy);
        co_await g.async_release(use_awaitable);
        auto g3 = co_await m.async_try_acquire(use_awaitable);
        EXPECT_TRUE(g3.owns_lock());
        co_await g3.async_release(use_awaitable);
    });
}

TEST_F(Handoff, NodeDeletedBySomeoneElseStopsTheHandOff) {
    run_test([&]() -> awaitable<void> {
        auto path = lock_path();
        auto a = co_await connect();
        auto admin = co_await connect();
        zklock::mutex m(*a, path, handoff(100));
        auto g1 = co_await m.async_acquire(use_awaitable);
        auto w = in_background([&](auto h) { m.async_acquire(h); });
        co_await sleep_for(50ms);
        EXPECT_FALSE(w->done);
        co_await zklock::async_break_lock(*admin, g1.node_path(), use_awaitable);
        // the queue watches its node and tells the grant that is out, which armed no watch itself
        co_await eventually([&] { return g1.is_lost(); });
        EXPECT_TRUE(g1.is_lost());
        EXPECT_EQ(g1.loss_reason(), errc::lock_node_deleted);
        co_await g1.async_release(use_awaitable);
        co_await eventually([&] { return w->done; });
        CO_REQUIRE(w->granted());
        auto& g2 = w->guard;
        EXPECT_NE(g2.node_path(), g1.node_path()) << "handed off under a node that was deleted";
        EXPECT_EQ(g2.local_grant(), 0u);
        EXPECT_GT(g2.node_czxid(), 0);
        auto kids = co_await children_of(*admin, path);
        CO_REQUIRE(kids.size() == 1u);
        EXPECT_EQ(path + "/" + kids[0], g2.node_path());
        co_await g2.async_release(use_awaitable);
    });
}

TEST_F(Handoff, ALostGrantThatIsNeverReleasedDoesNotHoldUpTheQueue) {
    // The node is deleted by someone else while its grant is out, and that grant's holder never
    // releases it. The local waiter behind it is served by a fresh node at once, instead of
    // waiting for a release that never comes.
    run_test([&]() -> awaitable<void> {
        auto path = lock_path();
        auto a = co_await connect();
        auto admin = co_await connect();
        zklock::mutex m(*a, path, handoff(100));
        auto g1 = co_await m.async_acquire(use_awaitable);
        auto w = in_background([&](auto h) { m.async_acquire_for(20s, h); });
        co_await sleep_for(50ms);
        CO_REQUIRE(!w->done);
        const auto t0 = std::chrono::steady_clock::now();
        co_await zklock::async_break_lock(*admin, g1.node_path(), use_awaitable);
        co_await eventually([&] { return w->done; }, 5000ms);
        EXPECT_TRUE(w->granted()) << "the waiter still waits behind a grant whose node is gone: "
                                  << w->ec.message();
        CO_REQUIRE(w->granted());
        EXPECT_LT(std::chrono::steady_clock::now() - t0, 2000ms);
        EXPECT_TRUE(g1.is_lost());
        EXPECT_EQ(g1.loss_reason(), errc::lock_node_deleted);
        EXPECT_NE(w->guard.node_path(), g1.node_path());
        EXPECT_GT(w->guard.fencing_token(), g1.fencing_token());
        // the lost grant's late release passes nothing on and takes nothing away
        auto w2 = in_background([&](auto h) { m.async_acquire_for(20s, h); });
        co_await g1.async_release(use_awaitable);
        co_await sleep_for(100ms);
        EXPECT_FALSE(w2->done) << "the old grant's release handed the current lock on";
        EXPECT_FALSE(w->guard.is_lost());
        auto kids = co_await children_of(*admin, path);
        CO_REQUIRE(kids.size() == 1u);
        EXPECT_EQ(path + "/" + kids[0], w->guard.node_path());
        co_await w->guard.async_release(use_awaitable);
        co_await eventually([&] { return w2->done; }, 3000ms);
        CO_REQUIRE(w2->granted());
        co_await w2->guard.async_release(use_awaitable);
    });
}

TEST_F(Handoff, AGrantLostByItsLeaseHoldsUpTheQueueOnlyUntilTheHandover) {
    // A grant lost by its lease while the session survives: the holder is told, and the local
    // waiter is served no sooner than the holder can have stopped (the handover time, as for any
    // lock lost by its lease), though the holder never releases. The queue's node was suspended
    // with the lease and is regained (the session survived): the waiter's grant is the next one
    // under the same node, with a larger token.
    using clk = std::chrono::steady_clock;
    const auto T = 2000ms;
    const double f = zklock::loss_policy::default_lease_fraction;
    const double hold_back = zklock::detail::session_lease::guaranteed_margin(f) * 2.0; // 0.575 s
    const double allowance = 0.15;
    run_test([&]() -> awaitable<void> {
        tcp_proxy proxy(first_port(zk_connect()));
        auto path = lock_path();
        auto o = through(proxy);
        o.session_timeout = T;
        auto a = co_await connect(o);
        CO_REQUIRE(a->negotiated_timeout() == T);
        zklock::mutex m(*a, path, handoff(100));
        auto g1 = co_await m.async_acquire(use_awaitable);
        clk::time_point lost{};
        double hold = 0; // the handover time, seen from the loss signal (s)
        g1.async_wait_lost([&](zklock::error_code) {
            lost = clk::now();
            hold = static_cast<double>(a->impl()->lease_handover_at() -
                                       zklock::detail::real_platform()->boot_now()) /
                   1e9;
        });
        auto w = in_background([&](auto h) { m.async_acquire_for(20s, h); });
        co_await sleep_for(50ms);
        CO_REQUIRE(!w->done);
        proxy.blackhole(true);
        co_await eventually([&] { return lost != clk::time_point{}; }, 3000ms);
        CO_REQUIRE(lost != clk::time_point{});
        EXPECT_EQ(g1.loss_reason(), errc::lease_expired);
        proxy.blackhole(false); // back at once: the session lives on
        co_await eventually([&] { return w->done; }, 5000ms);
        EXPECT_TRUE(w->granted()) << "the waiter still waits behind a grant lost by its lease: "
                                  << w->ec.message();
        CO_REQUIRE(w->granted());
        const double after_loss = std::chrono::duration<double>(clk::now() - lost).count();
        std::printf(
            "  hand-off queue: next grant %.3f s after the loss signal; the handover was %.3f s after it "
            "(%.3f s after the lease's deadline)\n",
            after_loss, hold, hold_back);
        // (against the handover time itself: a loss signal that a loaded machine delivers late
        // shortens the time from it, not the hold-back; CI once saw 0.519 s after a late signal.
        // That the signal comes in time is the busy-strand premise: quorum_lease_test.cpp)
        EXPECT_GE(after_loss, hold - allowance) << "the queue moved on before the handover time";
        // ((0.5875 - f) T after the deadline, less the signal's lateness: well above half of it)
        EXPECT_GT(hold, hold_back / 2)
            << "the handover is not held back the margin past the lease's deadline";
        EXPECT_EQ(a->state(), zklock::session_state::connected) << "the session survived";
        EXPECT_EQ(w->guard.node_path(), g1.node_path()) << "the queue's node was not regained";
        EXPECT_GT(w->guard.fencing_token(), g1.fencing_token());
        EXPECT_GE(a->statistics().locks_regained, 1u);
        co_await g1.async_release(use_awaitable);
        co_await w->guard.async_release(use_awaitable);
        co_await a->async_close(use_awaitable);
    });
}

TEST_F(Handoff, AGrantReleasedWhileTheQueuesNodeIsSuspendedIsPassedOnAtTheRegain) {
    // The queue's node is suspended with the session's lease (a cut link); the holder of the lent
    // grant is told and releases at once. The local waiter waits through the suspension and is
    // granted under the same node once it is regained; another session's waiter is not granted.
    run_test([&]() -> awaitable<void> {
        tcp_proxy proxy(first_port(zk_connect()));
        auto path = lock_path();
        auto o = through(proxy);
        o.session_timeout = 6000ms;
        auto a = co_await connect(o);
        auto b = co_await connect();
        zklock::mutex m(*a, path, handoff(100)), mb(*b, path);
        auto g1 = co_await m.async_acquire(use_awaitable);
        const auto node = g1.node_path();
        const auto token = g1.fencing_token();
        auto w = in_background([&](auto h) { m.async_acquire_for(30s, h); });
        auto other = in_background([&](auto h) { mb.async_acquire_for(30s, h); });
        co_await wait_for_children(*b, path, 2);
        bool told = false;
        g1.async_wait_lost([&](zklock::error_code ec) { told = ec == errc::lease_expired; });
        proxy.blackhole(true);
        co_await eventually([&] { return told; }, 10000ms);
        CO_REQUIRE(told);
        co_await g1.async_release(use_awaitable); // the holder stops at once
        co_await sleep_for(200ms);
        EXPECT_FALSE(w->done) << "granted under a suspended node";
        proxy.blackhole(false);
        co_await eventually([&] { return w->done; }, 10000ms);
        CO_REQUIRE(w->granted());
        EXPECT_EQ(w->guard.node_path(), node);
        EXPECT_GT(w->guard.fencing_token(), token);
        EXPECT_FALSE(w->guard.is_lost());
        EXPECT_FALSE(other->done) << "another session was granted a lock whose node was regained";
        co_await w->guard.async_release(use_awaitable);
        co_await eventually([&] { return other->done; }, 10000ms);
        CO_REQUIRE(other->granted());
        co_await other->guard.async_release(use_awaitable);
    });
}

namespace {
/// A revocation request on a hand-off queue's node with a local waiter behind the holder: the
/// holder is told (`revocable`) or not, and either way the hand-offs end: the waiter gets a
/// node of its own, with a larger token.
awaitable<void> revoke_a_handoff_queue(std::string path, bool revocable) {
    auto a = co_await connect();
    auto admin = co_await connect();
    auto o = handoff(100);
    o.revocable = revocable;
    zklock::mutex m(*a, path, o);
    auto g1 = co_await m.async_acquire(use_awaitable);
    auto w = in_background([&](auto h) { m.async_acquire(h); });
    co_await sleep_for(50ms);
    auto [ec, holder] = co_await zklock::async_revoke(*admin, path, {}, asio::as_tuple(use_awaitable));
    CO_REQUIRE(!ec);
    EXPECT_EQ(holder, g1.node_path());
    auto [why] = co_await g1.async_wait_revoked(asio::as_tuple(use_awaitable));
    EXPECT_EQ(why, revocable ? errc::revocation_requested : errc::not_revocable);
    co_await sleep_for(100ms); // (the queue has seen the request)
    co_await g1.async_release(use_awaitable);
    co_await eventually([&] { return w->done; });
    CO_REQUIRE(w->granted());
    EXPECT_NE(w->guard.node_path(), g1.node_path()) << "the hand-off went on after a revocation";
    EXPECT_GT(w->guard.fencing_token(), g1.fencing_token());
    co_await w->guard.async_release(use_awaitable);
}
} // namespace

TEST_F(Handoff, RevocationReachesTheHolderAndEndsTheHandOffs) {
    run(io, revoke_a_handoff_queue(lock_path(), true));
}

TEST_F(Handoff, SessionCloseFailsWaitersAndSignalsTheHolder) {
    run_test([&]() -> awaitable<void> {
        auto path = lock_path();
        auto a = co_await connect();
        zklock::mutex m(*a, path, handoff(8));
        auto g = co_await m.async_acquire(use_awaitable);
        int failed = 0;
        for (int i = 0; i < 5; ++i)
            asio::co_spawn(
                co_await asio::this_coro::executor,
                [&]() -> awaitable<void> {
                    auto [ec, w] = co_await m.async_acquire(asio::as_tuple(use_awaitable));
                    EXPECT_EQ(ec, asio::error::operation_aborted);
                    failed += ec ? 1 : 0;
                },
                asio::detached);
        co_await sleep_for(50ms);
        co_await a->async_close(use_awaitable);
        auto lost = co_await g.async_wait_lost(asio::as_tuple(use_awaitable));
        EXPECT_EQ(std::get<0>(lost), errc::session_closed);
        co_await eventually([&] { return failed == 5; });
        EXPECT_EQ(failed, 5);
        co_await g.async_release(use_awaitable);
    });
}

TEST_F(Handoff, CancellationAndDeadlineAfterTheGrantChangeNothing) {
    run_test([&]() -> awaitable<void> {
        auto path = lock_path();
        auto s = co_await connect();
        zklock::mutex m(*s, path, handoff(8));
        asio::cancellation_signal cancel;
        auto g =
            co_await m.async_acquire_for(200ms, asio::bind_cancellation_slot(cancel.slot(), use_awaitable));
        CO_REQUIRE(g.owns_lock());
        cancel.emit(asio::cancellation_type::terminal);
        // a second acquire, granted by hand-off, with a deadline that passes while it holds
        zklock::guard g2;
        asio::co_spawn(
            co_await asio::this_coro::executor,
            [&]() -> awaitable<void> { g2 = co_await m.async_acquire_for(100ms, use_awaitable); },
            asio::detached);
        co_await sleep_for(20ms);
        co_await g.async_release(use_awaitable);
        co_await eventually([&] { return g2.owns_lock(); });
        CO_REQUIRE(g2.owns_lock());
        EXPECT_EQ(g2.local_grant(), 1u);
        co_await sleep_for(300ms); // past both deadlines
        EXPECT_FALSE(g2.is_lost());
        EXPECT_EQ((co_await children_of(*s, path)).size(), 1u);
        // and a cancellation emitted right after starting an acquire is not lost
        asio::cancellation_signal early;
        bool ended = false;
        zklock::error_code early_ec;
        m.async_acquire(asio::bind_cancellation_slot(early.slot(), [&](zklock::error_code ec, zklock::guard) {
            early_ec = ec;
            ended = true;
        }));
        early.emit(asio::cancellation_type::terminal);
        co_await eventually([&] { return ended; });
        EXPECT_TRUE(ended);
        EXPECT_EQ(early_ec, asio::error::operation_aborted);
        co_await g2.async_release(use_awaitable);
    });
}

TEST_F(Handoff, BadOptionsAreRefused) {
    run_test([&]() -> awaitable<void> {
        auto s = co_await connect();
        auto path = lock_path();
        zklock::mutex too_many(*s, path, handoff(4097));
        auto [ec, g] = co_await too_many.async_acquire(asio::as_tuple(use_awaitable));
        EXPECT_EQ(ec, errc::invalid_local_handoff);
        zklock::shared_mutex rw(*s, path, handoff(4));
        auto [ec2, g2] = co_await rw.async_acquire_shared(asio::as_tuple(use_awaitable));
        EXPECT_EQ(ec2, errc::local_handoff_unsupported);
        zklock::mutex bad_path(*s, "no-slash", handoff(4));
        auto [ec3, g3] = co_await bad_path.async_acquire(asio::as_tuple(use_awaitable));
        EXPECT_EQ(ec3.category(), zklock::make_error_code(errc::invalid_argument).category());
        EXPECT_TRUE(ec3) << "a bad path is refused";
        auto o = handoff(4);
        o.loss = zklock::loss_policy::lease(0.55);
        zklock::mutex bad_lease(*s, path, o);
        auto [ec4, g4] = co_await bad_lease.async_acquire(asio::as_tuple(use_awaitable));
        EXPECT_EQ(ec4, errc::invalid_lease_fraction) << ec4.message();
    });
}

TEST_F(Handoff, ARevocationEndsTheHandOffsOfANonRevocableLockWithoutTellingTheHolder) {
    // By design, a hand-off queue always watches its node for revocation, so an operator can
    // make a busy process let others in; the grant that is out is told only if it asked for
    // revocable.
    run(io, revoke_a_handoff_queue(lock_path(), false));
}

TEST_F(Handoff, MutexesThatDifferInAnOptionDoNotShareANode) {
    // Two mutex objects on one path in one process share a hand-off queue, and so its node, only
    // if nothing about the node or the grant differs. Otherwise the second waits for the first
    // like another process would, and gets a node of its own, made with its own settings. Guards
    // against the second being handed the first one's node at once, with the first one's ACL,
    // data and loss policy.
    run_test([&]() -> awaitable<void> {
        auto s = co_await connect();
        std::vector<std::pair<std::string, zklock::mutex_options>> variants;
        auto v = handoff(4);
        v.node_acl = zklock::acl::custom({{zklock::perm::all & ~zklock::perm::admin, "world", "anyone"}});
        variants.emplace_back("acl", v);
        v = handoff(4);
        v.node_data = "other holder";
        variants.emplace_back("node data", v);
        v = handoff(4);
        v.loss = zklock::loss_policy::on_expiry();
        variants.emplace_back("loss policy", v);
        v = handoff(4);
        v.revocable = true;
        variants.emplace_back("revocable", v);
        v = handoff(8);
        variants.emplace_back("bound", v);
        for (auto& [what, opts] : variants) {
            auto path = lock_path();
            zklock::mutex first(*s, path, handoff(4)), second(*s, path, opts), same(*s, path, handoff(4));
            auto g1 = co_await first.async_acquire(use_awaitable);
            const auto node1 = g1.node_path();
            auto w = in_background([&](auto h) { second.async_acquire_for(10s, h); });
            co_await sleep_for(300ms);
            EXPECT_FALSE(w->done) << what << ": granted while the first one's node is held";
            // control: a mutex with the same options is handed the node at once
            auto w2 = in_background([&](auto h) { same.async_acquire_for(10s, h); });
            co_await g1.async_release(use_awaitable);
            co_await eventually([&] { return w->done || w2->done; }, 3000ms);
            EXPECT_FALSE(w->done && w->guard.node_path() == node1) << what << ": handed the first one's node";
            if (w->done) w->guard.release_in_background();
            CO_REQUIRE(w2->granted());
            EXPECT_EQ(w2->guard.node_path(), node1) << what << ": the same options must share the node";
            co_await w2->guard.async_release(use_awaitable);
            co_await eventually([&] { return w->done; }, 5000ms);
            CO_REQUIRE(w->granted());
            EXPECT_NE(w->guard.node_path(), node1) << what;
            co_await w->guard.async_release(use_awaitable);
        }
    });
}
