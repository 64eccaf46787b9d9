// zklock/session.hpp: one ZooKeeper session, bridged into an Asio executor.
#pragma once

#include <zklock/config.hpp>
#include <zklock/completion.hpp>

#include <zklock/acl.hpp>
#include <zklock/error.hpp>
#include <zklock/loss_policy.hpp>
#include <zklock/tls.hpp>

#include <boost/asio/any_completion_handler.hpp>
#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/async_result.hpp>

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

namespace zklock {

namespace asio = boost::asio;

namespace detail {
class session_impl;
class platform;
} // namespace detail

/// Where a session stands. Observable with session::state() and session::async_wait_state().
enum class session_state {
    disconnected, ///< not connected yet (or the last async_connect failed)
    connecting,   ///< async_connect in progress, or a new session is being made after an expiry
    connected,    ///< the session is live; locks are held
    suspended,    ///< the connection dropped; the client is reconnecting with the same session.
                  ///< Locks are still held unless their loss policy (loss_policy) reports them lost.
    expired,      ///< the server expired the session: every lock it held is gone
    closed,       ///< async_close was called or the session object was destroyed
};

/// A short name for the state ("connected", ...).
ZKLOCK_DECL const char* to_string(session_state s) noexcept;

/// How to connect, and the loss policy.
struct session_options {
    /// Comma-separated host:port list, with an optional chroot: "127.0.0.1:2181,127.0.0.1:2182/app".
    std::string connect;
    /// Requested session timeout, at least 100 ms (else errc::invalid_session_timeout). The
    /// server clamps it to [2, 20] x tickTime; the negotiated value is session::negotiated_timeout().
    std::chrono::milliseconds session_timeout{10'000};
    /// async_connect fails with errc::connect_timeout if no server answers within this time
    /// (positive, else errc::invalid_connect_timeout).
    std::chrono::milliseconds connect_timeout{10'000};
    /// When held locks are reported lost while the session cannot vouch for them (see
    /// loss_policy; each lock may override it with mutex_options::loss). The default, a lease of
    /// 0.3 of the negotiated timeout renewed only by writes a quorum committed (a heartbeat every
    /// T/10 while a lock is held), reports the loss at least 0.2875 x T before the leader can
    /// expire the session, at every phase of docs/lease.md, under its premises (loss_policy::lease).
    loss_policy loss = loss_policy::lease();
    /// The largest session timeout the lease counts with (0: none, the default), for an ensemble
    /// whose servers do not all negotiate the same T: set it to the smallest maxSessionTimeout of
    /// the servers in `connect` (`echo conf | nc host port`). A server with a smaller maximum
    /// clamps T on a reconnect and revalidates the session at the leader with it before it
    /// answers; if that answer is lost, the client never learns the shorter T, and the leader
    /// can expire the session sooner than the lease counts (docs/lease.md, premise 6). With the
    /// cap the lease (its deadline, its heartbeats every cap/10) counts with min(T, cap). 0, or
    /// 100 ms to 2^31 - 1 ms; else async_connect fails with errc::invalid_lease_timeout_cap.
    /// session_statistics::timeout_changes counts the reconnects that negotiated another T: a
    /// non-zero count proves the servers' bounds differ.
    std::chrono::milliseconds lease_timeout_cap{0};
    /// After an expiry, open a new session automatically (locks of the old one stay lost).
    bool renew_after_expiry = true;
    /// While the session holds no lock and no acquire is in progress, keep the lease's evidence
    /// fresh: a read of "/" a heartbeat period (T/10) after the session's last request, 10/T
    /// requests a second (2.5/s at T = 4 s), where the C client alone pings every T/3. An acquire
    /// that wins at once is then granted at once. false: such a session sends only the C client's
    /// pings, and an acquire that starts after a quiet period longer than 5T/16 is granted about
    /// 5T/16 after its first reply (the lease needs a reply that old to vouch for a grant:
    /// docs/lease.md); a waiter's session keeps touching while it waits. For processes with many
    /// sessions that mostly hold nothing. Ignored by the other loss policies' locks.
    bool keep_lease_warm = true;
    /// Credentials presented on every connection (zoo_add_auth), such as {zklock::digest("svc", pw)}.
    /// async_connect completes once the server accepted them, and fails with
    /// zk_errc::auth_failed if it refused them (then the session ends: no retry). Refused on a
    /// later reconnect, they end the session too: its locks are lost and its waiting acquires
    /// fail, with zk_errc::auth_failed. Sent in clear
    /// text unless `tls` is set (Debian's C client has no SASL).
    std::vector<credentials> auth;
    /// Connect with TLS (to the servers' secureClientPort): see tls_options. Without it the
    /// connections are plain TCP. Errors of async_connect: errc::tls_config_invalid (a file that
    /// cannot be read; what and why: last_connect_attempts()); once every server of the list
    /// refused the handshake with a verdict that does not pass, the first server's, at once:
    /// errc::tls_unknown_ca, tls_server_name_mismatch, tls_certificate_expired,
    /// tls_client_certificate_required, tls_client_certificate_rejected, tls_handshake_failed;
    /// at the connect timeout, errc::tls_not_tls_server if every server closed the connection
    /// during the handshake (plain ports, most likely; a server not serving yet does it too).
    std::optional<tls_options> tls;
    /// Keep per-path lock metrics (session::metrics()): relaxed atomic counters and one shared
    /// (reader) lock per acquire to find the path's record.
    bool metrics = true;
    /// Per-path records for at most this many lock paths; later ones are summed under "(other)".
    /// Each path is 42 series of to_prometheus (42 lines of about 60 bytes plus the path): the
    /// default keeps a server that takes a lock per request path at 21 paths' worth (931 lines,
    /// about 70 KB with 30-byte paths), however many paths it locks; raise it for a fixed, small
    /// set of paths worth watching one by one.
    std::size_t metrics_max_paths = 20;
};

struct metrics_snapshot;

/// Counters of the requests this session sent and the watch events it received.
struct session_statistics {
    /// Create requests sent.
    std::uint64_t creates = 0;
    /// Delete requests sent.
    std::uint64_t deletes = 0;
    /// getChildren requests sent.
    std::uint64_t get_children = 0;
    /// getData requests sent.
    std::uint64_t get_data = 0;
    /// exists requests sent.
    std::uint64_t exists = 0;
    /// setData requests sent.
    std::uint64_t set_data = 0;
    std::uint64_t watch_events = 0; ///< node (not session) watch events delivered
    /// Lease heartbeats: while a lock is held, a multi that checks up to 64 held nodes (a slice,
    /// in turn), every T/10
    /// (see loss_policy::lease); while nothing is held, a multi checking "/" T/10 after a write
    /// that is still unanswered (a grant may come at its reply).
    std::uint64_t heartbeats = 0;
    /// Reads of "/" sent while nothing was held, T/10 after the session's last request: they
    /// keep the lease's evidence dense enough for a grant to be vouched for at once.
    std::uint64_t touches = 0;
    /// The longest a successful write (a create, a delete, a heartbeat...) took from its send to
    /// its reply, over the session's life. The lease's liveness premise: under (f - 0.1) T, a
    /// held lock is never reported lost by its own slowness (docs/lease.md, "Liveness").
    std::chrono::microseconds slowest_write{0};
    /// Renewals an acquire sent before its grant because the lease had lapsed (a multi holding
    /// one check of "/", committed by a quorum; see loss_policy::lease).
    std::uint64_t lease_renewals = 0;
    /// Watch removals sent for waiters that gave up (timeout, cancel, busy try) before their
    /// watch fired, so that the C client does not keep one watcher per attempt.
    std::uint64_t watch_removals = 0;
    std::uint64_t multis = 0; ///< transactions committed under a lock (guard::async_commit)
    /// Grants made on a predecessor's release marker: a waiter behind a deeper queue granted when
    /// the node before it was released by its holder, without listing the children again
    /// (docs/internals.md, "The hand-off").
    std::uint64_t marked_grants = 0;
    /// Connections that negotiated a session timeout other than the previous connection's: each
    /// proves that the servers' session-timeout bounds differ, which premise 6 of docs/lease.md
    /// excludes unless session_options::lease_timeout_cap is set.
    std::uint64_t timeout_changes = 0;
    /// Held locks suspended by a lapse of their lease (loss_policy::lease, "Suspension and
    /// regain"): regained, lost for good, released while suspended, or suspended now.
    std::uint64_t locks_suspended = 0;
    /// Suspended locks regained (guard::async_wait_verdict completed with success).
    std::uint64_t locks_regained = 0;
    /// Suspended locks lost for good (their node gone, the session ended, the window passed).
    std::uint64_t suspensions_lost = 0;
    /// The lock recipes' requests (heartbeats and touches not included).
    std::uint64_t requests() const noexcept {
        return creates + deletes + get_children + get_data + exists + set_data + watch_removals +
               lease_renewals + multis;
    }
};

/// Route the ZooKeeper C client's log lines (all sessions; the C client's logger is global).
/// Without a handler the C client is silent. The handler may be called from any thread.
ZKLOCK_DECL void set_log_handler(std::function<void(std::string_view)> handler);

/// A ZooKeeper session, bridged into an Asio executor.
///
/// One zhandle_t of the single-threaded C client (libzookeeper_st), driven on one strand of the
/// session's executor (no thread of its own); its completions and watch events run on that
/// strand, so that locks built on it see every event in server order. While connected it keeps
/// its io_context busy (its connection is a pending wait), until closed or destroyed.
///
/// Thread safety: distinct objects: safe. Shared object: all member functions may be called
/// concurrently; completion handlers run on their own associated executor (default: the
/// session's executor), never inside the initiating function.
///
/// Destroying a session closes it without waiting: the close request goes out behind the
/// requests already sent (with TLS it goes through zklock's relay, which needs the io_context to
/// run a moment longer: prefer async_close, which completes once it reached the server), and no
/// reply is awaited (against a dead or silent server the session then ends at its timeout, on
/// the server). Waiting operations (acquires, waits on a state) complete with
/// asio::error::operation_aborted, a node operation whose request was already sent with
/// zk_errc::closing, and held locks report errc::session_closed. Destroy it before its execution
/// context.
class ZKLOCK_DECL session {
public:
    /// The executor type: asio::any_io_executor.
    using executor_type = asio::any_io_executor;

    /// Makes a session on `ex` with `opts`.
    ///
    /// Does not connect; call async_connect. Throws nothing (bad options fail async_connect).
    session(executor_type ex, session_options opts);
    /// Makes a session on `ex` with `opts` that takes its clocks, timers and randomness from
    /// `plat` (the platform seam, src/session/platform.hpp) instead of the machine's: for tests
    /// of zklock that move a clock. Null: the machine's, as the constructor above.
    session(executor_type ex, session_options opts, std::shared_ptr<detail::platform> plat);
    /// Closes the session without waiting (see the class description); prefer async_close.
    ~session();
    /// Not copyable.
    session(const session&) = delete;
    /// Not copyable.
    session& operator=(const session&) = delete;

    /// The executor given to the constructor: where handlers without an associated executor run.
    executor_type get_executor() const noexcept;
    /// The options given to the constructor.
    const session_options& options() const noexcept;

    /// Connects, completing on the first ZOO_CONNECTED_STATE event.
    ///
    /// Completes at once (posted) if already connected (with session_options::auth: once the
    /// server accepted the credentials). While an attempt is in progress, or while the session is
    /// suspended or making a new session after an expiry, it waits for that connection. Host names
    /// in the connect string are resolved asynchronously; options().connect_timeout covers the
    /// resolution too.
    ///
    /// \signature `void(error_code)`: no error once connected, else the error. The token
    /// defaults to asio::deferred (zklock::default_completion_token).
    /// \executor The handler's associated executor (default: the session's executor); never inside
    /// the initiating function.
    /// \cancellation Terminal, partial: the operation completes with asio::error::operation_aborted;
    /// if it was the last one waiting for an attempt still in progress, the attempt is abandoned
    /// (state back to disconnected).
    /// \errors
    /// - errc::invalid_connect_string, errc::invalid_connect_separator, errc::invalid_chroot,
    ///   errc::path_too_long (the chroot): a bad session_options::connect.
    /// - errc::invalid_session_timeout, errc::invalid_connect_timeout, errc::invalid_lease_fraction
    ///   (session_options::loss): bad options.
    /// - errc::connect_timeout: no server answered within options().connect_timeout; the attempt is
    ///   abandoned (what each server got: last_connect_attempts()).
    /// - the resolver's error (asio::error::host_not_found if it gave none) when no host of the
    ///   connect string resolves.
    /// - the TLS errors (errc::tls_*) listed at session_options::tls.
    /// - errc::chroot_missing: the connect string's chroot does not exist on the server (checked
    ///   with one exists request once connected, until it is seen). The session stays connected:
    ///   create the chroot and call async_connect again, or close it.
    /// - zk_errc::auth_failed: the server refused session_options::auth (the session ends: no retry).
    /// - errc::session_expired: the session expired and no new session is made
    ///   (session_options::renew_after_expiry is false, or the C client refused to start one).
    /// - errc::session_closed: the session was closed before the operation started.
    /// - asio::error::operation_aborted: closed meanwhile, or cancelled.
    /// \lifetimes The session object may be destroyed while the operation is pending: that closes
    /// the session, and the operation completes with asio::error::operation_aborted. Until it
    /// completes, the operation keeps the handler's executor busy (outstanding work).
    /// \threadsafety Distinct objects: safe. Shared object: safe; it may be called concurrently
    /// with any member function.
    template <BOOST_ASIO_COMPLETION_TOKEN_FOR(void(error_code)) CompletionToken = default_completion_token>
    auto async_connect(CompletionToken&& token = default_completion_token{}) {
        return asio::async_initiate<CompletionToken, void(error_code)>(
            [impl = impl_](auto handler) {
                start_connect(impl, asio::any_completion_handler<void(error_code)>(std::move(handler)));
            },
            token);
    }

    /// Closes the session: the server deletes its ephemeral nodes, so every lock is released.
    ///
    /// With TLS it completes once the close request has gone through the relay (1 s at most).
    /// Waiting operations (acquires, waits on a state) complete with asio::error::operation_aborted,
    /// a node operation whose request was already sent with zk_errc::closing; guards report
    /// errc::session_closed. (Those completions are not ordered with the close's own: one may come
    /// after it.) Idempotent: on a closed session it completes at once. The closed state is
    /// final: a later async_connect fails with errc::session_closed.
    ///
    /// \signature `void(error_code)`: always no error. The token defaults to
    /// asio::deferred (zklock::default_completion_token).
    /// \executor The handler's associated executor (default: the session's executor); never inside
    /// the initiating function.
    /// \cancellation Not cancellable.
    /// \errors None: it always succeeds.
    /// \lifetimes The session object may be destroyed while the operation is pending (its
    /// destructor closes the session too). Until it completes, the operation keeps the handler's
    /// executor busy (outstanding work).
    /// \threadsafety Distinct objects: safe. Shared object: safe; it may be called concurrently
    /// with any member function.
    template <BOOST_ASIO_COMPLETION_TOKEN_FOR(void(error_code)) CompletionToken = default_completion_token>
    auto async_close(CompletionToken&& token = default_completion_token{}) {
        return asio::async_initiate<CompletionToken, void(error_code)>(
            [impl = impl_](auto handler) {
                start_close(impl, asio::any_completion_handler<void(error_code)>(std::move(handler)));
            },
            token);
    }

    /// Waits until the state differs from `last_seen`, then completes with the new state.
    ///
    /// Completes at once (posted) if it already differs. Intermediate states may be skipped.
    /// The closed state is final: a wait with `last_seen` == session_state::closed completes with
    /// errc::session_closed once the session is closed (at once if it already is), so that a
    /// loop of waits ends with the session.
    ///
    /// \signature `void(error_code, session_state)`: on success no error and the new state; on
    /// cancellation asio::error::operation_aborted and `last_seen` (or the current state, if the
    /// cancellation reached the session before the wait was registered). The token defaults to
    /// asio::deferred (zklock::default_completion_token).
    /// \executor The handler's associated executor (default: the session's executor); never inside
    /// the initiating function.
    /// \cancellation Terminal, partial, total: the operation completes with
    /// asio::error::operation_aborted and nothing else changes. A cancellation emitted right after
    /// the initiating call is not lost.
    /// \errors asio::error::operation_aborted: cancelled. errc::session_closed, with state closed:
    /// `last_seen` is closed and so is the session (no state follows closed: the wait could
    /// never end otherwise; it completes at once).
    /// \lifetimes The session object may be destroyed while the operation is pending: the state
    /// becomes closed, which completes the wait. Until it completes,
    /// the operation keeps the handler's executor busy (outstanding work).
    /// \threadsafety Distinct objects: safe. Shared object: safe; it may be called concurrently
    /// with any member function.
    template <BOOST_ASIO_COMPLETION_TOKEN_FOR(void(error_code, session_state))
                  CompletionToken = default_completion_token>
    auto async_wait_state(session_state last_seen, CompletionToken&& token = default_completion_token{}) {
        return asio::async_initiate<CompletionToken, void(error_code, session_state)>(
            [impl = impl_](auto handler, session_state s) {
                start_wait_state(
                    impl, s,
                    asio::any_completion_handler<void(error_code, session_state)>(std::move(handler)));
            },
            token, last_seen);
    }

    /// The current state (a snapshot; thread-safe).
    session_state state() const noexcept;
    /// The server-assigned session id (0 before the first connect).
    std::int64_t session_id() const noexcept;
    /// The negotiated session timeout (0 before the first connect).
    std::chrono::milliseconds negotiated_timeout() const noexcept;
    /// After async_connect failed with errc::connect_timeout: what the last connection attempt to
    /// each server got, e.g. "127.0.0.1:2181: connection refused, 10.0.0.2:2181: timed out"
    /// (an error_code cannot carry it; it is also logged). Empty when no attempt failed outright
    /// (servers that accept the connection but never answer the handshake). With TLS, also after
    /// a TLS error: "zk1:2281: TLS: the server's certificate is not valid now (certificate has
    /// expired), ...", or what in the TLS options could not be read. After a connect that failed
    /// because no host of the connect string resolved: each host and the resolver's answer,
    /// "zk1.example:2181: cannot resolve (Host not found (authoritative))". While an attempt is in
    /// progress: what each server got in the last round in which every server failed.
    std::string last_connect_attempts() const;
    /// A snapshot of the request and watch counters.
    session_statistics statistics() const noexcept;
    /// The lock metrics (include <zklock/metrics.hpp>): per path and in total, with wait and hold
    /// histograms, losses by reason, reconnects, expiries, background deletes. Any thread.
    metrics_snapshot metrics() const;

    /// Internal: the shared implementation, used by the lock types.
    const std::shared_ptr<detail::session_impl>& impl() const noexcept { return impl_; }

private:
    static void start_connect(std::shared_ptr<detail::session_impl>,
                              asio::any_completion_handler<void(error_code)>);
    static void start_close(std::shared_ptr<detail::session_impl>,
                            asio::any_completion_handler<void(error_code)>);
    static void start_wait_state(std::shared_ptr<detail::session_impl>, session_state,
                                 asio::any_completion_handler<void(error_code, session_state)>);

    std::shared_ptr<detail::session_impl> impl_;
};

} // namespace zklock
