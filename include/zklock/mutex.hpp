// zklock/mutex.hpp: the fair, herd-free exclusive lock of the ZooKeeper recipes.
#pragma once

#include <zklock/config.hpp>
#include <zklock/completion.hpp>

#include <zklock/detail/deadline.hpp>

#include <zklock/acl.hpp>
#include <zklock/dialect.hpp>
#include <zklock/error.hpp>
#include <zklock/guard.hpp>
#include <zklock/loss_policy.hpp>
#include <zklock/session.hpp>

#include <boost/asio/any_completion_handler.hpp>
#include <boost/asio/async_result.hpp>

#include <chrono>
#include <memory>
#include <optional>
#include <string>

namespace zklock {

namespace asio = boost::asio;

/// How waiters wait. Only `predecessor` is recommended; the other two are the seed documents'
/// simpler algorithms, kept to measure the herd effect they suffer from (the herd rows of bench/compare).
enum class lock_strategy {
    predecessor,    ///< the recipe: sequential nodes, each waiter watches only the next lower node
    watch_children, ///< sequential nodes, every waiter watches the children list: each release wakes all
    unique_node,    ///< everyone creates the same ephemeral "<path>/lock"; the losers watch it: each
                    ///< release wakes all, and the order is not fair. Not seen by Curator or kazoo.
};

/// Options of a lock: node data and naming, waiting algorithm, revocation, local hand-off, loss
/// policy and ACL.
///
/// Taken by mutex, shared_mutex, reentrant_mutex and semaphore (a semaphore uses only node_data
/// and node_acl). Checked by each acquire, not by the lock's constructor.
struct mutex_options {
    /// Data stored in the lock node (the holder description shown to inspection tools).
    /// Empty means "zklock <hostname> pid <pid>".
    std::string node_data;
    /// Node naming, for paths shared with peers (see lock_dialect). Default: Curator's.
    lock_dialect dialect = lock_dialect::curator;
    /// Waiting algorithm (benchmarks only; see lock_strategy).
    lock_strategy strategy = lock_strategy::predecessor;
    /// Revocable: the holder watches its node's data (one extra request per grant) and is told,
    /// through guard::async_wait_revoked, when someone asks it to let go (zklock::async_revoke,
    /// Curator's Revoker: the data "__REVOKE__", or the recipes' "unlock").
    bool revocable = false;
    /// In-process hand-off. 0 (the default): every acquire has its own node in ZooKeeper.
    /// N > 0: the acquires of this session on this path queue locally (FIFO) behind a single
    /// node; when the holder releases, the next local waiter gets the lock at once, with no
    /// request to ZooKeeper, up to N consecutive grants per node. Then the node is deleted and
    /// the local queue lines up again behind the other processes' nodes, so they wait at most
    /// N local holds. Fencing tokens still increase with every grant (guard::fencing_token).
    /// Trade-off: far more grants per second for coroutines of one process, at the price of
    /// fairness across processes (up to N local holds go before a remote waiter) and of
    /// ZooKeeper's view: inspection shows one node for the whole local queue. A hand-off only
    /// happens while the session is connected and the node is held. At most 4096 (else
    /// errc::invalid_local_handoff); exclusive locks only (mutex, reentrant_mutex; on a
    /// shared_mutex: errc::local_handoff_unsupported). A revocation request (zklock::async_revoke) on the
    /// queue's node always ends the run of hand-offs (the queue watches its node for it, whether
    /// or not `revocable` is set), so an operator can make a busy process let others in; the
    /// grant that is out is told only if it was acquired with `revocable`.
    std::uint32_t local_handoff = 0;
    /// This lock's loss policy; empty: the session's (session_options::loss). An invalid lease
    /// fraction fails the acquire with errc::invalid_lease_fraction.
    std::optional<loss_policy> loss;
    /// The ACL of the lock nodes and of the lock path node when zklock creates it (an existing
    /// node keeps its own; ancestors above the lock path are created open: they are shared).
    /// Default: open. acl::creator_all_world_read() lets only sessions with the same
    /// credentials (session_options::auth) contend, release, break or revoke, while anyone can
    /// list the contenders.
    acl node_acl = acl::open();
};

namespace detail {
struct acquire_request {
    std::string path;
    std::string node_data;
    std::optional<std::chrono::steady_clock::time_point> deadline;
    bool try_only = false;
    lock_dialect dialect = lock_dialect::curator;
    lock_strategy strategy = lock_strategy::predecessor;
    bool revocable = false;
    std::uint32_t local_handoff = 0;
    std::optional<loss_policy> loss;
    bool rw = false;        ///< the read/write lock's nodes (else the mutex's)
    bool reader = false;    ///< with rw: a read (shared) acquire
    std::string own_writer; ///< with reader: our own write node's name, which does not block us (downgrade)
    std::shared_ptr<const acl> node_acl; ///< null: the open ACL
    bool metered = false; ///< a user's acquire (counted in session::metrics()), not an internal one
    bool latch = false;   ///< Curator's LeaderLatch naming ("-latch-"; an election's curator_latch)
    /// An election's campaign: node_data is the candidate's value, verbatim (empty stays empty),
    /// and a candidate of another naming on the path fails it (errc::election_dialect_mixed).
    bool election = false;
};
/// The request every lock type starts from.
inline acquire_request
make_request(const std::string& path, const mutex_options& o,
             std::optional<std::chrono::steady_clock::time_point> deadline = std::nullopt,
             bool try_only = false) {
    acquire_request r;
    r.path = path;
    r.node_data = o.node_data;
    r.deadline = deadline;
    r.try_only = try_only;
    r.dialect = o.dialect;
    r.strategy = o.strategy;
    r.revocable = o.revocable;
    r.local_handoff = o.local_handoff;
    r.loss = o.loss;
    r.metered = true;
    if (!o.node_acl.is_open()) r.node_acl = std::make_shared<const acl>(o.node_acl);
    return r;
}
/// Starts an acquire: through the local hand-off queue when req.local_handoff > 0.
ZKLOCK_DECL void start_acquire(const std::shared_ptr<session_impl>& s, acquire_request req,
                               asio::any_completion_handler<void(error_code, guard)> handler);
/// Starts an acquire that creates its own node (what a hand-off queue uses).
ZKLOCK_DECL void start_node_acquire(const std::shared_ptr<session_impl>& s, acquire_request req,
                                    asio::any_completion_handler<void(error_code, guard)> handler);
} // namespace detail

/// An exclusive lock on a ZooKeeper path, granted in FIFO order.
///
/// Protocol: each acquire creates an EPHEMERAL_SEQUENTIAL node "<path>/_c_<uuid>-lock-<seq>"
/// (Curator's InterProcessMutex naming, so the two exclude each other on one path); the lowest
/// sequence holds the lock; every other contender watches only its predecessor (getData watch)
/// and lists the children again when it goes. Parents are created as CONTAINER nodes.
/// Children not of the form "...-lock-<10-char sequence>" are ignored.
///
/// A mutex object is a cheap description (session + path); it may be destroyed while its
/// operations are pending: the session owns them, so destroying the mutex ends nothing (an
/// acquire goes on, and completes, as if the object were alive). To end a pending acquire,
/// cancel it (per-operation cancellation), give it a deadline, or close the session.
/// Thread safety: distinct and shared objects: safe.
class ZKLOCK_DECL mutex {
public:
    /// A lock on `path` of session `s`, with `opts`.
    ///
    /// Sends nothing: the path and the options are checked by each acquire. The mutex keeps the
    /// session's implementation alive, not the session object: an acquire started after the
    /// session was closed or destroyed fails with errc::session_closed.
    mutex(session& s, std::string path, mutex_options opts = {})
        : session_(s.impl()), path_(std::move(path)), opts_(std::move(opts)) {}

