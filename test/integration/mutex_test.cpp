// The exclusive lock against a real ZooKeeper.
#include <zklock/mutex.hpp>

#include "common.hpp"
#include "session_faults.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/bind_executor.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/deferred.hpp>
#include <boost/asio/use_future.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>

#include <algorithm>
#include <atomic>
#include <future>
#include <map>
#include <mutex>

using namespace zt;
using zklock::errc;

using Mutex = zt::zk_test;

TEST_F(Mutex, AcquireReleaseWithUseAwaitable) {
    run_test([&]() -> awaitable<void> {
        auto s = co_await connect();
        auto path = lock_path();
        zklock::mutex m(*s, path);
        auto g = co_await m.async_acquire(use_awaitable);
        EXPECT_TRUE(g.owns_lock());
        EXPECT_FALSE(g.is_lost());
        EXPECT_GT(g.fencing_token(), 0);
        EXPECT_EQ(g.session_id(), s->session_id());
        EXPECT_TRUE(g.node_path().starts_with(path + "/_c_")) << g.node_path();
        auto kids = co_await children_of(*s, path);
        CO_REQUIRE(kids.size() == 1u);
        EXPECT_EQ(path + "/" + kids[0], g.node_path());
        EXPECT_EQ(zklock::detail::parse_contender(kids[0])->seq, g.sequence());
        co_await g.async_release(use_awaitable);
        EXPECT_FALSE(g.owns_lock());
        EXPECT_TRUE((co_await children_of(*s, path)).empty()); // release completes after the delete
        co_await g.async_release(use_awaitable);               // idempotent
    });
}

TEST_F(Mutex, AnyCompletionTokenWorks) {
    std::unique_ptr<zklock::session> s;
    auto path = lock_path();
    run(io, [&]() -> awaitable<void> { s = co_await connect(); }());
    zklock::mutex m(*s, path);

    // plain callback, checked to run on the io_context (not the C client's threads), not inline
    bool inline_call = true, called = false;
    std::thread::id cb_thread;
    zklock::guard g1;
    m.async_acquire([&](zklock::error_code ec, zklock::guard g) {
        EXPECT_FALSE(ec) << ec.message();
        called = true;
        cb_thread = std::this_thread::get_id();
        g1 = std::move(g);
    });
    inline_call = called;
    // (run until the callback: a held lock keeps its session's lease heartbeat, so the
    // io_context has work for as long as the lock is held)
    run_until(io, [&] { return called; });
    EXPECT_FALSE(inline_call);
    ASSERT_TRUE(called);
    EXPECT_EQ(cb_thread, std::this_thread::get_id());
    ASSERT_TRUE(g1.owns_lock());
    bool released = false;
    g1.async_release([&](zklock::error_code ec) { released = !ec; });
    run_until(io, [&] { return released; });
    EXPECT_TRUE(released);

    // deferred
    auto op = m.async_acquire(asio::deferred);
    zklock::guard g2;
    std::move(op)([&](zklock::error_code ec, zklock::guard g) {
        EXPECT_FALSE(ec);
        g2 = std::move(g);
    });
    run_until(io, [&] { return g2.owns_lock(); });
    ASSERT_TRUE(g2.owns_lock());
    g2.release_in_background();

    // use_future, with the io_context on another thread
    auto work = asio::make_work_guard(io);
    std::thread t([&] { io.run(); });
    auto fut = m.async_acquire(asio::use_future);
    ASSERT_EQ(fut.wait_for(10s), std::future_status::ready);
    auto g3 = fut.get();
    EXPECT_TRUE(g3.owns_lock());
    auto rel = g3.async_release(asio::use_future);
    ASSERT_EQ(rel.wait_for(10s), std::future_status::ready);
    rel.get();
    work.reset();
    io.stop();
    t.join();
    io.restart();
    run_test([&]() -> awaitable<void> {
        s.reset(); // (the session goes on the io_context's thread)
        co_return;
    });
}

