// The loss signal against the next grant, per fault and per loss policy, side by side: how long
// before the server hands a lock to someone else does the holder learn that it lost it?
//
// On a 3-server ensemble started by scripts/zk.sh (bench/margins.sh does it all): session A holds
// a lock through one follower only, session B waits through the two other servers. At a phase
// spread over the C client's ping interval (T/3) after one of the server's replies to A, a fault
// cuts A off:
//   freeze     that follower is SIGSTOPped (it answered A but never relays A's last touches)
//   partition  A's connection to it goes through a proxy that starts swallowing all traffic
// The run records when A's loss signal fired and when B was granted, both from the fault.
// A negative margin is an overlap: B held the lock while A still believed it held it.
//
//   zklock_loss_margins --dir ZK_DIR --scripts DIR [--runs N] [--session-timeout MS]
//                       [--policies lease,on_disconnect] [--faults freeze,partition]
// Prints one line per run on stderr and a Markdown table on stdout.
#include <zklock.hpp>

#include "../test/integration/ensemble.hpp"
#include "../test/integration/proxy.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

namespace asio = boost::asio;
using asio::awaitable;
using asio::use_awaitable;
using namespace std::chrono_literals;
using clk = std::chrono::steady_clock;

namespace {

struct config {
    std::string dir, scripts;
    int runs = 10;
    std::chrono::milliseconds T{2000};
    std::vector<std::string> policies{"lease", "on_disconnect"}, faults{"freeze", "partition"};
};

[[noreturn]] void usage(const std::string& why) {
    std::fprintf(stderr, "zklock_loss_margins: %s\n", why.c_str());
    std::exit(2);
}

std::vector<std::string> split(const std::string& s) {
    std::vector<std::string> out;
    std::stringstream in(s);
    for (std::string x; std::getline(in, x, ',');)
        if (!x.empty()) out.push_back(x);
    return out;
}

void zk_sh(const config& c, const std::string& verb, int server) {
    auto cmd = c.scripts + "/zk.sh " + verb + " " + c.dir + " " + std::to_string(server) + " >/dev/null";
    if (std::system(cmd.c_str()) != 0) usage("failed: " + cmd);
}

zklock::loss_policy policy_of(const std::string& p) {
    if (p == "lease") return zklock::loss_policy::lease();
    if (p == "on_disconnect") return zklock::loss_policy::on_disconnect();
    if (p == "on_expiry") return zklock::loss_policy::on_expiry();
    usage("unknown policy " + p);
}

awaitable<void> sleep_for(clk::duration d) {
    asio::steady_timer t(co_await asio::this_coro::executor, d);
    co_await t.async_wait(use_awaitable);
}

template <class Pred>
awaitable<bool> eventually(Pred pred, clk::duration limit) {
    auto deadline = clk::now() + limit;
    while (!pred() && clk::now() < deadline) co_await sleep_for(5ms);
    co_return pred();
}

struct outcome {
    bool lost = false, granted = false;
    double loss_s = 0, grant_s = 0;
    std::string why;
    double margin() const { return grant_s - loss_s; }
};

/// One run: A holds `path` through `server` (directly, or through a proxy for a partition), B waits.
awaitable<outcome> one_run(const config& c, const std::string& fault, const std::string& policy, int server,
                           const std::string& others, clk::duration phase, int n) {
    auto ex = co_await asio::this_coro::executor;
    const auto port = zt::server_port(c.dir, server);
    if (port == 0) usage("no port for server " + std::to_string(server) + " in " + c.dir);
    // A reaches the server through a proxy in both cases: it partitions, and it tells when the
    // server last replied to A (the phase's reference).
    auto proxy = std::make_unique<zt::tcp_proxy>(port);
    zklock::session_options oa;
    oa.connect = "127.0.0.1:" + std::to_string(proxy->port());
    oa.session_timeout = c.T;
    oa.loss = policy_of(policy);
    oa.renew_after_expiry = false;
    zklock::session_options ob;
    ob.connect = others;
    ob.session_timeout = 4 * c.T;
    auto a = std::make_unique<zklock::session>(ex, oa);
    zklock::session b(ex, ob);
    co_await a->async_connect(use_awaitable);
    co_await b.async_connect(use_awaitable);
    if (a->negotiated_timeout() != c.T) usage("the server did not grant the session timeout asked for");

    struct shared {
        clk::time_point lost_at{}, granted_at{};
        zklock::error_code why;
        zklock::guard next;
    };
    auto st = std::make_shared<shared>();
    const std::string path = "/zklock-margins/" + fault + "-" + policy + "-" + std::to_string(n);
    zklock::mutex ma(*a, path), mb(b, path);
    auto held = co_await ma.async_acquire(use_awaitable);
    held.async_wait_lost([st](zklock::error_code ec) {
        st->why = ec;
        st->lost_at = clk::now();
    });
    mb.async_acquire_for(30s, [st](zklock::error_code ec, zklock::guard g) {
        if (ec) return (void)std::fprintf(stderr, "  waiter failed: %s\n", ec.message().c_str()); // no grant
        st->granted_at = clk::now();
        st->next = std::move(g);
    });
    for (int i = 0; i < 200; ++i) { // until B's node is queued behind A's
        auto list = co_await zklock::async_list_contenders(b, path, {}, use_awaitable);
        if (list.size() == 2) break;
        co_await sleep_for(10ms);
    }
    // the phase: after one of the server's replies to A (a lease heartbeat's, or a C client
    // ping's under on_disconnect, whose pings come every T/3 when A is idle)
    auto seen = proxy->last_reply();
    co_await eventually([&] { return proxy->last_reply() != seen; }, c.T);
    co_await sleep_for(phase);
    if (fault == "freeze")
        zk_sh(c, "pause", server);
    else
        proxy->blackhole(true);
    const auto t0 = clk::now();
    co_await eventually(
        [&] { return st->lost_at != clk::time_point{} && st->granted_at != clk::time_point{}; }, 8 * c.T);
    if (fault == "freeze") {
        zk_sh(c, "resume", server);
        zk_sh(c, "wait", server);
    } else {
        proxy->blackhole(false);
    }
    outcome r;
    r.lost = st->lost_at != clk::time_point{};
    r.granted = st->granted_at != clk::time_point{};
    if (st->why == zklock::errc::lease_expired)
        r.why = "lease_expired";
    else if (st->why == zklock::errc::lock_lost_suspended)
        r.why = "lock_lost_suspended";
    else
        r.why = st->why ? st->why.message() : "-";
    r.loss_s = std::chrono::duration<double>(st->lost_at - t0).count();
    r.grant_s = std::chrono::duration<double>(st->granted_at - t0).count();
    co_await held.async_release(use_awaitable);
    if (st->next.owns_lock()) co_await st->next.async_release(use_awaitable);
    co_await a->async_close(use_awaitable);
    co_await b.async_close(use_awaitable);
    co_return r;
}

std::string fmt(double v) {
    char b[32];
    std::snprintf(b, sizeof b, "%+.2f", v);
    return b;
}

awaitable<int> main_co(config c) {
    // the follower to cut off, and the two other servers for the waiter
    int server = 0;
    std::string others;
    for (int i = 1; i <= 3; ++i) {
        auto port = zt::server_port(c.dir, i);
        if (port == 0) usage("no port for server " + std::to_string(i) + " in " + c.dir);
        if (!server && zt::is_follower(c.dir, i))
            server = i;
        else
            others += (others.empty() ? "" : ",") + std::string("127.0.0.1:") + std::to_string(port);
    }
    if (!server) usage("no follower found in " + c.dir);
    std::map<std::pair<std::string, std::string>, std::vector<outcome>> cells;
    int n = 0;
    const auto ping = c.T / 3; // the C client's ping interval when idle
    for (int k = 0; k < c.runs; ++k)
        for (auto& fault : c.faults)
            for (auto& policy : c.policies) {
                // the phase: k of `runs` steps over one ping interval
                auto phase = ping * k / c.runs;
                auto r = co_await one_run(c, fault, policy, server, others, phase, n++);
                std::fprintf(stderr, "%-9s %-13s phase %4lld ms: loss %s s (%s), grant %s s, margin %s s\n",
                             fault.c_str(), policy.c_str(),
                             static_cast<long long>(
                                 std::chrono::duration_cast<std::chrono::milliseconds>(phase).count()),
                             r.lost ? fmt(r.loss_s).c_str() : "none", r.why.c_str(),
                             r.granted ? fmt(r.grant_s).c_str() : "none",
                             r.lost && r.granted ? fmt(r.margin()).c_str() : "-");
                cells[{fault, policy}].push_back(r);
            }
    std::printf(
        "| fault | policy | runs | loss signal after the fault | next holder granted after the fault | "
        "margin: smallest, median, largest | overlaps |\n|---|---|---|---|---|---|---|\n");
    for (auto& fault : c.faults)
        for (auto& policy : c.policies) {
            auto& rs = cells[{fault, policy}];
            std::vector<double> loss, grant, margin;
            int overlaps = 0, missing = 0;
            for (auto& r : rs) {
                if (!r.lost || !r.granted) {
                    ++missing;
                    continue;
                }
                loss.push_back(r.loss_s);
                grant.push_back(r.grant_s);
                margin.push_back(r.margin());
                if (r.margin() < 0) ++overlaps;
            }
            std::sort(loss.begin(), loss.end());
            std::sort(grant.begin(), grant.end());
            std::sort(margin.begin(), margin.end());
            if (margin.empty()) {
                std::printf("| %s | %s | %zu | - | - | - | %d runs without both events |\n", fault.c_str(),
                            policy.c_str(), rs.size(), missing);
                continue;
            }
            std::printf("| %s | %s | %zu | %s .. %s s | %s .. %s s | %s, %s, %s s | %d%s |\n", fault.c_str(),
                        policy.c_str(), rs.size(), fmt(loss.front()).c_str(), fmt(loss.back()).c_str(),
                        fmt(grant.front()).c_str(), fmt(grant.back()).c_str(), fmt(margin.front()).c_str(),
                        fmt(margin[margin.size() / 2]).c_str(), fmt(margin.back()).c_str(), overlaps,
                        missing ? (" (" + std::to_string(missing) + " runs without both events)").c_str()
                                : "");
        }
    co_return 0;
}

} // namespace

