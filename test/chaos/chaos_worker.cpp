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
//   R <path> <start_ns> <fencing_token> <session_id_hex>   a suspended lock (its E line said
//                                                           lost lease_expired) was regained: a hold
//                                                           again, with the same token
//   S <path> <stop_ns>                                      with --slow-stop-ms N > 0, after every
//                                                           loss: the worker actually stopped (it
//                                                           went on acting for a random 0..N ms
//                                                           after the loss signal; just before its
//                                                           release), so the library's deferred
//                                                           delete of the lost lock is exercised
//   # slow-stop-ms N                                        first line of such a worker's log (the
//                                                           checker then knows an S line is due)
//
// With --recipe semaphore the worker takes a lease of a semaphore of 2 (zklock::semaphore) on the
// path instead of the mutex, and logs G, E and S exactly as above (the checker allows two holds at
// once):
//   # recipe semaphore 2                                    first line of such a worker's log
//
// With --recipe election the worker campaigns (zklock::election) instead of acquiring the mutex,
// with the value "<name>-<n>" (n: its n-th campaign), and logs G, E and S exactly as above. While
// it leads (the hold) it goes 1-3 rounds of: proclaim "<name>-<n>-p<k>", then a guarded write
// (leadership::async_commit) of "t=<token> w=<name> n=<n> k=<k>" to the election path's data
// node "<path>-data" (persistent, a sibling of the election path: its children are candidates;
// created before the first campaign on the path), then a wait, the rounds spread over the hold
// time. After a loss signal it proclaims and commits once more (both must fail: nothing may land
// once the loss is told), and a slow stopper commits again at the end of its slow stop, before
// the S line. Every proclaim and commit is logged with the fencing token of its leadership (the
// checker finds its hold by worker, path and token), when it was sent and when it completed:
//   # recipe election                                       first line of such a worker's log
//   P <path> <token> <sent_ns> <done_ns> ok <value>          a proclaim that landed
//   C <path> <token> <sent_ns> <done_ns> ok <data_path> <version>
//                                                           a commit that landed: the data node's
//                                                           new version (commit_result::ops[0])
//   P|C <path> <token> <sent_ns> <done_ns> fail <name> <category>:<code> <message>
//                                                           one that failed: the error's name (errc's
//                                                           or zk_errc's; "other" for the rest), its
//                                                           code, and its message (free text)
// A P or C line of a lost hold may come after its E line (sent after the loss signal, or still in
// flight when the signal came).
//
//   zklock_chaos_worker --connect H:P,H:P,... --paths N --log FILE [--seed S] [--session-timeout MS]
//                       [--hold-ms MIN:MAX] [--policy lease|on_disconnect|on_expiry] [--partition-ms MS]
//                       [--name NAME] [--slow-stop-ms N] [--recipe mutex|election|semaphore] [--dialect curator|kazoo]
//   --dialect: the naming of the worker's nodes, for paths shared with peers (chaos.sh --peers):
//              curator (the default: lock_dialect::curator, election_dialect::curator_selector) or
//              kazoo (lock_dialect::kazoo, election_dialect::kazoo). chaos.sh gives kazoo only to
//              election workers beside kazoo peers: kazoo's Election sees only kazoo-named nodes and
//              zklock's election refuses a path of mixed namings; its mutex workers keep the
//              default, which kazoo's Lock sees through extra_lock_patterns=["-lock-"].
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
#include <set>
#include <string>
#include <tuple>
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
    std::string connect, log = "/dev/stdout", name = "w", policy = "lease", recipe = "mutex",
                         dialect = "curator";
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
        else if (a == "--recipe")
            o.recipe = next();
        else if (a == "--dialect")
            o.dialect = next();
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
    if (o.recipe != "mutex" && o.recipe != "election" && o.recipe != "semaphore")
        usage("--recipe is mutex, election or semaphore");
    if (o.dialect != "curator" && o.dialect != "kazoo") usage("--dialect is curator or kazoo");
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
    static constexpr int semaphore_size = 2; // --recipe semaphore: N
    worker(asio::io_context& io, options o) : io_(io), o_(std::move(o)), rng_(o_.seed) {
        log_ = std::fopen(o_.log.c_str(), "a");
        if (!log_) usage(("cannot open " + o_.log).c_str());
        if (o_.slow_stop_ms > 0) {
            std::fprintf(log_, "# slow-stop-ms %d\n", o_.slow_stop_ms);
            std::fflush(log_);
        }
        if (o_.recipe == "election") {
            std::fprintf(log_, "# recipe election\n");
            std::fflush(log_);
        }
        if (o_.recipe == "semaphore") {
            std::fprintf(log_, "# recipe semaphore %d\n", semaphore_size);
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
            if (o_.recipe == "election") {
                co_await lead(s, path, pick_hold, pick_slow_stop);
                continue;
            }
            zklock::mutex_options mo;
            mo.dialect = o_.dialect == "kazoo" ? zklock::lock_dialect::kazoo : zklock::lock_dialect::curator;
            zklock::mutex m(s, path, mo);
            zklock::semaphore sem(s, path, semaphore_size);
            // (not a conditional expression around the co_awaits: GCC 12 mishandles temporaries there)
            std::tuple<zklock::error_code, zklock::guard> acquired;
            if (o_.recipe == "semaphore")
                acquired = co_await sem.async_acquire_for(10s, asio::as_tuple(use_awaitable));
            else
                acquired = co_await m.async_acquire_for(10s, asio::as_tuple(use_awaitable));
            auto& [ec, g] = acquired;
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
            // hold, unless the loss signal comes first; a suspended lock (a lapse of the lease)
            // that is regained holds again (an R line), until its release or a final loss
            for (bool holding = true; holding;) {
                holding = false;
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
                    // a holder that takes time to stop: it goes on "acting" (here: waits) with the
                    // lost guard still alive, then releases it; the checker ends the hold at the S line
                    asio::steady_timer acting(ex, std::chrono::milliseconds(pick_slow_stop(rng_)));
                    co_await acting.async_wait(asio::as_tuple(use_awaitable));
                    std::fprintf(log_, "S %s %lld\n", path.c_str(), now_ns());
                    std::fflush(log_);
                }
                if (!was_lost || !g.is_suspended()) break;
                // Suspended: wait for the verdict (at most 10 s; then the release deletes the node
                // at once). Regained: the same token, a hold again from now.
                asio::steady_timer limit(ex, 10s);
                auto v = co_await (g.async_wait_verdict(asio::as_tuple(use_awaitable)) ||
                                   limit.async_wait(asio::as_tuple(use_awaitable)));
                if (v.index() != 0 || std::get<0>(std::get<0>(v)) || g.is_lost()) break;
                std::fprintf(log_, "R %s %lld %lld %llx\n", path.c_str(), now_ns(),
                             static_cast<long long>(g.fencing_token()),
                             static_cast<unsigned long long>(g.session_id()));
                std::fflush(log_);
                ++regains_;
                holding = !stop_;
                if (!holding) {
                    std::fprintf(log_, "E %s %lld released\n", path.c_str(), now_ns());
                    std::fflush(log_);
                }
            }
            co_await g.async_release(asio::as_tuple(use_awaitable));
            ++holds_;
        }
        co_await s.async_close(asio::as_tuple(use_awaitable));
        if (o_.recipe == "election")
            std::fprintf(
                stderr,
                "%s: %d leaderships, %d failed campaigns; commits %d landed, %d failed; proclaims %d "
                "landed, %d failed\n",
                o_.name.c_str(), holds_, failed_acquires_, commits_ok_, commits_failed_, proclaims_ok_,
                proclaims_failed_);
        else
            std::fprintf(stderr, "%s: %d holds, %d failed acquires, %d regained after a suspension\n",
                         o_.name.c_str(), holds_, failed_acquires_, regains_);
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
    // One leadership's state, shared with its loss watcher.
    struct hold_state {
        explicit hold_state(const asio::any_io_executor& ex) : timer(ex) {}
        bool ended = false;       // its E line is written
        bool lost = false;        // ... and it was the loss signal's
        asio::steady_timer timer; // the wait between rounds; the loss signal cancels it
        // A slow stop (--slow-stop-ms): armed by the loss signal itself, so that its S line comes
        // on time even while the coroutine waits on a write that was in flight at the loss.
        std::chrono::milliseconds slow_stop{0};
        std::shared_ptr<asio::steady_timer> stop; // (made by the loss signal)
        bool stopped = false;                     // its S line is written
    };

    // --recipe election: one campaign on `path`, and if it wins, one leadership (see the header).
    asio::awaitable<void> lead(zklock::session& s, const std::string& path,
                               std::uniform_int_distribution<int>& pick_hold,
                               std::uniform_int_distribution<int>& pick_slow_stop) {
        auto ex = co_await asio::this_coro::executor;
        const std::string data = path + "-data";
        if (!data_nodes_.count(data)) { // persistent; an existing node is no error
            auto [ec] = co_await zklock::async_create_node(s, data, "", asio::as_tuple(use_awaitable));
            if (ec) {
                std::fprintf(stderr, "%s: create %s: %s\n", o_.name.c_str(), data.c_str(),
                             ec.message().c_str());
                asio::steady_timer pause(ex, 50ms);
                co_await pause.async_wait(asio::as_tuple(use_awaitable));
                co_return;
            }
            data_nodes_.insert(data);
        }
        const std::string value = o_.name + "-" + std::to_string(++campaigns_);
        zklock::election_options eo;
        eo.dialect = o_.dialect == "kazoo" ? zklock::election_dialect::kazoo
                                           : zklock::election_dialect::curator_selector;
        zklock::election e(s, path, eo);
        auto [ec, l] = co_await e.async_campaign_for(value, 10s, asio::as_tuple(use_awaitable));
        if (ec) {
            ++failed_acquires_;
            asio::steady_timer pause(ex, 50ms);
            co_await pause.async_wait(asio::as_tuple(use_awaitable));
            co_return;
        }
        const long long token = l.fencing_token();
        std::fprintf(log_, "G %s %lld %lld %llx\n", path.c_str(), now_ns(), token,
                     static_cast<unsigned long long>(l.session_id()));
        std::fflush(log_);
        // the loss signal ends the hold at once (its E line), as in the mutex mode; a proclaim or
        // commit in flight then completes after it
        auto st = std::make_shared<hold_state>(ex);
        // (at least 1 ms: a draw of 0 wrote no S line, which the checker takes for a missing stop)
        if (o_.slow_stop_ms > 0) st->slow_stop = std::chrono::milliseconds(std::max(1, pick_slow_stop(rng_)));
        l.async_wait_lost([this, st, path](zklock::error_code lost) {
            if (st->ended || !lost || lost == zklock::errc::lock_released) return;
            st->ended = st->lost = true;
            std::fprintf(log_, "E %s %lld lost %s\n", path.c_str(), now_ns(), reason_name(lost));
            std::fflush(log_);
            st->timer.cancel();
            if (st->slow_stop.count() > 0) {
                st->stop = std::make_shared<asio::steady_timer>(st->timer.get_executor(), st->slow_stop);
                st->stop->async_wait([this, st, path](zklock::error_code) {
                    std::fprintf(log_, "S %s %lld\n", path.c_str(), now_ns());
                    std::fflush(log_);
                    st->stopped = true;
                });
            } else {
                st->stopped = true;
            }
        });
        const auto hold = std::chrono::milliseconds(pick_hold(rng_));
        const int rounds = 1 + static_cast<int>(rng_() % 3);
        const auto t0 = std::chrono::steady_clock::now();
        for (int k = 0; k < rounds && !st->ended; ++k) {
            co_await proclaim(l, path, token, value + "-p" + std::to_string(k));
            if (st->ended) break;
            co_await commit(l, path, token, data, value, k);
            if (st->ended) break;
            st->timer.expires_at(t0 + hold * (k + 1) / rounds);
            co_await st->timer.async_wait(asio::as_tuple(use_awaitable));
        }
        if (st->lost) {
            // A slow stop, as in the mutex mode: the worker acts for up to --slow-stop-ms after the
            // loss signal, counted from the signal (the loss handler armed it: the writes below
            // may wait behind a request in flight at the loss; counting from their end made an S
            // line late with no write landing, a false "slow stop" overlap).
            // After the loss signal nothing may land: a proclaim and commits that must fail.
            co_await proclaim(l, path, token, value + "-after-loss");
            co_await commit(l, path, token, data, value, -1);
            if (!st->stopped) co_await commit(l, path, token, data, value, -2); // (while still acting)
            while (!st->stopped) { // (resign only once it stopped acting, as the mutex mode releases)
                asio::steady_timer tick(ex, 1ms);
                co_await tick.async_wait(asio::as_tuple(use_awaitable));
            }
        } else {
            st->ended = true;
            std::fprintf(log_, "E %s %lld released\n", path.c_str(), now_ns());
            std::fflush(log_);
        }
        co_await l.async_resign(asio::as_tuple(use_awaitable));
        ++holds_;
    }

    asio::awaitable<void> proclaim(zklock::leadership& l, const std::string& path, long long token,
                                   const std::string& value) {
        const long long sent = now_ns();
        auto [ec] = co_await l.async_proclaim(value, asio::as_tuple(use_awaitable));
        const long long done = now_ns();
        if (!ec) {
            ++proclaims_ok_;
            std::fprintf(log_, "P %s %lld %lld %lld ok %s\n", path.c_str(), token, sent, done, value.c_str());
        } else {
            ++proclaims_failed_;
            std::fprintf(log_, "P %s %lld %lld %lld fail %s\n", path.c_str(), token, sent, done,
                         error_text(ec).c_str());
        }
        std::fflush(log_);
    }

    // k: the round (-1: after the loss signal; -2: at the end of a slow stop)
    asio::awaitable<void> commit(zklock::leadership& l, const std::string& path, long long token,
                                 const std::string& data, const std::string& value, int k) {
        zklock::transaction t;
        t.set_data(data,
                   "t=" + std::to_string(token) + " w=" + o_.name + " n=" + value + " k=" + std::to_string(k),
                   -1);
        const long long sent = now_ns();
        auto [ec, r] = co_await l.async_commit(std::move(t), asio::as_tuple(use_awaitable));
        const long long done = now_ns();
        if (!ec && r.ops.size() == 1) {
            ++commits_ok_;
            std::fprintf(log_, "C %s %lld %lld %lld ok %s %d\n", path.c_str(), token, sent, done,
                         data.c_str(), static_cast<int>(r.ops[0].version));
        } else {
            ++commits_failed_;
            std::fprintf(log_, "C %s %lld %lld %lld fail %s\n", path.c_str(), token, sent, done,
                         (ec ? error_text(ec) : std::string("none:0 success without its result")).c_str());
        }
        std::fflush(log_);
    }

    static std::string error_text(const zklock::error_code& ec) {
        std::string m = ec.message();
        for (auto& c : m)
            if (c == '\n') c = ' ';
        return std::string(error_name(ec)) + " " + ec.category().name() + ":" + std::to_string(ec.value()) +
               " " + m;
    }

    static const char* error_name(const zklock::error_code& ec) {
        using zklock::errc;
        using zklock::zk_errc;
        if (ec == errc::lock_lost) return "lock_lost";
        if (ec == errc::not_held) return "not_held";
        if (ec == errc::session_closed) return "session_closed";
        if (ec == errc::session_expired) return "session_expired";
        if (ec == errc::not_connected) return "not_connected";
        if (ec == zk_errc::connection_loss) return "connection_loss";
        if (ec == zk_errc::operation_timeout) return "operation_timeout";
        if (ec == zk_errc::session_expired) return "zk_session_expired";
        if (ec == zk_errc::closing) return "closing";
        if (ec == zk_errc::invalid_state) return "invalid_state";
        if (ec == zk_errc::no_node) return "no_node";
        return "other";
    }

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
    int holds_ = 0, failed_acquires_ = 0, regains_ = 0;
    // --recipe election
    std::set<std::string> data_nodes_; // created (or found) already
    int campaigns_ = 0, commits_ok_ = 0, commits_failed_ = 0, proclaims_ok_ = 0, proclaims_failed_ = 0;
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