TEST_F(Mutex, MutualExclusionManySessionsManyCoroutines) {
    constexpr int sessions = 5, coroutines = 20, rounds = 3;
    auto path = lock_path();
    std::mutex mu;
    std::vector<std::pair<std::chrono::steady_clock::time_point, std::chrono::steady_clock::time_point>>
        holds;
    std::vector<std::int64_t> tokens;
    std::atomic<int> inside{0}, max_inside{0};
    run_test(
        [&]() -> awaitable<void> {
            std::vector<std::unique_ptr<zklock::session>> ss;
            for (int i = 0; i < sessions; ++i) ss.push_back(co_await connect());
            auto ex = co_await asio::this_coro::executor;
            std::atomic<int> finished{0};
            for (int i = 0; i < sessions; ++i)
                for (int c = 0; c < coroutines; ++c)
                    asio::co_spawn(
                        ex,
                        [&, i]() -> awaitable<void> {
                            zklock::mutex m(*ss[i], path);
                            for (int r = 0; r < rounds; ++r) {
                                auto g = co_await m.async_acquire(use_awaitable);
                                auto start = std::chrono::steady_clock::now();
                                int now = ++inside;
                                int prev = max_inside.load();
                                while (now > prev && !max_inside.compare_exchange_weak(prev, now)) {
                                }
                                {
                                    std::lock_guard lk(mu);
                                    tokens.push_back(g.fencing_token());
                                }
                                co_await sleep_for(1ms);
                                --inside;
                                auto end = std::chrono::steady_clock::now();
                                {
                                    std::lock_guard lk(mu);
                                    holds.emplace_back(start, end);
                                }
                                co_await g.async_release(use_awaitable);
                            }
                            ++finished;
                        },
                        boost::asio::detached);
            while (finished < sessions * coroutines) co_await sleep_for(20ms);
        },
        120s, 2);
    ASSERT_EQ(holds.size(), static_cast<std::size_t>(sessions * coroutines * rounds));
    EXPECT_EQ(max_inside.load(), 1);
    std::sort(holds.begin(), holds.end());
    for (std::size_t i = 1; i < holds.size(); ++i)
        EXPECT_LE(holds[i - 1].second, holds[i].first)
            << "hold intervals " << i - 1 << " and " << i << " overlap";
    // tokens were recorded in grant order: strictly increasing
    for (std::size_t i = 1; i < tokens.size(); ++i) EXPECT_LT(tokens[i - 1], tokens[i]) << i;
}

TEST_F(Mutex, GrantsInFifoOrderAndWakesOneWaiterPerRelease) {
    constexpr int waiters = 6;
    run_test([&]() -> awaitable<void> {
        auto path = lock_path();
        auto holder_s = co_await connect();
        std::vector<std::unique_ptr<zklock::session>> ss;
        for (int i = 0; i < waiters; ++i) ss.push_back(co_await connect());
        zklock::mutex hm(*holder_s, path);
        auto holder = co_await hm.async_acquire(use_awaitable);

        auto ex = co_await asio::this_coro::executor;
        std::vector<int> order;
        std::vector<zklock::guard> granted(waiters);
        for (int i = 0; i < waiters; ++i) {
            asio::co_spawn(
                ex,
                [&, i]() -> awaitable<void> {
                    zklock::mutex m(*ss[i], path);
                    granted[i] = co_await m.async_acquire(use_awaitable);
                    order.push_back(i);
                },
                boost::asio::detached);
            co_await wait_for_children(*holder_s, path, static_cast<std::size_t>(i + 2)); // queued in order
        }
        // Per release, the sessions that got a watch event: exactly one, the next in line. (A
        // waiter behind a deeper queue gets two events, its predecessor's release marker and
        // the deletion, and lists nothing: marked_grants.)
        auto events = [&] {
            std::vector<std::uint64_t> n;
            n.push_back(holder_s->statistics().watch_events);
            for (auto& s : ss) n.push_back(s->statistics().watch_events);
            return n;
        };
        co_await sleep_for(100ms);
        auto before = events();
        EXPECT_TRUE(order.empty());
        co_await holder.async_release(use_awaitable);
        std::uint64_t marked = 0;
        for (int i = 0; i < waiters; ++i) {
            while (order.size() < static_cast<std::size_t>(i + 1)) co_await sleep_for(5ms);
            co_await sleep_for(50ms); // let any extra (herd) notification arrive
            auto now = events();
            std::vector<std::size_t> woken;
            for (std::size_t k = 0; k < now.size(); ++k)
                if (now[k] != before[k]) woken.push_back(k);
            EXPECT_EQ(woken, std::vector<std::size_t>{static_cast<std::size_t>(i) + 1})
                << "release " << i << " woke another session than the next waiter's";
            before = now;
            EXPECT_EQ(order.size(), static_cast<std::size_t>(i + 1));
            co_await granted[static_cast<std::size_t>(order.back())].async_release(use_awaitable);
        }
        for (auto& s : ss) marked += s->statistics().marked_grants;
        // The first in line was granted as `alone` (on the holder's deletion); the others listed
        // behind a deeper queue, and each was granted on its predecessor's marker.
        EXPECT_EQ(marked, static_cast<std::uint64_t>(waiters - 1));
        EXPECT_EQ(order, (std::vector<int>{0, 1, 2, 3, 4, 5}));
    });
}

