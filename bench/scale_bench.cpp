// Many locks in one process, for bench/scale.sh (issue 46): what holding costs the client and the
// ensemble as the held count grows, in two shapes, and the acquire throughput beside it.
//
// Hold mode (the default): --sessions M sessions (T = --session-timeout-ms), each holding
// --locks-per-session K locks, every lock on its own path (K = N, M = 1: one session holding N
// locks; K = 1 or 0: M sessions holding one lock each, or nothing). One io_context thread.
// Ramp-up: connects the sessions, then acquires the locks, --parallel (256) in flight at a time;
// a connect or an acquire that fails is counted (by its error message, printed on stderr as
//   ACQUIRE_ERROR <count> <message>
// lines) and the run goes on. Then prints on stdout
//   READY <sessions> <locks held> <connect_s> <acquire_s> <negotiated_T_ms> <acquire_failures>
//         <slice_path_chars> <slice_checks> <rss_before_bytes> <rss_objects_bytes>
// (slice_path_chars: the sum of the path lengths of the first min(held, 64) nodes of the first
// session that holds any: what one heartbeat's slice of checks names; rss_objects: the RSS once the
// session and mutex objects are made, before anything is sent). Then, while holding:
//   SIGUSR1  prints  MARK <t_s> <cpu_s> <rss_bytes> <heartbeats> <touches> <checks_sent>
//                         <requests> <lost> <not_connected>
//            (t_s: CLOCK_MONOTONIC; cpu_s: this process's user+system time (getrusage); rss: from
//            /proc/self/statm; counters summed over the sessions: session::statistics()'s
//            heartbeats, touches and requests(), and session_impl::heartbeat_checks_sent(), the
//            check ops the heartbeats carried; lost: held guards whose is_lost() is true)
//   SIGTERM/SIGINT  prints a last MARK, closes every session, exits (3 if a lock was lost or a
//            session left the connected state).
//
// Cycle mode (--cycle-seconds F): --sessions M sessions, each on a path of its own, acquire and
// release in a loop for F seconds (after a 1 s warm-up); prints
//   CYCLES <cycles> <seconds> <failures>
// (failures: acquires or releases that failed; their messages as ACQUIRE_ERROR lines on stderr).
//
//   zklock_scale --connect C [--sessions 1] [--locks-per-session 1000] [--session-timeout-ms 4000]
//                [--parallel 256] [--prefix /zklock-scale] [--cycle-seconds F]
#include <zklock.hpp>

#include "session/session_impl.hpp" // heartbeat_checks_sent(): the checks the heartbeats carried

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
#include <map>
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

