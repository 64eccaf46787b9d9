// zklock/znode.hpp: plain ZooKeeper reads and writes on a session, as Asio operations.
// For data that a lock protects (e.g. a value written with its fencing token) and for tooling.
#pragma once

#include <zklock/config.hpp>
#include <zklock/completion.hpp>

#include <zklock/error.hpp>
#include <zklock/session.hpp>

#include <boost/asio/any_completion_handler.hpp>
#include <boost/asio/async_result.hpp>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace zklock {

namespace asio = boost::asio;

/// A node's data and the stat fields that matter for optimistic updates and fencing.
struct node_data {
    std::string data;                 ///< the node's data
    std::int32_t version = 0;         ///< pass to async_set_data for a compare-and-set
    std::int64_t czxid = 0;           ///< the zxid of the transaction that created the node
    std::int64_t mzxid = 0;           ///< the zxid of the transaction that last modified the node
    std::int64_t ephemeral_owner = 0; ///< the session id of an ephemeral node's owner (0 otherwise)
};

namespace detail {
ZKLOCK_DECL void start_get_data(const std::shared_ptr<session_impl>&, std::string,
                                asio::any_completion_handler<void(error_code, node_data)>);
ZKLOCK_DECL void start_set_data(const std::shared_ptr<session_impl>&, std::string, std::string, int,
                                asio::any_completion_handler<void(error_code)>);
ZKLOCK_DECL void start_create(const std::shared_ptr<session_impl>&, std::string, std::string,
                              asio::any_completion_handler<void(error_code)>);
ZKLOCK_DECL void start_delete(const std::shared_ptr<session_impl>&, std::string, int,
                              asio::any_completion_handler<void(error_code)>);
ZKLOCK_DECL void start_children(const std::shared_ptr<session_impl>&, std::string,
                                asio::any_completion_handler<void(error_code, std::vector<std::string>)>);
} // namespace detail

// Every operation below: the path is checked like a lock path (errc::path_*); ZooKeeper's own
// errors come as zk_errc (e.g. zk_errc::no_node, zk_errc::bad_version); errc::not_connected
// before async_connect completed. Handlers run on their associated executor (default: the
// session's), never inline. Not cancellable (each is one ZooKeeper round trip).

/// Reads a node: its data, version and zxids.
///
/// \signature `void(error_code, node_data)`: on success an empty error_code and the node's data;
/// on failure the error and a default-constructed node_data. The token defaults to asio::deferred
/// (zklock::default_completion_token).
/// \executor The handler's associated executor (default: the session's), never inside the
/// initiating function. While the operation is pending, the handler's executor has outstanding
/// work.
/// \cancellation Not cancellable (one ZooKeeper round trip).
/// \errors
/// - a bad path, before anything is sent: errc::path_* (the path is checked like a lock path,
///   see validate_lock_path);
/// - errc::not_connected: the session is disconnected (async_connect not called yet, or its
///   attempt failed);
/// - asio::error::operation_aborted: the session was closed (or destroyed) before the operation
///   started;
/// - ZooKeeper's own errors, as zk_errc: e.g. zk_errc::no_node (the node does not exist),
///   zk_errc::no_auth (its ACL refuses this session), zk_errc::connection_loss;
///   zk_errc::closing or zk_errc::invalid_state when the session is closed or destroyed before
///   the reply.
/// \lifetimes `path` is copied into the operation, which also shares the session's implementation
/// (taken at the call, also for a deferred operation): the session object may be destroyed while
/// the operation is pending (it then completes with an error, see above).
/// \threadsafety Distinct sessions: safe. Shared session: safe (operations may be started on
/// one session from any thread, concurrently).
template <BOOST_ASIO_COMPLETION_TOKEN_FOR(void(error_code, node_data))
              CompletionToken = default_completion_token>
auto async_get_data(session& s, std::string path, CompletionToken&& token = default_completion_token{}) {
    return asio::async_initiate<CompletionToken, void(error_code, node_data)>(
        [](auto h, std::shared_ptr<detail::session_impl> s, std::string p) {
            detail::start_get_data(s, std::move(p), std::move(h));
        },
        token, s.impl(), std::move(path));
}

