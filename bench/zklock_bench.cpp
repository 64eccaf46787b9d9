// zklock benchmark driver: W coroutines over S sessions contend for L locks for D seconds.
// Prints one JSON object (and a readable line on stderr): cycles/s, acquire latency, requests
// per cycle (from the sessions' own counters), client CPU per cycle, peak RSS, and whether the
// recorded hold intervals overlapped.
// With --handoff N the coroutines of a session hand the lock to each other (mutex_options::local_handoff);
// then it also reports the most grants one node served and each session's share of the grants
// (sessions stand for processes: none may be starved).
// With --processes P the workers and sessions are split over P forked processes (worker w runs in
// process w % P, on the same locks); their results are merged, the overlap check included (the
// hold intervals use CLOCK_MONOTONIC, which all processes share).
//   zklock_bench --connect C [--workers 8] [--sessions 8] [--processes 1] [--locks 1] [--hold-ms 0] [--duration 5]
//                [--handoff N] [--strategy predecessor|children|unique] [--release background] [--label x]
//                [--metrics on|off]   (with metrics on, exits 3 unless the sessions' metrics count every grant)
//                [--tls-dir D]        (TLS with D/ca.pem, D/client.pem, D/client.key: zk.sh start --tls)
#include <zklock.hpp>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace asio = boost::asio;
using asio::use_awaitable;
using clk = std::chrono::steady_clock;

/// A field of /proc/self/status ("Threads", "VmRSS"), as text.
static std::string proc_status(const std::string& key) {
    std::ifstream f("/proc/self/status");
    for (std::string line; std::getline(f, line);)
        if (line.rfind(key + ":", 0) == 0) {
            auto v = line.substr(key.size() + 1);
            v.erase(0, v.find_first_not_of(" \t"));
            return v.substr(0, v.find(' '));
        }
    return "?";
}

struct config {
    std::string connect, label = "zklock";
    zklock::lock_strategy strategy = zklock::lock_strategy::predecessor;
    bool background_release = false; // release_in_background(): the next request is queued behind the delete
    bool metrics = true;             // session_options::metrics (--metrics off: to measure their cost)
    std::string tls_dir; // --tls-dir D: TLS with D/ca.pem, D/client.pem, D/client.key (zk.sh --tls)
    int workers = 8, sessions = 8, locks = 1, hold_ms = 0, processes = 1;
    std::uint32_t handoff = 0;
    double duration = 5, warmup = 1;
};

struct hold {
    clk::time_point start, end;
};

