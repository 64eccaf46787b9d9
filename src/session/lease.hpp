// The client-side lease of a session (loss_policy::lease): pure bookkeeping over a clock that
// keeps counting while the machine is suspended, unit-tested with explicit times and no server.
// The derivation it implements is in docs/lease.md.
#pragma once

#include <zklock/loss_policy.hpp>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <mutex>
#include <vector>

namespace zklock::detail {

/// Times are nanoseconds of the lease's clock (platform::boot_now: CLOCK_BOOTTIME in production,
/// which counts while the machine is suspended); 0 means "never".
using lease_ns = std::int64_t;

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
    default:
        return false;
    }
}

/// What a request's reply proves about the ensemble (loss_policy::lease).
enum class vouch : std::uint8_t {
    touch,  ///< a read (or a write that failed): it reached the session's server and touched the
            ///< session there, nothing more; a follower cut off from the leader answers reads
    commit, ///< a successful write: the leader proposed it and a quorum logged it before the
            ///< reply, so the leader still led with a quorum after the request was sent
};

/// True when the reply to a request of kind `v` with code `rc` proves a commit.
constexpr bool proves_commit(vouch v, int rc) noexcept { return v == vouch::commit && rc == 0; }

/// The lease: the latest moment `v` at which the ensemble is known to have heard from the session
/// (the "vouched" time), from which no leader can expire the session before v + T.
///
/// Evidence (docs/lease.md, "The derivation"), all on one connection of the session:
///  (a) the connection's handshake, sent no earlier than `hs`, once a request on that connection
///      has been committed: the handshake touched the session at the leader itself (a follower
///      revalidates it there), that leader still led with a quorum when the commit came, and a
///      later leader starts after that commit;
///  (b) a request sent at `j` whose reply came at `j'`, once a request sent at k >= j' + G on
///      the same connection has been committed: j touched the session at its server before j',
///      and k reached that server after k, so at least G after the touch; the commit passed
///      through the server's link to the leader after that, and a follower sends the leader a
///      ping answer, carrying the sessions it heard from, at least every G (the premise, with
///      G = ping_gap T): one of them carried j's touch. Measuring from j's reply takes the
///      client link's delays and stalls out of the argument (j and k delivered in one burst
///      still have G between the touch and k's arrival), and a send time taken when a request
///      was only queued is safe here (k's real send is later still).
/// A lock is reported lost once now > v + (reference_offset + f) T: in the steady state of
/// heartbeats every T/10, `v + reference_offset T` is at most the last heartbeat's send less a
/// round trip. The margin before the earliest expiry is (1 - reference_offset - f) T, 0.2875 T
/// with the default f = 0.3, with no network delay to subtract: v is a send time, earlier than
/// any touch it stands for.
///
/// T is the smallest timeout negotiated in the session's life (a new leader restores a session
/// with its first T, and a late relay from an old follower carries the T it knew).
///
/// The evidence methods run on the session's strand, inside the C client's calls; the reads
/// (vouched, lapsed, ...) from any thread.
class session_lease {
public:
    /// G, the longest time between two ping answers a follower sends the leader, as a fraction
    /// of T (the premise): tickTime/2 plus the jitter of the leader's ping loop, the link and the
    /// follower's queue. ZooKeeper negotiates T >= 2 tickTime (minSessionTimeout), so tickTime/2
    /// <= T/4, and this leaves T/16 of jitter at tickTime = T/2 (125 ms at T = 2 s), 3T/16 at
    /// tickTime = T/4.
    static constexpr double ping_gap = 5.0 / 16;
    /// The heartbeat period while a lock is held (loss_policy::heartbeat_fraction).
    static constexpr double heartbeat = loss_policy::heartbeat_fraction;
    /// How long after the vouched time the lease's reference point lies, as a fraction of T.
    static constexpr double reference_offset = ping_gap + heartbeat;
    /// The earliest expiry after the reference point, as a fraction of T: the margin is this
    /// less the lease fraction, in every fault case of the derivation.
    static constexpr double expiry_after_reference = 1.0 - reference_offset;

    /// How evidence (b) is counted. The defaults are the library's; the model of the servers
    /// (test/unit/lease_model_test.cpp) also runs the earlier rule (G = T/4 between the
    /// two sends) to show what it missed.
    struct rules {
        double gap = ping_gap;       ///< G, as a fraction of T
        bool from_reply = true;      ///< G counted from j's reply (false: from j's send)
        bool confirm_revival = true; ///< a commit answered past v + T needs a later one (premise 8)
    };

