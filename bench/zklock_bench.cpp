// zklock benchmark driver: W coroutines over S sessions contend for L locks for D seconds.
// Prints one JSON object (and a readable line on stderr): cycles/s, acquire latency, requests
// per cycle (from the sessions' own counters), client CPU per cycle, peak RSS, and whether the
// recorded hold intervals overlapped.
// With --handoff N the coroutines of a session hand the lock to each other (mutex_options::local_handoff);
// then it also reports the most grants one node served and each session's share of the grants
// (sessions stand for processes: none may be starved).
//   zklock_bench --connect C [--workers 8] [--sessions 8] [--locks 1] [--hold-ms 0] [--duration 5]
//                [--handoff N] [--strategy predecessor|children|unique] [--release background] [--label x]
#include <zklock.hpp>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace asio = boost::asio;
using asio::use_awaitable;
using clk = std::chrono::steady_clock;

struct config {
    std::string connect, label = "zklock";
    zklock::lock_strategy strategy = zklock::lock_strategy::predecessor;
    bool background_release = false; // release_in_background(): the next request is queued behind the delete
    int workers = 8, sessions = 8, locks = 1, hold_ms = 0;
    std::uint32_t handoff = 0;
    double duration = 5, warmup = 1;
};

struct hold { clk::time_point start, end; };

