// The client-side lease of a session (loss_policy::lease): pure arithmetic over a clock that
// keeps counting while the machine is suspended, unit-tested with explicit times and no server.
#pragma once

#include <zklock/loss_policy.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <mutex>
#include <vector>

#include <time.h>

namespace zklock::detail {

/// Times are lease_clock nanoseconds; 0 means "never".
using lease_ns = std::int64_t;

/// The lease's clock: CLOCK_BOOTTIME, which keeps counting while the machine is suspended (the
/// servers' clocks do too; CLOCK_MONOTONIC, behind steady_clock, stops).
struct lease_clock {
    static lease_ns now() noexcept {
        timespec ts{};
        ::clock_gettime(CLOCK_BOOTTIME, &ts);
        return static_cast<lease_ns>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
    }
};

/// True when the server replied to the request: it reached a live server on this session.
/// Connection loss, timeouts, close, expiry and the C client's own refusals are not replies.
/// (Any server may have answered: a reply renews the lease only per renews_lease.)
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

/// How a request's successful reply vouches for the session (loss_policy::lease):
/// only a reply that went through the leader after the request was sent renews the lease.
enum class vouch : std::uint8_t {
    none,  ///< a read (exists, getData, getChildren): a follower answers it from its own copy,
           ///< even one cut off from the leader: it renews nothing
    sync,  ///< a sync: a follower answers it only after the leader's reply
    write, ///< a write: committed by the leader and a quorum before it is answered
};

/// True when the reply to a request of kind `v` renews the lease: a successful sync or write.
/// Errors never do (connection loss, timeouts, expiry, refusals; also a write's ZNODEEXISTS and
/// the like, which this does not need).
constexpr bool renews_lease(vouch v, int rc) noexcept { return v != vouch::none && rc == 0; }

/// The lease: the send time of the latest request whose reply renewed it (see renews_lease),
/// and the lapses that replies revealed. Written inside zookeeper_process (the C client's
/// completions, on the session's strand), read anywhere.
class session_lease {
public:
    /// A request sent at `sent` got a renewing reply at `now`. Out-of-order replies never move
    /// the lease back. If the lease had gone unrenewed for longer than the smallest lease
    /// fraction in use (set_watch_fraction) by then, the gap is remembered (lapse_since): a lapse
    /// is final even when no timer saw it. Returns true when such a gap was recorded.
    bool acknowledge(lease_ns sent, lease_ns now = 0) noexcept {
        auto cur = last_ack_send_.load(std::memory_order_relaxed);
        bool gap = false;
        if (now != 0 && cur != 0) {
            const double f = watch_fraction_.load(std::memory_order_relaxed);
            const auto t = timeout_.load(std::memory_order_relaxed);
            if (f > 0 && t > 0 && now - cur > static_cast<lease_ns>(f * static_cast<double>(t))) {
                record_gap(now, now - cur);
                gap = true;
            }
        }
        while (sent > cur && !last_ack_send_.compare_exchange_weak(cur, sent, std::memory_order_release,
                                                                    std::memory_order_relaxed)) {
        }
        return gap;
    }
    /// A new session (after an expiry): nothing of the old one vouches for it.
    void reset() noexcept {
        last_ack_send_.store(0, std::memory_order_release);
        std::lock_guard lk(gaps_mu_);
        gaps_.clear();
    }
    lease_ns last_ack_send() const noexcept { return last_ack_send_.load(std::memory_order_acquire); }

    /// The negotiated session timeout T (ns), and the smallest lease fraction held under: gaps
    /// longer than that x T are recorded. Set by the session (strand).
    void set_timeout(lease_ns t) noexcept { timeout_.store(t, std::memory_order_relaxed); }
    lease_ns timeout() const noexcept { return timeout_.load(std::memory_order_relaxed); }
    void set_watch_fraction(double f) noexcept { watch_fraction_.store(f, std::memory_order_relaxed); }