    session_lease() { gaps_.reserve(max_gaps); }
    explicit session_lease(rules r) : rules_(r) { gaps_.reserve(max_gaps); }

    // ---- evidence (the session's strand) ----

    /// A new ZooKeeper session, whose first handshake is sent after `t`: nothing vouches for it.
    void start(lease_ns t) noexcept {
        vouched_.store(0, std::memory_order_release);
        next_hs_ = t;
        started_at_.store(t, std::memory_order_relaxed);
        last_seen_connected_ = 0;
        seen_connected_ = false;
        connection_ = false;
        first_answered_send_.store(0, std::memory_order_relaxed);
        ring_size_ = 0;
        confirm_from_.store(0, std::memory_order_relaxed);
        timeout_.store(0, std::memory_order_relaxed); // (a new session: its own T)
        negotiated_.store(0, std::memory_order_relaxed);
        std::lock_guard lk(gaps_mu_);
        gaps_.clear();
    }
    /// The C client's state was read as connected (`connected`) or not after a call into it;
    /// `t` was read from the lease clock before the state. A handshake of the next connection is sent
    /// only after the C client gave up the current one, so after the last `t` seen connected.
    void saw_state(lease_ns t, bool connected) noexcept {
        if (connected) {
            last_seen_connected_ = t;
            seen_connected_ = true;
        } else if (seen_connected_) {
            next_hs_ = last_seen_connected_;
            seen_connected_ = false;
        }
    }
    /// A connection was established with negotiated timeout `timeout` (ns); its handshake was
    /// sent no earlier than the bound saw_state kept. Replies that follow are this connection's.
    /// `now`: when the C client reported it (inside zookeeper_process; for diagnostics, and for
    /// the older rule of the model: 0 there).
    ///
    /// The lease counts with the smallest T of the session's life: the server clamps the T the
    /// C client asks for to its own bounds, so a reconnect can raise it, while a new leader
    /// restores the session with the T of its createSession, and an old follower's late relay
    /// carries the T it knew. Every one of those expiries comes no earlier than v + T_min.
    ///
    /// A server also clamps T on a reconnect whose answer the client never reads (a lost or
    /// held-back ConnectResponse), after it revalidated the session at the leader with the
    /// clamped T: the leader's expiry can then come at that handshake + the clamped T, which no
    /// connected event reported. Premise 6 of docs/lease.md excludes it: every server the session
    /// can reach negotiates the same T, or the cap (set_timeout_cap: the smallest
    /// maxSessionTimeout of those servers) bounds the T counted here. A T that changes on a
    /// reconnect proves the servers' bounds differ: timeout_changes() counts it.
    void on_connected(lease_ns timeout, lease_ns now = 0) noexcept {
        const lease_ns old = timeout_.load(std::memory_order_relaxed);
        const lease_ns prev = negotiated_.load(std::memory_order_relaxed);
        if (prev != 0 && prev != timeout) timeout_changes_.fetch_add(1, std::memory_order_relaxed);
        lease_ns t = old != 0 && old < timeout ? old : timeout;
        const lease_ns cap = cap_.load(std::memory_order_relaxed);
        if (cap > 0 && cap < t) t = cap;
        timeout_.store(t, std::memory_order_relaxed);
        negotiated_.store(timeout, std::memory_order_relaxed);
        hs_ = seen_connected_ ? last_seen_connected_ : next_hs_;
        hs_seen_.store(hs_, std::memory_order_relaxed);
        connected_at_.store(now, std::memory_order_relaxed);
        first_answered_send_.store(0, std::memory_order_relaxed);
        connection_ = true;
        committed_here_ = false;
        ring_size_ = 0;
    }
    /// The largest T the lease counts with (ns; 0: none): session_options::lease_timeout_cap, the
    /// smallest maxSessionTimeout of the servers the session can reach, for an ensemble whose
    /// servers' session-timeout bounds differ (premise 6, docs/lease.md). Before the first
    /// connection.
    void set_timeout_cap(lease_ns cap) noexcept { cap_.store(cap, std::memory_order_relaxed); }
    /// Connections whose negotiated T differed from the previous connection's: each proves that
    /// the servers' session-timeout bounds differ (premise 6).
    std::uint64_t timeout_changes() const noexcept {
        return timeout_changes_.load(std::memory_order_relaxed);
    }
    /// A commit answered after the earliest expiry the lease knows of (now > v + T: its evidence
    /// no longer rules out that the leader was expiring the session) credits nothing by itself:
    /// the leader may have taken it in the window between ExpiryQueue.poll and setSessionClosing,
    /// where a request still passes the session check and commits just ahead of the closeSession
    /// (docs/lease.md, premise 8). Only a commit sent after its reply credits again (and credits
    /// what it vouches for): the closeSession that followed would have failed it. Until then
    /// awaiting_confirmation() is true, and an acquire renews again at once.
    bool awaiting_confirmation() const noexcept { return confirm_from_.load(std::memory_order_relaxed) != 0; }
    /// The server answered a request sent at `sent` on the current connection, at `now`;
    /// `commit`: it proved a commit (proves_commit). Returns true if it moved the vouched time
    /// after the lease of the smallest fraction in use had lapsed (a gap: the lapse is final,
    /// see lapse_since).
    bool on_reply(lease_ns sent, bool commit, lease_ns now) noexcept {
        if (!connection_) return false;
        // Rule (b) counts G from the reply (`now`). The older rule, G between the sends, counted
        // a request queued before this connection (handed to the C client while it reconnected)
        // as sent at the connection; the model runs it with no connection time.
        const lease_ns key =
            rules_.from_reply ? now : std::max(sent, connected_at_.load(std::memory_order_relaxed));
        if (first_answered_send_.load(std::memory_order_relaxed) == 0)
            first_answered_send_.store(key, std::memory_order_relaxed);
        bool gap = false;
        if (commit) {
            if (now - sent > slowest_commit_.load(std::memory_order_relaxed))
                slowest_commit_.store(now - sent, std::memory_order_relaxed);
            // A revival (premise 8): a commit answered past the earliest expiry the lease knows
            // of confirms only with a later commit, sent after the first one's reply.
            const lease_ns cur = vouched_.load(std::memory_order_relaxed);
            const lease_ns pending = confirm_from_.load(std::memory_order_relaxed);
            if (rules_.confirm_revival && cur != 0 && now > cur + timeout_.load(std::memory_order_relaxed) &&
                (pending == 0 || sent < pending)) {
                if (pending == 0) confirm_from_.store(now, std::memory_order_relaxed);
                remember(sent, key);
                return false;
            }
            confirm_from_.store(0, std::memory_order_relaxed);
            lease_ns cand = 0;
            if (!committed_here_) {
                committed_here_ = true;
                cand = hs_; // (a)
            }
            const lease_ns t = timeout_.load(std::memory_order_relaxed);
            const lease_ns limit = sent - static_cast<lease_ns>(rules_.gap * static_cast<double>(t));
            // (b): the latest answered request whose reply came at or before `limit`; older
            // entries are useless now (later commits are sent later).
            std::size_t found = ring_size_;
            for (std::size_t i = ring_size_; i-- > 0;)
                if (ring_[i].key <= limit) {
                    found = i;
                    break;
                }
            if (found != ring_size_) {
                cand = std::max(cand, ring_[found].sent);
                std::copy(ring_.begin() + static_cast<std::ptrdiff_t>(found),
                          ring_.begin() + static_cast<std::ptrdiff_t>(ring_size_), ring_.begin());
                ring_size_ -= found;
            }
            gap = credit(cand, now);
        }
        remember(sent, key);
        return gap;
    }

