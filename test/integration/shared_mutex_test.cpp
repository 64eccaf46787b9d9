// The read/write lock against a real ZooKeeper.
#include <zklock/shared_mutex.hpp>

#include "common.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/detached.hpp>

#include <algorithm>

using namespace zt;
using zklock::errc;

using SharedMutex = zt::zk_test;

TEST_F(SharedMutex, ReadersShareWritersExclude) {
    constexpr int sessions = 4, coroutines = 6, rounds = 4;
    struct hold {
        std::chrono::steady_clock::time_point start, end;
        bool writer;
    };
    std::vector<hold> holds;
    int readers_inside = 0, writers_inside = 0, max_readers = 0, violations = 0;
    run_test(
        [&]() -> awaitable<void> {
            auto path = lock_path("rw");
            std::vector<std::unique_ptr<zklock::session>> ss;
            for (int i = 0; i < sessions; ++i) ss.push_back(co_await connect());
            auto ex = co_await asio::this_coro::executor;
            int finished = 0;
            for (int i = 0; i < sessions; ++i)
                for (int c = 0; c < coroutines; ++c)
                    asio::co_spawn(
                        ex,
                        [&, i, c]() -> awaitable<void> {
                            zklock::shared_mutex m(*ss[i], path);
                            for (int r = 0; r < rounds; ++r) {
                                bool writer = (c + r) % 3 == 0;
                                zklock::guard g; // (no co_await inside ?: with GCC 12: it miscompiles it)
                                if (writer)
                                    g = co_await m.async_acquire(use_awaitable);
                                else
                                    g = co_await m.async_acquire_shared(use_awaitable);
                                auto start = std::chrono::steady_clock::now();
                                if (writer) {
                                    if (writers_inside || readers_inside) ++violations;
                                    ++writers_inside;
                                } else {
                                    if (writers_inside) ++violations;
                                    max_readers = std::max(max_readers, ++readers_inside);
                                }
                                co_await sleep_for(writer ? 2ms : 15ms);
                                (writer ? writers_inside : readers_inside)--;
                                holds.push_back({start, std::chrono::steady_clock::now(), writer});
                                co_await g.async_release(use_awaitable);
                            }
                            ++finished;
                        },
                        boost::asio::detached);
            while (finished < sessions * coroutines) co_await sleep_for(20ms);
        },
        120s);
    EXPECT_EQ(holds.size(), static_cast<std::size_t>(sessions * coroutines * rounds));
    EXPECT_EQ(violations, 0);
    EXPECT_GT(max_readers, 1) << "readers never shared the lock";
    for (auto& w : holds) {
        if (!w.writer) continue;
        for (auto& o : holds)
            if (&o != &w) EXPECT_TRUE(o.end <= w.start || w.end <= o.start) << "a hold overlaps a write hold";
    }
}

TEST_F(SharedMutex, AQueuedWriterBlocksLaterReadersButNotEarlierOnes) {
    run_test([&]() -> awaitable<void> {
        auto path = lock_path("rw");
        auto a = co_await connect();
        auto b = co_await connect();
        auto c = co_await connect();
        zklock::shared_mutex ma(*a, path), mb(*b, path), mc(*c, path);
        auto r1 = co_await ma.async_acquire_shared(use_awaitable);
        zklock::guard w;
        bool w_done = false;
        mb.async_acquire([&](zklock::error_code ec, zklock::guard g) {
            EXPECT_FALSE(ec);
            w = std::move(g);
            w_done = true;
        });
        co_await wait_for_children(*a, path, 2);
        // a reader arriving after the queued writer waits for it (no writer starvation)
        auto [ec, r2] = co_await mc.async_try_acquire_shared(boost::asio::as_tuple(use_awaitable));
        EXPECT_EQ(ec, errc::lock_busy);
        zklock::guard r3;
        bool r3_done = false;
        mc.async_acquire_shared([&](zklock::error_code ec, zklock::guard g) {
            EXPECT_FALSE(ec);
            r3 = std::move(g);
            r3_done = true;
        });
        co_await wait_for_children(*a, path, 3);
        co_await sleep_for(100ms);
        EXPECT_FALSE(w_done);
        EXPECT_FALSE(r3_done);
        auto before = b->statistics().watch_events + c->statistics().watch_events;
        co_await r1.async_release(use_awaitable);
        co_await eventually([&] { return w_done; }, 3000ms);
        EXPECT_TRUE(w_done);
        co_await sleep_for(100ms);
        EXPECT_FALSE(r3_done) << "a reader got in while the writer held the lock";
        EXPECT_EQ(b->statistics().watch_events + c->statistics().watch_events - before, 1u)
            << "one release, one wakeup";
        co_await w.async_release(use_awaitable);
        co_await eventually([&] { return r3_done; }, 3000ms);
        EXPECT_TRUE(r3_done);
        co_await r3.async_release(use_awaitable);
    });
}

