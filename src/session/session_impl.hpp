// The session: one ZooKeeper session over a link of its platform (zk_link.hpp, platform.hpp: in
// production the C client, bridge/zk_handle.hpp), its completions and events on one strand, plus
// the session-wide machinery the lock recipes share (listeners, watch registry, the lease,
// guaranteed background deletes).
//
// The parts, one file each:
//   session_connect.cpp    making the connection: checks, resolution, the TLS relay, the connect timeout
//   session_impl.cpp       the driver of the state machine; authentication, close; listeners, watches
//   session_fsm.hpp        the state machine's decisions, pure (events in, effects out)
//   session_heartbeat.cpp  the lease: its timer, heartbeats and touches (session/lease.hpp: its rules)
//   session_requests.cpp   the requests (zk_request, to the link)
//   session_cleanup.cpp    the guaranteed deletes (session/cleanup_rules.hpp: their decisions, pure)
#pragma once

#include "session/cleanup_fsm.hpp"
#include "session/session_tap.hpp"
#include "session/lease.hpp"
#include "session/platform.hpp"
#include "session/timer.hpp"
#include "session/zk_link.hpp"
#include <zklock/guard.hpp>
#include "session/metrics.hpp"
#include "common/pending.hpp"
#include "session/session_fsm.hpp"
#include "bridge/tls_relay.hpp"

#include <zklock/session.hpp>
#include <zklock/transaction.hpp>

#include <boost/asio/async_result.hpp>
#include <boost/asio/strand.hpp>

#include <zookeeper/zookeeper.h>

#include <atomic>
#include <functional>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <variant>
#include <vector>

namespace zklock::detail {

/// Session events delivered to listeners (on the strand).
enum class session_event {
    reconnected,   ///< connected (again): re-check and re-arm
    suspended,     ///< the connection dropped; the client reconnects with the same session
    lease_check,   ///< the lease timer fired: lease-policy locks check whether theirs lapsed
    expired,       ///< the session is gone
    closed,        ///< closed by us
    state_changed, ///< another change (connect timeout, no renewal): re-check the state
};

/// Anything whose fate follows the session: an acquire in progress, a held lock.
class session_listener {
public:
    virtual ~session_listener() = default;
    virtual void on_session_event(session_event e) = 0;
};

class session_impl final : public std::enable_shared_from_this<session_impl>, public zk_link_events {
public:
    using strand_type = asio::strand<asio::any_io_executor>;

    /// `plat`: time, timers and randomness (session/platform.hpp); null for the real one.
    session_impl(asio::any_io_executor ex, session_options opts, std::shared_ptr<platform> plat = nullptr);
    ~session_impl();

    const asio::any_io_executor& executor() const noexcept { return ex_; }
    strand_type& strand() noexcept { return strand_; }
    const session_options& options() const noexcept { return opts_; }
    /// The platform below the session: every clock read and timer above the seam comes from it.
    const std::shared_ptr<platform>& plat() const noexcept { return plat_; }
    /// `d` from now on the platform's steady clock, saturated as deadline.hpp's deadline_after: a
    /// `d` too large to add (milliseconds::max()...) means no deadline.
    template <class Rep, class Period>
    std::chrono::steady_clock::time_point
    steady_deadline(std::chrono::duration<Rep, Period> d) const noexcept {
        using clock = std::chrono::steady_clock;
        const auto now = plat_->steady_now();
        if (d <= d.zero()) return now;
        const std::chrono::duration<double> room = clock::time_point::max() - now;
        if (std::chrono::duration<double>(d) >= room / 2) return clock::time_point::max();
        return now + std::chrono::duration_cast<clock::duration>(d);
    }
    /// What the last connect that timed out got from each server (zk_handle::attempts); "" if none.
    std::string last_connect_attempts() const {
        std::lock_guard lk(attempts_mu_);
        return last_attempts_;
    }