    /// A request was handed to the C client at `t` (strand); `commit`: a write (vouch::commit).
    void note_send(lease_ns t, bool commit) noexcept {
        last_send_.store(t, std::memory_order_relaxed);
        if (commit) last_commit_send_.store(t, std::memory_order_relaxed);
    }

    // ---- reads (any thread) ----

    /// When the session last handed a request to the C client.
    lease_ns last_send() const noexcept { return last_send_.load(std::memory_order_relaxed); }
    /// The longest time from a commit's send to its reply, over the session's life (ns).
    lease_ns slowest_commit() const noexcept { return slowest_commit_.load(std::memory_order_relaxed); }
    /// When the session last handed a write to the C client.
    lease_ns last_commit_send() const noexcept { return last_commit_send_.load(std::memory_order_relaxed); }

    /// The vouched time v (0: nothing vouches for the session).
    lease_ns vouched() const noexcept { return vouched_.load(std::memory_order_acquire); }
    /// The session timeout T (ns) the lease counts with: the smallest negotiated in the session's
    /// life (0 before its first connection).
    lease_ns timeout() const noexcept { return timeout_.load(std::memory_order_relaxed); }
    /// The timeout negotiated on the current connection (0 before the first).
    lease_ns negotiated() const noexcept { return negotiated_.load(std::memory_order_relaxed); }
    /// The smallest lease fraction held under: gaps longer than that are recorded.
    void set_watch_fraction(double f) noexcept { watch_fraction_.store(f, std::memory_order_relaxed); }

