// The state behind a guard: one granted lock node, following the session's fate.
#pragma once

#include "session/metrics.hpp"
#include "common/pending.hpp"
#include "session/regain_fsm.hpp"
#include "session/session_impl.hpp"
#include "session/timer.hpp"

#include <zklock/error.hpp>
#include <zklock/guard.hpp>
#include <zklock/loss_policy.hpp>

#include <boost/asio/bind_executor.hpp>
#include <boost/asio/cancellation_signal.hpp>

#include <atomic>
#include <map>
#include <set>
#include <vector>
#include <optional>
#include <memory>
#include <string>

namespace zklock::detail {

struct held_lock;

/// One operation bound to a lock's loss (guard::bind_loss): its own signal, emitted on the
/// operation's executor; kept alive by the operation's handler (asio::consign).
struct loss_binding {
    explicit loss_binding(asio::any_io_executor e) : ex(std::move(e)) {}
    asio::any_io_executor ex;
    asio::cancellation_signal signal;
    /// Posts the emission to the operation's executor (any thread).
    static void fire(const std::shared_ptr<loss_binding>& b);
};

/// Takes over a held_lock's node when its last hold is released (in-process hand-off: the node
/// belongs to a local queue, not to the grant).
struct release_hook {
    virtual ~release_hook() = default;
    /// Strand. `done` completes the user's async_release.
    virtual void local_release(held_lock& grant, std::optional<pending<void(error_code)>> done) = 0;
};

struct held_lock final : session_listener, std::enable_shared_from_this<held_lock> {
    /// held -> suspended (lease lapse, node kept) -> held again (regained) or lost.
    enum class status { held, suspended, lost, released };
    using waiter_map = std::map<std::uint64_t, pending<void(error_code)>>;
    /// What waits on a held lock: loss and revocation waiters, operations bound to its loss.
    /// Made by the first of them (most held locks never have one: 100,000 held locks, issue 46).
    struct waiters {
        std::set<std::uint64_t> cancelled_early; // cancelled before they were parked
        waiter_map loss, revoke;
        waiter_map verdict; // guard::async_wait_verdict: completed by a regain or a final loss
        std::vector<std::weak_ptr<loss_binding>> bindings;
    };
    enum class wait_kind { loss, revoke, verdict };

    held_lock(std::shared_ptr<session_impl> s, std::string node, std::int32_t seq, std::int64_t czxid,
              std::int64_t sid, std::uint32_t local_index = 0, std::shared_ptr<release_hook> hook = nullptr)
        : session(std::move(s)), node(std::move(node)), seq(seq), czxid(czxid), session_id(sid),
          local_index(local_index), hook(std::move(hook)) {}

