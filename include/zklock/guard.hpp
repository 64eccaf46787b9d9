// zklock/guard.hpp: ownership of one acquired lock node.
#pragma once

#include <zklock/config.hpp>
#include <zklock/completion.hpp>

#include <zklock/detail/no_session.hpp>
#include <zklock/error.hpp>
#include <zklock/transaction.hpp>

#include <boost/asio/any_completion_handler.hpp>
#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/async_result.hpp>
#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/consign.hpp>

#include <cstdint>
#include <memory>
#include <string>

namespace zklock {

namespace asio = boost::asio;

namespace detail {
struct held_lock;
struct loss_binding;
/// The binding's slot (an unconnected slot for nullptr).
ZKLOCK_DECL asio::cancellation_slot loss_binding_slot(loss_binding* b) noexcept;
} // namespace detail

/// Owns one granted lock: a movable handle, not tied to a thread (coroutines move between threads).
///
/// Release: async_release() deletes the lock node and completes when it is gone (or the session
/// is gone, which deletes it too). It is idempotent. If the guard is destroyed or assigned while
/// it still owns the lock, the release is scheduled in the background ("guaranteed delete":
/// retried across reconnects until it succeeds or the session ends); the destructor never blocks
/// and never throws.
///
/// Loss: the lock can be lost while held: session expiry (errc::session_expired), session close
/// (errc::session_closed), the node deleted by someone else (errc::lock_node_deleted) or, by the
/// lock's loss_policy, a lease with no reply from the server (errc::lease_expired, the default)
/// or a dropped connection (errc::lock_lost_suspended, loss_policy::on_disconnect). Then the
/// holder must stop acting as the owner. Learn it with async_wait_lost(), by binding work to
/// it with bind_loss(), or by polling is_lost() (which reads the lease's clock itself, so it is exact
/// even when the io_context is too busy to run the loss signal in time).
///
/// Suspension and regain: under the lease policy (the default), a lapse of the lease first
/// *suspends* the lock: the holder is told exactly as above (errc::lease_expired, at the same
/// moment), and must stop; but the node is kept, and the session goes on checking it with a
/// committed write. If the node turns out to have survived (the session outlived a leader
/// failover, say), the lock is *regained*: is_lost() turns false again, with the same
/// fencing_token(); otherwise the loss is final. async_wait_verdict() waits for the verdict;
/// is_suspended() tells the state. See loss_policy::lease and docs/lease.md.
///
/// Fencing: fencing_token() increases strictly with every grant of a lock, including grants
/// handed off inside a process (mutex_options::local_handoff). It is the node's czxid times 4096
/// plus the grant's index under that node. Pass it to the resource you protect and have that
/// resource refuse tokens smaller than the largest it has seen: it is what keeps a paused or
/// partitioned former holder from doing damage after its loss. (Tokens of different locks are
/// comparable too: czxids are ordered across the whole ensemble.) A reentrant_mutex's nested
/// acquire by the owner that holds the lock is not a new grant: its guard carries the same token
/// as the owner's first one, so the resource must refuse only *smaller* tokens (compare with <,
/// not <=), or it would refuse the nested holder's own writes.
///
/// Outstanding work: while a session holds a lock under the lease policy (the default), its
/// heartbeat and lease timers keep the session's io_context busy, so io_context::run() does
/// not return before the lock is released (the lease must keep running to vouch for the lock).
///
/// Executors: handlers run on their associated executor; a plain callback without one runs on the
/// session's executor, also for an empty guard that once held a lock (released or moved from).
/// A default-constructed guard, which never knew a session, completes on the handler's own
/// executor (a coroutine's, or one bound with asio::bind_executor); only a plain callback with
/// no executor at all then runs on asio::system_executor, as asio::post would run it.
///
/// Thread safety: distinct objects: safe. Shared object: unsafe, except the const accessors.
class ZKLOCK_DECL guard {
public:
    /// An empty guard (owns_lock() == false).
    guard() noexcept;
    /// Internal: a guard that owns the granted lock `h` (the lock types make guards this way).
    explicit guard(std::shared_ptr<detail::held_lock> h) noexcept;
    /// Takes over the other guard's lock; the other guard is left empty (it keeps the session's
    /// executor, where its operations then complete).
    guard(guard&&) noexcept;
    /// Releases the currently owned lock in the background, then takes `other`'s.
    guard& operator=(guard&&) noexcept;
    guard(const guard&) = delete;
    guard& operator=(const guard&) = delete;
    /// Releases in the background if the lock is still owned. Never blocks, never throws.
    ~guard();

