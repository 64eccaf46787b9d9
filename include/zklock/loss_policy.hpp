// zklock/loss_policy.hpp: when a held lock is reported lost while the session cannot confirm it.
#pragma once

#include <zklock/config.hpp>

#include <zklock/error.hpp>

#include <chrono>

namespace zklock {

/// When a lock that is still held in ZooKeeper's eyes is reported lost to its holder, because
/// this client can no longer vouch that it is. Set on the session (session_options::loss), and
/// per lock (mutex_options::loss).
///
/// Only the leader expires sessions. It hears of a session on a follower only through that
/// follower's answers to its pings, and a leader cut off from its quorum may be deposed at any
/// moment while it goes on answering reads and syncs alone. So neither the moment the client
/// notices a disconnect nor any read or sync reply tells when some leader may expire the
/// session. A write that a quorum committed does: see lease().
///
/// A holder paused longer than the margin (GC, swap, SIGSTOP of its own process) is covered only
/// by fencing tokens (guard::fencing_token): no policy can tell a paused process anything.
class ZKLOCK_DECL loss_policy {
public:
    /// The kind of policy (see lease(), on_disconnect(), on_expiry()).
    enum class kind {
        lease,         ///< the default; see lease()
        on_disconnect, ///< lost as soon as the connection drops
        on_expiry,     ///< lost only on a confirmed session expiry: UNSAFE, see on_expiry()
    };

    /// The default lease fraction f: see lease().
    static constexpr double default_lease_fraction = 0.3;
    /// The largest lease fraction: it leaves a margin of 0.1375 T.
    static constexpr double max_lease_fraction = 0.45;
    /// While the session holds a lock it sends a heartbeat every heartbeat_fraction x T, T the
    /// negotiated session timeout; the lease fraction must be larger.
    static constexpr double heartbeat_fraction = 0.1;

