// A chaos-soak worker (scripts/chaos.sh): contends on a few lock paths and logs every hold, while
// faults are injected around it. It reaches each server through its own in-process TCP proxy,
// which chaos.sh drives with signals:
//   SIGUSR1  drop every connection (the client reconnects at once)
//   SIGUSR2  partition: the proxies swallow all traffic for --partition-ms, then drop
//   SIGHUP   delay every forwarded chunk by 300 ms for 3 s
//   SIGTERM  finish the current hold, release, close the session and exit 0
//
// Log lines (one per event, written and flushed at once; times are CLOCK_REALTIME ns so that the
// logs of several processes can be merged):
//   G <path> <start_ns> <fencing_token> <session_id_hex>   the lock was granted
//   E <path> <end_ns> released                              the holder let go (before the delete)
//   E <path> <end_ns> lost <reason>                         the loss signal ended the hold
//   S <path> <stop_ns>                                      with --slow-stop-ms N > 0, after every
//                                                           loss: the worker actually stopped (it
//                                                           went on acting for a random 0..N ms
//                                                           after the loss signal; just before its
//                                                           release), so the library's deferred
//                                                           delete of the lost lock is exercised
//   # slow-stop-ms N                                        first line of such a worker's log (the
//                                                           checker then knows an S line is due)
//
//   zklock_chaos_worker --connect H:P,H:P,... --paths N --log FILE [--seed S] [--session-timeout MS]
//                       [--hold-ms MIN:MAX] [--policy lease|on_disconnect|on_expiry] [--partition-ms MS]
//                       [--name NAME] [--slow-stop-ms N]
#include <zklock.hpp>

#include "../integration/proxy.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <random>
#include <string>
#include <vector>

namespace asio = boost::asio;
using asio::use_awaitable;
using namespace std::chrono_literals;
using namespace asio::experimental::awaitable_operators;

namespace {

long long now_ns() {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(
               std::chrono::system_clock::now().time_since_epoch())
        .count();
}

struct options {
    std::string connect, log = "/dev/stdout", name = "w", policy = "lease";
    int paths = 2, hold_min = 5, hold_max = 60, partition_ms = 4000, slow_stop_ms = 0;
    unsigned seed = 1;
    std::chrono::milliseconds session_timeout{2000};
};

[[noreturn]] void usage(const char* why) {
    std::fprintf(stderr, "zklock_chaos_worker: %s\n", why);
    std::exit(2);
}

options parse(int argc, char** argv) {
    options o;
    for (int i = 1; i < argc; ++i) {
        std::string a = argv[i];
        auto next = [&]() -> std::string {
            if (i + 1 >= argc) usage(("missing value after " + a).c_str());
            return argv[++i];
        };
        if (a == "--connect")
            o.connect = next();
        else if (a == "--paths")
            o.paths = std::stoi(next());
        else if (a == "--log")
            o.log = next();
        else if (a == "--seed")
            o.seed = static_cast<unsigned>(std::stoul(next()));
        else if (a == "--name")
            o.name = next();
        else if (a == "--policy")
            o.policy = next();
        else if (a == "--partition-ms")
            o.partition_ms = std::stoi(next());
        else if (a == "--slow-stop-ms")
            o.slow_stop_ms = std::stoi(next());
        else if (a == "--session-timeout")
            o.session_timeout = std::chrono::milliseconds(std::stoi(next()));
        else if (a == "--hold-ms") {
            auto v = next();
            auto colon = v.find(':');
            if (colon == std::string::npos) usage("--hold-ms takes MIN:MAX");
            o.hold_min = std::stoi(v.substr(0, colon));
            o.hold_max = std::stoi(v.substr(colon + 1));
        } else
            usage(("unknown argument " + a).c_str());
    }
    if (o.connect.empty()) usage("--connect is required");
    if (o.paths < 1 || o.hold_min < 0 || o.hold_max < o.hold_min) usage("bad --paths or --hold-ms");
    if (o.slow_stop_ms < 0) usage("bad --slow-stop-ms");
    return o;
}

zklock::loss_policy policy_of(const std::string& p) {
    if (p == "lease") return zklock::loss_policy::lease();
    if (p == "on_disconnect") return zklock::loss_policy::on_disconnect();
    if (p == "on_expiry") return zklock::loss_policy::on_expiry();
    usage("--policy is lease, on_disconnect or on_expiry");
}

class worker {
public:
    worker(asio::io_context& io, options o) : io_(io), o_(std::move(o)), rng_(o_.seed) {
        log_ = std::fopen(o_.log.c_str(), "a");
        if (!log_) usage(("cannot open " + o_.log).c_str());
        if (o_.slow_stop_ms > 0) {
            std::fprintf(log_, "# slow-stop-ms %d\n", o_.slow_stop_ms);
            std::fflush(log_);
        }
        // one proxy per server: the faults of this client are injected there
        std::string proxied;
        std::size_t start = 0;
        while (start <= o_.connect.size()) {
            auto end = o_.connect.find(',', start);
            if (end == std::string::npos) end = o_.connect.size();
            auto hp = o_.connect.substr(start, end - start);
            auto port = static_cast<unsigned short>(std::stoi(hp.substr(hp.rfind(':') + 1)));
            proxies_.push_back(std::make_unique<zt::tcp_proxy>(port));
            proxied += (proxied.empty() ? "" : ",") + std::string("127.0.0.1:") +
                       std::to_string(proxies_.back()->port());
            start = end + 1;
        }
        o_.connect = proxied;
    }
    ~worker() { std::fclose(log_); }

