// The safe forms of docs/pitfalls.md, run by the suite against a server (examples.Pitfalls):
// GCC 12's coroutine miscompiles avoided, background loops stopped, a leader that stands again
// after a loss. Exits 0 when every step did what the page says.
//   zklock_pitfalls [connect-string]      (default: $ZK_CONNECT or 127.0.0.1:2181)
#include <zklock.hpp>

#include <tuple>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <cstdlib>
#include <iostream>
#include <memory>
#include <optional>
#include <string>

namespace asio = boost::asio;
using namespace std::chrono_literals;

namespace {

int failures = 0;
void check(bool ok, const char* what) {
    std::cout << (ok ? "ok:   " : "FAIL: ") << what << "\n";
    if (!ok) ++failures;
}

// A helper of the application's own, taking its settings by value.
struct connect_settings {
    std::string connect;
    std::chrono::milliseconds connect_timeout{10s};
};
asio::awaitable<zklock::error_code> try_connect(zklock::session& zk, connect_settings s) {
    (void)s; // (the session was made with them; a real helper would log or retry)
    auto [ec] = co_await zk.async_connect(asio::as_tuple(asio::use_awaitable));
    co_return ec;
}

// Pitfall 3: a leader that stands again after each loss, until stopped.
asio::awaitable<void> lead_until_stopped(zklock::session& zk, std::string path, std::string me,
                                         std::shared_ptr<int> terms) {
    zklock::election e{zk, path};
    asio::steady_timer pause{zk.get_executor()};
    for (;;) {
        auto [ec, lead] = co_await e.async_campaign(me, asio::as_tuple(asio::use_awaitable));
        if (ec == asio::error::operation_aborted) co_return; // stopped
        if (ec) {                                            // disconnected, expired: again, soon
            pause.expires_after(500ms);
            co_await pause.async_wait(asio::as_tuple(asio::use_awaitable));
            continue;
        }
        ++*terms; // leading: start the leader's work here, with lead.fencing_token()
        zklock::error_code lost;
        for (;;) {
            std::tie(lost) = co_await lead.async_wait_lost(asio::as_tuple(asio::use_awaitable));
            // stop the leader's work first (lost: the node is gone, or the lease lapsed)
            if (lost == asio::error::operation_aborted) break; // stopped while leading
            auto [verdict] = co_await lead.async_wait_verdict(asio::as_tuple(asio::use_awaitable));
            if (verdict) break; // lost for good
            // regained (a failover the session survived): the same term, the same fencing
            // token; start the leader's work again
        }
        co_await lead.async_resign(asio::as_tuple(asio::use_awaitable));
        if (lost == asio::error::operation_aborted) co_return; // stopped
    }
}

// Pitfall 2: a loop that logs every state of the session; it ends with the session.
asio::awaitable<void> log_states(zklock::session& zk, std::shared_ptr<bool> ended) {
    auto st = zk.state();
    for (;;) {
        auto [ec, next] = co_await zk.async_wait_state(st, asio::as_tuple(asio::use_awaitable));
        if (ec) break; // errc::session_closed: no state follows closed; operation_aborted: stopped
        st = next;
    }
    *ended = true;
}

asio::awaitable<void> run(std::string connect) {
    // Pitfall 1: GCC 12 and braced temporaries in a co_await's full expression.
    // The executor in a statement of its own, not inside the session's braced initializer:
    auto ex = co_await asio::this_coro::executor;
    zklock::session zk{ex, {.connect = connect, .session_timeout = 4s}};
    // The helper's settings named first, not a braced temporary in the call:
    connect_settings settings{.connect = connect, .connect_timeout = 3s};
    auto ec = co_await try_connect(zk, settings);
    check(!ec, "connected, the helper's settings named in a statement of their own");
    // The mutex named first, not a temporary whose member is awaited:
    zklock::mutex m{zk, "/zklock-examples/pitfalls/lock"};
    auto g = co_await m.async_acquire(asio::use_awaitable);
    check(g.owns_lock(), "acquired through a named mutex");
    co_await g.async_release(asio::use_awaitable);

    // Pitfall 2: background loops, stopped before the session goes.
    auto ended = std::make_shared<bool>(false);
    asio::co_spawn(ex, log_states(zk, ended), asio::detached);
    auto terms = std::make_shared<int>(0);
    asio::cancellation_signal stop;
    auto stopped = std::make_shared<bool>(false);
    asio::co_spawn(ex, lead_until_stopped(zk, "/zklock-examples/pitfalls/leader", "me", terms),
                   asio::bind_cancellation_slot(stop.slot(), [stopped](std::exception_ptr) { *stopped = true; }));

    // Pitfall 3: the leader loses its leadership (an operator breaks its node) and stands again.
    asio::steady_timer t{ex};
    for (int i = 0; i < 50 && *terms < 1; ++i) {
        t.expires_after(100ms);
        co_await t.async_wait(asio::use_awaitable);
    }
    check(*terms == 1, "the loop leads");
    zklock::election e{zk, "/zklock-examples/pitfalls/leader"};
    auto leader = co_await e.async_leader(asio::use_awaitable);
    if (leader) co_await zklock::async_break_lock(zk, leader->node_path, asio::use_awaitable);
    for (int i = 0; i < 50 && *terms < 2; ++i) {
        t.expires_after(100ms);
        co_await t.async_wait(asio::use_awaitable);
    }
    check(*terms == 2, "after the loss it stood again and leads again");

    // Stop the leader's loop (its wait for a loss, or its campaign, completes with
    // operation_aborted and the loop returns), then close the session: the state logger ends.
    stop.emit(asio::cancellation_type::terminal);
    for (int i = 0; i < 50 && !*stopped; ++i) {
        t.expires_after(100ms);
        co_await t.async_wait(asio::use_awaitable);
    }
    check(*stopped, "the leader's loop stopped on the signal");
    co_await zk.async_close(asio::use_awaitable);
    for (int i = 0; i < 50 && !*ended; ++i) {
        t.expires_after(100ms);
        co_await t.async_wait(asio::use_awaitable);
    }
    check(*ended, "the state logger ended with the session");
}

} // namespace

int main(int argc, char** argv) {
    const char* env = std::getenv("ZK_CONNECT");
    std::string connect = argc > 1 ? argv[1] : env ? env : "127.0.0.1:2181";
    asio::io_context io;
    asio::co_spawn(io, run(connect), [](std::exception_ptr e) {
        if (!e) return;
        try { std::rethrow_exception(e); } catch (const std::exception& x) { std::cerr << "error: " << x.what() << "\n"; std::exit(1); }
    });
    io.run(); // returns once every loop has ended: none is left waiting
    return failures == 0 ? 0 : 1;
}
