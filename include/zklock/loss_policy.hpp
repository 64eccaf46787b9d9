// zklock/loss_policy.hpp: when a held lock is reported lost while the session cannot confirm it.
#pragma once

#include <zklock/error.hpp>

namespace zklock {

/// When a lock that is still held in ZooKeeper's eyes is reported lost to its holder, because
/// this client can no longer vouch that it is. Set on the session (session_options::loss), and
/// per lock (mutex_options::loss).
///
/// Only the leader expires sessions, from "heard from" touches that followers relay to it every
/// tickTime/2. A follower that freezes or is cut off after replying to the client never relays
/// its last touches, so the leader's clock for the session can run up to a ping interval plus
/// tickTime/2 behind the client's: a policy counted from the moment the client notices the
/// disconnect cannot be safe. A lease counted from the client's own traffic can (see lease()).
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
    static constexpr double default_lease_fraction = 1.0 / 3.0;
    /// While the session holds a lock it sends a cheap request (exists "/") every
    /// heartbeat_fraction x T, T the negotiated session timeout.
    static constexpr double heartbeat_fraction = 0.1;

    /// The client-side lease (the default). The session remembers the send time s of the latest
    /// request that got a reply from the server (any reply: the request reached a live server
    /// on this session); while it holds a lock it keeps a request going every T/10. A held lock
    /// is reported lost (errc::lease_expired) once now > s + fraction x T.
    ///
    /// Guarantee (assumptions: T >= 2 x tickTime, which ZooKeeper enforces unless an operator
    /// lowers minSessionTimeout; followers relay touches every tickTime/2; the server expires a
    /// session no earlier than T after its last relayed touch; clocks run at the same rate):
    /// the leader cannot expire the session, and so cannot hand the lock to anyone else, before
    ///     s + T - tickTime/2 - T/10 - d  >=  s + 0.65 T - d
    /// (d: one-way network delay plus the follower's queueing). The loss is reported at
    /// s + fraction x T, so the margin is at least (0.65 - fraction) x T - d: 0.317 T with the
    /// default 1/3. Cost: T/10 heartbeats, i.e. 10 / T requests per second per session while it
    /// holds at least one lock (1 per second with T = 10 s). A connection that drops and comes
    /// back within (fraction - 0.1) x T reports no loss.
    /// `fraction` must be in (0.1, 0.65]; anything else fails acquires with errc::invalid_argument.
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
    /// errc::invalid_argument for a lease fraction outside (heartbeat_fraction, 0.65].
    constexpr error_code validate() const noexcept {
        if (kind_ == kind::lease && !(fraction_ > heartbeat_fraction && fraction_ <= 0.65))
            return make_error_code(errc::invalid_argument);
        return {};
    }
    friend constexpr bool operator==(const loss_policy&, const loss_policy&) = default;

private:
    constexpr loss_policy(kind k, double f) noexcept : kind_(k), fraction_(f) {}
    kind kind_;
    double fraction_;
};

/// "lease(0.333)", "on_disconnect", "on_expiry".
const char* to_string(loss_policy::kind k) noexcept;

} // namespace zklock
