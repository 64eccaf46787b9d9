// zklock/loss_policy.hpp: when a held lock is reported lost while the session cannot confirm it.
#pragma once

#include <zklock/error.hpp>

namespace zklock {

/// When a lock that is still held in ZooKeeper's eyes is reported lost to its holder, because
/// this client can no longer vouch that it is. Set on the session (session_options::loss), and
/// per lock (mutex_options::loss).
///
/// Only the leader expires sessions, from "heard from" touches that followers relay to it in
/// their answers to its pings (every tickTime/2). A follower that freezes, or is cut off from
/// the leader, after replying to the client never relays its last touches; one cut off from the
/// leader alone even goes on answering reads from its own copy for syncLimit x tickTime. So
/// neither the moment the client notices a disconnect nor any reply from "a server" tells when
/// the leader will expire the session. A lease renewed only by replies that went through the
/// leader does (see lease()).
///
/// A holder paused longer than the margin (GC, swap, SIGSTOP of its own process) is covered only
/// by fencing tokens (guard::fencing_token): no policy can tell a paused process anything.
class loss_policy {
public:
    enum class kind {
        lease,         ///< the default; see lease()
        on_disconnect, ///< lost as soon as the connection drops
        on_expiry,     ///< lost only on a confirmed session expiry: UNSAFE, see on_expiry()
    };

    /// The default lease fraction f: see lease().
    static constexpr double default_lease_fraction = 0.3;
    /// The largest lease fraction the derivation covers: a follower that stalls, resumes just
    /// long enough to renew the lease once more, and is cut off again leaves a margin of
    /// (0.65 - 2f) T in the worst case ZooKeeper allows (tickTime = T/2).
    static constexpr double max_lease_fraction = 0.325;
    /// While the session holds a lock it sends a sync every heartbeat_fraction x T, T the
    /// negotiated session timeout.
    static constexpr double heartbeat_fraction = 0.1;

    /// The client-side lease (the default). The session remembers the send time s of the latest
    /// request whose reply went through the leader: a sync, which a follower answers only after
    /// the leader's reply, or a successful write. Reads renew nothing: a follower cut off from
    /// the leader answers them from its own copy. While the session holds a lock it sends a sync
    /// every T/10. A held lock is reported lost (errc::lease_expired) once now > s + fraction x T
    /// (a clock that counts through suspend), and a lapse is final: a renewal that arrives after
    /// it, or a lapse that no timer saw in time, does not bring the lock back.
    ///
    /// Guarantee (assumptions: T >= 2 x tickTime, which ZooKeeper enforces unless an operator
    /// lowers minSessionTimeout; the leader pings each follower every tickTime/2; the server
    /// expires a session no earlier than T after the last touch it received; the client's clock
    /// runs no faster than the servers'), with r = tickTime / T and d the one-way network delay:
    ///  - the holder's follower frozen or cut off from the leader: the leader cannot expire the
    ///    session before s + (1 - r/2 - 0.1) T - d >= s + 0.65 T - d; margin (0.65 - f) T - d,
    ///    0.35 T with the default;
    ///  - the holder connected to the leader, which is cut off from its quorum: it answers syncs
    ///    alone until it steps down, then a new leader gives every session a full T: margin
    ///    (1 - 1.5 r - f) T - d, 0.325 T with the default at r = 1/4; positive for r < 0.466;
    ///  - the follower stalls, resumes just long enough to answer one sync, and is cut again:
    ///    margin (0.65 - 2 f) T - d at r = 1/2, 0.05 T with the default.
    /// syncLimit does not enter. A lock lost by its lease while the session lives on keeps its
    /// node until its release, or until s + 0.65 T: the holder's window to stop.
    /// Cost: T/10 syncs, 10 / T requests per second per session while it holds at least one lock
    /// (1 per second with T = 10 s). A connection that drops and comes back within
    /// (fraction - 0.1) x T reports no loss.
    /// `fraction` must be in (0.1, 0.325]; anything else fails acquires (and async_connect, for
    /// the session's policy) with errc::invalid_lease_fraction.
    static constexpr loss_policy lease(double fraction = default_lease_fraction) noexcept {
        return loss_policy(kind::lease, fraction);
    }
    /// Lost (errc::lock_lost_suspended) as soon as the client notices the connection dropped.
    /// Not safer than the lease: the client notices a silent partition only 2/3 T after its last
    /// reply, which can be after the server expired the session (frozen follower). It reports a
    /// loss on every brief reconnect, too.
    static constexpr loss_policy on_disconnect() noexcept { return loss_policy(kind::on_disconnect, 0); }
    /// Lost only when the session's expiry is confirmed (errc::session_expired), which the client
    /// learns only on reconnecting. UNSAFE: during a partition the server expires the session and
    /// grants the lock to someone else while this holder still believes it holds it. For locks
    /// whose resource enforces fencing tokens, or where overlap is harmless.
    static constexpr loss_policy on_expiry() noexcept { return loss_policy(kind::on_expiry, 0); }

    constexpr kind type() const noexcept { return kind_; }
    /// The lease fraction (0 for the other kinds).
    constexpr double lease_fraction() const noexcept { return fraction_; }
    /// errc::invalid_lease_fraction for a lease fraction outside (heartbeat_fraction, max_lease_fraction].
    constexpr error_code validate() const noexcept {
        if (kind_ == kind::lease && !(fraction_ > heartbeat_fraction && fraction_ <= max_lease_fraction))
            return make_error_code(errc::invalid_lease_fraction);
        return {};
    }
    friend constexpr bool operator==(const loss_policy&, const loss_policy&) = default;

private:
    constexpr loss_policy(kind k, double f) noexcept : kind_(k), fraction_(f) {}
    kind kind_;
    double fraction_;
};

/// "lease", "on_disconnect", "on_expiry".
const char* to_string(loss_policy::kind k) noexcept;

} // namespace zklock