    // -- thread-safe snapshots --
    session_state state() const noexcept { return state_.load(std::memory_order_acquire); }
    std::int64_t session_id() const noexcept { return session_id_.load(std::memory_order_acquire); }
    std::chrono::milliseconds negotiated_timeout() const noexcept {
        return std::chrono::milliseconds(timeout_ms_.load(std::memory_order_acquire));
    }
    session_statistics statistics() const noexcept;
    std::uint64_t generation() const noexcept { return generation_.load(std::memory_order_acquire); }

    // -- the lease (loss_policy::lease); thread-safe reads --
    /// True once no request sent within the last `fraction` x T got a reply that went through
    /// the leader (see loss_policy).
    bool lease_lapsed(double fraction) const noexcept;
    /// True if a grant now must wait for a renewal (session_lease::too_short_for_grant): until
    /// `headroom_until` (0: not yet) the lease must leave its first heartbeats room (two
    /// heartbeat periods, at most half the fraction, from when heartbeats can first renew it);
    /// after that, not lapsed is enough. lease_for_grant seeks the headroom for T/2 at most: slow
    /// replies can leave it a few milliseconds, and right after a connection nothing can be
    /// vouched for before G.
    bool lease_too_short_for_grant(double fraction, lease_ns headroom_until) const noexcept;
    /// True while a commit answered past the lease's earliest known expiry waits for a later one
    /// to confirm it (session_lease::awaiting_confirmation): a renewal sent now would.
    bool lease_awaits_confirmation() const noexcept { return lease_->awaiting_confirmation(); }
    /// True if a lock held under `fraction` since `since` (the lease clock) has lost its lease: lapsed
    /// now, or lapsed at some time after `since` that a later renewal revealed (final).
    bool lease_lapsed_since(lease_ns since, double fraction) const noexcept;
    /// (the lease clock) Until when a lock lost by its lease keeps its node: the last renewing send
    /// plus session_lease::handover_fraction() x T (0: never renewed).
    lease_ns lease_handover_at() const noexcept;
    /// Tests: how often the heartbeat timer was armed (a timerfd_settime and a reactor wait each).
    std::uint64_t heartbeat_timer_arms() const noexcept {
        return heartbeat_timer_arms_.load(std::memory_order_relaxed);
    }
    /// Tests: how many node checks the heartbeats carried in all.
    std::uint64_t heartbeat_checks_sent() const noexcept {
        return heartbeat_checks_sent_.load(std::memory_order_relaxed);
    }
    /// The most held nodes one heartbeat checks (session_heartbeat.cpp: a slice taken in turn).
    static constexpr std::size_t heartbeat_checks = 64;
    /// Strand: lease locks check their lease now (a renewal revealed a lapse).
    void check_lease() override;
    /// Strand only: why the session ended, for what it held or was waiting for when
    /// session_event::expired came: errc::session_expired, or zk_errc::auth_failed when the
    /// server refused the credentials on a reconnect.
    error_code end_reason() const noexcept { return end_reason_; }
    /// The policy a lock follows: its own override, else the session's.
    loss_policy policy_for(const std::optional<loss_policy>& override_) const noexcept {
        return override_ ? *override_ : opts_.loss;
    }
    /// (strand) A held lock under a lease of `fraction` on `node`: while one is registered, the
    /// heartbeat checks every held node in one multi every T/10. `on_gone` runs (strand) when
    /// a heartbeat finds the node deleted. Returns an id for lease_unregister.
    std::uint64_t lease_register(double fraction, std::string node, std::function<void()> on_gone);
    void lease_unregister(std::uint64_t id);
    /// (strand) A held lock whose lease lapsed and that may be regained (held_lock::suspend):
    /// it leaves the lease's fractions (the lease timer no longer looks at it) but stays with the
    /// heartbeats, which go on every period and check its node in turn (`on_gone` as before).
    /// After every heartbeat the server answered, `on_commit(sent)` runs with the heartbeat's
    /// send time: one write per period per session, whatever the number of suspended locks.
    void lease_suspend(std::uint64_t id, std::function<void(lease_ns)> on_commit);
    /// (strand) Back under the lease (a regain).
    void lease_resume(std::uint64_t id);
    /// (strand) Runs `fn` once the lease of `fraction` lapses, or the session ends, whichever
    /// comes first (bounds a release that waits for a reconnect).
    /// Returns an id for cancel_lease_lapse (0 if `fn` ran at once).
    std::uint64_t on_lease_lapse(double fraction, std::function<void()> fn);
    void cancel_lease_lapse(std::uint64_t id);