TEST_F(SharedMutex, DowngradeLetsReadersInAndNeverOverlapsAWriter) {
    run_test([&]() -> awaitable<void> {
        auto path = lock_path("rw");
        auto a = co_await connect();
        auto b = co_await connect();
        zklock::shared_mutex ma(*a, path), mb(*b, path);
        // no writer queued: the downgrade succeeds, readers get in, writers stay out
        auto w = co_await ma.async_acquire(use_awaitable);
        auto r = co_await ma.async_downgrade(std::move(w), use_awaitable);
        EXPECT_TRUE(r.owns_lock());
        EXPECT_FALSE(w.owns_lock());
        EXPECT_EQ((co_await children_of(*a, path)).size(), 1u) << "the write node must be gone";
        auto [ec_r, r2] = co_await mb.async_try_acquire_shared(boost::asio::as_tuple(use_awaitable));
        EXPECT_FALSE(ec_r) << ec_r.message();
        auto [ec_w, w_none] = co_await mb.async_try_acquire(boost::asio::as_tuple(use_awaitable));
        EXPECT_EQ(ec_w, errc::lock_busy);
        co_await r2.async_release(use_awaitable);
        co_await r.async_release(use_awaitable);

        // a writer queued behind us: refused, and we keep the write lock
        auto w1 = co_await ma.async_acquire(use_awaitable);
        zklock::guard w2;
        bool w2_done = false;
        mb.async_acquire([&](zklock::error_code ec, zklock::guard g) {
            EXPECT_FALSE(ec);
            w2 = std::move(g);
            w2_done = true;
        });
        co_await wait_for_children(*a, path, 2);
        auto [ec, back] = co_await ma.async_downgrade(std::move(w1), boost::asio::as_tuple(use_awaitable));
        EXPECT_EQ(ec, errc::lock_busy) << ec.message();
        EXPECT_TRUE(back.owns_lock()) << "the write lock must be handed back";
        EXPECT_EQ((co_await children_of(*a, path)).size(), 2u) << "the refused read node must be gone";
        co_await sleep_for(100ms);
        EXPECT_FALSE(w2_done);
        co_await back.async_release(use_awaitable);
        co_await eventually([&] { return w2_done; }, 3000ms);
        EXPECT_TRUE(w2_done);
        co_await w2.async_release(use_awaitable);

        // an upgrade is refused, not deadlocked; a read guard cannot be downgraded
        auto rd = co_await ma.async_acquire_shared(use_awaitable);
        auto [ec1, kept] = co_await ma.async_upgrade(std::move(rd), boost::asio::as_tuple(use_awaitable));
        EXPECT_EQ(ec1, errc::upgrade_not_supported) << ec1.message();
        EXPECT_TRUE(kept.owns_lock()) << "the read lock must stay held";
        auto [ec2, none] = co_await ma.async_downgrade(std::move(kept), boost::asio::as_tuple(use_awaitable));
        EXPECT_EQ(ec2, errc::not_a_write_guard);
    });
}

TEST_F(SharedMutex, CancelAndTimeoutLeaveNoNode) {
    run_test([&]() -> awaitable<void> {
        auto path = lock_path("rw");
        auto a = co_await connect();
        auto b = co_await connect();
        zklock::shared_mutex ma(*a, path), mb(*b, path);
        auto w = co_await ma.async_acquire(use_awaitable);
        auto [ec1, g1] = co_await mb.async_acquire_shared_for(200ms, boost::asio::as_tuple(use_awaitable));
        EXPECT_EQ(ec1, errc::acquire_timeout);
        auto [ec2, g2] = co_await mb.async_acquire_for(200ms, boost::asio::as_tuple(use_awaitable));
        EXPECT_EQ(ec2, errc::acquire_timeout);
        asio::cancellation_signal sig;
        bool done = false;
        mb.async_acquire_shared(
            asio::bind_cancellation_slot(sig.slot(), [&](zklock::error_code ec, zklock::guard) {
                EXPECT_EQ(ec, asio::error::operation_aborted);
                done = true;
            }));
        co_await wait_for_children(*a, path, 2);
        sig.emit(asio::cancellation_type::total);
        while (!done) co_await sleep_for(5ms);
        EXPECT_EQ((co_await children_of(*a, path)).size(), 1u);
        co_await w.async_release(use_awaitable);
    });
}
