// The race the lease must win (lease_test.cpp, process_test.cpp): session `a` holds a lock,
// session `b` waits for it; a fault cuts `a` off; the loss signal must reach `a` well before
// the server hands the lock to `b`.
#pragma once

#include "common.hpp"

#include "detail/lease.hpp"
#include "detail/session_impl.hpp"

#include <cstdio>
#include <functional>

namespace zt {

/// The session's lease inputs, in ms relative to `at` (lease_clock), for a failure message.
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
    zklock::error_code why; ///< the loss reason
    double loss_s = 0;      ///< the loss signal, seconds after the fault
    double grant_s = 0;     ///< b's grant, seconds after the fault
    zklock::guard holder;   ///< a's guard (lost)
    zklock::guard next;     ///< b's guard
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
    };
    auto st = std::make_shared<shared_state>();
    loss_race r;
    zklock::mutex ma(a, path), mb(b, path);
    r.holder = co_await ma.async_acquire(use_awaitable);
    const auto granted_ns = zklock::detail::lease_clock::now();
    const auto at_grant = describe_lease(a, granted_ns);
    r.holder.async_wait_lost([st](zklock::error_code ec) {
        st->why = ec;
        st->lost_at = clk::now();
    });
    mb.async_acquire_for(limit + 10s, [st](zklock::error_code ec, zklock::guard x) {
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
                      << static_cast<double>(zklock::detail::lease_clock::now() - granted_ns) / 1e6
                      << " ms after the grant";
    co_await sleep_for(phase);
    fault();
    auto t0 = clk::now();
    co_await eventually(
        [&] { return st->lost_at != clk::time_point{} && st->granted_at != clk::time_point{}; }, limit);
    if (after) after();
    r.lost = st->lost_at != clk::time_point{};
    r.granted = st->granted_at != clk::time_point{};
    r.why = st->why;
    r.loss_s = std::chrono::duration<double>(st->lost_at - t0).count();
    r.grant_s = std::chrono::duration<double>(st->granted_at - t0).count();
    r.next = std::move(st->next);
    co_return r;
}

} // namespace zt