    // -- public operations (any thread) --
    void connect(pending<void(error_code)> h);
    void close(pending<void(error_code)> h);
    void wait_state(session_state last_seen, pending<void(error_code, session_state)> h);
    /// Synchronous close for the destructor of `session`.
    void shutdown() noexcept;

    // -- requests (call on the strand); the handler runs on the strand --
    // (The async_ wrappers copy their arguments: with use_awaitable the initiation runs later.)
    /// `acl`: null for the open ACL.
    void create(const std::string& path, const std::string& data, int flags, zk_handler h,
                const std::shared_ptr<const acl>& acl = nullptr);
    /// create2 immediately followed by getChildren(parent) in the same flight: ZooKeeper runs one
    /// session's requests in order, so the listing already contains the new node.
    void create_and_list(const std::string& path, const std::string& data, int flags,
                         const std::string& parent, zk_handler h,
                         const std::shared_ptr<const acl>& acl = nullptr);
    /// getChildren; with watch_id != 0 a child watch is armed (the herd-prone strategy only).
    /// A multi-op (zoo_amulti) of `ops`, all or nothing; a success renews the lease (a write).
    void multi(const std::vector<transaction::op>& ops, zk_handler h);
    void multi(const std::vector<transaction::op>& ops, zk_handler h, std::atomic<std::uint64_t>& counter);
    void get_children(const std::string& path, zk_handler h, std::uint64_t watch_id = 0);
    /// getData; with watch_id != 0 a watch is armed that calls the registered watch function.
    void get_data(const std::string& path, std::uint64_t watch_id, zk_handler h);
    /// Records which path (and kind) a registered watch is armed on, for drop_watch.
    void note_watch_path(std::uint64_t watch_id, const std::string& path, bool child);
    void exists(const std::string& path, zk_handler h);
    /// exists with a watch (`watch_id`): on a missing node it fires on the node's creation.
    void exists_watch(const std::string& path, std::uint64_t watch_id, zk_handler h);
    void remove(const std::string& path, int version, zk_handler h);
    void set_data(const std::string& path, const std::string& data, int version, zk_handler h);
    /// A multi holding one check of `node` ("/" if empty): committed by a quorum, so its success
    /// renews the lease (session_lease); an acquire sends it before a grant when the lease is
    /// short, checking its own node (which it can read: "/" may not be readable).
    void renew_lease(zk_handler h, const std::string& node = {});
    template <class Token>
    auto async_renew_lease(const std::string& node, Token&& t) {
        return asio::async_initiate<Token, void(zk_result)>(
            [this, node](auto h) { renew_lease(zk_handler(std::move(h)), node); }, t);
    }

    template <class Token>
    auto async_create_and_list(const std::string& path, const std::string& data, int flags,
                               const std::string& parent, Token&& t, std::shared_ptr<const acl> a = nullptr) {
        return asio::async_initiate<Token, void(zk_result)>(
            [this, path, data, flags, parent, a](auto h) {
                create_and_list(path, data, flags, parent, zk_handler(std::move(h)), a);
            },
            t);
    }
    template <class Token>
    auto async_create(const std::string& path, const std::string& data, int flags, Token&& t,
                      std::shared_ptr<const acl> a = nullptr) {
        return asio::async_initiate<Token, void(zk_result)>(
            [this, path, data, flags, a](auto h) { create(path, data, flags, zk_handler(std::move(h)), a); },
            t);
    }
    template <class Token>
    auto async_get_children(const std::string& path, Token&& t) {
        return asio::async_initiate<Token, void(zk_result)>(
            [this, path](auto h) { get_children(path, zk_handler(std::move(h))); }, t);
    }
    template <class Token>
    auto async_get_children_watch(const std::string& path, std::uint64_t watch_id, Token&& t) {
        return asio::async_initiate<Token, void(zk_result)>(
            [this, path, watch_id](auto h) { get_children(path, zk_handler(std::move(h)), watch_id); }, t);
    }
    template <class Token>
    auto async_get_data(const std::string& path, std::uint64_t watch_id, Token&& t) {
        return asio::async_initiate<Token, void(zk_result)>(
            [this, path, watch_id](auto h) { get_data(path, watch_id, zk_handler(std::move(h))); }, t);
    }
    template <class Token>
    auto async_exists(const std::string& path, Token&& t) {
        return asio::async_initiate<Token, void(zk_result)>(
            [this, path](auto h) { exists(path, zk_handler(std::move(h))); }, t);
    }
    template <class Token>
    auto async_remove(const std::string& path, Token&& t) {
        return asio::async_initiate<Token, void(zk_result)>(
            [this, path](auto h) { remove(path, -1, zk_handler(std::move(h))); }, t);
    }