    /// When a lock under a lease of `fraction` stops being vouched for (0: never vouched).
    static constexpr lease_ns deadline(lease_ns vouched, lease_ns timeout, double fraction) noexcept {
        if (vouched == 0) return 0;
        return vouched + static_cast<lease_ns>((reference_offset + fraction) * static_cast<double>(timeout));
    }
    /// True once `now` is past the deadline (always true before the first evidence).
    static constexpr bool lapsed(lease_ns vouched, lease_ns now, lease_ns timeout, double fraction) noexcept {
        return vouched == 0 || now > deadline(vouched, timeout, fraction);
    }
    bool lapsed(lease_ns now, double fraction) const noexcept {
        return lapsed(vouched(), now, timeout(), fraction);
    }
    /// The earliest moment a leader could expire the session: v + T (0: unknown).
    lease_ns earliest_expiry() const noexcept {
        const lease_ns v = vouched();
        return v == 0 ? 0 : v + timeout();
    }
    /// The longest gap (ns past the reference point) that ended after `since` (0: none).
    lease_ns lapse_since(lease_ns since) const noexcept {
        std::lock_guard lk(gaps_mu_);
        // gaps_ is ordered by end time with decreasing lengths: the first one that ended after
        // `since` is the longest of those.
        for (const auto& g : gaps_)
            if (g.end > since) return g.length;
        return 0;
    }
    /// True if a lock held under `fraction` since `since` has lost its lease: lapsed now, or a
    /// recorded gap that ended after `since` was longer than fraction x T.
    bool lapsed_since(lease_ns since, lease_ns now, double fraction) const noexcept {
        if (lapsed(now, fraction)) return true;
        const auto gap = lapse_since(since);
        return gap != 0 && gap > static_cast<lease_ns>(fraction * static_cast<double>(timeout()));
    }

