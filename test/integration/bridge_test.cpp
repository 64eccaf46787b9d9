// The C-client bridge: the single-threaded client, driven from the io_context.
// - No threads of its own: counted in /proc/self/task around a session's whole life (connect,
//   1,000 acquires, close).
// - Nothing waits for the network: a close ends the session at the server without waiting for
//   its answer.
// - The requests of one strand turn leave in one TCP segment (the kernel's own count).
#include <zklock/mutex.hpp>

#include "common.hpp"
#include "session_faults.hpp"
#include "proxy.hpp"
#include "tcp_segments.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/detached.hpp>

#include <filesystem>

using namespace zt;

namespace {
int thread_count() {
    int n = 0;
    for ([[maybe_unused]] auto& e : std::filesystem::directory_iterator("/proc/self/task")) ++n;
    return n;
}
} // namespace

class Threads : public zk_test {};
class Bridge : public zk_test {};

TEST_F(Threads, NeitherZklockNorTheCClientStartsAThread) {
    const int before = thread_count();
    int most = before;
    run_test(
        [&]() -> awaitable<void> {
            auto path = lock_path();
            auto s = co_await connect_session();
            most = std::max(most, thread_count());
            zklock::mutex m(*s, path);
            for (int i = 0; i < 1000; ++i) {
                auto g = co_await m.async_acquire(use_awaitable);
                if (i % 100 == 0) most = std::max(most, thread_count());
                co_await g.async_release(use_awaitable);
            }
            most = std::max(most, thread_count());
            co_await s->async_close(use_awaitable);
            most = std::max(most, thread_count());
            s.reset();
        },
        120s);
    const int after = thread_count();
    std::printf("  threads: %d before, at most %d during, %d after; longest C-client call so far %.3f ms\n",
                before, most, after, static_cast<double>(zklock::detail::longest_client_call_ns()) / 1e6);
    EXPECT_EQ(most, before) << "a thread was started while the session lived";
    EXPECT_EQ(after, before);
}

TEST_F(Threads, ManySessionsOnOneIoContextStartNoThread) {
    // (1,000 sessions of libzookeeper_mt were 2,000 threads)
    const int before = thread_count();
    int most = before;
    run_test(
        [&]() -> awaitable<void> {
            std::vector<std::unique_ptr<zklock::session>> sessions;
            for (int i = 0; i < 50; ++i) sessions.push_back(co_await connect_session());
            most = std::max(most, thread_count());
            for (auto& s : sessions) co_await s->async_close(use_awaitable);
        },
        120s);
    EXPECT_EQ(most, before);
    EXPECT_EQ(thread_count(), before);
}

TEST_F(Bridge, ACloseEndsTheSessionAtTheServerWithoutWaitingForItsAnswer) {
    // A slow network: every byte takes 1 s each way. The single-threaded client's own
    // zookeeper_close would wait here for the server's answer (up to 1.5 s); the bridge shuts its
    // socket's reading side first, so nothing waits. The close request still reaches the server:
    // the holder's node goes after that second, not at the session timeout (10 s).
    run_test([&]() -> awaitable<void> {
        using clk = std::chrono::steady_clock;
        auto path = lock_path();
        tcp_proxy proxy(first_port(zk_connect()));
        auto o = through(proxy);
        o.session_timeout = 10000ms;
        auto a = co_await connect(o);
        auto b = co_await connect();
        zklock::mutex ma(*a, path), mb(*b, path);
        auto g = co_await ma.async_acquire(use_awaitable);
        proxy.delay(1000ms);
        const auto t0 = clk::now();
        co_await a->async_close(use_awaitable);
        const double close_s = std::chrono::duration<double>(clk::now() - t0).count();
        std::printf("  close took %.3f ms\n", close_s * 1e3);
        EXPECT_LT(close_s, 0.5) << "the close waited for the server";
        auto [ec, next] = co_await mb.async_acquire_for(5s, boost::asio::as_tuple(use_awaitable));
        EXPECT_FALSE(ec) << "the holder's node outlived its closed session: " << ec.message();
        if (!ec) co_await next.async_release(use_awaitable);
    });
}

namespace {
/// Ticks every 10 ms on the test's io_context until stopped, and records the longest gap: a call
/// that blocked the io_context shows as a gap.
struct tick_watch {
    std::shared_ptr<bool> on = std::make_shared<bool>(true);
    std::shared_ptr<double> longest_gap_ms = std::make_shared<double>(0);
    void start(asio::io_context& io) {
        asio::co_spawn(
            io,
            [](std::shared_ptr<bool> on, std::shared_ptr<double> gap) -> awaitable<void> {
                auto last = std::chrono::steady_clock::now();
                while (*on) {
                    co_await sleep_for(10ms);
                    auto now = std::chrono::steady_clock::now();
                    *gap = std::max(*gap, std::chrono::duration<double, std::milli>(now - last).count() - 10);
                    last = now;
                }
            }(on, longest_gap_ms),
            asio::detached);
    }
};
} // namespace