    // -- watch registry (strand) --
    /// Registers `fn(event type)`, called once on the strand when the node watch fires.
    std::uint64_t add_watch(std::function<void(int)> fn);
    /// Forgets a watch. With `armed` (the request that set it succeeded) and the watch not fired,
    /// its watcher is also removed from the C client (zoo_aremove_watches), which otherwise
    /// keeps it until the node changes: a waiter that gives up behind a long hold would leave
    /// one watcher per attempt.
    /// `everywhere`: remove the session's watches on the path from the server too
    /// (zoo_aremove_all_watches), for a watch on a node that may never change: a release marker's.
    void drop_watch(std::uint64_t id, bool armed = false, bool everywhere = false);

    /// Per-session state of a recipe (strand), created by the recipe on first use.
    std::shared_ptr<void>& extension(std::uint64_t key) { return extensions_[key]; }

    // -- listeners (strand) --
    std::uint64_t add_listener(std::weak_ptr<session_listener> l);
    /// Strand: session_options::keep_lease_warm is false and nothing needs the lease now (no
    /// lock held, no acquire in progress, no write in flight): no touches.
    bool idle_and_cold() const noexcept;
    void remove_listener(std::uint64_t id) { listeners_.erase(id); }

    // -- guaranteed deletes (strand) --
    /// Deletes `node` now if connected, else on the next reconnect, until it is gone or the
    /// session ends. `done` (optional) completes when that happens.
    /// With `owner_czxid` != 0 the node is deleted only while it is still the one created with
    /// that czxid (a fixed name that someone else may have recreated: the unique_node strategy).
    /// With `marked`, the holder of a write node releases it with its release marker
    /// (protocol.hpp, release_marker), and deletes it plainly if the server refuses that.
    void delete_in_background(std::string node, std::optional<pending<void(error_code)>> done = std::nullopt,
                              std::int64_t owner_czxid = 0, bool marked = false);
    /// Same, for a node known only by the guid in its name (a create whose reply was lost).
    void delete_by_guid_in_background(std::string parent, std::string guid);
    /// Same, for a fixed-name node whose data starts with `guid` (cleanup_fsm::of_data_guid).
    void delete_if_data_guid_in_background(std::string node, std::string guid);
    /// Same, for a lock path an acquire made (or may have made) and never created a node in; the
    /// job ends if someone's node is in it by then (cleanup_fsm::of_unused_path).
    void delete_unused_path_in_background(std::string path);
    std::size_t background_deletes() const noexcept { return cleanups_.size(); }
    /// The lease's inputs (diagnostics: tests' failure messages).
    session_lease::view lease_view() const noexcept { return lease_->inspect(); }

    // -- called by the C-client bridge (on the strand) --
    void on_session_event(std::uint64_t gen, int state) override;
    /// The server's verdict on session_options::auth for handle generation `gen`.
    void on_auth_result(std::uint64_t gen, int rc) override;
    void on_watch(std::uint64_t id, int type) override;

    /// A test's tap on the session (session_tap.hpp): null outside tests. Set on the thread that
    /// runs the session's io_context.
    std::shared_ptr<session_tap> tap;
    /// A fresh guid for a lock node or a lease (format_guid of the platform's randomness), seen by
    /// the test's tap first.
    std::string new_guid();
    /// The holder description the recipes' nodes carry by default: "zklock <host> pid <pid>",
    /// from the platform (made once; any thread).
    const std::string& node_data() const;