    /// The heartbeat period: heartbeat x T.
    static constexpr lease_ns heartbeat_interval(lease_ns timeout) noexcept {
        return static_cast<lease_ns>(heartbeat * static_cast<double>(timeout));
    }
    /// Whether a session that holds nothing should touch at `now`: it has sent nothing for a
    /// heartbeat period (the timer fires exactly then: next_touch_at).
    static constexpr bool touch_due(lease_ns last_send, lease_ns now, lease_ns timeout) noexcept {
        return now - last_send >= heartbeat_interval(timeout);
    }
    /// When a session that holds nothing touches next: a period after its last send, so that its
    /// sends stay at most a period apart, as a holder's heartbeats are (docs/lease.md, "Liveness":
    /// a commit at k then finds a request to credit, sent a period or less before one answered
    /// G before k).
    /// A period from `now` if that moment has passed (no send went out: nothing to space).
    static constexpr lease_ns next_touch_at(lease_ns last_send, lease_ns now, lease_ns timeout) noexcept {
        return period_after(last_send, now, timeout);
    }
    /// When a heartbeat should follow up a write sent at `last_commit` that is still in flight:
    /// a period after it (a grant may come at its reply, and the lease must not then wait a round
    /// trip for its next commit: docs/lease.md, "Liveness"). A period from `now` if that passed.
    static constexpr lease_ns next_heartbeat_at(lease_ns last_commit, lease_ns now,
                                                lease_ns timeout) noexcept {
        return period_after(last_commit, now, timeout);
    }
    /// The earliest moment a commit can vouch for anything sent on the current connection: G
    /// after its first reply (evidence (b)); until then only the handshake's bound vouches,
    /// which can lie far back (a slow TLS handshake, servers tried in turn). G from `now` if
    /// nothing on it was answered yet.
    lease_ns renewable_from(lease_ns now) const noexcept {
        const lease_ns s0 = first_answered_send_.load(std::memory_order_relaxed);
        const auto q = static_cast<lease_ns>(rules_.gap * static_cast<double>(timeout()));
        return s0 == 0 ? now + q : s0 + q;
    }
    /// The liveness premise as a fraction of T: round trips shorter than this keep a held lock
    /// that nothing threatens (docs/lease.md, "Liveness"). A heartbeat sent at k vouches for one
    /// sent at least a period and a round trip before k - G, so the deadline is at least
    /// f T - T/64 - r after k; the next heartbeat, a period later, must be answered before it:
    /// 2 r < (f - heartbeat - 1/64) T.
    static constexpr double liveness_bound(double fraction) noexcept {
        return (fraction - heartbeat - 1.0 / 64) / 2;
    }
    /// True if a lock granted now under `fraction` would likely be lost by the session's own
    /// slowness (docs/lease.md, "Liveness"). Once heartbeats can renew the lease (renewable_from
    /// has passed), it must not lapse within two heartbeat periods, at most fraction / 2: the
    /// first heartbeat then goes at the steady state's time. Before that (right after a
    /// connection), only a heartbeat sent after renewable_from can renew it, the first one at
    /// most a period after it: the lease must run a period and the liveness bound past it.
    bool too_short_to_grant(lease_ns now, double fraction) const noexcept {
        const lease_ns v = vouched(), t = timeout();
        if (v == 0 || t <= 0) return true;
        const lease_ns from = renewable_from(now);
        const double room =
            from > now ? heartbeat + liveness_bound(fraction) : std::min(2 * heartbeat, fraction / 2);
        return deadline(v, t, fraction) <
               std::max(now, from) + static_cast<lease_ns>(room * static_cast<double>(t));
    }
    /// How long (a fraction of T) an acquire seeks a lease with room for its first heartbeat
    /// (too_short_to_grant) before a lease that has merely not lapsed is enough. Long enough for
    /// evidence to exist: right after a connection (the handshake's bound can lie far back: a slow
    /// TLS handshake, servers tried in turn) only a commit sent G after the connection's first
    /// answer can vouch for it. Bounded, so that round trips near the liveness bound cannot
    /// livelock an acquire.
    static constexpr double grant_headroom_wait = 0.5;
    /// When an acquire that first found its lease short at `now` stops seeking headroom.
    static constexpr lease_ns grant_headroom_until(lease_ns now, lease_ns timeout) noexcept {
        return now + static_cast<lease_ns>(grant_headroom_wait * static_cast<double>(timeout));
    }
    /// The grant's check (lease_for_grant drives it; the simulator runs the same): true if a grant
    /// now must wait for a renewal. Until `headroom_until` (0: the acquire has not seen a short
    /// lease yet) the lease must leave its first heartbeats room (too_short_to_grant); after that,
    /// not lapsed is enough. A grant its lease does not vouch for is never given.
    bool too_short_for_grant(lease_ns now, double fraction, lease_ns headroom_until) const noexcept {
        const bool seeking = headroom_until == 0 || now < headroom_until;
        return seeking ? too_short_to_grant(now, fraction) : lapsed(now, fraction);
    }
    /// When the first heartbeat after a grant is due: a period after the lease's reference
    /// point v + reference_offset T (which the steady state keeps at or after the last
    /// heartbeat's send, less a round trip), or a period after the last write (`last_commit`,
    /// see next_heartbeat_at) if sooner, between `now` and a period from now. Right after a
    /// connection a heartbeat before renewable_from renews nothing itself, but it goes anyway:
    /// the heartbeats sent after renewable_from credit the ones answered G before them, so the
    /// sends must stay a period apart from the grant on.
    lease_ns first_heartbeat_at(lease_ns now, lease_ns last_commit) const noexcept {
        const lease_ns v = vouched(), t = timeout();
        if (v == 0 || t <= 0) return now;
        const lease_ns p = heartbeat_interval(t);
        const lease_ns steady = std::clamp(
            v + static_cast<lease_ns>(reference_offset * static_cast<double>(t)) + p, now, now + p);
        return std::min(steady, next_heartbeat_at(last_commit, now, t));
    }