TEST_F(Mutex, TryAcquire) {
    run_test([&]() -> awaitable<void> {
        auto c = co_await two_contenders();
        auto g = co_await c.ma.async_try_acquire(use_awaitable);
        CO_REQUIRE(g.owns_lock());
        auto [ec, g2] = co_await c.mb.async_try_acquire(boost::asio::as_tuple(use_awaitable));
        EXPECT_EQ(ec, errc::lock_busy) << ec.message();
        EXPECT_FALSE(g2.owns_lock());
        EXPECT_EQ((co_await children_of(*c.a, c.path)).size(), 1u); // the loser's node is already gone
        co_await g.async_release(use_awaitable);
        auto g3 = co_await c.mb.async_try_acquire(use_awaitable);
        EXPECT_TRUE(g3.owns_lock());
        co_await g3.async_release(use_awaitable);
    });
}

TEST_F(Mutex, TimeoutLeavesNoNode) {
    run_test([&]() -> awaitable<void> {
        auto c = co_await two_contenders();
        auto g = co_await c.ma.async_acquire(use_awaitable);
        auto t0 = std::chrono::steady_clock::now();
        auto [ec, g2] = co_await c.mb.async_acquire_for(300ms, boost::asio::as_tuple(use_awaitable));
        auto took = std::chrono::steady_clock::now() - t0;
        EXPECT_EQ(ec, errc::acquire_timeout) << ec.message();
        EXPECT_GE(took, 300ms);
        EXPECT_FALSE(g2.owns_lock());
        auto kids = co_await children_of(*c.a, c.path);
        CO_REQUIRE(kids.size() == 1u);
        EXPECT_EQ(c.path + "/" + kids[0], g.node_path());
        // a deadline already passed: fails without leaving anything either
        auto [ec2, g3] = co_await c.mb.async_acquire_until(std::chrono::steady_clock::now() - 1s,
                                                           boost::asio::as_tuple(use_awaitable));
        EXPECT_EQ(ec2, errc::acquire_timeout);
        co_await g.async_release(use_awaitable);
    });
}

TEST_F(Mutex, CancellationLeavesNoNodeForEveryCancellationType) {
    run_test([&]() -> awaitable<void> {
        auto c = co_await two_contenders();
        auto g = co_await c.ma.async_acquire(use_awaitable);
        for (auto type : {asio::cancellation_type::terminal, asio::cancellation_type::partial,
                          asio::cancellation_type::total}) {
            asio::cancellation_signal sig;
            zklock::error_code got;
            bool done = false;
            c.mb.async_acquire(
                asio::bind_cancellation_slot(sig.slot(), [&](zklock::error_code ec, zklock::guard) {
                    got = ec;
                    done = true;
                }));
            co_await wait_for_children(*c.a, c.path, 2);
            sig.emit(type);
            while (!done) co_await sleep_for(5ms);
            EXPECT_EQ(got, asio::error::operation_aborted);
            EXPECT_EQ((co_await children_of(*c.a, c.path)).size(), 1u)
                << "cancelled waiter's node left behind";
        }
        co_await g.async_release(use_awaitable);
    });
}

TEST_F(Mutex, CancelRacingTheGrantLeavesNoNode) {
    run_test([&]() -> awaitable<void> {
        auto path = lock_path();
        auto a = co_await connect();
        zklock::mutex m(*a, path);
        int granted = 0, aborted = 0;
        for (int i = 0; i < 40; ++i) {
            asio::cancellation_signal sig;
            bool done = false;
            zklock::guard kept;
            m.async_acquire(
                asio::bind_cancellation_slot(sig.slot(), [&](zklock::error_code ec, zklock::guard g) {
                    if (!ec) {
                        ++granted;
                        kept = std::move(g);
                    } else {
                        EXPECT_EQ(ec, asio::error::operation_aborted);
                        ++aborted;
                    }
                    done = true;
                }));
            // cancel at various points: before the create is sent, in flight, around the grant
            if (i % 4 != 0) co_await sleep_for(std::chrono::milliseconds(i % 4 == 1 ? 0 : (i % 7)));
            sig.emit(asio::cancellation_type::terminal);
            while (!done) co_await sleep_for(1ms);
            if (kept) co_await kept.async_release(use_awaitable);
            EXPECT_TRUE((co_await children_of(*a, path)).empty()) << "iteration " << i;
        }
        EXPECT_EQ(granted + aborted, 40);
        EXPECT_GT(aborted, 0);
    });
}