    // metrics (session::metrics())
    metrics_registry& metrics() noexcept { return metrics_; }
    bool metrics_enabled() const noexcept { return opts_.metrics; }
    metrics_snapshot metrics_snapshot_now() const;
    std::atomic<std::uint64_t> n_reconnects{0}, n_expiries{0}, n_cleanup_retries{0}, n_cleanups_pending{0};
    std::atomic<std::int64_t> oldest_cleanup_ns{0}; // steady-clock ns of the oldest pending delete (0: none)

    // statistics
    std::atomic<std::uint64_t> n_create{0}, n_delete{0}, n_children{0}, n_get{0}, n_exists{0}, n_set{0},
        n_watch{0}, n_heartbeat{0}, n_unwatch{0}, n_renewal{0}, n_touch{0}, n_multi{0}, n_marked_grants{0},
        n_suspended{0}, n_regained{0}, n_suspensions_lost{0};

private:
    struct cleanup_job {
        cleanup_job(cleanup_fsm m, std::chrono::steady_clock::time_point t) : fsm(std::move(m)), since(t) {}
        cleanup_fsm fsm; // what it deletes, and how far it got (session/cleanup_fsm.hpp)
        std::vector<pending<void(error_code)>> waiters;
        bool running = false; // a request or a back-off in flight
        std::chrono::steady_clock::time_point since;
        std::shared_ptr<timer> backoff; // a retry that waits
    };
    /// The metrics' view of cleanups_ (strand): how many, since when (the list is in age order).
    void cleanup_gauges() noexcept {
        n_cleanups_pending.store(cleanups_.size(), std::memory_order_relaxed);
        oldest_cleanup_ns.store(cleanups_.empty() ? 0
                                                  : std::chrono::duration_cast<std::chrono::nanoseconds>(
                                                        cleanups_.front().since.time_since_epoch())
                                                        .count(),
                                std::memory_order_relaxed);
    }