    /// The longest gap (ns) without renewal that ended after `since` (0: none recorded).
    lease_ns lapse_since(lease_ns since) const noexcept {
        std::lock_guard lk(gaps_mu_);
        // gaps_ is ordered by end time with decreasing lengths: the first one that ended after
        // `since` is the longest of those.
        for (const auto& g : gaps_)
            if (g.end > since) return g.length;
        return 0;
    }

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
    /// True if a lock held under `fraction` since `since` has lost its lease: lapsed now, or a
    /// recorded gap that ended after `since` was longer than fraction x T.
    bool lapsed_since(lease_ns since, lease_ns now, lease_ns timeout, double fraction) const noexcept {
        if (lapsed(now, timeout, fraction)) return true;
        const auto gap = lapse_since(since);
        return gap != 0 && gap > static_cast<lease_ns>(fraction * static_cast<double>(timeout));
    }

    /// The heartbeat period: heartbeat_fraction x T.
    static constexpr lease_ns heartbeat_interval(lease_ns timeout) noexcept {
        return static_cast<lease_ns>(loss_policy::heartbeat_fraction * static_cast<double>(timeout));
    }

    // ---- the derivation (README, "The lease"): bounds as fractions of T, for r = tickTime / T
    // (ZooKeeper enforces r <= 1/2) and the heartbeat interval h = T/10; d, the network delay,
    // comes on top of each.
    /// Cut between the holder's follower and the leader (or the follower frozen): the leader's
    /// last relayed touch is at most tickTime/2 + h older than the last leader-vouched send.
    static constexpr double follower_cut_expiry(double r) noexcept {
        return 1.0 - r / 2.0 - loss_policy::heartbeat_fraction;
    }
    /// The holder's own server is the leader, cut off from its quorum: it answers syncs alone
    /// until it steps down, at most 1.5 tickTime after the followers gave it up; the new leader
    /// gives every session a full T from its own start.
    static constexpr double isolated_leader_expiry(double r) noexcept { return 1.0 - 1.5 * r; }
    /// The guaranteed margin between the loss signal and the earliest expiry, in the worst of
    /// the single-fault cases, as a fraction of T: min(follower, isolated leader) - fraction.
    static constexpr double guaranteed_margin(double fraction, double r = 0.5) noexcept {
        return std::min(follower_cut_expiry(r), isolated_leader_expiry(r)) - fraction;
    }
    /// The follower stalls, resumes just long enough to answer a sync (its answer to the leader's
    /// ping cut off), and is cut again: the lease is renewed once more without the leader hearing
    /// of it. Margin: follower_cut_expiry - 2 x fraction.
    static constexpr double stall_resume_margin(double fraction, double r = 0.5) noexcept {
        return follower_cut_expiry(r) - 2.0 * fraction;
    }
    /// How long (as a fraction of T after the last renewing send) a lock lost by its lease while
    /// the session lives on keeps its node, unless released first: until the leader could have
    /// expired the session anyway if the holder's follower had been cut off (any tickTime
    /// ZooKeeper allows). The holder must stop within this; the next holder waits for it.
    static constexpr double handover_fraction() noexcept { return follower_cut_expiry(0.5); }

private:
    struct gap {
        lease_ns end;
        lease_ns length;
    };
    void record_gap(lease_ns end, lease_ns length) noexcept {
        std::lock_guard lk(gaps_mu_);
        // Keep the gaps ordered by end with decreasing lengths: an older gap no longer than a
        // newer one answers no query differently (every lock it covers, the newer covers too).
        while (!gaps_.empty() && gaps_.back().length <= length) gaps_.pop_back();
        if (gaps_.size() == max_gaps) {
            // Full: the newest two become one, the longer length with the later end. That can
            // only report a lapse to a lock granted between their ends, never miss one.
            gaps_[max_gaps - 2].end = gaps_[max_gaps - 1].end;
            gaps_.pop_back();
        }
        gaps_.push_back({end, length}); // (capacity reserved: no allocation here)
    }
    static constexpr std::size_t max_gaps = 64;

public:
    session_lease() { gaps_.reserve(max_gaps); }

private:
    std::atomic<lease_ns> last_ack_send_{0};
    std::atomic<lease_ns> timeout_{0};
    std::atomic<double> watch_fraction_{0};
    mutable std::mutex gaps_mu_;
    std::vector<gap> gaps_;
};

} // namespace zklock::detail