    /// The lock path given to the constructor.
    const std::string& path() const noexcept { return path_; }
    /// Internal: the session the lock lives on.
    const std::shared_ptr<detail::session_impl>& session_impl() const noexcept { return session_; }

    /// Waits for the lock, with no deadline.
    ///
    /// Connection loss while waiting is ridden out: the acquire resumes after reconnecting. An
    /// acquire started while the session is connecting, suspended or making a new session after
    /// an expiry waits for the connection.
    ///
    /// \signature `void(error_code, guard)`: on success no error and a guard that owns the lock;
    /// on failure the error and an empty guard. The token defaults to asio::deferred
    /// (zklock::default_completion_token).
    /// \executor The handler's associated executor (default: the session's executor); never inside
    /// the initiating function.
    /// \cancellation Terminal, partial, total. After cancellation no node of this acquire is left
    /// behind: it is deleted before completion when the server answers, and in the background
    /// (retried until it succeeds or the session ends) when not. A cancel, or a deadline
    /// (async_acquire_for/until), completes the operation within 40 ms even when the server sits
    /// on a request (a reply that never comes would otherwise hold it for the C client's request
    /// timeout, 2/3 T); a node that the late reply shows is deleted then.
    /// \errors
    /// - path errors (errc::path_*): a bad lock path (nothing is sent).
    /// - errc::invalid_lease_fraction, errc::invalid_local_handoff, errc::data_too_large: bad
    ///   mutex_options (nothing is sent).
    /// - errc::not_connected: the session is disconnected (async_connect has not completed, or the
    ///   last attempt failed).
    /// - errc::session_expired (or zk_errc::auth_failed, when the server refused the credentials
    ///   on a reconnect): the session ended.
    /// - errc::session_closed: the session was closed before the acquire started.
    /// - errc::lock_node_deleted: our node was deleted by someone else while waiting.
    /// - errc::path_used_by_semaphore, errc::strategy_conflict: the path is used by another kind
    ///   of lock (one path, one lock).
    /// - errc::sequence_overflow, errc::create_retries_exhausted, errc::chroot_missing,
    ///   errc::internal_error.
    /// - a zk_errc from the server (zk_errc::no_auth, for instance: the ACL of the lock path).
    /// - asio::error::operation_aborted: cancelled, or the session was closed while waiting.
    /// \lifetimes The mutex object may be destroyed while the operation is pending: the session
    /// owns the operation, which goes on and completes as if the object were alive. The operation
    /// keeps the session's implementation alive, and the handler's executor busy (outstanding
    /// work), until it completes; closing or destroying the session object completes it with
    /// asio::error::operation_aborted.
    /// \threadsafety Distinct and shared mutex objects: safe.
    template <BOOST_ASIO_COMPLETION_TOKEN_FOR(void(error_code, guard))
                  CompletionToken = default_completion_token>
    auto async_acquire(CompletionToken&& token = default_completion_token{}) {
        return initiate({}, false, std::forward<CompletionToken>(token));
    }

