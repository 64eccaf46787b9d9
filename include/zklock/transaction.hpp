// zklock/transaction.hpp: writes that land only while the lock is held (guard::async_commit).
#pragma once

#include <zklock/config.hpp>

#include <zklock/acl.hpp>
#include <zklock/error.hpp>

#include <cstddef>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

namespace zklock {

/// How transaction::create makes its node.
enum class create_mode {
    persistent,            ///< stays until it is deleted
    ephemeral,             ///< deleted with the session that created it
    persistent_sequential, ///< ZooKeeper appends a 10-digit counter to the name (see op_result::path)
    ephemeral_sequential,  ///< ephemeral, and with the counter of persistent_sequential
};

/// The most bytes of paths and data a transaction may carry (each operation counts 64 bytes more
/// for its framing). ZooKeeper closes the connection on a request larger than its jute.maxbuffer
/// (1 MiB by default) instead of answering it; this cap keeps a transaction well below that.
inline constexpr std::size_t max_transaction_bytes = 900 * 1024;

/// ZooKeeper writes to commit all at once or not at all (a multi-op), built by chaining:
///
///     auto r = co_await guard.async_commit(zklock::transaction{}
///                                              .set_data("/bank/alice", "70", alice.version)
///                                              .set_data("/bank/bob", "130", bob.version),
///                                          asio::use_awaitable);
///
/// A version of -1 matches any version; otherwise the operation fails with zk_errc::bad_version
/// unless the node's version is that one (the version that async_get_data returned).
class ZKLOCK_DECL transaction {
public:
    /// What an operation does, one value per chaining call: `create` (create()), `set_data`
    /// (set_data()), `remove` (remove(): delete a node) and `check` (check(): change nothing).
    enum class kind { create, set_data, remove, check };
    /// One operation of the transaction, as the chaining calls recorded it.
    struct op {
        kind what;                                  ///< what the operation does
        std::string path;                           ///< the node it applies to
        std::string data;                           ///< create, set_data
        std::int32_t version = -1;                  ///< set_data, remove, check
        create_mode mode = create_mode::persistent; ///< create
        acl node_acl = acl::open();                 ///< create
    };

    /// Creates `path` (its parent must exist). With a sequential mode the result's path names the
    /// node. `node_acl`: who may do what to the new node; with acl::creator_all_world_read() or
    /// an `auth` entry the session needs credentials (session_options::auth), else the operation
    /// fails with zk_errc::invalid_acl and nothing is applied.
    transaction& create(std::string path, std::string data = {}, create_mode mode = create_mode::persistent,
                        acl node_acl = acl::open()) {
        ops_.push_back(op{kind::create, std::move(path), std::move(data), -1, mode, std::move(node_acl)});
        return *this;
    }
    /// Replaces the data of `path`, if its version is `version` (-1: any).
    transaction& set_data(std::string path, std::string data, std::int32_t version = -1) {
        ops_.push_back(
            op{kind::set_data, std::move(path), std::move(data), version, create_mode::persistent});
        return *this;
    }
    /// Deletes `path` (it must have no children), if its version is `version` (-1: any).
    transaction& remove(std::string path, std::int32_t version = -1) {
        ops_.push_back(op{kind::remove, std::move(path), {}, version, create_mode::persistent});
        return *this;
    }
    /// Changes nothing: the transaction fails unless `path` exists with version `version` (-1: any).
    transaction& check(std::string path, std::int32_t version) {
        ops_.push_back(op{kind::check, std::move(path), {}, version, create_mode::persistent});
        return *this;
    }

    /// The operations, in the order they were added.
    const std::vector<op>& ops() const noexcept { return ops_; }
    /// The number of operations.
    std::size_t size() const noexcept { return ops_.size(); }
    /// True if the transaction has no operation (async_commit refuses it: errc::transaction_empty).
    bool empty() const noexcept { return ops_.empty(); }

    /// What async_commit checks before sending anything: errc::transaction_empty,
    /// errc::transaction_too_large (over max_transaction_bytes), a bad path (errc::path_*), or
    /// a version below -1 (errc::invalid_version).
    error_code validate() const noexcept;

private:
    std::vector<op> ops_;
};

/// What one operation of a committed transaction returned.
struct op_result {
    error_code ec;             ///< its own outcome (after a failure: see commit_result)
    std::string path;          ///< create: the created node's path (with its sequence suffix)
    std::int32_t version = -1; ///< set_data: the node's new version
};

/// What async_commit completes with, besides its error_code.
struct commit_result {
    /// The value of `failed` when none of the transaction's own operations failed.
    static constexpr std::size_t npos = std::numeric_limits<std::size_t>::max();
    /// One per operation of the transaction, in order. After a failure nothing was applied.
    std::vector<op_result> ops;
    /// The index of the operation that failed, when one of the transaction's own operations
    /// failed (the error_code is then its error, e.g. zk_errc::bad_version); npos otherwise
    /// (success, errc::lock_lost, or a request that failed as a whole).
    std::size_t failed = npos;
};

} // namespace zklock
