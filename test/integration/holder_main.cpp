// Test helper: takes a lock, prints "HELD <fencing token>", then holds it until killed.
//   zklock_test_holder CONNECT PATH SESSION_TIMEOUT_MS
#include <zklock.hpp>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <cstdio>
#include <cstdlib>
#include <string>

namespace asio = boost::asio;

int main(int argc, char** argv) {
    if (argc != 4) return 2;
    asio::io_context io;
    int rc = 0;
    asio::co_spawn(
        io,
        [&]() -> asio::awaitable<void> {
            auto ex = co_await asio::this_coro::executor;
            zklock::session_options o;
            o.connect = argv[1];
            o.session_timeout = std::chrono::milliseconds(std::atoi(argv[3]));
            zklock::session zk{ex, o};
            co_await zk.async_connect(asio::use_awaitable);
            zklock::mutex m{zk, argv[2]};
            auto g = co_await m.async_acquire(asio::use_awaitable);
            std::printf("HELD %lld\n", static_cast<long long>(g.fencing_token()));
            std::fflush(stdout);
            asio::steady_timer forever(ex, std::chrono::hours(1));
            co_await forever.async_wait(asio::use_awaitable);
        },
        [&](std::exception_ptr e) {
            if (e) rc = 1;
        });
    io.run();
    return rc;
}