TEST_F(Bridge, HostNamesAreResolvedAsynchronously) {
    // "localhost" instead of the address: the session resolves it (asio's resolver) and the C
    // client gets addresses; the lock works as with an address.
    run_test([&]() -> awaitable<void> {
        auto path = lock_path();
        auto o = options("localhost:" + std::to_string(first_port(zk_connect())));
        auto s = co_await connect(o);
        // The C client was given addresses: it never calls getaddrinfo itself.
        const std::string given = s->impl()->client_connect_string();
        std::printf("  the C client was given \"%s\"\n", given.c_str());
        EXPECT_EQ(given.find("localhost"), std::string::npos) << given;
        EXPECT_TRUE(given.rfind("127.0.0.1:", 0) == 0 || given.rfind("[::1]:", 0) == 0 ||
                    given.rfind("::1:", 0) == 0)
            << given;
        zklock::mutex m(*s, path);
        auto g = co_await m.async_acquire(use_awaitable);
        EXPECT_TRUE(g.owns_lock());
        co_await g.async_release(use_awaitable);
        co_await s->async_close(use_awaitable);
    });
}

TEST_F(Bridge, AHostThatDoesNotResolveFailsTheConnectWithoutBlocking) {
    run_test([&]() -> awaitable<void> {
        tick_watch w;
        w.start(io);
        auto o = options("no-such-host.invalid:2181");
        o.connect_timeout = 3000ms;
        zklock::session s(io.get_executor(), o);
        auto [ec] = co_await s.async_connect(boost::asio::as_tuple(use_awaitable));
        *w.on = false;
        EXPECT_TRUE(ec) << "connected to a host that does not exist";
        EXPECT_FALSE(ec.message().empty());
        std::printf("  connect: %s; longest gap in the io_context's ticks %.1f ms\n", ec.message().c_str(),
                    *w.longest_gap_ms);
        EXPECT_NE(s.state(), zklock::session_state::connected);
        EXPECT_LT(*w.longest_gap_ms, 1000.0)
            << "the io_context was blocked (a resolver timing out takes seconds)";
    });
}

TEST_F(Bridge, HostNamesAreLookedUpAgainWhenEveryServerHasFailed) {
    // A name whose address changes (zt::faults(s).resolve_host stands in for the DNS): first an
    // address where nothing listens (127.0.0.2: the server listens on 127.0.0.1 only), then the
    // server's. After a round in which every server failed, the session looks the name up again
    // and hands the C client the new address (zoo_set_servers): the connect succeeds.
    run_test([&]() -> awaitable<void> {
        auto o = options("zk-moved.test:" + std::to_string(first_port(zk_connect())));
        o.connect_timeout = 15000ms;
        zklock::session s(io.get_executor(), o);
        auto where = std::make_shared<std::string>("127.0.0.2");
        zt::faults(s).resolve_host = [where](const std::string& host) {
            return host == "zk-moved.test" ? *where : std::string();
        };
        asio::steady_timer moved(io, 1500ms);
        moved.async_wait([where](zklock::error_code) { *where = "127.0.0.1"; });
        auto [ec] = co_await s.async_connect(boost::asio::as_tuple(use_awaitable));
        EXPECT_FALSE(ec) << "the new address was never tried: " << ec.message();
        EXPECT_EQ(s.state(), zklock::session_state::connected);
        co_await s.async_close(use_awaitable);
    });
}

TEST_F(Bridge, TheRequestsOfOneTurnLeaveInOneSegment) {
    // The C client writes each request as two segments (its length, then its body: TCP_NODELAY).
    // An uncontended acquire sends its create and its getChildren in one strand turn, a release
    // one delete: corked until the next drive, a cycle is 2 data segments, not 6.
    run_test([&]() -> awaitable<void> {
        auto path = lock_path();
        const auto port = first_port(zk_connect());
        auto s = co_await connect_session();
        zklock::mutex m(*s, path);
        {
            auto g = co_await m.async_acquire(use_awaitable); // (the path exists from here on)
            co_await g.async_release(use_awaitable);
        }
        constexpr int cycles = 100;
        const auto segments0 = data_segments_sent_to(port);
        const auto requests0 = s->statistics().requests();
        for (int i = 0; i < cycles; ++i) {
            auto g = co_await m.async_acquire(use_awaitable);
            co_await g.async_release(use_awaitable);
        }
        const double segments = static_cast<double>(data_segments_sent_to(port) - segments0) / cycles;
        const double requests = static_cast<double>(s->statistics().requests() - requests0) / cycles;
        std::printf("  per cycle: %.2f requests, %.2f data segments to the server\n", requests, segments);
        EXPECT_GE(requests, 3.0);
        EXPECT_GT(segments, 0.0) << "no segment counted: the session's socket was not found";
        // (2 per cycle, and now and then a ping or a lease heartbeat of this or another session)
        EXPECT_LT(segments, 2.5) << "requests sent in one turn left in several segments";
        co_await s->async_close(use_awaitable);
    });
}
