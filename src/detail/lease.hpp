// The client-side lease of a session (loss_policy::lease): pure arithmetic over steady_clock
// times, unit-tested with a controllable clock and no server.
#pragma once

#include <zklock/loss_policy.hpp>

#include <atomic>
#include <chrono>
#include <cstdint>

namespace zklock::detail {

/// Times are steady_clock nanoseconds since its epoch; 0 means "never".
using lease_ns = std::int64_t;

inline lease_ns to_lease_ns(std::chrono::steady_clock::time_point t) noexcept {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count();
}

/// True when the server replied to the request: it reached a live server on this session.
/// Connection loss, timeouts, close, expiry and the C client's own refusals are not replies.
constexpr bool is_server_reply(int rc) noexcept {
    switch (rc) {
    case 0:    // ZOK
    case -101: // ZNONODE
    case -102: // ZNOAUTH
    case -103: // ZBADVERSION
    case -108: // ZNOCHILDRENFOREPHEMERALS
    case -110: // ZNODEEXISTS
    case -111: // ZNOTEMPTY
    case -114: // ZINVALIDACL
    case -121: // ZNOWATCHER
        return true;
    default: return false;
    }
}

/// The lease: the send time of the latest request that got a reply. Written by the C client's
/// completion thread, read anywhere.
class session_lease {
public:
    /// A request sent at `sent` got a reply. Out-of-order replies never move the lease back.
    void acknowledge(lease_ns sent) noexcept {
        auto cur = last_ack_send_.load(std::memory_order_relaxed);
        while (sent > cur && !last_ack_send_.compare_exchange_weak(cur, sent, std::memory_order_release,
                                                                    std::memory_order_relaxed)) {
        }
    }
    /// A new session (after an expiry): nothing of the old one vouches for it.
    void reset() noexcept { last_ack_send_.store(0, std::memory_order_release); }
    lease_ns last_ack_send() const noexcept { return last_ack_send_.load(std::memory_order_acquire); }

    /// When a lock under a lease of `fraction` stops being vouched for (0: never acknowledged).
    static constexpr lease_ns deadline(lease_ns last_ack_send, lease_ns timeout, double fraction) noexcept {
        if (last_ack_send == 0) return 0;
        return last_ack_send + static_cast<lease_ns>(fraction * static_cast<double>(timeout));
    }
    /// True once `now` is past the deadline (always true before the first reply).
    static constexpr bool lapsed(lease_ns last_ack_send, lease_ns now, lease_ns timeout, double fraction) noexcept {
        return last_ack_send == 0 || now > deadline(last_ack_send, timeout, fraction);
    }
    bool lapsed(lease_ns now, lease_ns timeout, double fraction) const noexcept {
        return lapsed(last_ack_send(), now, timeout, fraction);
    }

    /// The heartbeat period: heartbeat_fraction x T.
    static constexpr lease_ns heartbeat_interval(lease_ns timeout) noexcept {
        return static_cast<lease_ns>(loss_policy::heartbeat_fraction * static_cast<double>(timeout));
    }
    /// The earliest the leader can expire the session, counted from the lease's send time, as a
    /// fraction of T, for a ratio tickTime / T (at most 1/2): 1 - tick/(2T) - heartbeat_fraction.
    static constexpr double earliest_expiry_fraction(double tick_over_timeout) noexcept {
        return 1.0 - tick_over_timeout / 2.0 - loss_policy::heartbeat_fraction;
    }
    /// The guaranteed margin between the loss signal and the earliest expiry, as a fraction of T
    /// (before the network delay d): worst case tick = T/2.
    static constexpr double guaranteed_margin(double fraction, double tick_over_timeout = 0.5) noexcept {
        return earliest_expiry_fraction(tick_over_timeout) - fraction;
    }

private:
    std::atomic<lease_ns> last_ack_send_{0};
};

} // namespace zklock::detail
