// N idle holders in one process (one io_context thread): each its own session holding its own
// lock on its own path, for bench/holders_cost.sh, which measures what their lease heartbeats
// cost the ensemble.
// Ramp-up: connects the N sessions and acquires the N locks (a few at a time), then prints
//   READY <holders> <connect_s> <acquire_s> <negotiated_timeout_ms>
// on stdout. Then, while holding:
//   SIGUSR1  prints  MARK <t_s> <heartbeats> <touches> <lease_renewals> <requests> <cpu_s> <lost> <not_connected>
//            (t_s: CLOCK_MONOTONIC; counters summed over the sessions; cpu_s: this process's user+system)
//   SIGTERM/SIGINT  prints a last MARK, closes every session (the server deletes the nodes), exits
//            (3 if a lock was lost or a session left the connected state while holding).
//   zklock_holders --connect C [--holders 100] [--session-timeout-ms 10000] [--parallel 64]
#include <zklock.hpp>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <memory>
#include <string>
#include <vector>

namespace asio = boost::asio;
using asio::use_awaitable;
using clk = std::chrono::steady_clock;

static double cpu_seconds() {
    rusage ru{};
    getrusage(RUSAGE_SELF, &ru);
    return ru.ru_utime.tv_sec + ru.ru_stime.tv_sec + (ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
}

static double mono_seconds() { // CLOCK_MONOTONIC, as the script's date +%s.%N is not: only differences matter
    timespec ts{};
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

int main(int argc, char** argv) {
    std::string connect = std::getenv("ZK_CONNECT") ? std::getenv("ZK_CONNECT") : "";
    int holders = 100, parallel = 64, timeout_ms = 10'000;
    for (int i = 1; i + 1 < argc; i += 2) {
        std::string k = argv[i], v = argv[i + 1];
        if (k == "--connect")
            connect = v;
        else if (k == "--holders")
            holders = std::atoi(v.c_str());
        else if (k == "--parallel")
            parallel = std::atoi(v.c_str());
        else if (k == "--session-timeout-ms")
            timeout_ms = std::atoi(v.c_str());
        else {
            std::fprintf(stderr, "zklock_holders: unknown option %s\n", k.c_str());
            return 2;
        }
    }
    if (connect.empty() || holders < 1 || parallel < 1 || timeout_ms < 1) {
        std::fprintf(stderr, "usage: zklock_holders --connect HOST:PORT [--holders N] [--session-timeout-ms "
                             "MS] [--parallel N]\n");
        return 2;
    }
    const std::string base = "/zklock-holders/run-" + std::to_string(::getpid());
    asio::io_context io(1);
    std::vector<std::unique_ptr<zklock::session>> sessions;
    std::vector<std::unique_ptr<zklock::mutex>> mutexes;
    std::vector<zklock::guard> guards(static_cast<std::size_t>(holders));
    int rc = 0;

    auto mark = [&] {
        zklock::session_statistics sum;
        std::uint64_t requests = 0;
        long lost = 0, not_connected = 0;
        for (auto& s : sessions) {
            auto st = s->statistics();
            sum.heartbeats += st.heartbeats;
            sum.touches += st.touches;
            sum.lease_renewals += st.lease_renewals;
            requests += st.requests();
            not_connected += s->state() != zklock::session_state::connected;
        }
        for (auto& g : guards) lost += !g || g.is_lost();
        std::printf("MARK %.6f %llu %llu %llu %llu %.3f %ld %ld\n", mono_seconds(),
                    static_cast<unsigned long long>(sum.heartbeats),
                    static_cast<unsigned long long>(sum.touches),
                    static_cast<unsigned long long>(sum.lease_renewals),
                    static_cast<unsigned long long>(requests), cpu_seconds(), lost, not_connected);
        std::fflush(stdout);
        if (lost || not_connected) rc = 3;
    };

    auto fail = [](std::exception_ptr e) {
        if (e) try {
                std::rethrow_exception(e);
            } catch (const std::exception& x) {
                std::fprintf(stderr, "zklock_holders: %s\n", x.what());
                std::exit(1);
            }
    };
    // before the ramp-up: a signal that comes early waits in the set instead of killing the process
    asio::signal_set sigs(io, SIGUSR1, SIGTERM, SIGINT);
    asio::co_spawn(
        io,
        [&]() -> asio::awaitable<void> {
            auto ex = co_await asio::this_coro::executor;
            sessions.reserve(static_cast<std::size_t>(holders));
            for (int i = 0; i < holders; ++i) {
                zklock::session_options o;
                o.connect = connect;
                o.session_timeout = std::chrono::milliseconds(timeout_ms);
                sessions.push_back(std::make_unique<zklock::session>(ex, o));
                mutexes.push_back(
                    std::make_unique<zklock::mutex>(*sessions.back(), base + "/h-" + std::to_string(i)));
            }
            // `parallel` coroutines take the sessions in turn: connect all, then acquire all
            asio::steady_timer t(ex);
            auto in_turn = [&](auto step) -> asio::awaitable<void> {
                int next = 0, running = 0;
                for (int k = 0; k < std::min(parallel, holders); ++k) {
                    ++running;
                    asio::co_spawn(
                        ex,
                        [&]() -> asio::awaitable<void> {
                            while (next < holders) co_await step(next++);
                            --running;
                        },
                        fail);
                }
                while (running > 0) {
                    t.expires_after(std::chrono::milliseconds(5));
                    co_await t.async_wait(use_awaitable);
                }
            };
            const auto c0 = clk::now();
            co_await in_turn([&](int i) -> asio::awaitable<void> {
                co_await sessions[static_cast<std::size_t>(i)]->async_connect(use_awaitable);
            });
            const auto c1 = clk::now();
            co_await in_turn([&](int i) -> asio::awaitable<void> {
                guards[static_cast<std::size_t>(i)] =
                    co_await mutexes[static_cast<std::size_t>(i)]->async_acquire(use_awaitable);
            });
            const auto c2 = clk::now();
            std::printf("READY %d %.3f %.3f %lld\n", holders, std::chrono::duration<double>(c1 - c0).count(),
                        std::chrono::duration<double>(c2 - c1).count(),
                        static_cast<long long>(sessions.front()->negotiated_timeout().count()));
            std::fflush(stdout);
            std::fprintf(stderr,
                         "zklock_holders: %d sessions connected in %.2f s, %d locks acquired in %.2f s (T = "
                         "%lld ms)\n",
                         holders, std::chrono::duration<double>(c1 - c0).count(), holders,
                         std::chrono::duration<double>(c2 - c1).count(),
                         static_cast<long long>(sessions.front()->negotiated_timeout().count()));

            for (;;) {
                int sig = co_await sigs.async_wait(use_awaitable);
                mark();
                if (sig != SIGUSR1) break;
            }
            // close all at once (each close is a round trip; the server deletes the lock nodes)
            int closing = 0;
            for (auto& s : sessions) {
                ++closing;
                s->async_close([&](zklock::error_code) { --closing; });
            }
            while (closing > 0) {
                t.expires_after(std::chrono::milliseconds(5));
                co_await t.async_wait(use_awaitable);
            }
            guards.clear();
            mutexes.clear();
        },
        fail);
    io.run();
    sessions.clear();
    return rc;
}