    /// As async_acquire, failing with errc::acquire_timeout once `timeout` has passed.
    ///
    /// The timeout counts from when the operation starts: with a deferred token (asio::deferred,
    /// use_awaitable awaited later), when it is launched, not when this call made it. A zero
    /// timeout (a deadline already past when it starts) is one try, as async_try_acquire, failing
    /// with errc::acquire_timeout when the lock is taken. While the session is disconnected the
    /// deadline still holds. A timeout too large to add to the clock means no deadline.
    ///
    /// \signature As async_acquire. The token defaults to asio::deferred
    /// (zklock::default_completion_token).
    /// \executor As async_acquire.
    /// \cancellation As async_acquire; the deadline too completes the operation within 40 ms and
    /// leaves no node behind.
    /// \errors As async_acquire, plus errc::acquire_timeout: the deadline passed before the grant
    /// (for a zero timeout: the lock was taken).
    /// \lifetimes As async_acquire.
    /// \threadsafety As async_acquire.
    template <class Rep, class Period,
              BOOST_ASIO_COMPLETION_TOKEN_FOR(void(error_code, guard))
                  CompletionToken = default_completion_token>
    auto async_acquire_for(std::chrono::duration<Rep, Period> timeout,
                           CompletionToken&& token = default_completion_token{}) {
        return initiate(detail::deadline_spec::after(timeout), false, std::forward<CompletionToken>(token));
    }

    /// As async_acquire, failing with errc::acquire_timeout once `deadline` has passed.
    ///
    /// A deadline already past when the operation starts is one try, as a zero timeout of
    /// async_acquire_for. While the session is disconnected the deadline still holds.
    ///
    /// \signature As async_acquire. The token defaults to asio::deferred
    /// (zklock::default_completion_token).
    /// \executor As async_acquire.
    /// \cancellation As async_acquire; the deadline too completes the operation within 40 ms and
    /// leaves no node behind.
    /// \errors As async_acquire, plus errc::acquire_timeout: the deadline passed before the grant
    /// (for a deadline already past: the lock was taken).
    /// \lifetimes As async_acquire.
    /// \threadsafety As async_acquire.
    template <BOOST_ASIO_COMPLETION_TOKEN_FOR(void(error_code, guard))
                  CompletionToken = default_completion_token>
    auto async_acquire_until(std::chrono::steady_clock::time_point deadline,
                             CompletionToken&& token = default_completion_token{}) {
        return initiate(detail::deadline_spec::at(deadline), false, std::forward<CompletionToken>(token));
    }

    /// Takes the lock only if no other contender is queued: errc::lock_busy otherwise.
    ///
    /// The node it created is deleted before completion. Costs the same round trips as an
    /// uncontended acquire. While the connection is down (the session connecting, suspended or
    /// making a new session after an expiry) it fails at once with zk_errc::connection_loss: it
    /// never waits for a reconnect.
    ///
    /// \signature As async_acquire. The token defaults to asio::deferred
    /// (zklock::default_completion_token).
    /// \executor As async_acquire.
    /// \cancellation As async_acquire.
    /// \errors As async_acquire, plus:
    /// - errc::lock_busy: another contender holds the lock or is queued.
    /// - zk_errc::connection_loss: the connection is down.
    /// \lifetimes As async_acquire.
    /// \threadsafety As async_acquire.
    template <BOOST_ASIO_COMPLETION_TOKEN_FOR(void(error_code, guard))
                  CompletionToken = default_completion_token>
    auto async_try_acquire(CompletionToken&& token = default_completion_token{}) {
        return initiate({}, true, std::forward<CompletionToken>(token));
    }

private:
    template <class CompletionToken>
    auto initiate(detail::deadline_spec deadline, bool try_only, CompletionToken&& token) {
        return asio::async_initiate<CompletionToken, void(error_code, guard)>(
            [](auto handler, std::shared_ptr<detail::session_impl> s, detail::acquire_request req,
               detail::deadline_spec d) {
                req.deadline =
                    d.resolve(detail::steady_now_of(s.get())); // the clock starts with the operation
                detail::start_acquire(
                    s, std::move(req),
                    asio::any_completion_handler<void(error_code, guard)>(std::move(handler)));
            },
            token, session_, detail::make_request(path_, opts_, std::nullopt, try_only), deadline);
    }

    std::shared_ptr<detail::session_impl> session_;
    std::string path_;
    mutex_options opts_;
};

} // namespace zklock