int main(int argc, char** argv) {
    config c;
    for (int i = 1; i < argc; ++i) {
        std::string a = argv[i];
        auto next = [&]() -> std::string {
            if (i + 1 >= argc) usage("missing value after " + a);
            return argv[++i];
        };
        if (a == "--dir")
            c.dir = next();
        else if (a == "--scripts")
            c.scripts = next();
        else if (a == "--runs")
            c.runs = std::stoi(next());
        else if (a == "--session-timeout")
            c.T = std::chrono::milliseconds(std::stoi(next()));
        else if (a == "--policies")
            c.policies = split(next());
        else if (a == "--faults")
            c.faults = split(next());
        else
            usage("unknown argument " + a);
    }
    if (c.dir.empty() || c.scripts.empty()) usage("--dir and --scripts are required");
    for (auto& p : c.policies) policy_of(p);
    for (auto& f : c.faults)
        if (f != "freeze" && f != "partition") usage("unknown fault " + f);
    asio::io_context io;
    int rc = 1;
    asio::co_spawn(io, main_co(c), [&](std::exception_ptr e, int r) {
        if (e) {
            try {
                std::rethrow_exception(e);
            } catch (const std::exception& x) {
                std::fprintf(stderr, "zklock_loss_margins: %s\n", x.what());
            }
        }
        rc = e ? 1 : r;
    });
    io.run();
    return rc;
}