static double cpu_seconds() {
    rusage ru{};
    getrusage(RUSAGE_SELF, &ru);
    return ru.ru_utime.tv_sec + ru.ru_stime.tv_sec + (ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
}

/// What one process measured.
struct run_result {
    long cycles = 0;
    double wall = 0, cpu = 0;
    std::uint64_t requests = 0, watch_events = 0, marked_grants = 0;
    std::uint64_t lease_requests = 0; // the lease's heartbeats and touches
    std::uint32_t max_node_grants = 0;
    long maxrss_kb = 0;
    std::vector<double> latencies_us;
    std::map<int, std::vector<hold>> holds;
    std::vector<long> session_cycles; // per global session index
};

/// Runs this process's share: workers w with w % processes == index, sessions likewise.
static run_result run_process(const config& cfg, const std::string& base, int index) {
    run_result res;
    std::vector<int> my_workers;
    for (int w = 0; w < cfg.workers; ++w)
        if (w % cfg.processes == index) my_workers.push_back(w);
    const int my_sessions = std::max(1, cfg.sessions / cfg.processes);
    res.session_cycles.assign(static_cast<std::size_t>(cfg.sessions), 0);
    asio::io_context io(1);
    std::vector<std::unique_ptr<zklock::session>> sessions;
    auto& latencies_us = res.latencies_us;
    auto& holds = res.holds;
    auto& cycles = res.cycles;
    auto& session_cycles = res.session_cycles;
    auto& max_node_grants = res.max_node_grants;
    bool measuring = false, stop = false;
    std::uint64_t all_grants = 0; // every grant, warm-up included (checked against the metrics)
    int running = 0;
    double cpu0 = 0;
    auto& wall = res.wall;
    std::uint64_t req0 = 0, req1 = 0, watch0 = 0, watch1 = 0, lease0 = 0, lease1 = 0, marked0 = 0,
                  marked1 = 0;
    clk::time_point t_start;
    // The sum over the sessions of one figure of their statistics.
    auto total = [&](auto figure) {
        std::uint64_t n = 0;
        for (auto& s : sessions) n += figure(s->statistics());
        return n;
    };
    auto total_requests = [&] {
        return total([](const zklock::session_statistics& st) { return st.requests(); });
    };
    auto total_lease_requests = [&] {
        return total([](const zklock::session_statistics& st) { return st.heartbeats + st.touches; });
    };
    auto total_marked = [&] {
        return total([](const zklock::session_statistics& st) { return st.marked_grants; });
    };
    auto total_watch_events = [&] {
        return total([](const zklock::session_statistics& st) { return st.watch_events; });
    };

    asio::co_spawn(
        io,
        [&]() -> asio::awaitable<void> {
            auto ex = co_await asio::this_coro::executor;
            const auto c0 = clk::now();
            for (int i = 0; i < my_sessions; ++i) {
                zklock::session_options o;
                o.connect = cfg.connect;
                o.metrics = cfg.metrics;
                if (!cfg.tls_dir.empty()) {
                    zklock::tls_options t;
                    t.ca_file = cfg.tls_dir + "/ca.pem";
                    t.certificate_file = cfg.tls_dir + "/client.pem";
                    t.private_key_file = cfg.tls_dir + "/client.key";
                    o.tls = t;
                }
                sessions.push_back(std::make_unique<zklock::session>(ex, o));
                co_await sessions.back()->async_connect(use_awaitable);
            }
            // what the sessions cost before any lock: time to connect (one after another), the
            // process's threads (the C client's own: two per session) and its resident memory
            std::fprintf(stderr,
                         "bench: process %d: %d sessions connected in %.2f s; threads %s; RSS %s kB\n", index,
                         my_sessions, std::chrono::duration<double>(clk::now() - c0).count(),
                         proc_status("Threads").c_str(), proc_status("VmRSS").c_str());
            for (int w : my_workers) {
                ++running;
                asio::co_spawn(
                    ex,
                    [&, w]() -> asio::awaitable<void> {
                        const int local_session = (w / cfg.processes) % my_sessions;
                        const int global_session = local_session * cfg.processes + index;
                        int lock_no = w % cfg.locks;
                        zklock::mutex_options mo;
                        mo.strategy = cfg.strategy;
                        mo.local_handoff = cfg.handoff;
                        zklock::mutex m(*sessions[static_cast<std::size_t>(local_session)],
                                        base + "/lock-" + std::to_string(lock_no), mo);
                        asio::steady_timer t(co_await asio::this_coro::executor);
                        while (!stop) {
                            auto t0 = clk::now();
                            auto g = co_await m.async_acquire(use_awaitable);
                            auto t1 = clk::now();
                            ++all_grants;
                            if (cfg.hold_ms > 0) {
                                t.expires_after(std::chrono::milliseconds(cfg.hold_ms));
                                co_await t.async_wait(use_awaitable);
                            }
                            auto t2 = clk::now();
                            if (measuring) {
                                latencies_us.push_back(
                                    std::chrono::duration<double, std::micro>(t1 - t0).count());
                                holds[lock_no].push_back({t1, t2});
                                ++cycles;
                                ++session_cycles[static_cast<std::size_t>(global_session) %
                                                 session_cycles.size()];
                                max_node_grants = std::max(max_node_grants, g.local_grant() + 1);
                            }
                            if (cfg.background_release)
                                g.release_in_background();
                            else
                                co_await g.async_release(use_awaitable);
                        }
                        --running;
                    },
                    asio::detached);
            }
            asio::steady_timer t(ex);
            t.expires_after(
                std::chrono::duration_cast<clk::duration>(std::chrono::duration<double>(cfg.warmup)));
            co_await t.async_wait(use_awaitable);
            measuring = true;
            t_start = clk::now();
            cpu0 = cpu_seconds();
            req0 = total_requests();
            watch0 = total_watch_events();
            marked0 = total_marked();
            lease0 = total_lease_requests();
            t.expires_after(
                std::chrono::duration_cast<clk::duration>(std::chrono::duration<double>(cfg.duration)));
            co_await t.async_wait(use_awaitable);
            measuring = false;
            wall = std::chrono::duration<double>(clk::now() - t_start).count();
            req1 = total_requests();
            watch1 = total_watch_events();
            marked1 = total_marked();
            lease1 = total_lease_requests();
            cpu0 = cpu_seconds() - cpu0;
            stop = true;
            while (running > 0) {
                t.expires_after(std::chrono::milliseconds(5));
                co_await t.async_wait(use_awaitable);
            }
            if (cfg.metrics) { // the sessions' metrics must add up to what the benchmark itself counted
                std::uint64_t granted = 0, started = 0;
                for (auto& s : sessions) {
                    auto m = s->metrics();
                    granted += m.total.granted;
                    started += m.total.acquires_started;
                }
                if (granted != all_grants || started != all_grants) {
                    std::fprintf(
                        stderr,
                        "bench: metrics say %llu started, %llu granted; the benchmark counted %llu grants\n",
                        static_cast<unsigned long long>(started), static_cast<unsigned long long>(granted),
                        static_cast<unsigned long long>(all_grants));
                    std::exit(3);
                }
            }
            for (auto& s : sessions) co_await s->async_close(use_awaitable);
        },
        [](std::exception_ptr e) {
            if (e) try {
                    std::rethrow_exception(e);
                } catch (const std::exception& x) {
                    std::fprintf(stderr, "bench: %s\n", x.what());
                    std::exit(1);
                }
        });
    io.run();
    sessions.clear();

    res.requests = req1 - req0;
    res.watch_events = watch1 - watch0;
    res.marked_grants = marked1 - marked0;
    res.lease_requests = lease1 - lease0;
    res.cpu = cpu0;
    rusage ru{};
    getrusage(RUSAGE_SELF, &ru);
    res.maxrss_kb = ru.ru_maxrss;
    return res;
}

/// A child's result, through a temporary file.
static void write_result(const run_result& r, const std::string& file) {
    std::FILE* f = std::fopen(file.c_str(), "w");
    if (!f) std::exit(4);
    std::fprintf(f, "S %ld %.9f %.9f %llu %llu %u %ld %llu %llu\n", r.cycles, r.wall, r.cpu,
                 static_cast<unsigned long long>(r.requests), static_cast<unsigned long long>(r.watch_events),
                 r.max_node_grants, r.maxrss_kb, static_cast<unsigned long long>(r.lease_requests),
                 static_cast<unsigned long long>(r.marked_grants));
    for (auto c : r.session_cycles) std::fprintf(f, "C %ld\n", c);
    for (auto l : r.latencies_us) std::fprintf(f, "L %.3f\n", l);
    for (auto& [lock, hs] : r.holds)
        for (auto& h : hs)
            std::fprintf(f, "H %d %lld %lld\n", lock,
                         static_cast<long long>(h.start.time_since_epoch().count()),
                         static_cast<long long>(h.end.time_since_epoch().count()));
    std::fclose(f);
}

static bool read_result(run_result& into, const std::string& file) {
    std::ifstream in(file);
    if (!in) return false;
    std::string tag;
    std::size_t c = 0;
    bool saw_summary = false;
    while (in >> tag) {
        if (tag == "S") {
            long cycles;
            double wall, cpu;
            unsigned long long req, watch, lease, marked;
            unsigned mng;
            long rss;
            in >> cycles >> wall >> cpu >> req >> watch >> mng >> rss >> lease >> marked;
            into.marked_grants += marked;
            into.lease_requests += lease;
            into.cycles += cycles;
            into.wall = std::max(into.wall, wall);
            into.cpu += cpu;
            into.requests += req;
            into.watch_events += watch;
            into.max_node_grants = std::max(into.max_node_grants, static_cast<std::uint32_t>(mng));
            into.maxrss_kb = std::max(into.maxrss_kb, rss);
            saw_summary = true;
        } else if (tag == "C") {
            long n;
            in >> n;
            if (c < into.session_cycles.size()) into.session_cycles[c] += n;
            ++c;
        } else if (tag == "L") {
            double l;
            in >> l;
            into.latencies_us.push_back(l);
        } else if (tag == "H") {
            int lock;
            long long a, b;
            in >> lock >> a >> b;
            into.holds[lock].push_back(
                {clk::time_point(clk::duration(a)), clk::time_point(clk::duration(b))});
        }
    }
    return saw_summary;
}

int main(int argc, char** argv) {
    config cfg;
    if (const char* e = std::getenv("ZK_CONNECT")) cfg.connect = e;
    for (int i = 1; i + 1 < argc; i += 2) {
        std::string k = argv[i], v = argv[i + 1];
        if (k == "--connect")
            cfg.connect = v;
        else if (k == "--workers")
            cfg.workers = std::atoi(v.c_str());
        else if (k == "--sessions")
            cfg.sessions = std::atoi(v.c_str());
        else if (k == "--processes")
            cfg.processes = std::atoi(v.c_str());
        else if (k == "--locks")
            cfg.locks = std::atoi(v.c_str());
        else if (k == "--hold-ms")
            cfg.hold_ms = std::atoi(v.c_str());
        else if (k == "--duration")
            cfg.duration = std::atof(v.c_str());
        else if (k == "--warmup")
            cfg.warmup = std::atof(v.c_str());
        else if (k == "--label")
            cfg.label = v;
        else if (k == "--handoff")
            cfg.handoff = static_cast<std::uint32_t>(std::atoi(v.c_str()));
        else if (k == "--release")
            cfg.background_release = v == "background";
        else if (k == "--metrics")
            cfg.metrics = v != "off";
        else if (k == "--tls-dir")
            cfg.tls_dir = v;
        else if (k == "--strategy") {
            if (v == "predecessor")
                cfg.strategy = zklock::lock_strategy::predecessor;
            else if (v == "children")
                cfg.strategy = zklock::lock_strategy::watch_children;
            else if (v == "unique")
                cfg.strategy = zklock::lock_strategy::unique_node;
            else {
                std::fprintf(stderr, "unknown strategy %s\n", v.c_str());
                return 2;
            }
        } else {
            std::fprintf(stderr, "unknown option %s\n", k.c_str());
            return 2;
        }
    }
    if (cfg.connect.empty() || cfg.workers < 1 || cfg.sessions < 1 || cfg.locks < 1) {
        std::fprintf(stderr, "usage: zklock_bench --connect HOST:PORT [--workers N] [--sessions N] [--locks "
                             "N] [--hold-ms N] [--duration S]\n");
        return 2;
    }
    cfg.sessions = std::min(cfg.sessions, cfg.workers);
    cfg.processes = std::clamp(cfg.processes, 1, cfg.sessions);
    const std::string base = "/zklock-bench/run-" + std::to_string(::getpid());
    const auto parent = ::getpid();
    auto base_file = [parent](int p) {
        return "/tmp/zklock_bench." + std::to_string(parent) + "." + std::to_string(p);
    };

    run_result res;
    if (cfg.processes == 1) {
        res = run_process(cfg, base, 0);
    } else {
        res.session_cycles.assign(static_cast<std::size_t>(cfg.sessions), 0);
        std::fflush(nullptr);
        std::vector<pid_t> children;
        for (int p = 0; p < cfg.processes; ++p) {
            pid_t pid = ::fork();
            if (pid < 0) {
                std::perror("fork");
                return 1;
            }
            if (pid == 0) {
                write_result(run_process(cfg, base, p), base_file(p));
                std::_Exit(0);
            }
            children.push_back(pid);
        }
        int failed = 0;
        for (auto pid : children) {
            int status = 0;
            ::waitpid(pid, &status, 0);
            failed += !(WIFEXITED(status) && WEXITSTATUS(status) == 0);
        }
        for (int p = 0; p < cfg.processes; ++p) {
            failed += !read_result(res, base_file(p));
            std::remove(base_file(p).c_str());
        }
        if (failed) {
            std::fprintf(stderr, "bench: %d process(es) failed\n", failed);
            return 1;
        }
    }
    auto& latencies_us = res.latencies_us;
    auto& holds = res.holds;
    const long cycles = res.cycles;
    const double wall = res.wall;
    const double cpu0 = res.cpu;
    auto& session_cycles = res.session_cycles;
    const auto max_node_grants = res.max_node_grants;
    std::sort(latencies_us.begin(), latencies_us.end());
    auto pct = [&](double p) {
        if (latencies_us.empty()) return 0.0;
        return latencies_us[std::min(latencies_us.size() - 1,
                                     static_cast<std::size_t>(p * latencies_us.size()))];
    };
    long overlaps = 0;
    for (auto& [l, hs] : holds) {
        std::sort(hs.begin(), hs.end(), [](const hold& a, const hold& b) { return a.start < b.start; });
        for (std::size_t i = 1; i < hs.size(); ++i) overlaps += hs[i].start < hs[i - 1].end;
    }
    auto [smin, smax] = std::minmax_element(session_cycles.begin(), session_cycles.end());
    double cps = cycles / wall;
    double rpc =
        cycles ? double(res.requests) / cycles : 0; // requests issued during the window / cycles in it
    std::printf(
        "{\"impl\":\"%s\",\"processes\":%d,\"workers\":%d,\"sessions\":%d,\"locks\":%d,\"hold_ms\":%d,"
        "\"cycles\":%ld,"
        "\"seconds\":%.3f,\"cycles_per_s\":%.1f,\"p50_us\":%.1f,\"p99_us\":%.1f,\"max_us\":%.1f,"
        "\"requests_per_cycle\":%.2f,\"lease_requests_per_cycle\":%.3f,\"watch_events_per_cycle\":%.2f,"
        "\"waiters_woken_per_cycle\":%.2f,\"cpu_"
        "us_per_cycle\":%.1f,\"peak_rss_"
        "kb\":%ld,\"overlaps\":%ld,"
        "\"handoff\":%u,\"max_grants_per_node\":%u,\"session_share_min\":%.3f,\"session_share_max\":%.3f}\n",
        cfg.label.c_str(), cfg.processes, cfg.workers, cfg.sessions, cfg.locks, cfg.hold_ms, cycles, wall,
        cps, pct(0.5), pct(0.99), latencies_us.empty() ? 0.0 : latencies_us.back(), rpc,
        cycles ? double(res.lease_requests) / cycles : 0.0, cycles ? double(res.watch_events) / cycles : 0.0,
        cycles ? double(res.watch_events - res.marked_grants) / cycles : 0.0,
        cycles ? cpu0 * 1e6 / cycles : 0.0, res.maxrss_kb, overlaps, cfg.handoff, max_node_grants,
        cycles ? double(*smin) / cycles : 0.0, cycles ? double(*smax) / cycles : 0.0);
    std::fprintf(stderr,
                 "%s: %d workers/%d sessions/%d locks hold %d ms: %.0f cycles/s p50 %.0f us p99 %.0f us, "
                 "%.2f req/cycle, %.1f us CPU/cycle, overlaps %ld\n",
                 cfg.label.c_str(), cfg.workers, cfg.sessions, cfg.locks, cfg.hold_ms, cps, pct(0.5),
                 pct(0.99), rpc, cycles ? cpu0 * 1e6 / cycles : 0.0, overlaps);
    return overlaps == 0 ? 0 : 3;
}
