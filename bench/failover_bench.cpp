// Holders and waiters through a ZooKeeper failover (bench/failover.sh): N sessions each hold a lock
// on their own path and lead an election of their own, and the first M paths each have a waiter
// (an acquire and a campaign) on a session of its own, all in one process (one io_context thread). The script kills the leader (or deposes it) while they hold.
// Ramp-up: connects, acquires, queues the waiters, then prints
//   READY <holders> <waiters> <negotiated_timeout_ms>
// on stdout. Then, while running, records per holder when it was told of a loss and why, per
// waiter when it was granted (the lock changed hands), and per session whether it left the
// connected state and whether its session survived (the same session id, connected at the end).
//   SIGUSR1  prints  MARK <requests> <heartbeats> <touches> <lease_renewals> <listings> <exists>
//                          <get_data> <creates> <deletes>  (summed over sessions)
//   SIGTERM/SIGINT  prints one JSON line (the counts, the losses' reasons, the first and last loss
//            and grant, in seconds after the last SIGUSR2), closes every session and exits.
//   SIGUSR2  marks the fault's moment (the script sends it as it kills the leader).
//   zklock_failover --connect C [--holders 100] [--waiters 100] [--session-timeout-ms 4000]
#include <zklock.hpp>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace asio = boost::asio;
using asio::use_awaitable;
using clk = std::chrono::steady_clock;

namespace {

struct holder {
    std::unique_ptr<zklock::session> session;
    std::int64_t session_id = 0;
    zklock::guard guard;
    std::int64_t token = 0;
    clk::time_point lost_at{};
    std::string why;
    bool disconnected = false; // left the connected state at some point
    zklock::leadership lead;   // its election on a path of its own (beside Curator's LeaderLatch)
    std::int64_t lead_token = 0;
    bool lead_lost = false;
};
struct waiter {
    std::unique_ptr<zklock::session> session;
    std::int64_t session_id = 0;
    zklock::guard guard;
    clk::time_point granted_at{};
    bool disconnected = false;
    zklock::leadership lead;
    clk::time_point led_at{}; // its campaign behind the holder's won: the leader changed
};

void watch_states(zklock::session& s, bool& disconnected) {
    auto st = std::make_shared<zklock::session_state>(s.state());
    auto loop = std::make_shared<std::function<void()>>();
    *loop = [&s, &disconnected, st, loop] {
        s.async_wait_state(*st, [&disconnected, st, loop](zklock::error_code ec, zklock::session_state next) {
            if (ec) {
                *loop = nullptr; // (ends the cycle of the loop's own reference)
                return;
            }
            if (next != zklock::session_state::connected) disconnected = true;
            *st = next;
            (*loop)();
        });
    };
    (*loop)();
}

} // namespace