    /// True if this guard owns a lock that was granted and not released (it may have been lost).
    bool owns_lock() const noexcept { return h_ != nullptr; }
    /// owns_lock().
    explicit operator bool() const noexcept { return owns_lock(); }
    /// True once the lock is known to be lost (see the class comment). Under the lease policy it
    /// also compares the lease's deadline with the lease's clock; once true, it stays true until
    /// a regain (a suspended lock whose node provably survived: async_wait_verdict) makes it
    /// false again. Code that checks it before each act of the owner stops at the loss and goes
    /// on after the regain.
    bool is_lost() const noexcept;
    /// True while the lock is suspended: lost by a lapse of its lease (is_lost() is true), with
    /// its node kept and the verdict (regained or lost for good) still to come.
    bool is_suspended() const noexcept;
    /// Why the lock was lost (empty while it is not). It can change once: under the lease policy
    /// is_lost() and loss_reason() read the lease's clock themselves, so they report
    /// errc::lease_expired as soon as the deadline passes, before the loss signal went out; the
    /// signal (async_wait_lost) then carries the cause found, and loss_reason() returns it from
    /// then on: errc::session_expired if the lapse was seen past the session's earliest expiry
    /// (a pause, a suspend) and the session turned out expired.
    error_code loss_reason() const;

    /// Full path of the lock node, like "/locks/orders/_c_<uuid>-lock-0000000042".
    const std::string& node_path() const noexcept;
    /// The node's sequence number (the parent's cversion at creation; may be negative after overflow).
    std::int32_t sequence() const noexcept;
    /// Strictly increasing across the successive grants of a lock: node_czxid() * 4096 +
    /// local_grant(). The guards of one reentrant owner's nested acquires share one grant and
    /// one token. (Valid while the ensemble's epoch, the czxid's high 32 bits, is below 2^19.)
    std::int64_t fencing_token() const noexcept;
    /// The lock node's czxid (the zxid of the transaction that created it).
    std::int64_t node_czxid() const noexcept;
    /// With in-process hand-off: the index of this grant among those made under the same node
    /// (0 for the first; at most mutex_options::local_handoff - 1). Always 0 otherwise.
    std::uint32_t local_grant() const noexcept;
    /// The id of the session that holds the node.
    std::int64_t session_id() const noexcept;

    /// Releases the lock: deletes the node, completing when it is deleted or the session is gone.
    ///
    /// The guard is empty as soon as this is called. Calling it on an empty guard completes with
    /// success (idempotent). A lock already lost (see is_lost) completes at once: its node is
    /// gone, or its delete goes on in the background. While the connection is down the delete
    /// waits for the reconnect, but the release completes no later than the lock's loss policy
    /// stops vouching for it (the lease's deadline; one session timeout with
    /// loss_policy::on_expiry), the delete going on in the background. Once the session is known
    /// to be gone (expired or closed) it completes with success, since the server deleted the
    /// node. If the operation is created but never started (a dropped `deferred` or unawaited
    /// `use_awaitable`), the lock is released in the background. A reentrant_mutex guard that is
    /// not its owner's last completes at once: the node stays until the last one is released.
    ///
    /// \signature `void(error_code)`: the error_code is always empty (success), whether the node
    /// was deleted, its delete goes on in the background, or the guard was empty. The token
    /// defaults to asio::deferred (zklock::default_completion_token).
    /// \executor The handler's associated executor; without one, the session's executor (also
    /// for an empty guard that once held a lock). A default-constructed guard completes on the
    /// handler's associated executor, or on asio::system_executor for a plain callback with no
    /// executor. Never inside the initiating function. While the operation is pending, the
    /// handler's executor has outstanding work.
    /// \cancellation Not cancellable.
    /// \errors None: the operation always completes with success.
    /// \lifetimes The lock moves from the guard into the operation at the call (also for a
    /// deferred operation), so the guard may be destroyed at once. The operation keeps the lock's
    /// state and the session's implementation alive until it completes; the session object may
    /// be destroyed meanwhile (the release then completes with success: the server deletes a
    /// closed session's nodes).
    /// \threadsafety Distinct objects: safe. Shared object: unsafe (the call empties the guard).
    template <BOOST_ASIO_COMPLETION_TOKEN_FOR(void(error_code)) CompletionToken = default_completion_token>
    auto async_release(CompletionToken&& token = default_completion_token{}) {
        // The initiation owns a guard: an operation that is never started (a deferred or
        // use_awaitable operation dropped unawaited) still releases the lock, in the background.
        // (Shared, so that the initiation stays copyable, as asio::deferred requires; a second
        // start finds the guard empty and completes at once.)
        return asio::async_initiate<CompletionToken, void(error_code)>(
            [g = std::make_shared<guard>(std::move(*this))](auto handler) {
                if (!g->h_ && !g->ex_)
                    return detail::complete_without_session(std::move(handler), error_code());
                start_release(std::move(g->h_), g->ex_,
                              asio::any_completion_handler<void(error_code)>(std::move(handler)));
            },
            token);
    }