    /// Registers with the session (strand). Call once, right after the grant.
    void start();
    /// The holder lets go (strand). `done` completes when the node is gone.
    void release(std::optional<pending<void(error_code)>> done);
    /// Loss waiters (strand). `id`: from new_waiter_id() (0: none, not cancellable).
    void wait_lost(pending<void(error_code)> h, std::uint64_t id = 0);
    /// Revocation waiters (strand).
    void wait_revoked(pending<void(error_code)> h, std::uint64_t id = 0);
    /// Any thread: an id for a waiter, and its cancellation installed in the handler's slot now,
    /// in the initiating function (a cancel that reaches the strand before the waiter is parked
    /// is remembered, not lost).
    std::uint64_t new_cancellable_waiter(wait_kind which, pending<void(error_code)>& h);
    /// Strand: cancel waiter `id` of `which`, parked or not yet.
    void cancel_waiter(wait_kind which, std::uint64_t id);
    void on_data(const std::string& data);
    /// Parks a loss or revocation waiter (cancellable) and arms the node watch.
    void park(wait_kind which, pending<void(error_code)> h, std::uint64_t id = 0);
    /// Strand: the waiters, made on first use.
    waiters& wait_state() {
        if (!waiters_) waiters_ = std::make_unique<waiters>();
        return *waiters_;
    }
    waiter_map& waiting(wait_kind which) {
        return which == wait_kind::loss     ? wait_state().loss
               : which == wait_kind::revoke ? wait_state().revoke
                                            : wait_state().verdict;
    }
    /// Strand: completes every loss and revocation waiter with `why`, drops the bindings (after
    /// firing them if `fire`) and the early cancellations; and the verdict waiters, with
    /// `verdict` (`why` if not given), unless `keep_verdicts` (a suspension).
    void end_waits(error_code why, bool fire, bool keep_verdicts = false,
                   std::optional<error_code> verdict = std::nullopt);
    /// Verdict waiters (strand): {} at once while held and not known lost, the reason once lost
    /// for good; parked while suspended (or lost by the clock but not yet reported).
    void wait_verdict(pending<void(error_code)> h, std::uint64_t id = 0);
    /// Arms a data watch on the node itself, once (strand).
    void arm_watch();
    void on_session_event(session_event e) override;
    void lose(error_code why);
    /// A loss seen once the server could have expired the session (past the lease's earliest
    /// expiry: after a pause of the process, a suspend, a blocked io_context): a deleted node or a
    /// lapsed lease may then be the expiry itself, so neither "deleted by another client" nor
    /// "the server may expire the session soon" may be said yet. is_lost() is true at once; the
    /// signal goes out with session_expired if the session turns out expired, else with
    /// `why`, as soon as one request on the session is answered (or after T/10: the reason is
    /// then `why`). `by_policy`: lose_by_policy rather than lose. Strand.
    void lose_after_finding_the_cause(error_code why, bool by_policy);
    /// Lost by the loss policy while the session may live on: the node is deleted at the
    /// release, or once the server could have expired the session anyway
    /// (session_impl::lease_handover_at), whichever comes first; the holder must have stopped by
    /// then. Not before: the next holder would get the lock while this one is only just told.
    void lose_by_policy(error_code why);
    /// When a node lost by policy now may be deleted (the lease's clock): see lose_by_policy.
    lease_ns handover_time() const;
    /// Strand: the deferred delete at handover_at (a timer, or now if that has passed).
    void schedule_lost_node_delete();
    /// Strand: the deferred delete of lose_by_policy, now (at most once).
    void delete_lost_node();
    /// Strand: lose_by_policy for a lapsed lease whose policy may regain: the holder is told as
    /// by lose() (is_lost() true, loss waiters, bindings), the node is kept, and the session's
    /// heartbeats go on checking it. docs/lease.md, "Suspended, then regained or lost".
    void suspend(error_code why);
    /// Strand: a heartbeat of the session (sent at `sent`) was answered while suspended: the
    /// regain's machine (session/regain_fsm.hpp) may read the node back, and regain it.
    void on_commit(lease_ns sent);
    /// Strand: carries out the regain machine's action.
    void perform_regain(regain_fsm::action a);
    /// Strand: cancels the suspension's timers and forgets it.
    void drop_suspension();
    /// Strand: held again, with the same node and fencing token.
    void regain();
    /// Strand: a suspension that ends without a regain: lost for good with `why`; the node is
    /// deleted (at the handover time kept at the suspension) if `delete_node`.
    void end_suspension(error_code why, bool delete_node);
    /// Leaves the session's listeners and lease (strand).
    void unregister();
    /// Any thread: lost, or (lease policy) the lease has lapsed. A lapse seen here sticks, and is
    /// reported through the loss signal at the strand's next lease check.
    bool is_lost_now() const noexcept;
    /// Any thread: why (errc::lease_expired for a lapse seen by is_lost_now()).
    error_code loss_reason_now() const;

    const std::shared_ptr<session_impl> session;
    const std::string node;
    const std::int32_t seq;
    const std::int64_t czxid;
    const std::int64_t session_id;
    const std::uint32_t local_index;          // the grant's index under its node (hand-off), else 0
    const std::shared_ptr<release_hook> hook; // hand-off: the node's owner, told of the release

