// The guard of a grant: its release, and the waits and bindings on its loss.
#include <zklock/mutex.hpp>
#include <zklock/multi_lock.hpp>
#include <zklock/semaphore.hpp>
#include <zklock/shared_mutex.hpp>
#include <zklock/znode.hpp>

#include "common.hpp"
#include "proxy.hpp"
#include "raw_zk.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/deferred.hpp>
#include <boost/asio/detached.hpp>

using namespace zt;
using zklock::errc;
using zklock::session_state;

using Guard = zt::zk_test;

TEST_F(Guard, ACancelEmittedRightAfterAWaitStartsIsNotLost) {
    // Guards against async_wait_lost, async_wait_revoked and async_wait_state installing their
    // cancellation handler from inside a lambda posted to the strand: a cancel emitted before it
    // ran would be lost, and the wait would go on.
    run_test([&]() -> awaitable<void> {
        auto path = lock_path();
        auto a = co_await connect();
        zklock::mutex_options ro;
        ro.revocable = true;
        zklock::mutex m(*a, path, ro);
        auto g = co_await m.async_acquire(use_awaitable);
        auto wait_and_cancel = [&](auto start) -> awaitable<zklock::error_code> {
            asio::cancellation_signal sig;
            bool done = false;
            zklock::error_code got;
            start(asio::bind_cancellation_slot(sig.slot(), [&](zklock::error_code ec, auto&&...) {
                got = ec;
                done = true;
            }));
            sig.emit(asio::cancellation_type::terminal); // before the strand ran the wait
            co_await eventually([&] { return done; }, 1000ms);
            EXPECT_TRUE(done) << "the cancel was lost";
            co_return got;
        };
        auto e1 = co_await wait_and_cancel([&](auto h) { g.async_wait_lost(std::move(h)); });
        EXPECT_EQ(e1, asio::error::operation_aborted) << e1.message();
        auto e2 = co_await wait_and_cancel([&](auto h) { g.async_wait_revoked(std::move(h)); });
        EXPECT_EQ(e2, asio::error::operation_aborted) << e2.message();
        auto e3 = co_await wait_and_cancel(
            [&](auto h) { a->async_wait_state(session_state::connected, std::move(h)); });
        EXPECT_EQ(e3, asio::error::operation_aborted) << e3.message();
        EXPECT_FALSE(g.is_lost());
        co_await g.async_release(use_awaitable);
    });
}

TEST_F(Guard, BindLossOnTwoThreads) {
    // bind_loss emits on the operation's own executor, cancels at once after a loss, and lives
    // as long as the operation. Guards against loss_slot() emitting on the session's strand while
    // the bound operation uses its slot on another thread, a binding made after the loss never
    // being cancelled, and the signal dying with the guard while an operation is still bound.
    run_test(
        [&]() -> awaitable<void> {
            auto path = lock_path();
            auto a = co_await connect();
            auto b = co_await connect();
            zklock::mutex m(*a, path);
            auto g = co_await m.async_acquire(use_awaitable);
            // work on a strand of the 2-thread io_context, bound to the lock
            auto strand = asio::make_strand(io);
            std::atomic<int> cancelled{0};
            std::vector<std::unique_ptr<asio::steady_timer>> work;
            for (int i = 0; i < 4; ++i) {
                work.push_back(std::make_unique<asio::steady_timer>(strand, 60s));
                asio::post(strand, [&, t = work.back().get()] {
                    t->async_wait(g.bind_loss(strand, [&](zklock::error_code ec) {
                        if (ec == asio::error::operation_aborted) ++cancelled;
                    }));
                });
            }
            co_await sleep_for(100ms);
            // someone else breaks the lock: the loss is seen through the node watch
            auto& bi = *b->impl();
            auto r = co_await asio::co_spawn(bi.strand(), bi.async_remove(g.node_path(), use_awaitable),
                                             use_awaitable);
            EXPECT_EQ(r.rc, ZOK);
            co_await eventually([&] { return cancelled.load() == 4; }, 3000ms);
            EXPECT_EQ(cancelled.load(), 4) << "bound work not cancelled";
            EXPECT_EQ(g.loss_reason(), errc::lock_node_deleted) << g.loss_reason().message();
            // bound after the loss: cancelled right after it starts
            std::atomic<bool> late{false};
            asio::steady_timer t2(strand, 60s);
            asio::post(strand, [&] {
                t2.async_wait(g.bind_loss(
                    strand, [&](zklock::error_code ec) { late = ec == asio::error::operation_aborted; }));
            });
            co_await eventually([&] { return late.load(); }, 3000ms);
            EXPECT_TRUE(late.load()) << "a binding made after the loss was not cancelled";
            // the guard goes while an operation is still bound: no use of freed memory (ASan/TSan)
            asio::steady_timer t3(strand, 200ms);
            std::atomic<bool> t3_done{false};
            {
                auto g2 = co_await m.async_acquire(use_awaitable);
                asio::post(strand, [&, gp = std::make_shared<zklock::guard>(std::move(g2))] {
                    t3.async_wait(gp->bind_loss(strand, [&](zklock::error_code) { t3_done = true; }));
                });
            }
            co_await eventually([&] { return t3_done.load(); }, 3000ms);
            EXPECT_TRUE(t3_done.load());
            co_await g.async_release(use_awaitable);
        },
        60s, 2);
}

TEST_F(Guard, AReleaseOperationNeverStartedStillReleases) {
    // Guards against an initiation that moves the lock out of the guard: an operation created but
    // never started would destroy it unreleased, and the node would stay until the session ended.
    run_test([&]() -> awaitable<void> {
        auto c = co_await two_contenders();
        {
            auto g = co_await c.ma.async_acquire(use_awaitable);
            auto op = g.async_release(asio::deferred); // never started
            EXPECT_FALSE(g.owns_lock());
        }
        auto g2 = co_await c.mb.async_acquire_for(5s, use_awaitable); // was: waited until the timeout
        EXPECT_TRUE(g2.owns_lock());
        co_await g2.async_release(use_awaitable);
        {
            auto g = co_await c.ma.async_acquire(use_awaitable);
            auto aw = g.async_release(use_awaitable); // an awaitable dropped unawaited
        }
        auto g3 = co_await c.mb.async_acquire_for(5s, use_awaitable);
        EXPECT_TRUE(g3.owns_lock());
        co_await g3.async_release(use_awaitable);
    });
}