    /// Completes when the lock is lost (with the reason) or released (errc::lock_released).
    ///
    /// The first call arms a watch on the node itself, so that its deletion by someone else is
    /// noticed (one extra request, paid only if asked). A lock already lost or released completes
    /// at once. Any number of waits may be pending on one lock.
    ///
    /// \signature `void(error_code)`: the loss reason, or errc::lock_released; never an empty
    /// error_code. The token defaults to asio::deferred (zklock::default_completion_token).
    /// \executor The handler's associated executor; without one, the session's executor (also
    /// for an empty guard that once held a lock). A default-constructed guard completes on the
    /// handler's associated executor, or on asio::system_executor for a plain callback with no
    /// executor. Never inside the initiating function. While the wait is pending, the handler's
    /// executor has outstanding work (an io_context's run() does not return).
    /// \cancellation Terminal, partial, total: the wait completes with
    /// asio::error::operation_aborted; the lock is not affected. A cancellation emitted before
    /// the wait reached the session's strand is not lost.
    /// \errors
    /// - the loss reason: errc::lease_expired, errc::lock_lost_suspended, errc::lock_node_deleted,
    ///   errc::session_expired, errc::session_closed, or zk_errc::auth_failed when the server
    ///   refused the session's credentials;
    /// - errc::lock_released: the lock was released (by async_release, release_in_background,
    ///   or the guard's destruction or assignment);
    /// - errc::not_held: the guard is empty;
    /// - asio::error::operation_aborted: the wait was cancelled.
    /// \lifetimes The operation shares the lock's state (taken at the call, also for a deferred
    /// operation), and through it the session's implementation: the guard may be moved, released
    /// or destroyed while the wait is pending (the release completes it with errc::lock_released),
    /// and so may the session object (the wait then completes with errc::session_closed).
    /// \threadsafety Distinct objects: safe. Shared object: unsafe.
    template <BOOST_ASIO_COMPLETION_TOKEN_FOR(void(error_code)) CompletionToken = default_completion_token>
    auto async_wait_lost(CompletionToken&& token = default_completion_token{}) {
        return asio::async_initiate<CompletionToken, void(error_code)>(
            [h = h_, ex = ex_](auto handler) {
                if (!h && !ex)
                    return detail::complete_without_session(std::move(handler), error_code(errc::not_held));
                start_wait_lost(h, ex, asio::any_completion_handler<void(error_code)>(std::move(handler)));
            },
            token);
    }

    /// Waits for the verdict on a suspended lock: regained, or lost for good.
    ///
    /// Completes with success at once if the lock is held (not lost), and when a suspended lock
    /// is regained (is_lost() is false again, the same fencing_token()); with the final loss
    /// reason when the lock is lost for good (at once if it already is): errc::lock_node_deleted
    /// (the node was deleted, or is not this session's any more), errc::session_expired,
    /// errc::session_closed, or errc::lease_expired when the regain window
    /// (loss_policy::with_regain_window) passed or the policy does not regain. A holder that
    /// stopped at the loss signal can wait here to know whether to resume:
    /// \code
    ///   co_await g.async_wait_lost(asio::use_awaitable); // stop acting as the owner
    ///   auto [ec] = co_await g.async_wait_verdict(asio::as_tuple(asio::use_awaitable));
    ///   if (!ec) { /* regained: act again, with g.fencing_token() */ }
    /// \endcode
    ///
    /// \signature `void(error_code)`: empty when held or regained, else the reason. The token
    /// defaults to asio::deferred (zklock::default_completion_token).
    /// \executor As async_wait_lost.
    /// \cancellation Terminal, partial, total: completes with asio::error::operation_aborted;
    /// the lock is not affected.
    /// \errors The final loss reason (above); errc::lock_released if the lock was released
    /// first; errc::not_held for an empty guard; asio::error::operation_aborted.
    /// \lifetimes As async_wait_lost.
    /// \threadsafety Distinct objects: safe. Shared object: unsafe.
    template <BOOST_ASIO_COMPLETION_TOKEN_FOR(void(error_code)) CompletionToken = default_completion_token>
    auto async_wait_verdict(CompletionToken&& token = default_completion_token{}) {
        return asio::async_initiate<CompletionToken, void(error_code)>(
            [h = h_, ex = ex_](auto handler) {
                if (!h && !ex)
                    return detail::complete_without_session(std::move(handler), error_code(errc::not_held));
                start_wait_verdict(h, ex, asio::any_completion_handler<void(error_code)>(std::move(handler)));
            },
            token);
    }

