// The shortest useful zklock program: connect, take a lock, use its fencing token, release.
//   zklock_tutorial [connect-string]      (default: $ZK_CONNECT or 127.0.0.1:2181)
#include <zklock.hpp>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <cstdlib>
#include <iostream>

namespace asio = boost::asio;
using namespace std::chrono_literals;

asio::awaitable<void> run(std::string connect) {
    // (GCC 12 miscompiles a co_await inside a braced initializer that also builds a temporary:
    //  take the executor in a statement of its own.)
    auto ex = co_await asio::this_coro::executor;
    zklock::session zk{ex, {.connect = connect, .session_timeout = 10s}};
    co_await zk.async_connect(asio::use_awaitable);

    zklock::mutex m{zk, "/locks/tutorial"};
    auto guard = co_await m.async_acquire(asio::use_awaitable); // suspends, never blocks a thread
    std::cout << "holding " << guard.node_path() << ", fencing token " << guard.fencing_token() << "\n";
    co_await guard.async_release(asio::use_awaitable);
}

int main(int argc, char** argv) {
    const char* env = std::getenv("ZK_CONNECT");
    std::string connect = argc > 1 ? argv[1] : env ? env : "127.0.0.1:2181";
    asio::io_context io;
    asio::co_spawn(io, run(connect), [](std::exception_ptr e) {
        if (!e) return;
        try { std::rethrow_exception(e); } catch (const std::exception& x) { std::cerr << "error: " << x.what() << "\n"; std::exit(1); }
    });
    io.run();
}