    int holds = 1; // strand: guards sharing this node (reentrant acquires); deleted at 0
    std::atomic<bool> lost{false};
    /// Why it was lost (or suspended). Written on the strand before `lost` is set, and again
    /// when a suspension ends (while another thread may read it: two atomics, not an error_code).
    error_code reason() const noexcept {
        const auto* cat = reason_cat_.load(std::memory_order_acquire);
        return cat ? error_code(reason_val_.load(std::memory_order_acquire), *cat) : error_code();
    }
    void set_reason(error_code ec) noexcept {
        reason_val_.store(ec.value(), std::memory_order_release);
        reason_cat_.store(&ec.category(), std::memory_order_release);
    }
    std::atomic<int> reason_val_{0};
    std::atomic<const boost::system::error_category*> reason_cat_{nullptr};
    status st = status::held; // strand
    std::uint64_t listener_id = 0;
    std::uint64_t watch_id = 0;
    bool wants_watch = false; // someone asked for the node watch (loss or revocation waiters)
    std::atomic<std::uint64_t> next_waiter{1};
    std::unique_ptr<waiters> waiters_;          // strand: see waiters
    std::optional<loss_policy> policy_override; // set before start(); else the session's
    loss_policy policy = loss_policy::lease();  // resolved by start()
    bool lease_registered = false;              // strand
    std::uint64_t lease_id = 0;                 // strand: session_impl::lease_register's
    // the lease's clock: when start() (or a regain) found the lease valid (any thread reads it)
    std::atomic<lease_ns> lease_since{0};
    /// The lease_since of the hold whose lapse is_lost_now() saw (-1: none yet).
    mutable std::atomic<lease_ns> lease_seen_lapsed{-1};
    std::atomic<bool> finding_cause{false}; // lose_after_finding_the_cause is under way
    error_code tentative_reason;            // written on the strand before finding_cause is set
    // (The timers of a loss are made when it happens, not held in place: a held lock that is
    // never lost costs their 8-byte pointers, not their 330 bytes; issue 46's 100,000 held locks.)
    std::unique_ptr<timer> cause_timer;    // strand: its bound (boot)
    std::unique_ptr<timer> handover_timer; // strand: the deferred delete (lose_by_policy; boot)
    /// strand: the same, when no CLOCK_BOOTTIME timer could be made (no descriptor left: an Asio
    /// steady timer needs none; it can only fire late, after a suspend, keeping the node longer)
    std::unique_ptr<timer> handover_fallback;
    bool delete_deferred = false; // strand
    lease_ns handover_at = 0;     // strand: when a node lost by policy goes (lose_by_policy)
    bool fixed_name = false;      // unique_node: the name is not ours alone; delete only our incarnation
    /// A write node granted as the lowest: its release carries the release marker (protocol.hpp).
    bool marks_release = false;
    std::shared_ptr<path_metrics> metrics; // strand: set at the grant by the acquire's meter
    std::chrono::steady_clock::time_point granted_at{};
    /// Records the hold's end once (strand); with a loss reason, the loss too.
    void end_hold(const error_code* loss = nullptr) {
        if (!metrics) return;
        metrics->hold.observe(session->plat()->steady_now() - granted_at);
        if (loss) metrics->record_loss(*loss);
        metrics = nullptr;
    }
    bool revocable = false;
    bool revoke_requested = false;
    // -- a suspension (status::suspended); made when it happens, as the loss timers
    struct suspension {
        suspension(std::int64_t czxid, std::int64_t sid) : fsm(czxid, sid) {}
        regain_fsm fsm;                // the read after a heartbeat (session/regain_fsm.hpp)
        lease_ns since = 0;            // the lease's clock: when the lease was found lapsed
        lease_ns delete_at = 0;        // the handover time lose_by_policy would have used
        std::unique_ptr<timer> window; // the regain window's end (boot)
    };
    std::unique_ptr<suspension> susp; // strand
    std::atomic<bool> suspended_now{false};
    bool was_suspended = false; // strand: a later delete checks the incarnation (czxid)
};

/// Deletes the node `g` owns, then runs `then()` on the session's strand (for a waiter that must
/// not complete before the node is gone).
/// Counts an acquire of `path` on `s` from now to its completion (`p` completes it), by outcome;
/// a grant's hold is then counted by its held_lock (metrics, granted_at). recipes/meter.cpp.
void meter_acquire(session_impl& s, const std::string& path, pending<void(error_code, guard)>& p);

template <class F>
void release_then(guard g, F then) {
    auto h = g.state();
    auto& s = *h->session;
    h->release(
        pending<void(error_code)>(asio::any_completion_handler<void(error_code)>(asio::bind_executor(
                                      s.strand(), [then = std::move(then)](error_code) mutable { then(); })),
                                  s.executor()));
    // g's destructor posts a second release: a no-op
}

} // namespace zklock::detail
