// What a new user hit (issue 31): acquires while the ensemble cannot be reached complete within
// their bound (item 2); a zero deadline is one try (item 8); a closed session says so (item 10).
#include <zklock/mutex.hpp>

#include "common.hpp"
#include "proxy.hpp"

#include <boost/asio/as_tuple.hpp>

using namespace zt;
using zklock::errc;
using zklock::session_state;
using clk = std::chrono::steady_clock;

using Outage = zt::zk_test;

TEST_F(Outage, ATryAcquireOrADeadlineEndsWithinItsBoundWhileDisconnected) {
    // Before: a try-acquire during an outage waited until the server came back (7.2 s, no bound).
    run_test([&]() -> awaitable<void> {
        tcp_proxy proxy(first_port(zk_connect()));
        auto path = lock_path("outage");
        auto o = through(proxy);
        o.session_timeout = 4000ms;
        auto a = co_await connect(o);
        zklock::mutex m(*a, path);
        proxy.blackhole(true);
        proxy.drop(); // the client notices at once and cannot reconnect
        co_await wait_state(*a, session_state::suspended, 3000ms);
        CO_REQUIRE(a->state() == session_state::suspended);
        auto t0 = clk::now();
        auto [ec, g] = co_await m.async_try_acquire(boost::asio::as_tuple(use_awaitable));
        auto took = clk::now() - t0;
        EXPECT_EQ(ec, zklock::zk_errc::connection_loss) << ec.message();
        EXPECT_NE(ec.message().find("onnection"), std::string::npos) << ec.message();
        EXPECT_LT(took, 200ms) << "the try-acquire waited for the reconnect";
        EXPECT_FALSE(g.owns_lock());
        t0 = clk::now();
        auto [ec2, g2] = co_await m.async_acquire_for(300ms, boost::asio::as_tuple(use_awaitable));
        took = clk::now() - t0;
        EXPECT_EQ(ec2, errc::acquire_timeout) << ec2.message();
        EXPECT_LT(took, 300ms + 100ms) << "the deadline was not kept while disconnected";
        proxy.blackhole(false);
        co_await wait_state(*a, session_state::connected, 5000ms);
        // once back, a try-acquire works again
        auto [ec3, g3] = co_await m.async_try_acquire(boost::asio::as_tuple(use_awaitable));
        EXPECT_FALSE(ec3) << ec3.message();
        EXPECT_TRUE(g3.owns_lock());
        co_await g3.async_release(use_awaitable);
    });
}

using NewUser = zt::zk_test;

TEST_F(NewUser, AZeroDeadlineIsOneTry) {
    // Before: async_acquire_for(0ms) failed with acquire_timeout on a free lock.
    run_test([&]() -> awaitable<void> {
        auto a = co_await connect();
        auto b = co_await connect();
        auto path = lock_path("zero");
        zklock::mutex ma(*a, path), mb(*b, path);
        auto [ec, g] = co_await ma.async_acquire_for(0ms, boost::asio::as_tuple(use_awaitable));
        EXPECT_FALSE(ec) << ec.message();
        CO_REQUIRE(g.owns_lock());
        auto t0 = clk::now();
        auto [ec2, g2] = co_await mb.async_acquire_for(0ms, boost::asio::as_tuple(use_awaitable));
        EXPECT_EQ(ec2, errc::acquire_timeout) << ec2.message();
        EXPECT_LT(clk::now() - t0, 1000ms);
        EXPECT_FALSE(g2.owns_lock());
        co_await wait_for_children(*a, path, 1); // the try's node is gone
        co_await g.async_release(use_awaitable);
    });
}

TEST_F(NewUser, AClosedSessionSaysItIsClosed) {
    // Before: an acquire or async_connect on a closed session completed with a bare
    // "Operation canceled" (system:125).
    run_test([&]() -> awaitable<void> {
        auto a = co_await connect();
        co_await a->async_close(use_awaitable);
        auto [ec] = co_await a->async_connect(boost::asio::as_tuple(use_awaitable));
        EXPECT_EQ(ec, errc::session_closed) << ec.message();
        zklock::mutex m(*a, lock_path("closed"));
        auto [ec2, g] = co_await m.async_acquire(boost::asio::as_tuple(use_awaitable));
        EXPECT_EQ(ec2, errc::session_closed) << ec2.message();
        EXPECT_NE(ec2.message().find("closed"), std::string::npos) << ec2.message();
    });
}
