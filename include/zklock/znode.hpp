// zklock/znode.hpp: plain ZooKeeper reads and writes on a session, as Asio operations.
// For data that a lock protects (e.g. a value written with its fencing token) and for tooling.
#pragma once

#include <zklock/config.hpp>

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
    std::string data;
    std::int32_t version = 0; ///< pass to async_set_data for a compare-and-set
    std::int64_t czxid = 0;
    std::int64_t mzxid = 0;
    std::int64_t ephemeral_owner = 0;
};

namespace detail {
ZKLOCK_DECL void start_get_data(const std::shared_ptr<session_impl>&, std::string, asio::any_completion_handler<void(error_code, node_data)>);
ZKLOCK_DECL void start_set_data(const std::shared_ptr<session_impl>&, std::string, std::string, int, asio::any_completion_handler<void(error_code)>);
ZKLOCK_DECL void start_create(const std::shared_ptr<session_impl>&, std::string, std::string, asio::any_completion_handler<void(error_code)>);
ZKLOCK_DECL void start_delete(const std::shared_ptr<session_impl>&, std::string, int, asio::any_completion_handler<void(error_code)>);
ZKLOCK_DECL void start_children(const std::shared_ptr<session_impl>&, std::string, asio::any_completion_handler<void(error_code, std::vector<std::string>)>);
} // namespace detail

// Every operation below: the path is checked like a lock path (errc::path_*); ZooKeeper's own
// errors come as zk_errc (e.g. zk_errc::no_node, zk_errc::bad_version); errc::not_connected
// before async_connect completed. Handlers run on their associated executor (default: the
// session's), never inline. Not cancellable (each is one ZooKeeper round trip).

/// Reads a node. Completion signature: void(error_code, node_data).
template <class CompletionToken>
auto async_get_data(session& s, std::string path, CompletionToken&& token) {
    return asio::async_initiate<CompletionToken, void(error_code, node_data)>(
        [](auto h, std::shared_ptr<detail::session_impl> s, std::string p) {
            detail::start_get_data(s, std::move(p), std::move(h));
        }, token, s.impl(), std::move(path));
}

/// Writes a node's data; `version` -1 writes unconditionally, otherwise only if it matches.
/// Completion signature: void(error_code).
template <class CompletionToken>
auto async_set_data(session& s, std::string path, std::string data, int version, CompletionToken&& token) {
    return asio::async_initiate<CompletionToken, void(error_code)>(
        [](auto h, std::shared_ptr<detail::session_impl> s, std::string p, std::string d, int v) {
            detail::start_set_data(s, std::move(p), std::move(d), v, std::move(h));
        }, token, s.impl(), std::move(path), std::move(data), version);
}

/// Creates a persistent node, and its missing ancestors as CONTAINER nodes. An existing node
/// is not an error. Completion signature: void(error_code).
template <class CompletionToken>
auto async_create_node(session& s, std::string path, std::string data, CompletionToken&& token) {
    return asio::async_initiate<CompletionToken, void(error_code)>(
        [](auto h, std::shared_ptr<detail::session_impl> s, std::string p, std::string d) {
            detail::start_create(s, std::move(p), std::move(d), std::move(h));
        }, token, s.impl(), std::move(path), std::move(data));
}

/// Deletes a node (`version` -1: any version). Completion signature: void(error_code).
template <class CompletionToken>
auto async_delete_node(session& s, std::string path, int version, CompletionToken&& token) {
    return asio::async_initiate<CompletionToken, void(error_code)>(
        [](auto h, std::shared_ptr<detail::session_impl> s, std::string p, int v) {
            detail::start_delete(s, std::move(p), v, std::move(h));
        }, token, s.impl(), std::move(path), version);
}

/// Lists a node's children (unsorted). Completion signature: void(error_code, std::vector<std::string>).
template <class CompletionToken>
auto async_get_children(session& s, std::string path, CompletionToken&& token) {
    return asio::async_initiate<CompletionToken, void(error_code, std::vector<std::string>)>(
        [](auto h, std::shared_ptr<detail::session_impl> s, std::string p) {
            detail::start_children(s, std::move(p), std::move(h));
        }, token, s.impl(), std::move(path));
}

} // namespace zklock
