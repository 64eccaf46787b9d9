// zklock/inspect.hpp: who holds a lock, who waits, and the admin operations on them.
#pragma once

#include <zklock/config.hpp>
#include <zklock/completion.hpp>

#include <zklock/dialect.hpp>
#include <zklock/error.hpp>
#include <zklock/session.hpp>

#include <boost/asio/any_completion_handler.hpp>
#include <boost/asio/async_result.hpp>

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace zklock {

namespace asio = boost::asio;

/// One contender of a lock, as stored in ZooKeeper.
struct contender_info {
    std::string name;      ///< the node's name
    std::string node_path; ///< its full path
    /// The sequence number at the end of the node's name (0 when it carries none).
    std::int32_t sequence = 0;
    /// Granted (for a read/write lock: every reader below the first writer).
    bool holder = false;
    /// False for read nodes of a read/write lock and for semaphore leases.
    bool writer = true;
    bool lease = false; ///< a semaphore's lease ("<path>/leases/..."): the first N are held
    /// The holder description ("zklock <host> pid <pid>", Curator's IP, ...).
    std::string data;
    std::chrono::milliseconds age{0}; ///< now minus the node's creation time (server clock)
    std::int64_t session_id = 0;      ///< the ephemeralOwner
    std::int64_t czxid = 0;           ///< the node's czxid (guard::node_czxid() of its holder)
    /// Named like a lock node, but no sequential create made it (a malformed suffix, or one that
    /// is negative or not below the parent's cversion while that counter has not wrapped): made
    /// by hand. Ignored for ordering, never a holder; async_break_lock removes it.
    bool foreign = false;
};

/// Every recipe's nodes are listed whatever these say: one path, one lock (a mutex's, a read/write
/// lock's or a semaphore's). Kept so that code written against earlier versions still compiles.
struct inspect_options {
    lock_dialect dialect = lock_dialect::curator; ///< (no effect: both dialects' nodes are listed)
    bool read_write = false;                      ///< (no effect: read and write nodes are always listed)
};

namespace detail {
ZKLOCK_DECL void
start_list_contenders(const std::shared_ptr<session_impl>&, std::string, inspect_options,
                      asio::any_completion_handler<void(error_code, std::vector<contender_info>)>);
ZKLOCK_DECL void start_break_lock(const std::shared_ptr<session_impl>&, std::string,
                                  asio::any_completion_handler<void(error_code)>);
ZKLOCK_DECL void start_revoke(const std::shared_ptr<session_impl>&, std::string, inspect_options,
                              asio::any_completion_handler<void(error_code, std::string)>);
} // namespace detail

/// Lists a lock's contenders in queue order, holder(s) first, with their node data and age.
///
/// The contenders are followed by the foreign children (contender_info::foreign). Listed are the
/// nodes of every recipe (mutex, read and write nodes, in Curator's and kazoo's naming), and a
/// semaphore's leases. Children that are not lock nodes are left out.
/// A path that does not exist has no contenders. A node deleted between the listing and its read
/// is left out. The overload that takes an inspect_options is kept for older code: `o` has no
/// effect (see inspect_options).
///
/// \signature `void(error_code, std::vector<contender_info>)`: on success an empty error_code and
/// the contenders (empty if there are none); on failure the error and an empty vector. The token
/// defaults to asio::deferred (zklock::default_completion_token).
/// \executor The handler's associated executor (default: the session's), never inside the
/// initiating function. While the operation is pending, the handler's executor has outstanding
/// work.
/// \cancellation Not cancellable.
/// \errors
/// - a bad path, before anything is sent: errc::path_* (see validate_lock_path);
/// - errc::not_connected: the session is disconnected (async_connect not called yet, or its
///   attempt failed);
/// - asio::error::operation_aborted: the session was closed (or destroyed) before the operation
///   started;
/// - the server's own code for a request it refused (zk_errc::no_auth, zk_errc::connection_loss,
///   ...);
/// - errc::internal_error: an exception inside zklock (e.g. out of memory).
/// \lifetimes `path` is copied into the operation, which also shares the session's
/// implementation (taken at the call, also for a deferred operation): the session object may be
/// destroyed while the operation is pending (its requests then fail with zk_errc::closing or
/// zk_errc::invalid_state).
/// \threadsafety Distinct sessions: safe. Shared session: safe (operations may be started on
/// one session from any thread, concurrently).
template <BOOST_ASIO_COMPLETION_TOKEN_FOR(void(error_code, std::vector<contender_info>))
              CompletionToken = default_completion_token>
auto async_list_contenders(session& s, std::string path, inspect_options o,
                           CompletionToken&& token = default_completion_token{}) {
    return asio::async_initiate<CompletionToken, void(error_code, std::vector<contender_info>)>(
        [](auto h, std::shared_ptr<detail::session_impl> s, std::string p, inspect_options o) {
            detail::start_list_contenders(s, std::move(p), o, std::move(h));
        },
        token, s.impl(), std::move(path), o);
}

/// Lists a lock's contenders: the overload above, without its inspect_options (which has no
/// effect).
///
/// \signature As the overload above. The token defaults to asio::deferred
/// (zklock::default_completion_token).
/// \executor As the overload above.
/// \cancellation Not cancellable.
/// \errors As the overload above.
/// \lifetimes As the overload above.
/// \threadsafety As the overload above.
template <BOOST_ASIO_COMPLETION_TOKEN_FOR(void(error_code, std::vector<contender_info>))
              CompletionToken = default_completion_token>
auto async_list_contenders(session& s, std::string path,
                           CompletionToken&& token = default_completion_token{}) {
    return async_list_contenders(s, std::move(path), inspect_options{}, std::forward<CompletionToken>(token));
}

/// Admin: breaks a lock by deleting one contender's node.
///
/// For example the node_path of a holder whose process hangs without its session expiring. The
/// holder is told through its loss signal (errc::lock_node_deleted) if it watches its node.
/// `node_path` must name a lock node, a contender or a foreign one, or a semaphore lease (else
/// errc::not_a_lock_node, and nothing is deleted). The node is deleted whatever its version.
///
/// \signature `void(error_code)`: empty once the node is deleted, else the error. The token
/// defaults to asio::deferred (zklock::default_completion_token).
/// \executor The handler's associated executor (default: the session's), never inside the
/// initiating function. While the operation is pending, the handler's executor has outstanding
/// work.
/// \cancellation Not cancellable (one ZooKeeper round trip).
/// \errors
/// - a bad path, before anything is sent: errc::path_* (see validate_lock_path);
/// - errc::not_connected: the session is disconnected (async_connect not called yet, or its
///   attempt failed);
/// - asio::error::operation_aborted: the session was closed (or destroyed) before the operation
///   started;
/// - errc::not_a_lock_node: `node_path` does not name a lock node (nothing was deleted);
/// - zk_errc::no_node if it is already gone, zk_errc::no_auth if its ACL does not let this
///   session delete it, or another code the server answered with (zk_errc::connection_loss, ...).
/// \lifetimes `node_path` is copied into the operation, which also shares the session's
/// implementation (taken at the call, also for a deferred operation): the session object may be
/// destroyed while the operation is pending (its requests then fail with zk_errc::closing or
/// zk_errc::invalid_state).
/// \threadsafety Distinct sessions: safe. Shared session: safe (operations may be started on
/// one session from any thread, concurrently).
template <BOOST_ASIO_COMPLETION_TOKEN_FOR(void(error_code)) CompletionToken = default_completion_token>
auto async_break_lock(session& s, std::string node_path,
                      CompletionToken&& token = default_completion_token{}) {
    return asio::async_initiate<CompletionToken, void(error_code)>(
        [](auto h, std::shared_ptr<detail::session_impl> s, std::string p) {
            detail::start_break_lock(s, std::move(p), std::move(h));
        },
        token, s.impl(), std::move(node_path));
}

/// Asks the current holder of the lock at `path` to let go.
///
/// Writes Curator's revocation marker "__REVOKE__" into the holder's node (the first node that
/// async_list_contenders lists). A holder whose lock was made with mutex_options::revocable
/// learns it through guard::async_wait_revoked (Curator's revocable locks react the same way).
/// The holder is asked, not forced. The overload that takes an inspect_options is kept for older
/// code: `o` has no effect (see inspect_options).
///
/// \signature `void(error_code, std::string node_path_of_the_holder)`: on success an empty
/// error_code and the holder's node path; if the write failed, its error and that node's path;
/// otherwise the error and an empty string. The token defaults to asio::deferred
/// (zklock::default_completion_token).
/// \executor The handler's associated executor (default: the session's), never inside the
/// initiating function. While the operation is pending, the handler's executor has outstanding
/// work.
/// \cancellation Not cancellable.
/// \errors
/// - a bad path, before anything is sent: errc::path_* (see validate_lock_path);
/// - errc::not_connected: the session is disconnected (async_connect not called yet, or its
///   attempt failed);
/// - asio::error::operation_aborted: the session was closed (or destroyed) before the operation
///   started;
/// - zk_errc::no_node if nobody holds it (also when the path does not exist);
/// - the listing's errors (see async_list_contenders), and the server's answer to the write
///   (e.g. zk_errc::no_auth if the holder's node does not let this session write it,
///   zk_errc::no_node if it was deleted meanwhile);
/// - errc::internal_error: an exception inside zklock (e.g. out of memory).
/// \lifetimes `path` is copied into the operation, which also shares the session's
/// implementation (taken at the call, also for a deferred operation): the session object may be
/// destroyed while the operation is pending (its requests then fail with zk_errc::closing or
/// zk_errc::invalid_state).
/// \threadsafety Distinct sessions: safe. Shared session: safe (operations may be started on
/// one session from any thread, concurrently).
template <BOOST_ASIO_COMPLETION_TOKEN_FOR(void(error_code, std::string))
              CompletionToken = default_completion_token>
auto async_revoke(session& s, std::string path, inspect_options o,
                  CompletionToken&& token = default_completion_token{}) {
    return asio::async_initiate<CompletionToken, void(error_code, std::string)>(
        [](auto h, std::shared_ptr<detail::session_impl> s, std::string p, inspect_options o) {
            detail::start_revoke(s, std::move(p), o, std::move(h));
        },
        token, s.impl(), std::move(path), o);
}

/// Asks the current holder of the lock at `path` to let go: the overload above, without its
/// inspect_options (which has no effect).
///
/// \signature As the overload above. The token defaults to asio::deferred
/// (zklock::default_completion_token).
/// \executor As the overload above.
/// \cancellation Not cancellable.
/// \errors As the overload above.
/// \lifetimes As the overload above.
/// \threadsafety As the overload above.
template <BOOST_ASIO_COMPLETION_TOKEN_FOR(void(error_code, std::string))
              CompletionToken = default_completion_token>
auto async_revoke(session& s, std::string path, CompletionToken&& token = default_completion_token{}) {
    return async_revoke(s, std::move(path), inspect_options{}, std::forward<CompletionToken>(token));
}

} // namespace zklock
