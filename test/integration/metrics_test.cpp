// session::metrics() and to_prometheus() against a scripted sequence on the real server.
#include <zklock/inspect.hpp>
#include <zklock/metrics.hpp>
#include <zklock/mutex.hpp>

#include "common.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <map>
#include <regex>
#include <sstream>

#include <unistd.h>

using namespace zt;
using zklock::errc;
using clock_type = std::chrono::steady_clock;

namespace {

/// A small parser of the Prometheus text format (0.0.4): every sample must belong to a family
/// declared by # TYPE before it, with a numeric value; histograms must be cumulative and end
/// with le="+Inf" equal to _count. Returns the samples ("name{labels}" -> value).
std::map<std::string, double> parse_prometheus(const std::string& text) {
    std::map<std::string, double> samples;
    std::map<std::string, std::string> types;
    const std::regex type_re(
        R"(^# TYPE ([a-zA-Z_:][a-zA-Z0-9_:]*) (counter|gauge|histogram|summary|untyped)$)");
    const std::regex help_re(R"(^# HELP ([a-zA-Z_:][a-zA-Z0-9_:]*) .*$)");
    const std::regex sample_re(
        R"(^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{([a-zA-Z_][a-zA-Z0-9_]*="([^"\\\n]|\\[\\"n])*"(,[a-zA-Z_][a-zA-Z0-9_]*="([^"\\\n]|\\[\\"n])*")*)\})? (\S+)$)");
    std::istringstream in(text);
    std::string line;
    std::map<std::string, double> last_bucket; // histogram series -> last cumulative count
    while (std::getline(in, line)) {
        std::smatch m;
        if (std::regex_match(line, m, type_re)) {
            EXPECT_EQ(types.count(m[1]), 0u) << "family declared twice: " << line;
            types[m[1]] = m[2];
            continue;
        }
        if (std::regex_match(line, help_re)) continue;
        if (!std::regex_match(line, m, sample_re)) {
            ADD_FAILURE() << "not a valid line: " << line;
            continue;
        }
        std::string name = m[1], labels = m[3];
        std::string family = name;
        for (const char* suffix : {"_bucket", "_sum", "_count"})
            if (family.ends_with(suffix) &&
                types.count(family.substr(0, family.size() - std::strlen(suffix))) &&
                types[family.substr(0, family.size() - std::strlen(suffix))] == "histogram")
                family = family.substr(0, family.size() - std::strlen(suffix));
        EXPECT_TRUE(types.count(family)) << "sample before its # TYPE: " << line;
        char* end = nullptr;
        std::string value = m[7];
        double v = value == "+Inf" ? INFINITY : std::strtod(value.c_str(), &end);
        EXPECT_TRUE(value == "+Inf" || (end && *end == '\0')) << "bad value: " << line;
        samples[name + "{" + labels + "}"] = v;
        if (name.ends_with("_bucket")) {
            auto series = name + "{" + std::regex_replace(labels, std::regex(R"(,?le="[^"]*")"), "") + "}";
            EXPECT_GE(v, last_bucket[series]) << "buckets not cumulative: " << line;
            last_bucket[series] = v;
            if (labels.find("le=\"+Inf\"") != std::string::npos) {
                auto base = name.substr(0, name.size() - 7);
                auto rest = std::regex_replace(labels, std::regex(R"(,?le="\+Inf")"), "");
                last_bucket[series] = 0;
                // _count comes after the buckets: checked by the caller through the samples
                samples["__inf " + base + "{" + rest + "}"] = v;
            }
        }
    }
    for (auto& [k, v] : samples)
        if (k.rfind("__inf ", 0) == 0) {
            auto count_key = k.substr(6);
            auto brace = count_key.find('{');
            count_key = count_key.substr(0, brace) + "_count" + count_key.substr(brace);
            EXPECT_EQ(samples[count_key], v) << "+Inf bucket != _count for " << count_key;
        }
    return samples;
}

std::string sample_key(const std::string& name, const std::string& labels) {
    return name + "{" + labels + "}";
}

} // namespace

using Metrics = zt::zk_test;

TEST_F(Metrics, CountersMatchAScriptedSequenceAndThePrometheusTextParses) {
    run_test([&]() -> awaitable<void> {
        auto path = lock_path();
        auto a = co_await connect();
        auto b = co_await connect();
        auto admin = co_await connect();
        zklock::mutex ma(*a, path), mb(*b, path);
        clock_type::duration measured{};
        // 3 grants
        for (int i = 0; i < 3; ++i) {
            auto t0 = clock_type::now();
            auto g = co_await ma.async_acquire(use_awaitable);
            measured += clock_type::now() - t0;
            co_await sleep_for(20ms);
            co_await g.async_release(use_awaitable);
        }
        // b holds: 2 timeouts, 2 cancels, 1 busy try
        auto gb = co_await mb.async_acquire(use_awaitable);
        for (int i = 0; i < 2; ++i) {
            auto [ec, g] = co_await ma.async_acquire_for(50ms, boost::asio::as_tuple(use_awaitable));
            EXPECT_EQ(ec, errc::acquire_timeout);
        }
        for (int i = 0; i < 2; ++i) {
            asio::cancellation_signal sig;
            bool done = false;
            ma.async_acquire(
                asio::bind_cancellation_slot(sig.slot(), [&](zklock::error_code ec, zklock::guard) {
                    EXPECT_EQ(ec, asio::error::operation_aborted);
                    done = true;
                }));
            co_await sleep_for(50ms);
            EXPECT_EQ(a->metrics().by_path[path].waiting, 1) << "a waiting acquire is not counted as waiting";
            sig.emit(asio::cancellation_type::terminal);
            co_await eventually([&] { return done; });
        }
        auto [bec, bg] = co_await ma.async_try_acquire(boost::asio::as_tuple(use_awaitable));
        EXPECT_EQ(bec, errc::lock_busy);
        co_await gb.async_release(use_awaitable);
        // a 4th grant, then lost: its node is broken by an admin
        auto t0 = clock_type::now();
        auto g = co_await ma.async_acquire(use_awaitable);
        measured += clock_type::now() - t0;
        bool lost = false;
        g.async_wait_lost([&](zklock::error_code) { lost = true; });
        auto [kec] =
            co_await zklock::async_break_lock(*admin, g.node_path(), boost::asio::as_tuple(use_awaitable));
        EXPECT_FALSE(kec);
        co_await eventually([&] { return lost; });
        co_await g.async_release(use_awaitable);

        auto m = a->metrics();
        CO_REQUIRE(m.by_path.count(path) == 1u);
        auto& l = m.by_path[path];
        EXPECT_EQ(l.acquires_started, 9u);
        EXPECT_EQ(l.granted, 4u);
        EXPECT_EQ(l.timed_out, 2u);
        EXPECT_EQ(l.cancelled, 2u);
        EXPECT_EQ(l.busy, 1u);
        EXPECT_EQ(l.failed, 0u);
        EXPECT_EQ(l.waiting, 0);
        EXPECT_EQ(l.wait.count, 4u);
        EXPECT_EQ(l.hold.count, 4u) << "three releases and one loss";
        EXPECT_EQ(l.losses[static_cast<std::size_t>(zklock::loss_reason::node_deleted)], 1u);
        std::uint64_t in_buckets = 0;
        for (auto n : l.wait.buckets) in_buckets += n;
        EXPECT_EQ(in_buckets, l.wait.count);
        // The histogram's sum is the recorded waits: never more than what the test measured
        // around them, and less only by the completion's trip back to the test (a few ms each).
        auto measured_us = static_cast<std::uint64_t>(
            std::chrono::duration_cast<std::chrono::microseconds>(measured).count());
        EXPECT_LE(l.wait.sum_us, measured_us);
        EXPECT_LE(measured_us - l.wait.sum_us, 4u * 20'000u)
            << "sum " << l.wait.sum_us << " us, measured " << measured_us;
        EXPECT_GE(l.hold.sum_us, 3u * 20'000u) << "three holds of at least 20 ms";
        EXPECT_LE(l.wait.max_us, measured_us);
        EXPECT_EQ(m.total.granted, 4u);
        auto mb_metrics = b->metrics();
        EXPECT_EQ(mb_metrics.by_path[path].granted, 1u);
        EXPECT_EQ(mb_metrics.by_path[path].hold.count, 1u);

        auto text = zklock::to_prometheus(m);
        auto samples = parse_prometheus(text);
        auto pl = "path=\"" + path + "\"";
        EXPECT_EQ(samples[sample_key("zklock_acquires_total", pl + ",outcome=\"granted\"")], 4);
        EXPECT_EQ(samples[sample_key("zklock_acquires_total", pl + ",outcome=\"timed_out\"")], 2);
        EXPECT_EQ(samples[sample_key("zklock_acquires_total", pl + ",outcome=\"cancelled\"")], 2);
        EXPECT_EQ(samples[sample_key("zklock_losses_total", pl + ",reason=\"node_deleted\"")], 1);
        EXPECT_EQ(samples[sample_key("zklock_wait_seconds_count", pl)], 4);
        EXPECT_NEAR(samples[sample_key("zklock_wait_seconds_sum", pl)],
                    static_cast<double>(l.wait.sum_us) / 1e6, 1e-6);
        EXPECT_EQ(samples[sample_key("zklock_waiters", pl)], 0);
    });
}

TEST_F(Metrics, PathsAreEscapedCappedAndMetricsCanBeTurnedOff) {
    run_test([&]() -> awaitable<void> {
        auto o = options();
        o.metrics_max_paths = 2;
        auto a = co_await connect(o);
        auto base = unique_path("m");
        std::vector<std::string> paths{base + "/with \"quote\" and \\ backslash", base + "/b", base + "/c",
                                       base + "/d"};
        for (auto& p : paths) {
            zklock::mutex m(*a, p);
            auto g = co_await m.async_acquire(use_awaitable);
            co_await g.async_release(use_awaitable);
        }
        auto snap = a->metrics();
        EXPECT_EQ(snap.by_path.size(), 3u) << "two paths and (other)";
        EXPECT_EQ(snap.by_path["(other)"].granted, 2u);
        EXPECT_EQ(snap.total.granted, 4u);
        auto samples = parse_prometheus(zklock::to_prometheus(snap, "svc_locks"));
        EXPECT_EQ(samples[sample_key("svc_locks_acquires_total",
                                     "path=\"" + base +
                                         "/with \\\"quote\\\" and \\\\ backslash\",outcome=\"granted\"")],
                  1);

        auto off = options();
        off.metrics = false;
        auto c = co_await connect(off);
        zklock::mutex m(*c, paths[1]);
        auto g = co_await m.async_acquire(use_awaitable);
        co_await g.async_release(use_awaitable);
        EXPECT_TRUE(c->metrics().by_path.empty());
        EXPECT_GT(c->metrics().requests.creates, 0u) << "the request counters stay on";
        for (auto& p : paths) co_await expect_no_leftovers(*a, p);
    });
}

TEST_F(Metrics, ThePrometheusTextStaysSmallAtThousandsOfPathsAndAParserReadsIt) {
    // A server that takes a lock per request path (the docs' HTTP example) locks thousands of
    // paths. Before: 1,001 per-path records by default and 2.64 MB of text at 3,000 paths, with
    // numbers at full precision (le="0.0050000000000000001", which an exact label match of
    // le="0.005" misses). Now: 20 paths and "(other)" by default, numbers in their shortest exact
    // form; Debian's prometheus_client parser reads the text.
    run_test([&]() -> awaitable<void> {
        auto a = co_await connect();
        auto base = unique_path("many");
        constexpr int n = 3000;
        for (int i = 0; i < n; ++i) {
            zklock::mutex m(*a, base + "/p" + std::to_string(i));
            auto g = co_await m.async_acquire(use_awaitable);
            co_await g.async_release(use_awaitable);
        }
        auto snap = a->metrics();
        EXPECT_EQ(snap.by_path.size(), 21u) << "the default metrics_max_paths (20) and (other)";
        EXPECT_EQ(snap.by_path["(other)"].granted, static_cast<std::uint64_t>(n - 20));
        EXPECT_EQ(snap.total.granted, static_cast<std::uint64_t>(n));
        const auto text = zklock::to_prometheus(snap);
        std::printf("  %d paths: %zu bytes of Prometheus text, %zu lines\n", n, text.size(),
                    static_cast<std::size_t>(std::count(text.begin(), text.end(), '\n')));
        // 42 series per path, 21 paths, and the session's own: docs/operations.md states it (the
        // bytes grow with the paths' length: about 100 bytes each here)
        const auto lines = static_cast<std::size_t>(std::count(text.begin(), text.end(), '\n'));
        EXPECT_LE(lines, 21u * 42 + 60) << "docs/operations.md states the size";
        EXPECT_LT(text.size(), lines * (60 + base.size() + 8)) << "docs/operations.md states the size";
        EXPECT_NE(text.find("le=\"0.005\""), std::string::npos);
        EXPECT_EQ(text.find("00000000"), std::string::npos) << "a number printed past its shortest form";
        (void)parse_prometheus(text);
        // Debian's python3-prometheus-client parser (scripts/setup.sh installs it)
        const std::string file =
            ::testing::TempDir() + "zklock-metrics-" + std::to_string(::getpid()) + ".prom";
        {
            std::ofstream out(file);
            out << text;
        }
        const std::string cmd =
            "/usr/bin/python3 -c 'import sys\n"
            "from prometheus_client.parser import text_string_to_metric_families as parse\n"
            "fams = list(parse(open(sys.argv[1]).read()))\n"
            "samples = sum(len(f.samples) for f in fams)\n"
            "les = {s.labels.get(\"le\") for f in fams for s in f.samples if \"le\" in s.labels}\n"
            "assert \"0.005\" in les, les\n"
            "print(len(fams), samples)' " +
            file;
        const int rc = std::system(cmd.c_str());
        EXPECT_EQ(rc, 0) << cmd;
        std::remove(file.c_str());
        // (3,000 unused lock paths: the session's unused-path job and the server's container
        // reaper delete them, which takes longer than expect_no_leftovers waits)
        for (int i = 0; i < 600 && !(co_await children_of(*a, base)).empty(); ++i) co_await sleep_for(100ms);
        co_await expect_no_leftovers(*a, base);
    });
}