    void set_state(session_state s);
    /// At `at`, or connect_timeout from now.
    void arm_connect_timer(std::optional<std::chrono::steady_clock::time_point> at = std::nullopt);
    /// Resolves the connect string's host names with asio's resolver (never a getaddrinfo on the
    /// io_context), then `then(ec)` on the strand; the addresses land in resolved_connect_.
    void resolve_hosts(std::function<void(error_code)> then);
    std::string resolved_connect_;    // strand: what the C client is given ("": opts_.connect as it is)
    std::uint64_t resolve_epoch_ = 0; // strand: moved when an attempt is abandoned
    bool round_resolution_ = false;   // strand: a lookup after a failed round is under way
    std::chrono::steady_clock::time_point last_round_resolution_{};

public:
    /// (strand) The connect string the C client was given: addresses only, once the host names
    /// have been resolved (the options' string as it is when it names no host).
    const std::string& client_connect_string() const {
        return resolved_connect_.empty() ? opts_.connect : resolved_connect_;
    }
    /// (strand) Every server of handle `gen` failed once: look the host names up again, and give
    /// the C client the new addresses if they changed.
    void on_round_failed(std::uint64_t gen) override;

private:
public:
    /// (strand) The TLS relay (null without TLS), for tests.
    const std::shared_ptr<tls_relay>& relay() const noexcept { return relay_; }

private:
    /// (strand) The TLS relay of session_options::tls: made at the first connect; its listeners
    /// outlive handles and reconnects. Null without TLS.
    std::shared_ptr<tls_relay> relay_;
    /// (strand) Makes relay_ if TLS is on and it is not made yet: false (with ec) if the options
    /// are bad.
    bool make_relay(error_code& ec);
    /// (strand) A connection through the relay failed: a first connect fails at once with the
    /// TLS error once every server refused the handshake.
    void on_tls_failure(const std::string& server, const tls_failure& f);
    void cancel_connect(std::uint64_t id);
    void abandon_attempt(error_code why);
    void arm_lease_timer();
    void on_lease_timer();
    /// (strand) Sends a heartbeat (or a touch) now (`now`), and arms the next one unless one is
    /// armed already (`restart`: re-arm it anyway): T/10 later while a lock is held, else T/10
    /// after the last send.
    void arm_heartbeat(bool now, bool restart = false);
    /// (strand) The heartbeat (or touch) goes at `at` (the lease clock): the timer is armed for it,
    /// unless it is armed already for no later (it then waits on when it fires: heartbeat_due_).
    void schedule_heartbeat(lease_ns at);
    void arm_heartbeat_timer(lease_ns at);
    void send_heartbeat();
    void fire_lapse_waiters(bool all);
    void enter_closed();
    void notify(session_event e);
    /// (strand) A new zk_handle for resolved_connect_ (opts_.connect if empty, without TLS):
    /// handle_, or an error (tls_relay_bypassed, invalid_connect_string) and no handle.
    error_code start_handle();
    /// Closes a handle that is no longer the session one (never blocks: zk_handle::close).
    static void close_handle(std::shared_ptr<zk_link> h);
    void run_cleanups();
    void unwatch_everywhere(std::string path);
    void resend_unwatches();
    void unwatch_one_watcher(std::string path, std::uint64_t id, bool child);
    /// Starts (or starts again, after a retry's wait) the job's machine: its next request.
    void run_cleanup(std::list<cleanup_job>::iterator it);
    /// Carries out one action of the job's machine (cleanup_fsm.hpp).
    void perform_cleanup(std::list<cleanup_job>::iterator it, cleanup_action a);
    /// Waits as `plan` says (for the reconnect, or a capped back-off while connected), then
    /// run_cleanup: never gives up while the session lives.
    void retry_cleanup(std::list<cleanup_job>::iterator it, cleanup_rules::retry_plan plan);
    void finish_cleanup(std::list<cleanup_job>::iterator it, error_code ec);
    void finish_all_cleanups();
    bool cleanup_alive(std::uint64_t gen, std::uint64_t epoch) const noexcept;
    std::uint64_t cleanup_epoch_ = 0; // strand: moved by finish_all_cleanups (see cleanup_alive)
    bool refused_ = false;            // strand: the credentials were refused; no new handle yet
    /// Hands `r` to the link (counted in `counter`, if any); without a link `h` gets ZINVALIDSTATE.
    void send(zk_request r, zk_handler h, std::atomic<std::uint64_t>* counter);
    /// `h`, with its reply shown to the test's tap (as a request of kind `k` on `path`) first;
    /// `h` itself when there is no tap.
    zk_handler behind_tap(tapped_request k, const std::string& path, zk_handler h);
    /// get_data's request, sent now (get_data may hold it up for the test's tap).
    void get_data_now(const std::string& path, std::uint64_t watch_id, zk_handler h);
    /// A request the test's tap refused (session_tap::before): `h` completes with `rc`, posted.
    void refused_by_tap(int rc, zk_handler h);

    asio::any_io_executor ex_;
    strand_type strand_;
    session_options opts_;
    std::shared_ptr<platform> plat_;
    mutable std::once_flag node_data_once_;
    mutable std::string node_data_;
    metrics_registry metrics_{opts_.metrics_max_paths};

    std::atomic<session_state> state_{session_state::disconnected};
    std::atomic<std::int64_t> session_id_{0};
    std::atomic<int> timeout_ms_{0};
    std::atomic<std::uint64_t> generation_{0};
    std::atomic<bool> shut_down_{false};
    bool closed_done_ = false; // strand: enter_closed() ran

