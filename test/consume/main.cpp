// Uses only the public headers of an installed zklock: acquire, cancel, time out and release,
// with use_awaitable, deferred and plain callbacks. Exits 0 when every step behaved.
#include <zklock.hpp>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/deferred.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <cstdio>
#include <cstdlib>
#include <string>

namespace asio = boost::asio;
using namespace std::chrono_literals;

static int failures = 0;
#define CHECK(c)                                                                                             \
    do {                                                                                                     \
        if (!(c)) {                                                                                          \
            std::fprintf(stderr, "FAILED: %s (line %d)\n", #c, __LINE__);                                    \
            ++failures;                                                                                      \
        }                                                                                                    \
    } while (0)

asio::awaitable<void> run(std::string connect, std::string path) {
    auto ex = co_await asio::this_coro::executor;
    zklock::session a{ex, {.connect = connect}}, b{ex, {.connect = connect}};
    co_await a.async_connect(asio::use_awaitable);
    co_await b.async_connect(asio::deferred);
    zklock::mutex ma{a, path}, mb{b, path};

    auto g = co_await ma.async_acquire(asio::use_awaitable);
    CHECK(g.owns_lock() && g.fencing_token() > 0);
    // (functions of the library, not of the headers: exported by libzklock.so)
    CHECK(zklock::validate_lock_path("no-leading-slash") == zklock::errc::path_not_absolute);
    CHECK(zklock::to_prometheus(a.metrics()).find("zklock_") != std::string::npos);
    CHECK(std::string(zklock::to_string(a.state())) == "connected");
    zklock::shared_mutex rw{a, path + "-rw"};
    auto r = co_await rw.async_acquire_shared(asio::use_awaitable);
    CHECK(r.owns_lock());
    co_await r.async_release(asio::use_awaitable);

    // timeout
    auto [ec1, g1] = co_await mb.async_acquire_for(200ms, asio::as_tuple(asio::use_awaitable));
    CHECK(ec1 == zklock::errc::acquire_timeout);

    // cancellation, plain callback
    asio::cancellation_signal sig;
    bool cancelled = false;
    mb.async_acquire(asio::bind_cancellation_slot(sig.slot(), [&](zklock::error_code ec, zklock::guard) {
        cancelled = ec == asio::error::operation_aborted;
    }));
    asio::steady_timer t(ex, 200ms);
    co_await t.async_wait(asio::use_awaitable);
    sig.emit(asio::cancellation_type::terminal);
    t.expires_after(200ms);
    co_await t.async_wait(asio::use_awaitable);
    CHECK(cancelled);

    // release, deferred; then b gets it with a callback
    co_await g.async_release(asio::deferred);
    bool got = false;
    zklock::guard gb;
    mb.async_acquire([&](zklock::error_code ec, zklock::guard x) {
        got = !ec;
        gb = std::move(x);
    });
    for (int i = 0; i < 100 && !got; ++i) {
        t.expires_after(20ms);
        co_await t.async_wait(asio::use_awaitable);
    }
    CHECK(got);
    co_await gb.async_release(asio::use_awaitable);
    for (const auto& p : {path, path + "-rw"}) {
        auto [ec, kids] = co_await zklock::async_get_children(a, p, asio::as_tuple(asio::use_awaitable));
        CHECK(kids.empty());
    }
}

int main() {
    // the library linked at run time is the one the headers describe
    std::printf("zklock %s (headers %s)\n", std::string(zklock::version()).c_str(), ZKLOCK_VERSION_STRING);
    CHECK(zklock::version() == ZKLOCK_VERSION_STRING);
    const char* c = std::getenv("ZK_CONNECT");
    if (!c) {
        std::fprintf(stderr, "ZK_CONNECT not set\n");
        return 2;
    }
    asio::io_context io;
    asio::co_spawn(io, run(c, "/zklock-test/consumer-" + std::to_string(std::rand())),
                   [](std::exception_ptr e) {
                       if (e) {
                           try {
                               std::rethrow_exception(e);
                           } catch (const std::exception& x) {
                               std::fprintf(stderr, "error: %s\n", x.what());
                               ++failures;
                           }
                       }
                   });
    io.run();
    std::printf("consumer: %s\n", failures ? "FAILED" : "OK");
    return failures ? 1 : 0;
}