static double mono_seconds() {
    timespec ts{};
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

static long long rss_bytes() { // resident pages (statm's second field) x page size
    long long size = 0, resident = 0;
    if (FILE* f = std::fopen("/proc/self/statm", "r")) {
        if (std::fscanf(f, "%lld %lld", &size, &resident) != 2) resident = 0;
        std::fclose(f);
    }
    return resident * ::sysconf(_SC_PAGESIZE);
}

int main(int argc, char** argv) {
    std::string connect = std::getenv("ZK_CONNECT") ? std::getenv("ZK_CONNECT") : "";
    std::string prefix = "/zklock-scale";
    int sessions_n = 1, per = 1000, parallel = 256, timeout_ms = 4'000;
    double cycle_secs = 0;
    bool warm = true; // session_options::keep_lease_warm
    for (int i = 1; i + 1 < argc; i += 2) {
        std::string k = argv[i], v = argv[i + 1];
        if (k == "--connect")
            connect = v;
        else if (k == "--sessions")
            sessions_n = std::atoi(v.c_str());
        else if (k == "--locks-per-session")
            per = std::atoi(v.c_str());
        else if (k == "--parallel")
            parallel = std::atoi(v.c_str());
        else if (k == "--session-timeout-ms")
            timeout_ms = std::atoi(v.c_str());
        else if (k == "--prefix")
            prefix = v;
        else if (k == "--cycle-seconds")
            cycle_secs = std::atof(v.c_str());
        else if (k == "--keep-lease-warm")
            warm = v != "0" && v != "false";
        else {
            std::fprintf(stderr, "zklock_scale: unknown option %s\n", k.c_str());
            return 2;
        }
    }
    if (connect.empty() || sessions_n < 1 || per < 0 || parallel < 1 || timeout_ms < 1) {
        std::fprintf(stderr, "usage: zklock_scale --connect HOST:PORT [--sessions M] [--locks-per-session K] "
                             "[--session-timeout-ms MS] [--parallel 256] [--prefix P] [--cycle-seconds F]\n");
        return 2;
    }
    const bool cycle = cycle_secs > 0;
    if (cycle) per = 1;
    const std::string base = prefix + "/run-" + std::to_string(::getpid());
    const long long rss0 = rss_bytes();
    asio::io_context io(1);
    std::vector<std::unique_ptr<zklock::session>> sessions;
    std::vector<std::unique_ptr<zklock::mutex>> mutexes; // session j's k-th: j * per + k
    const std::size_t total = static_cast<std::size_t>(sessions_n) * static_cast<std::size_t>(per);
    std::vector<zklock::guard> guards(total);
    std::map<std::string, long> errors;
    long failures = 0;
    int rc = 0;
    auto record = [&](const std::exception& x) {
        ++failures;
        ++errors[x.what()];
    };
    auto print_errors = [&] {
        for (auto& [m, c] : errors) std::fprintf(stderr, "ACQUIRE_ERROR %ld %s\n", c, m.c_str());
    };

    auto mark = [&] {
        std::uint64_t hb = 0, touches = 0, requests = 0, checks = 0;
        long lost = 0, not_connected = 0, over_liveness = 0;
        long long slowest_us = 0;
        for (auto& s : sessions) {
            auto st = s->statistics();
            // the lease's liveness premise (docs/lease.md, premise 5): writes answered within
            // ((f - 0.1) T - T/64) / 2; a session past it may report losses that did not happen
            const auto bound_us = static_cast<long long>(
                zklock::detail::session_lease::liveness_bound(zklock::loss_policy::default_lease_fraction) *
                static_cast<double>(
                    std::chrono::duration_cast<std::chrono::microseconds>(s->negotiated_timeout()).count()));
            slowest_us = std::max<long long>(slowest_us, st.slowest_write.count());
            over_liveness += st.slowest_write.count() > bound_us;
            hb += st.heartbeats;
            touches += st.touches;
            requests += st.requests();
            checks += s->impl()->heartbeat_checks_sent();
            not_connected += s->state() != zklock::session_state::connected;
        }
        for (auto& g : guards) lost += g && g.is_lost();
        std::printf("MARK %.6f %.3f %lld %llu %llu %llu %llu %ld %ld %lld %ld\n", mono_seconds(),
                    cpu_seconds(), rss_bytes(), static_cast<unsigned long long>(hb),
                    static_cast<unsigned long long>(touches), static_cast<unsigned long long>(checks),
                    static_cast<unsigned long long>(requests), lost, not_connected, slowest_us,
                    over_liveness);
        std::fflush(stdout);
        if (lost || not_connected) rc = 3;
    };

    auto fail = [](std::exception_ptr e) {
        if (e) try {
                std::rethrow_exception(e);
            } catch (const std::exception& x) {
                std::fprintf(stderr, "zklock_scale: %s\n", x.what());
                std::exit(1);
            }
    };
    asio::signal_set sigs(io, SIGUSR1, SIGTERM, SIGINT);
    sigs.add(SIGUSR2);
    asio::co_spawn(
        io,
        [&]() -> asio::awaitable<void> {
            auto ex = co_await asio::this_coro::executor;
            sessions.reserve(static_cast<std::size_t>(sessions_n));
            mutexes.reserve(total);
            for (int j = 0; j < sessions_n; ++j) {
                zklock::session_options o;
                o.connect = connect;
                o.session_timeout = std::chrono::milliseconds(timeout_ms);
                o.keep_lease_warm = warm;
                sessions.push_back(std::make_unique<zklock::session>(ex, o));
                for (int k = 0; k < per; ++k)
                    mutexes.push_back(std::make_unique<zklock::mutex>(
                        *sessions.back(),
                        base + (per == 1 ? "/s-" + std::to_string(j) : "/l-" + std::to_string(j * per + k))));
            }
            const long long rss_objects = rss_bytes(); // the sessions and mutexes made, nothing sent
            // `parallel` coroutines take the items in turn
            asio::steady_timer t(ex);
            auto in_turn = [&](std::size_t count, auto step) -> asio::awaitable<void> {
                std::size_t next = 0;
                int running = 0;
                for (std::size_t k = 0; k < std::min<std::size_t>(static_cast<std::size_t>(parallel), count);
                     ++k) {
                    ++running;
                    asio::co_spawn(
                        ex,
                        [&]() -> asio::awaitable<void> {
                            while (next < count) co_await step(next++);
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
            std::string first_connect_failure;
            long connected = 0;
            std::vector<char> up(sessions.size(), 0);
            co_await in_turn(sessions.size(), [&](std::size_t i) -> asio::awaitable<void> {
                try {
                    co_await sessions[i]->async_connect(use_awaitable);
                    ++connected;
                    up[i] = 1;
                } catch (const std::exception& x) {
                    // (counted with the acquire errors, as "connect: ..."; the run goes on: that
                    // session's acquires then fail, and it counts as not connected)
                    ++failures;
                    ++errors[std::string("connect: ") + x.what()];
                    if (first_connect_failure.empty())
                        first_connect_failure =
                            "the first at " +
                            std::to_string(std::chrono::duration<double>(clk::now() - c0).count()) +
                            " s, in session " + std::to_string(i) + "'s turn of " +
                            std::to_string(sessions.size()) + ", " + std::to_string(connected) +
                            " connected by then";
                }
            });
            const auto c1 = clk::now();
            if (!first_connect_failure.empty())
                std::fprintf(stderr, "ACQUIRE_ERROR 0 (connects: %s)\n", first_connect_failure.c_str());

            if (cycle) {
                // each session: acquire and release its own lock in a loop
                bool counting = false, stop = false;
                long cycles = 0;
                for (std::size_t i = 0; i < mutexes.size(); ++i)
                    asio::co_spawn(
                        ex,
                        [&, i]() -> asio::awaitable<void> {
                            while (!stop) {
                                try {
                                    auto g = co_await mutexes[i]->async_acquire(use_awaitable);
                                    co_await g.async_release(use_awaitable);
                                    if (counting && !stop) ++cycles;
                                } catch (const std::exception& x) {
                                    if (counting) record(x);
                                }
                            }
                        },
                        asio::detached);
                t.expires_after(std::chrono::seconds(1));
                co_await t.async_wait(use_awaitable);
                counting = true;
                const auto f0 = clk::now();
                t.expires_after(std::chrono::milliseconds(static_cast<long long>(cycle_secs * 1000)));
                co_await t.async_wait(use_awaitable);
                stop = true;
                std::printf("CYCLES %ld %.3f %ld\n", cycles,
                            std::chrono::duration<double>(clk::now() - f0).count(), failures);
                std::fflush(stdout);
                print_errors();
                t.expires_after(std::chrono::milliseconds(500)); // (the loops' last cycles)
                co_await t.async_wait(use_awaitable);
            } else {
                co_await in_turn(total, [&](std::size_t i) -> asio::awaitable<void> {
                    if (!up[i / static_cast<std::size_t>(per)]) {
                        ++failures;
                        ++errors["acquire not tried: its session did not connect"];
                        co_return;
                    }
                    try {
                        guards[i] = co_await mutexes[i]->async_acquire(use_awaitable);
                    } catch (const std::exception& x) {
                        record(x);
                    }
                });
                const auto c2 = clk::now();
                // one heartbeat's slice: the first holding session's first min(held, 64) nodes
                std::size_t chars = 0, checks = 0;
                const std::size_t slice =
                    per > 1 ? std::min<std::size_t>(static_cast<std::size_t>(per),
                                                    zklock::detail::session_impl::heartbeat_checks)
                            : 1;
                for (std::size_t i = 0; i < total && checks < slice; ++i) {
                    if (!guards[i]) continue;
                    if (per > 1 && i >= static_cast<std::size_t>(per)) break; // (the first session's only)
                    chars += guards[i].node_path().size();
                    ++checks;
                }
                long held = 0;
                for (auto& g : guards) held += static_cast<bool>(g);
                print_errors();
                std::printf("READY %d %ld %.3f %.3f %lld %ld %zu %zu %lld %lld\n", sessions_n, held,
                            std::chrono::duration<double>(c1 - c0).count(),
                            std::chrono::duration<double>(c2 - c1).count(),
                            static_cast<long long>(sessions.front()->negotiated_timeout().count()), failures,
                            chars, checks, rss0, rss_objects);
                std::fflush(stdout);
                std::fprintf(stderr,
                             "zklock_scale: %d sessions connected in %.2f s, %ld locks acquired in %.2f s "
                             "(%ld failed; T = %lld ms)\n",
                             sessions_n, std::chrono::duration<double>(c1 - c0).count(), held,
                             std::chrono::duration<double>(c2 - c1).count(), failures,
                             static_cast<long long>(sessions.front()->negotiated_timeout().count()));
                for (;;) {
                    int sig = co_await sigs.async_wait(use_awaitable);
                    if (sig == SIGUSR2) {
                        // A held node deleted by another session (docs/lease.md, "A deleted
                        // node"): the first session's middle one; prints DETECTED <seconds from
                        // the delete's reply to is_lost()> <1 if reported, 0 if not within
                        // 2 ceil(N/64) periods + 10 s> <the stated bound, s>
                        const std::size_t n = std::min<std::size_t>(total, static_cast<std::size_t>(per));
                        auto& g = guards[n / 2];
                        const double period =
                            0.1 *
                            std::chrono::duration<double>(sessions.front()->negotiated_timeout()).count();
                        const double bound =
                            static_cast<double>((n + zklock::detail::session_impl::heartbeat_checks - 1) /
                                                zklock::detail::session_impl::heartbeat_checks) *
                            period;
                        zklock::session_options o;
                        o.connect = connect;
                        zklock::session other(ex, o);
                        co_await other.async_connect(use_awaitable);
                        co_await zklock::async_break_lock(other, g.node_path(), use_awaitable);
                        const auto d0 = clk::now();
                        const auto limit = std::chrono::duration<double>(2 * bound + 10);
                        while (!g.is_lost() && clk::now() - d0 < limit) {
                            t.expires_after(std::chrono::milliseconds(5));
                            co_await t.async_wait(use_awaitable);
                        }
                        std::printf("DETECTED %.3f %d %.3f\n",
                                    std::chrono::duration<double>(clk::now() - d0).count(),
                                    g.is_lost() ? 1 : 0, bound);
                        std::fflush(stdout);
                        co_await other.async_close(use_awaitable);
                        continue;
                    }
                    mark();
                    if (sig != SIGUSR1) break;
                }
            }
            // close all at once (the server deletes the lock nodes)
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