static double cpu_seconds() {
    rusage ru{};
    getrusage(RUSAGE_SELF, &ru);
    return ru.ru_utime.tv_sec + ru.ru_stime.tv_sec + (ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
}

int main(int argc, char** argv) {
    config cfg;
    if (const char* e = std::getenv("ZK_CONNECT")) cfg.connect = e;
    for (int i = 1; i + 1 < argc; i += 2) {
        std::string k = argv[i], v = argv[i + 1];
        if (k == "--connect") cfg.connect = v;
        else if (k == "--workers") cfg.workers = std::atoi(v.c_str());
        else if (k == "--sessions") cfg.sessions = std::atoi(v.c_str());
        else if (k == "--locks") cfg.locks = std::atoi(v.c_str());
        else if (k == "--hold-ms") cfg.hold_ms = std::atoi(v.c_str());
        else if (k == "--duration") cfg.duration = std::atof(v.c_str());
        else if (k == "--warmup") cfg.warmup = std::atof(v.c_str());
        else if (k == "--label") cfg.label = v;
        else if (k == "--handoff") cfg.handoff = static_cast<std::uint32_t>(std::atoi(v.c_str()));
        else if (k == "--release") cfg.background_release = v == "background";
        else if (k == "--strategy") {
            if (v == "predecessor") cfg.strategy = zklock::lock_strategy::predecessor;
            else if (v == "children") cfg.strategy = zklock::lock_strategy::watch_children;
            else if (v == "unique") cfg.strategy = zklock::lock_strategy::unique_node;
            else { std::fprintf(stderr, "unknown strategy %s\n", v.c_str()); return 2; }
        }
        else { std::fprintf(stderr, "unknown option %s\n", k.c_str()); return 2; }
    }
    if (cfg.connect.empty() || cfg.workers < 1 || cfg.sessions < 1 || cfg.locks < 1) {
        std::fprintf(stderr, "usage: zklock_bench --connect HOST:PORT [--workers N] [--sessions N] [--locks N] [--hold-ms N] [--duration S]\n");
        return 2;
    }
    cfg.sessions = std::min(cfg.sessions, cfg.workers);
    const std::string base = "/zklock-bench/run-" + std::to_string(::getpid());

    asio::io_context io(1);
    std::vector<std::unique_ptr<zklock::session>> sessions;
    std::vector<double> latencies_us;
    std::map<int, std::vector<hold>> holds;
    long cycles = 0;
    std::vector<long> session_cycles(static_cast<std::size_t>(std::max(cfg.sessions, 1)));
    std::uint32_t max_node_grants = 0;
    bool measuring = false, stop = false;
    int running = 0;
    double cpu0 = 0, wall = 0;
    std::uint64_t req0 = 0, req1 = 0, watch0 = 0, watch1 = 0;
    clk::time_point t_start;
    auto total_requests = [&] {
        std::uint64_t n = 0;
        for (auto& s : sessions) n += s->statistics().requests();
        return n;
    };
    auto total_watch_events = [&] {
        std::uint64_t n = 0;
        for (auto& s : sessions) n += s->statistics().watch_events;
        return n;
    };

    asio::co_spawn(io, [&]() -> asio::awaitable<void> {
        auto ex = co_await asio::this_coro::executor;
        for (int i = 0; i < cfg.sessions; ++i) {
            zklock::session_options o;
            o.connect = cfg.connect;
            sessions.push_back(std::make_unique<zklock::session>(ex, o));
            co_await sessions.back()->async_connect(use_awaitable);
        }
        for (int w = 0; w < cfg.workers; ++w) {
            ++running;
            asio::co_spawn(ex, [&, w]() -> asio::awaitable<void> {
                int lock_no = w % cfg.locks;
                zklock::mutex_options mo;
                mo.strategy = cfg.strategy;
                mo.local_handoff = cfg.handoff;
                zklock::mutex m(*sessions[w % cfg.sessions], base + "/lock-" + std::to_string(lock_no), mo);
                asio::steady_timer t(co_await asio::this_coro::executor);
                while (!stop) {
                    auto t0 = clk::now();
                    auto g = co_await m.async_acquire(use_awaitable);
                    auto t1 = clk::now();
                    if (cfg.hold_ms > 0) {
                        t.expires_after(std::chrono::milliseconds(cfg.hold_ms));
                        co_await t.async_wait(use_awaitable);
                    }
                    auto t2 = clk::now();
                    if (measuring) {
                        latencies_us.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count());
                        holds[lock_no].push_back({t1, t2});
                        ++cycles;
                        ++session_cycles[static_cast<std::size_t>(w % cfg.sessions)];
                        max_node_grants = std::max(max_node_grants, g.local_grant() + 1);
                    }
                    if (cfg.background_release)
                        g.release_in_background();
                    else
                        co_await g.async_release(use_awaitable);
                }
                --running;
            }, asio::detached);
        }
        asio::steady_timer t(ex);
        t.expires_after(std::chrono::duration_cast<clk::duration>(std::chrono::duration<double>(cfg.warmup)));
        co_await t.async_wait(use_awaitable);
        measuring = true;
        t_start = clk::now();
        cpu0 = cpu_seconds();
        req0 = total_requests();
        watch0 = total_watch_events();
        t.expires_after(std::chrono::duration_cast<clk::duration>(std::chrono::duration<double>(cfg.duration)));
        co_await t.async_wait(use_awaitable);
        measuring = false;
        wall = std::chrono::duration<double>(clk::now() - t_start).count();
        req1 = total_requests();
        watch1 = total_watch_events();
        cpu0 = cpu_seconds() - cpu0;
        stop = true;
        while (running > 0) {
            t.expires_after(std::chrono::milliseconds(5));
            co_await t.async_wait(use_awaitable);
        }
        for (auto& s : sessions) co_await s->async_close(use_awaitable);
    }, [](std::exception_ptr e) {
        if (e) try { std::rethrow_exception(e); } catch (const std::exception& x) { std::fprintf(stderr, "bench: %s\n", x.what()); std::exit(1); }
    });
    io.run();
    sessions.clear();

    std::sort(latencies_us.begin(), latencies_us.end());
    auto pct = [&](double p) {
        if (latencies_us.empty()) return 0.0;
        return latencies_us[std::min(latencies_us.size() - 1, static_cast<std::size_t>(p * latencies_us.size()))];
    };
    long overlaps = 0;
    for (auto& [l, hs] : holds) {
        std::sort(hs.begin(), hs.end(), [](const hold& a, const hold& b) { return a.start < b.start; });
        for (std::size_t i = 1; i < hs.size(); ++i) overlaps += hs[i].start < hs[i - 1].end;
    }
    rusage ru{};
    getrusage(RUSAGE_SELF, &ru);
    session_cycles.resize(static_cast<std::size_t>(cfg.sessions));
    auto [smin, smax] = std::minmax_element(session_cycles.begin(), session_cycles.end());
    double cps = cycles / wall;
    double rpc = cycles ? double(req1 - req0) / cycles : 0; // requests issued during the window / cycles in it
    std::printf("{\"impl\":\"%s\",\"workers\":%d,\"sessions\":%d,\"locks\":%d,\"hold_ms\":%d,\"cycles\":%ld,"
                "\"seconds\":%.3f,\"cycles_per_s\":%.1f,\"p50_us\":%.1f,\"p99_us\":%.1f,\"max_us\":%.1f,"
                "\"requests_per_cycle\":%.2f,\"watch_events_per_cycle\":%.2f,\"cpu_us_per_cycle\":%.1f,\"peak_rss_kb\":%ld,\"overlaps\":%ld,"
                "\"handoff\":%u,\"max_grants_per_node\":%u,\"session_share_min\":%.3f,\"session_share_max\":%.3f}\n",
                cfg.label.c_str(), cfg.workers, cfg.sessions, cfg.locks, cfg.hold_ms, cycles, wall, cps, pct(0.5),
                pct(0.99), latencies_us.empty() ? 0.0 : latencies_us.back(), rpc,
                cycles ? double(watch1 - watch0) / cycles : 0.0, cycles ? cpu0 * 1e6 / cycles : 0.0,
                ru.ru_maxrss, overlaps, cfg.handoff, max_node_grants, cycles ? double(*smin) / cycles : 0.0,
                cycles ? double(*smax) / cycles : 0.0);
    std::fprintf(stderr, "%s: %d workers/%d sessions/%d locks hold %d ms: %.0f cycles/s p50 %.0f us p99 %.0f us, "
                 "%.2f req/cycle, %.1f us CPU/cycle, overlaps %ld\n", cfg.label.c_str(), cfg.workers, cfg.sessions,
                 cfg.locks, cfg.hold_ms, cps, pct(0.5), pct(0.99), rpc, cycles ? cpu0 * 1e6 / cycles : 0.0, overlaps);
    return overlaps == 0 ? 0 : 3;
}