    std::shared_ptr<zk_link> handle_; // strand (and shutdown, after shut_down_ is set)
    std::mutex handle_mu_;            // guards handle_ against shutdown()
    mutable std::mutex attempts_mu_;  // guards last_attempts_
    std::string last_attempts_;       // see session::last_connect_attempts
    timer connect_timer_;
    std::shared_ptr<session_lease> lease_ = std::make_shared<session_lease>();
    timer lease_timer_; // (boot) fires at the earliest lease deadline in use
    timer
        heartbeat_timer_; // (boot) while connected: a heartbeat every T/10, or a touch T/10 after the last send
    std::map<double, std::size_t> lease_fractions_; // strand: held locks per lease fraction
    struct held_node {
        double fraction;
        std::string node;
        std::function<void()> on_gone;
        /// lease_suspend: out of the lease's fractions (its timer looks no more), still checked by
        /// the heartbeats; told of each heartbeat answered (its send time, the lease clock).
        std::function<void(lease_ns)> on_commit;
        bool suspended = false;
    };
    std::map<std::uint64_t, held_node> held_; // strand: lease_register
    std::set<std::uint64_t> suspended_;       // strand: the held_ ids under lease_suspend
    std::uint64_t heartbeat_cursor_ = 0;      // strand: the last held_ id a heartbeat checked
    lease_ns lease_checked_at_ = 0;           // strand: the lease timer's last turn
    std::map<std::uint64_t, std::pair<double, std::function<void()>>> lapse_waiters_;
    int heartbeats_in_flight_ = 0;
    bool heartbeat_armed_ = false;
    lease_ns heartbeat_due_ = 0; // strand: when the heartbeat (or touch) scheduled last is due
    std::atomic<std::uint64_t> heartbeat_timer_arms_{0};  // (tests: heartbeat_timer_arms())
    std::atomic<std::uint64_t> heartbeat_checks_sent_{0}; // (tests: heartbeat_checks_sent())
    std::vector<std::pair<std::uint64_t, pending<void(error_code)>>> connect_waiters_;
    error_code end_reason_ = make_error_code(errc::session_expired); // strand: see end_reason()
    bool auth_probe_needed_ = false;                                 // strand: see probe_auth()
    bool auth_probe_in_flight_ = false;
    bool auth_confirmed_ = true; // strand: the current handle's credentials were accepted (or none)
    /// The session state machine (session/session_fsm.hpp): its inputs, and its driver, which
    /// carries out the effects of `e` in order.
    session_fsm::facts fsm_facts() const noexcept;
    void feed(session_fsm::event e);
    void read_session_info();
    void complete_connect_waiters(error_code ec);
    /// Connected: completes the connect waiters once the connect string's chroot, if any, is
    /// known to exist (an exists on "/" under it, until one says so), else with
    /// errc::chroot_missing. No answer (the connection went) completes them as connected.
    void connect_waiters_connected();
    bool chroot_seen_ = false;            // strand: the chroot existed (or there is none to check)
    bool chroot_check_in_flight_ = false; // strand
    /// The credentials' verdict was lost with the connection: a request sent after them on the
    /// next connection tells (a reply means the server accepted them; a refusal closes it).
    void probe_auth();
    /// An attempt to connect is still under way: no connection yet, or one whose credentials
    /// the server has not accepted yet.
    bool attempt_in_progress() const noexcept;
    std::set<std::uint64_t> connects_cancelled_early_; // strand
    std::vector<pending<void(error_code)>> close_waiters_;
    std::map<std::uint64_t, std::pair<session_state, pending<void(error_code, session_state)>>>
        state_waiters_;
    std::atomic<std::uint64_t> next_state_waiter_{1};
    std::set<std::uint64_t> state_waits_cancelled_early_; // strand
    std::uint64_t next_id_ = 1;
    struct watch_entry {
        std::function<void(int)> fn;
        std::string path; ///< set when a request arms it
        bool child = false;
    };
    std::unordered_map<std::uint64_t, watch_entry> watches_;
    std::map<std::uint64_t, std::weak_ptr<session_listener>> listeners_;
    std::list<cleanup_job> cleanups_;
    /// Release markers' watch removals lost with the connection (unwatch_everywhere): sent again
    /// on the reconnect.
    std::vector<std::string> unwatch_again_;
    /// Removals of one watcher lost with the connection: the C client keeps the watcher and sets
    /// it again on the reconnect (SetWatches), so they are sent again then.
    struct unwatch_one {
        std::string path;
        std::uint64_t id;
        bool child;
    };
    std::vector<unwatch_one> unwatch_one_again_;
    std::map<std::uint64_t, std::shared_ptr<void>> extensions_;
};

} // namespace zklock::detail