    /// Waits until another client asks the holder of this revocable lock to let go.
    ///
    /// For a lock acquired with mutex_options::revocable: completes with
    /// errc::revocation_requested when another client asks the holder to let go (async_revoke;
    /// the holder is asked, not forced: release when it suits you). Completes with the loss
    /// reason or errc::lock_released if that comes first; errc::not_revocable / errc::not_held
    /// otherwise. A revocation is asked for by writing "__REVOKE__" (Curator's marker, as
    /// async_revoke does) or "unlock" into the holder's node. A request that came before the call
    /// completes it at once. Also arms the node watch (see async_wait_lost).
    ///
    /// \signature `void(error_code)`: errc::revocation_requested when a revocation was asked
    /// for, else the error below; never an empty error_code. The token defaults to asio::deferred
    /// (zklock::default_completion_token).
    /// \executor The handler's associated executor; without one, the session's executor (also
    /// for an empty guard that once held a lock). A default-constructed guard completes on the
    /// handler's associated executor, or on asio::system_executor for a plain callback with no
    /// executor. Never inside the initiating function. While the wait is pending, the handler's
    /// executor has outstanding work (an io_context's run() does not return).
    /// \cancellation Terminal, partial, total: the wait completes with
    /// asio::error::operation_aborted; the lock is not affected. A cancellation emitted before
    /// the wait reached the session's strand is not lost.
    /// \errors
    /// - errc::revocation_requested: the revocation was asked for (the lock is still held);
    /// - the loss reason (see async_wait_lost), if the lock is lost first;
    /// - errc::lock_released: the lock was released first;
    /// - errc::not_revocable: the lock was not acquired with mutex_options::revocable;
    /// - errc::not_held: the guard is empty;
    /// - asio::error::operation_aborted: the wait was cancelled.
    /// \lifetimes The operation shares the lock's state (taken at the call, also for a deferred
    /// operation), and through it the session's implementation: the guard may be moved, released
    /// or destroyed while the wait is pending (the release completes it with errc::lock_released),
    /// and so may the session object (the wait then completes with errc::session_closed).
    /// \threadsafety Distinct objects: safe. Shared object: unsafe.
    template <BOOST_ASIO_COMPLETION_TOKEN_FOR(void(error_code)) CompletionToken = default_completion_token>
    auto async_wait_revoked(CompletionToken&& token = default_completion_token{}) {
        return asio::async_initiate<CompletionToken, void(error_code)>(
            [h = h_, ex = ex_](auto handler) {
                if (!h && !ex)
                    return detail::complete_without_session(std::move(handler), error_code(errc::not_held));
                start_wait_revoked(h, ex, asio::any_completion_handler<void(error_code)>(std::move(handler)));
            },
            token);
    }