    /// The client-side lease (the default): a lock is reported lost (errc::lease_expired) at
    /// least (0.5875 - fraction) x T before any leader can expire the session and hand the lock
    /// on; 0.2875 T with the default. That margin is the holder's time to stop. T is the
    /// smallest session timeout negotiated in the session's life.
    ///
    /// How: the session keeps the latest moment v at which the ensemble is known to have heard
    /// from it, from the send and reply times of its requests on one connection and the replies
    /// to its writes, which a quorum commits (docs/lease.md). While it holds a lock it sends a
    /// heartbeat every T/10: a multi of a constant size (a write: a leader cut off from its
    /// quorum, or deposed, cannot answer it). While it holds none it sends a read of "/" whenever
    /// it has sent nothing for T/10 (the C client then sends no pings of its own), so that a
    /// grant is vouched for at once. A held lock is lost once now > v + (0.4125 + fraction) x T
    /// on CLOCK_BOOTTIME; in the steady state that is at most fraction x T after the last
    /// heartbeat's send. A lapse is final: a renewal that arrives after it, or a lapse that no
    /// timer saw in time, does not bring the lock back.
    ///
    /// Premises (docs/lease.md, each with how to check it): every follower sends the leader a
    /// ping answer at least every 5T/16 (tickTime/2 plus jitter: ZooKeeper's minSessionTimeout
    /// keeps tickTime <= T/2 unless an operator lowers it, which leaves T/16 of jitter at
    /// tickTime = T/2), and its answer carries every session it heard from; the client is
    /// connected to a participant, not to an observer behind an ObserverMaster (two relays)
    /// unless tickTime <= T/4; a new leader gives each session a full T from its own start; the
    /// client's clock runs no slower than the servers' (slow by a factor e shrinks the margin by
    /// about e (0.4125 + fraction) T). Not a premise: how soon the followers give up a leader,
    /// syncLimit, or the client link's delays and stalls. The heartbeat and the renewal before a
    /// grant check the session's own lock nodes, which need READ for their creator (a node ACL
    /// without it fails such a grant with errc::lease_check_denied); nothing needs READ on "/".
    ///
    /// Cost: one write every T/10 per session that holds a lock, of the same size whatever the
    /// number of locks it holds; a read every T/10 per connected session that holds none and
    /// sends nothing else (instead of the C client's pings every T/3). A connection that drops
    /// and comes back quickly (to any server) reports no loss: its handshake vouches for the
    /// session once a heartbeat commits.
    /// `fraction` must be in (0.1, 0.45]; anything else fails acquires (and async_connect, for
    /// the session's policy) with errc::invalid_lease_fraction.
    ///
    /// Suspension and regain (on by default, see with_regain_window): a lapse first *suspends*
    /// the lock. The holder is told exactly as above (is_lost() true, the loss signal, loss
    /// waiters and bound operations with errc::lease_expired), but the node is kept. The session's
    /// heartbeats go on (writes: only a leader with a quorum answers them); after one sent since
    /// the suspension is answered and the lease is valid again, the lock reads its node back. If
    /// the node is still the one this session created (its czxid and its owner), it existed
    /// without a gap from its create to the state that read saw, so nobody can have been granted
    /// the lock by then (an operator's break after that state is covered only by fencing, as
    /// during any hold), and the lock is *regained*: is_lost() turns false again, with the same
    /// fencing token (guard::async_wait_verdict). The node gone, the session expired or closed,
    /// or the regain window passed: the loss is final and the node is deleted as before. So a
    /// leader failover that the session survives, and after which its lease is valid again
    /// within the window, takes no lock away for good (docs/lease.md, "Suspended, then regained
    /// or lost").
    static constexpr loss_policy lease(double fraction = default_lease_fraction) noexcept {
        return loss_policy(kind::lease, fraction);
    }
    /// The default regain window: see with_regain_window.
    static constexpr std::chrono::milliseconds default_regain_window{60'000};
    /// A lease policy whose suspended locks may be regained for `window` after their suspension
    /// (zero or less: never; a lapse is then final at once, as before zklock 0.9). Longer than
    /// any leader election a session can survive in practice (an election can take seconds, a
    /// new leader then gives every session a full T); its only cost is how long a suspended
    /// holder waits for the verdict when the ensemble stays unreachable: the node of a session
    /// that expires goes with the session anyway, whatever the window.
    constexpr loss_policy with_regain_window(std::chrono::milliseconds window) const noexcept {
        loss_policy p = *this;
        p.regain_ms_ = window.count() > 0 ? window.count() : 0;
        return p;
    }
    /// How long a suspended lock may be regained (lease policies; zero: never).
    constexpr std::chrono::milliseconds regain_window() const noexcept {
        return std::chrono::milliseconds(kind_ == kind::lease ? regain_ms_ : 0);
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

    /// The policy's kind.
    constexpr kind type() const noexcept { return kind_; }
    /// The lease fraction (0 for the other kinds).
    constexpr double lease_fraction() const noexcept { return fraction_; }
    /// errc::invalid_lease_fraction for a lease fraction outside (heartbeat_fraction, max_lease_fraction].
    constexpr error_code validate() const noexcept {
        if (kind_ == kind::lease && !(fraction_ > heartbeat_fraction && fraction_ <= max_lease_fraction))
            return make_error_code(errc::invalid_lease_fraction);
        return {};
    }
    /// Equal when the kinds, the lease fractions and the regain windows are equal.
    friend constexpr bool operator==(const loss_policy&, const loss_policy&) = default;

private:
    constexpr loss_policy(kind k, double f) noexcept : kind_(k), fraction_(f) {}
    kind kind_;
    double fraction_;
    std::chrono::milliseconds::rep regain_ms_ = default_regain_window.count();
};

/// "lease", "on_disconnect", "on_expiry".
ZKLOCK_DECL const char* to_string(loss_policy::kind k) noexcept;

} // namespace zklock