TEST_F(Mutex, WaiterInTheMiddleGivingUpDoesNotBreakTheChain) {
    run_test([&]() -> awaitable<void> {
        auto path = lock_path();
        auto a = co_await connect();
        auto b = co_await connect();
        auto c = co_await connect();
        zklock::mutex ma(*a, path), mb(*b, path), mc(*c, path);
        auto ga = co_await ma.async_acquire(use_awaitable);
        asio::cancellation_signal sig;
        bool b_done = false;
        mb.async_acquire(asio::bind_cancellation_slot(sig.slot(), [&](zklock::error_code ec, zklock::guard) {
            EXPECT_EQ(ec, asio::error::operation_aborted);
            b_done = true;
        }));
        co_await wait_for_children(*a, path, 2);
        zklock::guard gc;
        bool c_done = false;
        mc.async_acquire([&](zklock::error_code ec, zklock::guard g) {
            EXPECT_FALSE(ec);
            gc = std::move(g);
            c_done = true;
        });
        co_await wait_for_children(*a, path, 3);
        sig.emit(asio::cancellation_type::terminal); // C's predecessor goes away: C re-lists, watches A
        while (!b_done) co_await sleep_for(5ms);
        co_await sleep_for(200ms);
        EXPECT_FALSE(c_done) << "C was granted while A still holds the lock";
        co_await ga.async_release(use_awaitable);
        co_await eventually([&] { return c_done; }, 5000ms);
        EXPECT_TRUE(c_done);
        co_await gc.async_release(use_awaitable);
    });
}

TEST_F(Mutex, LostCreateReplyIsRecoveredByGuid) {
    run_test([&]() -> awaitable<void> {
        auto path = lock_path();
        auto a = co_await connect();
        zklock::mutex m(*a, path);
        // Make sure the parent exists so the create itself is what gets "lost".
        auto warm = co_await m.async_acquire(use_awaitable);
        co_await warm.async_release(use_awaitable);
        auto before = a->statistics();
        zt::faults(*a).lose_create_replies = 1;
        auto g = co_await m.async_acquire(use_awaitable);
        auto after = a->statistics();
        EXPECT_EQ(zt::faults(*a).lose_create_replies.load(), 0) << "the fault was not injected";
        EXPECT_EQ(after.creates - before.creates, 1u) << "created twice instead of adopting the node";
        EXPECT_EQ(after.exists - before.exists, 1u) << "ownership (ephemeralOwner) was not checked";
        auto kids = co_await children_of(*a, path);
        CO_REQUIRE(kids.size() == 1u);
        EXPECT_EQ(path + "/" + kids[0], g.node_path());
        co_await g.async_release(use_awaitable);
    });
}

TEST_F(Mutex, LostCreateReplyWhileCancelledLeavesNoNode) {
    run_test([&]() -> awaitable<void> {
        auto c = co_await two_contenders();
        auto g = co_await c.ma.async_acquire(use_awaitable);
        zt::faults(*c.b).lose_create_replies = 1;
        auto [ec, g2] = co_await c.mb.async_acquire_for(200ms, boost::asio::as_tuple(use_awaitable));
        EXPECT_EQ(ec, errc::acquire_timeout);
        co_await g.async_release(use_awaitable);
    });
}

