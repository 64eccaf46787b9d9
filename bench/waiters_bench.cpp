// Many waiters (coroutines) on one lock in one process, one session: memory per waiter, wakeups per release,
// time to drain the queue, and a mass cancellation that must leave no node behind.
// With --handoff N the waiters queue locally behind one node (mutex_options::local_handoff): a
// release then wakes the next local waiter without a watch event.
//   zklock_waiters_bench --connect C [--waiters 10000] [--handoff N] [--metrics on|off]
#include <zklock.hpp>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

namespace asio = boost::asio;
using asio::use_awaitable;
using clk = std::chrono::steady_clock;

static long rss_kb() { // current resident set, from /proc
    std::ifstream in("/proc/self/status");
    std::string line;
    while (std::getline(in, line))
        if (line.rfind("VmRSS:", 0) == 0) return std::atol(line.c_str() + 6);
    return 0;
}

int main(int argc, char** argv) {
    std::string connect = std::getenv("ZK_CONNECT") ? std::getenv("ZK_CONNECT") : "";
    int n = 10000;
    std::uint32_t handoff = 0;
    bool metrics = true;
    for (int i = 1; i + 1 < argc; i += 2) {
        std::string k = argv[i], v = argv[i + 1];
        if (k == "--connect")
            connect = v;
        else if (k == "--waiters")
            n = std::atoi(v.c_str());
        else if (k == "--handoff")
            handoff = static_cast<std::uint32_t>(std::atoi(v.c_str()));
        else if (k == "--metrics" && (v == "on" || v == "off"))
            metrics = v == "on";
        else {
            std::fprintf(stderr, "zklock_waiters_bench: unknown option or value: %s %s\n", k.c_str(),
                         v.c_str());
            return 2;
        }
    }
    if (connect.empty() || n < 1) {
        std::fprintf(stderr, "usage: zklock_waiters_bench --connect HOST:PORT [--waiters N] [--handoff N] "
                             "[--metrics on|off]\n");
        return 2;
    }
    const std::string path = "/zklock-bench/waiters-" + std::to_string(::getpid());
    asio::io_context io(1);
    int rc = 0;
    asio::co_spawn(
        io,
        [&]() -> asio::awaitable<void> {
            auto ex = co_await asio::this_coro::executor;
            zklock::session_options o;
            o.connect = connect;
            o.session_timeout = std::chrono::seconds(30);
            o.metrics = metrics;
            zklock::session zk{ex, o};
            co_await zk.async_connect(use_awaitable);
            zklock::mutex_options mo;
            mo.local_handoff = handoff;
            zklock::mutex m{zk, path, mo};
            asio::steady_timer t(ex);
            auto wait_until = [&](auto pred) -> asio::awaitable<void> {
                while (!pred()) {
                    t.expires_after(std::chrono::milliseconds(20));
                    co_await t.async_wait(use_awaitable);
                }
            };
            int granted = 0, failed = 0;
            // Waits until the n waiters just started are in line: each plain waiter watches its
            // predecessor (one getData); local waiters are queued once a try_acquire issued after
            // them has been refused (the session's strand runs them in order).
            auto all_queued = [&](std::uint64_t get_data_before) -> asio::awaitable<void> {
                if (handoff == 0) {
                    co_await wait_until([&] {
                        return zk.statistics().get_data - get_data_before >= static_cast<std::uint64_t>(n) ||
                               failed;
                    });
                } else {
                    auto [ec, g] = co_await m.async_try_acquire(asio::as_tuple(use_awaitable));
                    if (ec != zklock::errc::lock_busy)
                        std::fprintf(stderr, "waiters: try_acquire: %s\n", ec.message().c_str());
                }
            };
            auto holder = co_await m.async_acquire(use_awaitable);
            auto g_before = zk.statistics().get_data;

            // 1. queue n waiters, measure the memory they take
            long rss0 = rss_kb();
            auto q0 = clk::now();
            int started = 0;
            for (int i = 0; i < n; ++i)
                asio::co_spawn(
                    ex,
                    [&]() -> asio::awaitable<void> {
                        ++started;
                        auto [ec, g] = co_await m.async_acquire(asio::as_tuple(use_awaitable));
                        if (ec) {
                            ++failed;
                            co_return;
                        }
                        ++granted;
                        // hand it on at once: release in the background, as a busy server would
                        g.release_in_background();
                    },
                    asio::detached);
            co_await wait_until([&] { return started == n; });
            std::size_t queued = 0;
            co_await all_queued(g_before);
            auto [ec0, kids] = co_await zklock::async_get_children(zk, path, asio::as_tuple(use_awaitable));
            queued = kids.size();
            double queue_s = std::chrono::duration<double>(clk::now() - q0).count();
            long rss1 = rss_kb();

            // 2. drain: every release must wake exactly one waiter
            auto w0 = zk.statistics().watch_events;
            auto d0 = clk::now();
            co_await holder.async_release(use_awaitable);
            co_await wait_until([&] { return granted + failed >= n; });
            double drain_s = std::chrono::duration<double>(clk::now() - d0).count();
            auto wakeups = zk.statistics().watch_events - w0;

            // 3. mass cancellation: n waiters queued behind a holder, all cancelled
            auto holder2 = co_await m.async_acquire(use_awaitable);
            std::vector<asio::cancellation_signal> sigs(static_cast<std::size_t>(n));
            int aborted = 0, other = 0;
            auto g0 = zk.statistics().get_data;
            started = 0;
            for (int i = 0; i < n; ++i)
                asio::co_spawn(
                    ex,
                    [&, i]() -> asio::awaitable<void> {
                        ++started;
                        auto [ec, g] = co_await m.async_acquire(asio::bind_cancellation_slot(
                            sigs[static_cast<std::size_t>(i)].slot(), asio::as_tuple(use_awaitable)));
                        (ec == asio::error::operation_aborted ? aborted : other)++;
                    },
                    asio::detached);
            co_await wait_until([&] { return started == n; });
            co_await all_queued(g0);
            auto c0 = clk::now();
            for (auto& s : sigs) s.emit(asio::cancellation_type::terminal);
            co_await wait_until([&] { return aborted + other >= n; });
            double cancel_s = std::chrono::duration<double>(clk::now() - c0).count();
            co_await holder2.async_release(use_awaitable);
            auto [ec1, left] = co_await zklock::async_get_children(zk, path, asio::as_tuple(use_awaitable));

            std::printf(
                "{\"waiters\":%d,\"queued_nodes\":%zu,\"queue_s\":%.2f,\"client_bytes_per_waiter\":%.0f,"
                "\"drain_s\":%.2f,\"grants_per_s\":%.0f,\"handoff\":%u,\"watch_events\":%llu,\"watch_events_"
                "per_release\":%.3f,"
                "\"cancel_s\":%.2f,\"aborted\":%d,\"nodes_left\":%zu}\n",
                n, queued, queue_s, (rss1 - rss0) * 1024.0 / n, drain_s, n / drain_s, handoff,
                static_cast<unsigned long long>(wakeups), double(wakeups) / n, cancel_s, aborted,
                left.size());
            // Plain: each release wakes exactly one waiter through one watch event. Hand-off: each
            // release completes exactly one local waiter (a waiter is completed once, by construction)
            // and ZooKeeper is involved once per node, i.e. per `handoff` grants.
            const bool wakeups_ok = handoff == 0 ? wakeups == static_cast<std::uint64_t>(n)
                                                 : wakeups <= static_cast<std::uint64_t>(n) / handoff + 2;
            rc = (granted == n && left.empty() && aborted == n && wakeups_ok) ? 0 : 1;
            co_await zk.async_close(use_awaitable);
        },
        [&](std::exception_ptr e) {
            if (e) try {
                    std::rethrow_exception(e);
                } catch (const std::exception& x) {
                    std::fprintf(stderr, "waiters: %s\n", x.what());
                    rc = 2;
                }
        });
    io.run();
    return rc;
}