    /// Commits `t`'s writes only if this lock is still held, all or nothing.
    ///
    /// One ZooKeeper multi-op checks that the lock node exists and applies the writes, all or
    /// nothing. A paused or partitioned former holder (GC, swap, SIGSTOP, a blocked io_context)
    /// cannot write after its lock is gone: its node is gone first (session expiry, a break), so
    /// its commit fails. Works for exclusive, shared (read) and semaphore guards. A grant of the
    /// in-process hand-off shares its node with the grants before and after it: it commits only
    /// while it is the grant that is out (checked before sending); await the commit before
    /// releasing the grant. A successful commit renews the lease (a write goes through the leader).
    ///
    /// \signature `void(error_code, commit_result)`: on success the error_code is empty and
    /// commit_result::ops holds one result per operation; on failure, one of the errors below
    /// (commit_result::failed names the operation that failed, if one did). The token defaults to
    /// asio::deferred (zklock::default_completion_token).
    /// \executor The handler's associated executor; without one, the session's executor (also
    /// for an empty guard that once held a lock). A default-constructed guard completes on the
    /// handler's associated executor, or on asio::system_executor for a plain callback with no
    /// executor. Never inside the initiating function. While the operation is pending, the
    /// handler's executor has outstanding work.
    /// \cancellation Not cancellable (a write in flight cannot be called back).
    /// \errors
    /// - errc::lock_lost: the lock node was gone at the commit, or the guard was already known to
    ///   be lost (is_lost: nothing is sent); nothing was applied;
    /// - one of `t`'s operations failed (zk_errc::bad_version, no_node, node_exists, ...): that
    ///   error, and commit_result::failed is its index; nothing was applied;
    /// - the lock check failed otherwise (e.g. no read permission on the lock node): its error;
    ///   nothing was applied;
    /// - bad input, before anything is sent: see transaction::validate; errc::not_held on an
    ///   empty guard;
    /// - errc::session_closed: the session was closed before the commit was sent;
    /// - zk_errc::connection_loss or operation_timeout: the outcome is unknown (read back to see);
    /// - another failure of the request as a whole (e.g. zk_errc::session_expired,
    ///   zk_errc::closing). When the request fails as a whole, every commit_result::ops entry
    ///   holds its error too.
    /// \lifetimes `t` is moved into the operation. The operation shares the lock's state (taken
    /// at the call, also for a deferred operation) and the session's implementation: the guard
    /// may be released or destroyed while the commit is pending; a commit that reaches the
    /// session's strand after the release sends nothing and completes with errc::lock_lost.
    /// \threadsafety Distinct objects: safe. Shared object: unsafe.
    template <BOOST_ASIO_COMPLETION_TOKEN_FOR(void(error_code, commit_result))
                  CompletionToken = default_completion_token>
    auto async_commit(transaction t, CompletionToken&& token = default_completion_token{}) {
        return asio::async_initiate<CompletionToken, void(error_code, commit_result)>(
            [h = h_, ex = ex_](auto handler, transaction t) {
                if (!h && !ex)
                    return detail::complete_without_session(std::move(handler), error_code(errc::not_held),
                                                            commit_result{});
                start_commit(
                    h, ex, std::move(t),
                    asio::any_completion_handler<void(error_code, commit_result)>(std::move(handler)));
            },
            token, std::move(t));
    }

    /// Binds an asynchronous operation to the lock: when the lock is lost, the operation is
    /// cancelled (cancellation_type::terminal), so a critical section stops with its lock:
    /// \code
    ///   auto ex = co_await asio::this_coro::executor;
    ///   co_await do_work(g.bind_loss(ex, asio::use_awaitable));
    /// \endcode
    /// `ex` is the executor the bound operation's handler runs on (a strand, on a multi-threaded
    /// io_context): the cancellation is emitted there, never on another thread. If the lock is
    /// already lost, the operation is cancelled right after it starts. Any number of operations
    /// may be bound, each with its own signal, which lives as long as the operation's handler:
    /// the guard may be released or destroyed while they are pending. Also arms the node watch
    /// (see async_wait_lost). On an empty guard the token is returned bound to nothing.
    /// Returns `token` bound to the binding's cancellation slot (asio::bind_cancellation_slot),
    /// with the binding consigned to its handler (asio::consign).
    template <class Executor, class CompletionToken>
    auto bind_loss(const Executor& ex, CompletionToken&& token) {
        auto b = start_loss_binding(h_, asio::any_io_executor(ex));
        auto slot = detail::loss_binding_slot(b.get());
        return asio::bind_cancellation_slot(
            slot, asio::consign(std::forward<CompletionToken>(token), std::move(b)));
    }

    /// Gives up ownership without waiting: the node is deleted in the background.
    void release_in_background() noexcept;

    /// Internal: the shared state behind the guard.
    const std::shared_ptr<detail::held_lock>& state() const noexcept { return h_; }

private:
    using handler_type = asio::any_completion_handler<void(error_code)>;
    static void start_release(std::shared_ptr<detail::held_lock>, const asio::any_io_executor&, handler_type);
    static void start_wait_revoked(std::shared_ptr<detail::held_lock>, const asio::any_io_executor&,
                                   handler_type);
    static void start_wait_lost(std::shared_ptr<detail::held_lock>, const asio::any_io_executor&,
                                handler_type);
    static void start_wait_verdict(std::shared_ptr<detail::held_lock>, const asio::any_io_executor&,
                                   handler_type);
    static void start_commit(std::shared_ptr<detail::held_lock>, const asio::any_io_executor&, transaction,
                             asio::any_completion_handler<void(error_code, commit_result)>);
    static std::shared_ptr<detail::loss_binding> start_loss_binding(const std::shared_ptr<detail::held_lock>&,
                                                                    asio::any_io_executor);

    std::shared_ptr<detail::held_lock> h_;
    // The session's executor, kept after a release or a move: the operations of an empty guard
    // complete there (never on a thread zklock did not ask for).
    asio::any_io_executor ex_;
};

} // namespace zklock