    /// The lease's inputs at a glance, for diagnostics (a test's failure message, a log line).
    struct view {
        lease_ns started, connected, handshake_bound, first_answered_send, vouched, timeout;
    };
    view inspect() const noexcept {
        return {started_at_.load(std::memory_order_relaxed),
                connected_at_.load(std::memory_order_relaxed),
                hs_seen_.load(std::memory_order_relaxed),
                first_answered_send_.load(std::memory_order_relaxed),
                vouched(),
                timeout()};
    }

    /// The guaranteed margin between the loss signal and the earliest expiry, as a fraction of
    /// T, less the network's one-way delays (docs/lease.md): the same in every fault case.
    static constexpr double guaranteed_margin(double fraction) noexcept {
        return expiry_after_reference - fraction;
    }

private:
    /// A heartbeat period after `t`, or after `now` if that has passed.
    static constexpr lease_ns period_after(lease_ns t, lease_ns now, lease_ns timeout) noexcept {
        const lease_ns p = heartbeat_interval(timeout);
        return t + p > now ? t + p : now + p;
    }
    /// v := max(v, cand) at `now`; true if that revealed a lapse of the watched fraction.
    bool credit(lease_ns cand, lease_ns now) noexcept {
        const lease_ns cur = vouched_.load(std::memory_order_relaxed);
        if (cand <= cur) return false;
        bool gap = false;
        const double f = watch_fraction_.load(std::memory_order_relaxed);
        const lease_ns t = timeout_.load(std::memory_order_relaxed);
        if (cur != 0 && f > 0 && t > 0 && now > deadline(cur, t, f)) {
            record_gap(now, now - deadline(cur, t, 0.0));
            gap = true;
        }
        vouched_.store(cand, std::memory_order_release);
        return gap;
    }
    /// Keeps answered requests at least T/64 apart by send time (the older of two close ones: a
    /// query then finds an entry at most T/64 older than the best, never a newer one).
    void remember(lease_ns sent, lease_ns key) noexcept {
        const lease_ns t = timeout_.load(std::memory_order_relaxed);
        if (ring_size_ > 0) {
            const answered& last = ring_[ring_size_ - 1];
            if (sent - last.sent < t / 64) return;
            if (sent < last.sent || key < last.key) return; // (out of order: keep it sorted)
        }
        if (ring_size_ == ring_.size()) {
            std::copy(ring_.begin() + 1, ring_.end(), ring_.begin());
            --ring_size_;
        }
        ring_[ring_size_++] = {sent, key};
    }
    struct answered {
        lease_ns sent; // credited as v
        lease_ns key;  // G is counted from it: the reply (or the send, under the older rule)
    };
    struct gap_entry {
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

    std::atomic<lease_ns> vouched_{0};
    std::atomic<lease_ns> timeout_{0};    // the smallest T of the session's life
    std::atomic<lease_ns> negotiated_{0}; // the current connection's T
    std::atomic<lease_ns> cap_{0};        // the largest T counted (0: none)
    std::atomic<std::uint64_t> timeout_changes_{0};
    std::atomic<lease_ns> confirm_from_{0}; // a revival waits for a commit sent from then on (0: none)
    rules rules_{};
    std::atomic<double> watch_fraction_{0};
    std::atomic<lease_ns> last_send_{0};
    std::atomic<lease_ns> last_commit_send_{0};
    std::atomic<lease_ns> slowest_commit_{0};
    std::atomic<lease_ns> first_answered_send_{0};     // on the current connection (0: none yet)
    std::atomic<lease_ns> connected_at_{0};            // the current connection's on_connected `now`
    std::atomic<lease_ns> started_at_{0}, hs_seen_{0}; // (inspect only)
    // strand only:
    lease_ns next_hs_ = 0;             // a lower bound on the next connection's handshake send
    lease_ns last_seen_connected_ = 0; // the last time the state was read as connected
    bool seen_connected_ = false;      // ... and no read since found it otherwise
    bool connection_ = false;          // a connection was established since start()
    lease_ns hs_ = 0;                  // the current connection's handshake bound
    bool committed_here_ = false;      // a commit on the current connection used (a)
    std::array<answered, 96> ring_{};  // answered requests on the current connection, ascending
    std::size_t ring_size_ = 0;
    mutable std::mutex gaps_mu_;
    std::vector<gap_entry> gaps_;
};

} // namespace zklock::detail