int main(int argc, char** argv) {
    std::string connect = std::getenv("ZK_CONNECT") ? std::getenv("ZK_CONNECT") : "";
    int holders = 100, waiters = 100, timeout_ms = 4000;
    for (int i = 1; i + 1 < argc; i += 2) {
        std::string k = argv[i], v = argv[i + 1];
        if (k == "--connect")
            connect = v;
        else if (k == "--holders")
            holders = std::atoi(v.c_str());
        else if (k == "--waiters")
            waiters = std::atoi(v.c_str());
        else if (k == "--session-timeout-ms")
            timeout_ms = std::atoi(v.c_str());
        else {
            std::fprintf(stderr, "unknown option %s\n", k.c_str());
            return 2;
        }
    }
    waiters = std::min(waiters, holders);
    if (connect.empty() || holders <= 0) {
        std::fprintf(
            stderr,
            "usage: zklock_failover --connect C [--holders N] [--waiters M] [--session-timeout-ms T]\n");
        return 2;
    }
    asio::io_context io;
    std::vector<holder> hs(static_cast<std::size_t>(holders));
    std::vector<waiter> ws(static_cast<std::size_t>(waiters));
    const std::string base = "/zklock-bench/failover/" + std::to_string(::getpid()) + "/p";
    clk::time_point fault_at = clk::now();
    int failed = 0;
    auto options = [&] {
        zklock::session_options o;
        o.connect = connect;
        o.session_timeout = std::chrono::milliseconds(timeout_ms);
        o.connect_timeout = std::chrono::seconds(30);
        return o;
    };
    asio::co_spawn(
        io,
        [&]() -> asio::awaitable<void> {
            auto ex = co_await asio::this_coro::executor;
            for (int i = 0; i < holders; ++i) {
                auto& h = hs[static_cast<std::size_t>(i)];
                h.session = std::make_unique<zklock::session>(ex, options());
                co_await h.session->async_connect(use_awaitable);
                h.session_id = h.session->session_id();
                zklock::mutex m(*h.session, base + std::to_string(i));
                h.guard = co_await m.async_acquire(use_awaitable);
                h.token = h.guard.fencing_token();
                h.guard.async_wait_lost([&h](zklock::error_code ec) {
                    if (ec == zklock::errc::lock_released) return;
                    h.lost_at = clk::now();
                    h.why = ec.message();
                });
                zklock::election e(*h.session, base + "e" + std::to_string(i));
                h.lead = co_await e.async_campaign("h" + std::to_string(i), use_awaitable);
                h.lead_token = h.lead.fencing_token();
                h.lead.async_wait_lost([&h](zklock::error_code ec) {
                    if (ec != zklock::errc::lock_released) h.lead_lost = true;
                });
                watch_states(*h.session, h.disconnected);
            }
            for (int i = 0; i < waiters; ++i) {
                auto& w = ws[static_cast<std::size_t>(i)];
                w.session = std::make_unique<zklock::session>(ex, options());
                co_await w.session->async_connect(use_awaitable);
                w.session_id = w.session->session_id();
                watch_states(*w.session, w.disconnected);
                auto m = std::make_shared<zklock::mutex>(*w.session, base + std::to_string(i));
                m->async_acquire([&w, m](zklock::error_code ec, zklock::guard g) {
                    if (ec) return;
                    w.granted_at = clk::now();
                    w.guard = std::move(g);
                });
                auto e = std::make_shared<zklock::election>(*w.session, base + "e" + std::to_string(i));
                e->async_campaign("w" + std::to_string(i),
                                  [&w, e](zklock::error_code ec, zklock::leadership l) {
                                      if (ec) return;
                                      w.led_at = clk::now();
                                      w.lead = std::move(l);
                                  });
            }
            std::printf("READY %d %d %lld\n", holders, waiters,
                        static_cast<long long>(hs[0].session->negotiated_timeout().count()));
            std::fflush(stdout);
        },
        [&](std::exception_ptr e) {
            if (!e) return;
            try {
                std::rethrow_exception(e);
            } catch (const std::exception& x) {
                std::fprintf(stderr, "zklock_failover: %s\n", x.what());
            }
            failed = 1;
            io.stop();
        });

    asio::signal_set marks(io, SIGUSR1, SIGUSR2);
    std::function<void()> on_mark = [&] {
        marks.async_wait([&](zklock::error_code ec, int sig) {
            if (ec) return;
            if (sig == SIGUSR2) {
                fault_at = clk::now();
            } else {
                struct {
                    std::uint64_t requests = 0, heartbeats = 0, touches = 0, lease_renewals = 0, listings = 0,
                                  exists = 0, reads = 0, creates = 0, deletes = 0;
                } sum;
                auto add = [&](zklock::session& s) {
                    auto st = s.statistics();
                    sum.requests += st.requests(); // (the recipes' requests: heartbeats and touches apart)
                    sum.heartbeats += st.heartbeats;
                    sum.touches += st.touches;
                    sum.lease_renewals += st.lease_renewals;
                    sum.listings += st.get_children;
                    sum.exists += st.exists;
                    sum.reads += st.get_data;
                    sum.creates += st.creates;
                    sum.deletes += st.deletes;
                };
                for (auto& h : hs)
                    if (h.session) add(*h.session);
                for (auto& w : ws)
                    if (w.session) add(*w.session);
                std::printf("MARK %llu %llu %llu %llu %llu %llu %llu %llu %llu\n",
                            static_cast<unsigned long long>(sum.requests),
                            static_cast<unsigned long long>(sum.heartbeats),
                            static_cast<unsigned long long>(sum.touches),
                            static_cast<unsigned long long>(sum.lease_renewals),
                            static_cast<unsigned long long>(sum.listings),
                            static_cast<unsigned long long>(sum.exists),
                            static_cast<unsigned long long>(sum.reads),
                            static_cast<unsigned long long>(sum.creates),
                            static_cast<unsigned long long>(sum.deletes));
                std::fflush(stdout);
            }
            on_mark();
        });
    };
    on_mark();
    asio::signal_set stop(io, SIGTERM, SIGINT);
    stop.async_wait([&](zklock::error_code, int) {
        marks.cancel();
        auto s = [&](clk::time_point t) { return std::chrono::duration<double>(t - fault_at).count(); };
        int lost = 0, granted = 0, survived = 0, disconnected = 0, tokens_same = 0, regained = 0,
            lost_for_good = 0;
        int leaders_told = 0, leaders_kept = 0, leaders_changed = 0;
        double first_loss = 1e9, last_loss = -1e9, first_grant = 1e9, last_grant = -1e9;
        std::map<std::string, int> reasons;
        for (auto& h : hs) {
            if (!h.session) continue;
            if (h.lost_at != clk::time_point{}) {
                ++lost;
                ++reasons[h.why];
                first_loss = std::min(first_loss, s(h.lost_at));
                last_loss = std::max(last_loss, s(h.lost_at));
                if (h.guard.is_lost()) ++lost_for_good;
            }
            // held now (never lost, or regained after a suspension), with the grant's token
            if (h.guard.owns_lock() && !h.guard.is_lost() && h.guard.fencing_token() == h.token)
                ++tokens_same;
            regained += h.session->statistics().locks_regained > 0;
            leaders_told += h.lead_lost;
            leaders_kept += h.lead.owns_lock() && !h.lead.is_lost() && h.lead.fencing_token() == h.lead_token;
            if (h.session->session_id() == h.session_id &&
                h.session->state() == zklock::session_state::connected)
                ++survived;
            disconnected += h.disconnected;
        }
        for (auto& w : ws) {
            leaders_changed += w.led_at != clk::time_point{};
            if (w.granted_at == clk::time_point{}) continue;
            ++granted;
            first_grant = std::min(first_grant, s(w.granted_at));
            last_grant = std::max(last_grant, s(w.granted_at));
        }
        std::string rs;
        for (auto& [r, n] : reasons) rs += (rs.empty() ? "" : ", ") + ("\"" + r + "\": " + std::to_string(n));
        std::printf(
            "{\"holders\": %d, \"waiters\": %d, \"holders_told_lost\": %d, \"holders_regained\": %d, "
            "\"holders_lost_for_good\": %d, \"holders_kept_with_same_token\": %d, "
            "\"locks_changed_hands\": %d, \"holder_sessions_survived\": %d, \"holders_disconnected\": %d, "
            "\"first_loss_s\": %.3f, \"last_loss_s\": %.3f, \"first_grant_s\": %.3f, \"last_grant_s\": %.3f, "
            "\"leaders\": %d, \"leaders_told_lost\": %d, \"leaders_kept_with_same_token\": %d, "
            "\"leaders_changed\": %d, \"loss_reasons\": {%s}}\n",
            holders, waiters, lost, regained, lost_for_good, tokens_same, granted, survived, disconnected,
            lost ? first_loss : -1.0, lost ? last_loss : -1.0, granted ? first_grant : -1.0,
            granted ? last_grant : -1.0, holders, leaders_told, leaders_kept, leaders_changed, rs.c_str());
        std::fflush(stdout);
        for (auto& w : ws) {
            w.guard = {};
            w.lead = {};
        }
        for (auto& h : hs) {
            h.guard = {};
            h.lead = {};
        }
        io.stop(); // (the sessions close as they are destroyed: the servers delete their nodes)
    });
    io.run();
    return failed;
}