    asio::awaitable<void> run() {
        auto ex = co_await asio::this_coro::executor;
        zklock::session_options so;
        so.connect = o_.connect;
        so.session_timeout = o_.session_timeout;
        so.connect_timeout = 60s;
        so.loss = policy_of(o_.policy);
        zklock::session s(ex, so);
        for (int i = 0; i < 30; ++i) { // the ensemble may be electing a leader
            auto [ec] = co_await s.async_connect(asio::as_tuple(use_awaitable));
            if (!ec) break;
            std::fprintf(stderr, "%s: connect: %s\n", o_.name.c_str(), ec.message().c_str());
        }
        std::uniform_int_distribution<int> pick_path(0, o_.paths - 1), pick_hold(o_.hold_min, o_.hold_max),
            pick_slow_stop(0, o_.slow_stop_ms);
        while (!stop_) {
            const std::string path = "/zklock-chaos/lock" + std::to_string(pick_path(rng_));
            zklock::mutex m(s, path);
            auto [ec, g] = co_await m.async_acquire_for(10s, asio::as_tuple(use_awaitable));
            if (ec) {
                ++failed_acquires_;
                asio::steady_timer pause(ex, 50ms);
                co_await pause.async_wait(asio::as_tuple(use_awaitable));
                continue;
            }
            std::fprintf(log_, "G %s %lld %lld %llx\n", path.c_str(), now_ns(),
                         static_cast<long long>(g.fencing_token()),
                         static_cast<unsigned long long>(g.session_id()));
            std::fflush(log_);
            // hold, unless the loss signal comes first
            asio::steady_timer hold(ex, std::chrono::milliseconds(pick_hold(rng_)));
            zklock::error_code lost;
            auto r = co_await (hold.async_wait(asio::as_tuple(use_awaitable)) ||
                               g.async_wait_lost(asio::as_tuple(use_awaitable)));
            if (r.index() == 1) lost = std::get<0>(std::get<1>(r));
            const bool was_lost = lost && lost != zklock::errc::lock_released;
            if (was_lost) {
                std::fprintf(log_, "E %s %lld lost %s\n", path.c_str(), now_ns(), reason_name(lost));
            } else {
                std::fprintf(log_, "E %s %lld released\n", path.c_str(), now_ns());
            }
            std::fflush(log_);
            if (was_lost && o_.slow_stop_ms > 0) {
                // a holder that takes time to stop: it goes on "acting" (here: waits) with the lost
                // guard still alive, then releases it; the checker ends the hold at the S line
                asio::steady_timer acting(ex, std::chrono::milliseconds(pick_slow_stop(rng_)));
                co_await acting.async_wait(asio::as_tuple(use_awaitable));
                std::fprintf(log_, "S %s %lld\n", path.c_str(), now_ns());
                std::fflush(log_);
            }
            co_await g.async_release(asio::as_tuple(use_awaitable));
            ++holds_;
        }
        co_await s.async_close(asio::as_tuple(use_awaitable));
        std::fprintf(stderr, "%s: %d holds, %d failed acquires\n", o_.name.c_str(), holds_, failed_acquires_);
    }

    void on_signal(int sig) {
        if (sig == SIGTERM || sig == SIGINT)
            stop_ = true;
        else if (sig == SIGUSR1)
            for (auto& p : proxies_) p->drop();
        else if (sig == SIGUSR2) {
            for (auto& p : proxies_) p->blackhole(true);
            auto t = std::make_shared<asio::steady_timer>(io_, std::chrono::milliseconds(o_.partition_ms));
            t->async_wait([this, t](boost::system::error_code) {
                for (auto& p : proxies_) p->blackhole(false);
            });
        } else if (sig == SIGHUP) {
            for (auto& p : proxies_) p->delay(300ms);
            auto t = std::make_shared<asio::steady_timer>(io_, 3s);
            t->async_wait([this, t](boost::system::error_code) {
                for (auto& p : proxies_) p->delay(0ms);
            });
        }
    }

private:
    static const char* reason_name(const zklock::error_code& ec) {
        if (ec == zklock::errc::lease_expired) return "lease_expired";
        if (ec == zklock::errc::lock_lost_suspended) return "disconnected";
        if (ec == zklock::errc::session_expired) return "session_expired";
        if (ec == zklock::errc::lock_node_deleted) return "node_deleted";
        if (ec == zklock::errc::session_closed) return "session_closed";
        return "other";
    }

    asio::io_context& io_;
    options o_;
    std::mt19937 rng_;
    std::FILE* log_ = nullptr;
    std::vector<std::unique_ptr<zt::tcp_proxy>> proxies_;
    bool stop_ = false;
    int holds_ = 0, failed_acquires_ = 0;
};

} // namespace

int main(int argc, char** argv) {
    auto o = parse(argc, argv);
    asio::io_context io;
    worker w(io, o);
    asio::signal_set signals(io, SIGTERM, SIGINT, SIGUSR1);
    signals.add(SIGUSR2);
    signals.add(SIGHUP);
    std::function<void(boost::system::error_code, int)> on_sig = [&](boost::system::error_code ec, int sig) {
        if (ec) return;
        w.on_signal(sig);
        signals.async_wait(on_sig);
    };
    signals.async_wait(on_sig);
    int rc = 1;
    asio::co_spawn(io, w.run(), [&](std::exception_ptr e) {
        rc = e ? 3 : 0;
        signals.cancel();
    });
    io.run();
    return rc;
}