TEST_F(Mutex, HandlersRunExactlyOnceOnTheirAssociatedExecutor) {
    run_test([&]() -> awaitable<void> {
        auto path = lock_path();
        auto s = co_await connect();
        zklock::mutex m(*s, path);
        auto strand = asio::make_strand(io);
        int acquired = 0, released = 0, lost_waits = 0;
        bool on_strand = true;
        zklock::guard g;
        m.async_acquire(asio::bind_executor(strand, [&](zklock::error_code ec, zklock::guard x) {
            EXPECT_FALSE(ec);
            on_strand = on_strand && strand.running_in_this_thread();
            ++acquired;
            g = std::move(x);
        }));
        while (!acquired) co_await sleep_for(5ms);
        g.async_wait_lost(asio::bind_executor(strand, [&](zklock::error_code ec) {
            EXPECT_EQ(ec, errc::lock_released);
            on_strand = on_strand && strand.running_in_this_thread();
            ++lost_waits;
        }));
        g.async_release(asio::bind_executor(strand, [&](zklock::error_code ec) {
            EXPECT_FALSE(ec);
            on_strand = on_strand && strand.running_in_this_thread();
            ++released;
        }));
        co_await sleep_for(300ms);
        EXPECT_EQ(acquired, 1);
        EXPECT_EQ(released, 1);
        EXPECT_EQ(lost_waits, 1);
        EXPECT_TRUE(on_strand);
    });
}

// The seeds' simpler algorithms: still exclusive, but every release wakes every waiter.
TEST_F(Mutex, SimplerStrategiesExcludeButWakeTheHerd) {
    for (auto strategy : {zklock::lock_strategy::predecessor, zklock::lock_strategy::watch_children,
                          zklock::lock_strategy::unique_node}) {
        asio::io_context io;
        constexpr int waiters = 4;
        int inside = 0, violations = 0, grants = 0, released = 0;
        std::uint64_t wakeups = 0;
        run(io, [&]() -> awaitable<void> {
            auto path = lock_path();
            std::vector<std::unique_ptr<zklock::session>> ss;
            for (int i = 0; i <= waiters; ++i) ss.push_back(co_await connect());
            zklock::mutex_options o;
            o.strategy = strategy;
            zklock::mutex holder_m(*ss[0], path, o);
            auto holder = co_await holder_m.async_acquire(use_awaitable);
            auto ex = co_await asio::this_coro::executor;
            std::vector<zklock::guard> gs(waiters + 1);
            for (int i = 1; i <= waiters; ++i)
                asio::co_spawn(
                    ex,
                    [&, i]() -> awaitable<void> {
                        zklock::mutex m(*ss[i], path, o);
                        gs[i] = co_await m.async_acquire(use_awaitable);
                        if (inside++) ++violations;
                        ++grants;
                        co_await sleep_for(5ms);
                        --inside;
                        co_await gs[i].async_release(use_awaitable);
                        ++released;
                    },
                    boost::asio::detached);
            co_await sleep_for(300ms); // every waiter is queued and watching
            auto watch_events = [&] {  // (waiters woken: see GrantsInFifoOrderAndWakesOneWaiterPerRelease)
                std::uint64_t n = 0;
                for (auto& s : ss) n += s->statistics().watch_events - s->statistics().marked_grants;
                return n;
            };
            auto before = watch_events();
            co_await holder.async_release(use_awaitable);
            co_await sleep_for(200ms);
            // (until every waiter has released: their coroutines use `gs`, which goes with this one)
            co_await eventually([&] { return released >= waiters; }, 5000ms);
            wakeups = watch_events() - before;
        }());
        EXPECT_EQ(violations, 0);
        EXPECT_EQ(grants, waiters);
        if (strategy == zklock::lock_strategy::predecessor)
            EXPECT_EQ(wakeups, static_cast<std::uint64_t>(waiters)) << "one wakeup per release";
        else
            EXPECT_GT(wakeups, static_cast<std::uint64_t>(waiters)) << "the herd should show";
    }
}

TEST_F(Mutex, LockPathsAreContainerNodesThatTheServerReaps) {
    // scripts/zk.sh runs the server with znode.container.checkIntervalMs=1000
    run_test([&]() -> awaitable<void> {
        auto path = unique_path("lock") + "/nested";
        auto a = co_await connect();
        zklock::mutex m(*a, path);
        auto g = co_await m.async_acquire(use_awaitable);
        co_await g.async_release(use_awaitable);
        bool gone = false;
        for (int i = 0; i < 100 && !gone; ++i) {
            auto [ec, d] = co_await zklock::async_get_data(*a, path, boost::asio::as_tuple(use_awaitable));
            gone = ec == zklock::zk_errc::no_node;
            if (!gone) co_await sleep_for(100ms);
        }
        EXPECT_TRUE(gone) << "the emptied lock path was not reaped: not a CONTAINER node?";
    });
}