/// Writes a node's data; `version` -1 writes unconditionally, otherwise only if it matches.
///
/// \signature `void(error_code)`: empty on success, else the error. The token defaults to
/// asio::deferred (zklock::default_completion_token).
/// \executor The handler's associated executor (default: the session's), never inside the
/// initiating function. While the operation is pending, the handler's executor has outstanding
/// work.
/// \cancellation Not cancellable (one ZooKeeper round trip).
/// \errors
/// - a bad path, before anything is sent: errc::path_* (the path is checked like a lock path,
///   see validate_lock_path);
/// - errc::write_too_large, before anything is sent: the path and data are over
///   max_write_bytes (a server closes the connection on a request over its jute.maxbuffer);
/// - errc::not_connected: the session is disconnected (async_connect not called yet, or its
///   attempt failed);
/// - asio::error::operation_aborted: the session was closed (or destroyed) before the operation
///   started;
/// - ZooKeeper's own errors, as zk_errc: e.g. zk_errc::bad_version (the node's version is not
///   `version`), zk_errc::no_node, zk_errc::no_auth, zk_errc::connection_loss (the outcome is
///   then unknown);
///   zk_errc::closing or zk_errc::invalid_state when the session is closed or destroyed before
///   the reply.
/// \lifetimes `path` and `data` are copied into the operation, which also shares the session's
/// implementation (taken at the call, also for a deferred operation): the session object may be
/// destroyed while the operation is pending (it then completes with an error, see above).
/// \threadsafety Distinct sessions: safe. Shared session: safe (operations may be started on
/// one session from any thread, concurrently).
template <BOOST_ASIO_COMPLETION_TOKEN_FOR(void(error_code)) CompletionToken = default_completion_token>
auto async_set_data(session& s, std::string path, std::string data, int version,
                    CompletionToken&& token = default_completion_token{}) {
    return asio::async_initiate<CompletionToken, void(error_code)>(
        [](auto h, std::shared_ptr<detail::session_impl> s, std::string p, std::string d, int v) {
            detail::start_set_data(s, std::move(p), std::move(d), v, std::move(h));
        },
        token, s.impl(), std::move(path), std::move(data), version);
}

/// Creates a persistent node, and its missing ancestors as CONTAINER nodes.
///
/// An existing node is not an error (its data is left as it is). The ancestors' creates and the
/// node's go out together; only the node's own create decides the outcome.
///
/// \signature `void(error_code)`: empty on success (also when the node already existed), else
/// the error. The token defaults to asio::deferred (zklock::default_completion_token).
/// \executor The handler's associated executor (default: the session's), never inside the
/// initiating function. While the operation is pending, the handler's executor has outstanding
/// work.
/// \cancellation Not cancellable (one ZooKeeper round trip).
/// \errors
/// - a bad path, before anything is sent: errc::path_* (the path is checked like a lock path,
///   see validate_lock_path);
/// - errc::write_too_large, before anything is sent: the path and data are over
///   max_write_bytes (a server closes the connection on a request over its jute.maxbuffer);
/// - errc::not_connected: the session is disconnected (async_connect not called yet, or its
///   attempt failed);
/// - asio::error::operation_aborted: the session was closed (or destroyed) before the operation
///   started;
/// - ZooKeeper's own errors, as zk_errc: e.g. zk_errc::no_auth, zk_errc::no_node (an ancestor
///   could not be created), zk_errc::connection_loss (the outcome is then unknown);
///   zk_errc::closing or zk_errc::invalid_state when the session is closed or destroyed before
///   the reply.
/// \lifetimes `path` and `data` are copied into the operation, which also shares the session's
/// implementation (taken at the call, also for a deferred operation): the session object may be
/// destroyed while the operation is pending (it then completes with an error, see above).
/// \threadsafety Distinct sessions: safe. Shared session: safe (operations may be started on
/// one session from any thread, concurrently).
template <BOOST_ASIO_COMPLETION_TOKEN_FOR(void(error_code)) CompletionToken = default_completion_token>
auto async_create_node(session& s, std::string path, std::string data,
                       CompletionToken&& token = default_completion_token{}) {
    return asio::async_initiate<CompletionToken, void(error_code)>(
        [](auto h, std::shared_ptr<detail::session_impl> s, std::string p, std::string d) {
            detail::start_create(s, std::move(p), std::move(d), std::move(h));
        },
        token, s.impl(), std::move(path), std::move(data));
}

