// The race the lease must win (lease_test.cpp, process_test.cpp): session `a` holds a lock,
// session `b` waits for it; a fault cuts `a` off; the loss signal must reach `a` well before
// the server hands the lock to `b`.
#pragma once

#include "common.hpp"

#include "session/lease.hpp"
#include "session/session_impl.hpp"

#include <cstdio>
#include <ctime>
#include <fstream>
#include <functional>
#include <optional>
#include <regex>

namespace zt {

/// The leader's own expiry of a session, from the servers' logs, as seconds after a moment t0.
struct leader_expiry {
    double logged = 0;          ///< when a server logged "Expiring session 0x<id>": a tick bucket
    double before_rounding = 0; ///< the leader's last news of the session + its T, before the
                                ///< rounding up to a tick; `logged` less a tick if not `exact`
    bool exact = false;         ///< before_rounding came from the leader's logged touches
};

/// When a server of the ensemble in `dir` expired session `session_id` (the leader's own expiry),
/// as seconds after `t0` (steady clock): the moment against which a lease's margin is measured, not
/// the next holder's grant (which adds the grant's latency). The servers log the wall clock's time
/// of day to the millisecond (zk.sh). The expiry is a tick bucket: ExpiryQueue rounds the last
/// touch + T up to the next tick. zk.sh has the leader's session tracker log every touch
/// ("Touch session: 0x<id> with timeout <ms>", ZK_TRACE_TOUCHES), so the expiry before its
/// rounding is the last touch that server logged before it expired the session, plus the timeout
/// of that touch (the one ExpiryQueue.update used). A server started again sets its trace mask
/// only once it serves, after a new leader's tracker took its sessions: then nothing was logged
/// since its start, and the expiry less one tick (`tick_s`) stands in, which is never later.
/// nullopt if no server logged the expiry (yet).
inline std::optional<leader_expiry> read_leader_expiry(const std::string& dir, std::int64_t session_id,
                                                       std::chrono::steady_clock::time_point t0,
                                                       int servers = 3, double tick_s = 0.5) {
    char hex[32];
    std::snprintf(hex, sizeof hex, "%llx", static_cast<unsigned long long>(session_id));
    const std::string clock = "^(\\d\\d):(\\d\\d):(\\d\\d)\\.(\\d{3}) ";
    const std::regex expired(clock + ".*Expiring session 0x" + std::string(hex) + ",");
    const std::regex touched(clock + ".*Touch session: 0x" + std::string(hex) + " with timeout (\\d+)");
    // t0 as a time of day (ms since local midnight), as the servers' JVMs print it
    const auto wall =
        std::chrono::system_clock::now() - std::chrono::duration_cast<std::chrono::system_clock::duration>(
                                               std::chrono::steady_clock::now() - t0);
    const std::time_t tt = std::chrono::system_clock::to_time_t(wall);
    std::tm tm{};
    ::localtime_r(&tt, &tm);
    const double t0_ms =
        ((tm.tm_hour * 60.0 + tm.tm_min) * 60.0 + tm.tm_sec) * 1000.0 +
        static_cast<double>(
            std::chrono::duration_cast<std::chrono::milliseconds>(wall.time_since_epoch()).count() % 1000);
    auto since_t0 = [&](const std::smatch& m) {
        const double at =
            ((std::stoi(m[1]) * 60.0 + std::stoi(m[2])) * 60.0 + std::stoi(m[3])) * 1000.0 + std::stoi(m[4]);
        double d = at - t0_ms;
        if (d < -43'200'000) d += 86'400'000; // (past midnight)
        return d / 1000;
    };
    // (the regexes run only on this session's lines: the logs hold every session's touches)
    const std::string touch_needle = "Touch session: 0x" + std::string(hex) + " with";
    const std::string expiry_needle = "Expiring session 0x" + std::string(hex) + ",";
    std::optional<leader_expiry> first;
    for (int i = 1; i <= servers; ++i) {
        std::ifstream in(dir + "/server" + std::to_string(i) + ".log");
        std::string l;
        std::smatch m;
        std::optional<double> last_touch; // + its timeout, s
        while (std::getline(in, l)) {
            if (l.rfind("=== zk.sh: server", 0) == 0) last_touch.reset(); // (started again)
            if (l.find(touch_needle) != std::string::npos && std::regex_search(l, m, touched)) {
                last_touch = since_t0(m) + std::stod(m[5]) / 1000;
            } else if (l.find(expiry_needle) != std::string::npos && std::regex_search(l, m, expired)) {
                leader_expiry x;
                x.logged = since_t0(m);
                x.exact = last_touch.has_value();
                x.before_rounding = x.exact ? *last_touch : x.logged - tick_s;
                if (!first || x.logged < first->logged) first = x;
            }
        }
    }
    return first;
}

/// read_leader_expiry's `logged`: when a server logged "Expiring session 0x<id>".
inline std::optional<double> logged_expiry(const std::string& dir, std::int64_t session_id,
                                           std::chrono::steady_clock::time_point t0, int servers = 3) {
    const auto x = read_leader_expiry(dir, session_id, t0, servers);
    return x ? std::optional<double>(x->logged) : std::nullopt;
}

/// tickTime of the servers in `dir` (zoo1.cfg), in seconds (0.5 if it cannot be read).
inline double tick_of(const std::string& dir) {
    std::ifstream in(dir + "/zoo1.cfg");
    for (std::string l; std::getline(in, l);)
        if (l.rfind("tickTime=", 0) == 0) return std::stod(l.substr(9)) / 1000;
    return 0.5;
}

/// The session's lease inputs, in ms relative to `at` (the lease clock), for a failure message.
inline std::string describe_lease(const zklock::session& s, zklock::detail::lease_ns at) {
    const auto v = s.impl()->lease_view();
    auto ms = [at](zklock::detail::lease_ns t) { return t == 0 ? 0.0 : static_cast<double>(t - at) / 1e6; };
    char buf[256];
    std::snprintf(
        buf, sizeof buf,
        "lease (ms from then): started %.1f, connected %.1f, handshake bound %.1f, first answered send "
        "%.1f, vouched %.1f, T %.0f",
        ms(v.started), ms(v.connected), ms(v.handshake_bound), ms(v.first_answered_send), ms(v.vouched),
        static_cast<double>(v.timeout) / 1e6);
    return buf;
}

struct loss_race {
    bool lost = false, granted = false;
    zklock::error_code why;                         ///< the loss reason
    double loss_s = 0;                              ///< the loss signal, seconds after the fault
    double grant_s = 0;                             ///< b's grant, seconds after the fault
    zklock::guard holder;                           ///< a's guard (lost)
    zklock::guard next;                             ///< b's guard
    std::chrono::steady_clock::time_point fault_at; ///< when fault() ran
    double margin() const { return grant_s - loss_s; }
};

/// `a` takes `path`, `b` queues behind it; `phase` after one of a's lease heartbeats, `fault()`
/// runs; then waits (at most `limit`) for both the loss signal and b's grant, and runs `after()`.
inline awaitable<loss_race> race_loss_against_grant(zklock::session& a, zklock::session& b,
                                                    const std::string& path, std::chrono::milliseconds phase,
                                                    std::function<void()> fault,
                                                    std::function<void()> after = {},
                                                    std::chrono::milliseconds limit = 8000ms) {
    using clk = std::chrono::steady_clock;
    // (shared with the handlers: a grant that comes after the wait below must not write into
    // this coroutine's frame)
    struct shared_state {
        clk::time_point lost_at{}, granted_at{};
        zklock::error_code why;
        zklock::guard next;
        bool race_over = false; // (the waiter's acquire is then cancelled if not granted)
    };
    auto st = std::make_shared<shared_state>();
    loss_race r;
    zklock::mutex ma(a, path), mb(b, path);
    r.holder = co_await ma.async_acquire(use_awaitable);
    const auto granted_ns = zklock::detail::real_platform()->boot_now();
    const auto at_grant = describe_lease(a, granted_ns);
    r.holder.async_wait_lost([st](zklock::error_code ec) {
        st->why = ec;
        st->lost_at = clk::now();
    });
    mb.async_acquire_for(limit + 10s, [st](zklock::error_code ec, zklock::guard x) {
        // (a waiter never granted within the race is cancelled as it ends: a holder whose
        // session survived regained its lock, see the callers)
        if (ec == boost::asio::error::operation_aborted && st->race_over) return;
        EXPECT_FALSE(ec) << ec.message();
        st->granted_at = clk::now();
        st->next = std::move(x);
    });
    co_await wait_for_children(b, path, 2);
    // (five heartbeats: the lease's steady state, vouched for by heartbeats rather than the
    // connection's handshake; the phase is counted from the last one)
    auto n = a.statistics().heartbeats;
    const auto beats_from = clk::now();
    co_await eventually(
        [&] { return a.statistics().heartbeats >= n + 5 || st->lost_at != clk::time_point{}; }, 10000ms);
    {
        const auto sa = a.statistics();
        const auto ma_ = a.metrics();
        EXPECT_GE(sa.heartbeats, n + 5)
            << "too few heartbeats while holding a lock: " << sa.heartbeats - n << " in "
            << std::chrono::duration<double>(clk::now() - beats_from).count() << " s (" << sa.heartbeats
            << " in all), touches " << sa.touches << ", slowest write " << sa.slowest_write.count() / 1000
            << " ms, state " << static_cast<int>(a.state()) << ", reconnects " << ma_.reconnects << ", lost "
            << (st->lost_at != clk::time_point{}) << " (" << st->why.message() << ")";
    }
    // (a loss before the fault makes every margin below meaningless: a failure of its own)
    // (the round then runs on, so that its waiter and sessions end as usual; its margins mean
    // nothing)
    if (st->lost_at != clk::time_point{})
        ADD_FAILURE() << "the lock was lost before the fault: " << st->why.message() << "; at the grant, "
                      << at_grant << "; now " << describe_lease(a, granted_ns) << ", lost at "
                      << std::chrono::duration<double, std::milli>(st->lost_at - clk::now()).count()
                      << " ms from now, now at "
                      << static_cast<double>(zklock::detail::real_platform()->boot_now() - granted_ns) / 1e6
                      << " ms after the grant";
    co_await sleep_for(phase);
    fault();
    auto t0 = clk::now();
    r.fault_at = t0;
    co_await eventually(
        [&] { return st->lost_at != clk::time_point{} && st->granted_at != clk::time_point{}; }, limit);
    st->race_over = true;
    if (after) after();
    r.lost = st->lost_at != clk::time_point{};
    r.granted = st->granted_at != clk::time_point{};
    r.why = st->why;
    r.loss_s = std::chrono::duration<double>(st->lost_at - t0).count();
    r.grant_s = std::chrono::duration<double>(st->granted_at - t0).count();
    r.next = std::move(st->next);
    co_return r;
}

/// The slack of an assertion against the leader's expiry before rounding: the loss callback's
/// scheduling on a loaded machine and the logs' millisecond clock; nothing of the network (the
/// margin is stated with none to subtract: docs/lease.md). 0.04 T at T = 1 s, 0.02 T at 2 s.
inline constexpr double expiry_allowance = 0.04;

/// The loss signal's lead over the leader's own expiry of session `sid` before its rounding to a
/// tick (read_leader_expiry; the log line is waited for up to 8 s), asserted to be at least `bound`
/// less `allowance` (the tests' slack for the loss callback's scheduling on a loaded machine) and
/// printed after `what`. `loss_s`: the loss signal, seconds after `t0`. Returns the lead before
/// rounding (nullopt: no server logged the expiry).
inline awaitable<std::optional<double>>
expect_lead_over_logged_expiry(const std::string& dir, std::int64_t sid,
                               std::chrono::steady_clock::time_point t0, double loss_s, double bound,
                               double allowance, const std::string& what, int servers = 3) {
    co_await eventually([&] { return logged_expiry(dir, sid, t0, servers).has_value(); }, 8000ms);
    const auto x = read_leader_expiry(dir, sid, t0, servers, tick_of(dir));
    EXPECT_TRUE(x.has_value()) << what << ": no \"Expiring session\" line in the servers' logs";
    if (!x) co_return std::nullopt;
    const double lead = x->before_rounding - loss_s;
    std::printf("  %s: the leader's expiry at +%.3f s (logged), +%.3f s before rounding (%s); the loss's "
                "lead over it %.3f s (bound %.3f s)\n",
                what.c_str(), x->logged, x->before_rounding, x->exact ? "its last touch + T" : "less a tick",
                lead, bound);
    EXPECT_GE(lead, bound - allowance) << what << ": against the leader's expiry before rounding";
    co_return lead;
}

} // namespace zt