/// Deletes a node (`version` -1: any version).
///
/// \signature `void(error_code)`: empty on success, else the error. The token defaults to
/// asio::deferred (zklock::default_completion_token).
/// \executor The handler's associated executor (default: the session's), never inside the
/// initiating function. While the operation is pending, the handler's executor has outstanding
/// work.
/// \cancellation Not cancellable (one ZooKeeper round trip).
/// \errors
/// - a bad path, before anything is sent: errc::path_* (the path is checked like a lock path,
///   see validate_lock_path);
/// - errc::not_connected: the session is disconnected (async_connect not called yet, or its
///   attempt failed);
/// - asio::error::operation_aborted: the session was closed (or destroyed) before the operation
///   started;
/// - ZooKeeper's own errors, as zk_errc: e.g. zk_errc::no_node, zk_errc::bad_version,
///   zk_errc::not_empty (the node has children), zk_errc::no_auth, zk_errc::connection_loss
///   (the outcome is then unknown);
///   zk_errc::closing or zk_errc::invalid_state when the session is closed or destroyed before
///   the reply.
/// \lifetimes `path` is copied into the operation, which also shares the session's implementation
/// (taken at the call, also for a deferred operation): the session object may be destroyed while
/// the operation is pending (it then completes with an error, see above).
/// \threadsafety Distinct sessions: safe. Shared session: safe (operations may be started on
/// one session from any thread, concurrently).
template <BOOST_ASIO_COMPLETION_TOKEN_FOR(void(error_code)) CompletionToken = default_completion_token>
auto async_delete_node(session& s, std::string path, int version,
                       CompletionToken&& token = default_completion_token{}) {
    return asio::async_initiate<CompletionToken, void(error_code)>(
        [](auto h, std::shared_ptr<detail::session_impl> s, std::string p, int v) {
            detail::start_delete(s, std::move(p), v, std::move(h));
        },
        token, s.impl(), std::move(path), version);
}

/// Lists a node's children (unsorted).
///
/// \signature `void(error_code, std::vector<std::string>)`: on success an empty error_code and
/// the children's names (not their paths); on failure the error and an empty vector. The token
/// defaults to asio::deferred (zklock::default_completion_token).
/// \executor The handler's associated executor (default: the session's), never inside the
/// initiating function. While the operation is pending, the handler's executor has outstanding
/// work.
/// \cancellation Not cancellable (one ZooKeeper round trip).
/// \errors
/// - a bad path, before anything is sent: errc::path_* (the path is checked like a lock path,
///   see validate_lock_path);
/// - errc::not_connected: the session is disconnected (async_connect not called yet, or its
///   attempt failed);
/// - asio::error::operation_aborted: the session was closed (or destroyed) before the operation
///   started;
/// - ZooKeeper's own errors, as zk_errc: e.g. zk_errc::no_node, zk_errc::no_auth,
///   zk_errc::connection_loss;
///   zk_errc::closing or zk_errc::invalid_state when the session is closed or destroyed before
///   the reply.
/// \lifetimes `path` is copied into the operation, which also shares the session's implementation
/// (taken at the call, also for a deferred operation): the session object may be destroyed while
/// the operation is pending (it then completes with an error, see above).
/// \threadsafety Distinct sessions: safe. Shared session: safe (operations may be started on
/// one session from any thread, concurrently).
template <BOOST_ASIO_COMPLETION_TOKEN_FOR(void(error_code, std::vector<std::string>))
              CompletionToken = default_completion_token>
auto async_get_children(session& s, std::string path, CompletionToken&& token = default_completion_token{}) {
    return asio::async_initiate<CompletionToken, void(error_code, std::vector<std::string>)>(
        [](auto h, std::shared_ptr<detail::session_impl> s, std::string p) {
            detail::start_children(s, std::move(p), std::move(h));
        },
        token, s.impl(), std::move(path));
}

} // namespace zklock
