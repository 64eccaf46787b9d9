// zklock/error.hpp: error codes of zklock and of the ZooKeeper server.
//
// Two categories:
//  - zklock::error_category() ("zklock") for conditions that zklock itself detects
//    (bad input, deadlines, lock loss, ...), with values from zklock::errc;
//  - zklock::zookeeper_category() ("zookeeper") for ZooKeeper's own return codes
//    (ZNONODE, ZCONNECTIONLOSS, ...), with the C client's numeric values, so they stay
//    recognisable: `ec == zklock::zk_errc::no_node`.
#pragma once

#include <zklock/config.hpp>

#include <boost/system/error_code.hpp>
#include <cstddef>
#include <type_traits>

namespace zklock {

using boost::system::error_code;

/// Conditions detected by zklock. Every value has a message that names the problem.
enum class errc {
    ok = 0,
    // -- bad input (nothing was sent to ZooKeeper) --
    path_empty = 1,         ///< a path (lock or data path) is empty
    path_not_absolute,      ///< a path does not start with '/'
    path_trailing_slash,    ///< a path ends with '/'
    path_empty_segment,     ///< a path contains "//"
    path_relative_segment,  ///< a path contains a "." or ".." segment
    path_bad_character,     ///< a path contains NUL or a control/unassigned character
    path_reserved,          ///< a path is in ZooKeeper's reserved /zookeeper tree
    invalid_connect_string, ///< the connect string is not host:port[,host:port...][/chroot]
    invalid_argument,       ///< another argument is out of range (e.g. a session timeout <= 0)
    path_too_long,          ///< a path is longer than max_path_length bytes
    data_too_large,         ///< node data is larger than max_node_data bytes
    invalid_lease_fraction, ///< loss_policy::lease(f) with f outside (0.1, 0.5]
    not_a_lock_node,        ///< async_break_lock: the path does not name a lock node (nothing was deleted)
    transaction_empty,      ///< async_commit: the transaction has no operation
    transaction_too_large,  ///< async_commit: the transaction is over max_transaction_bytes
    // -- session --
    connect_timeout = 20,   ///< no ZooKeeper server answered within the connect timeout
    not_connected,          ///< the operation needs a session, and async_connect has not completed
    session_expired,        ///< the ZooKeeper session expired: every lock it held is gone
    session_closed,         ///< the session was closed by this process
    // -- locks --
    lock_busy = 40,         ///< try-acquire: another contender holds the lock
    acquire_timeout,        ///< the acquire deadline passed before the lock was granted
    lock_lost_suspended,    ///< lost by loss_policy::on_disconnect: the connection to ZooKeeper dropped
    lock_node_deleted,      ///< the holder's (or waiter's) node was deleted by someone else
    lock_released,          ///< the lock was released by its holder (loss waiters complete with this)
    not_held,               ///< the guard holds no lock (moved-from, released or never acquired)
    upgrade_not_supported,  ///< a read lock cannot be upgraded to a write lock (it would deadlock)
    revocation_requested,   ///< another client asked the holder of a revocable lock to let go
    not_revocable,          ///< async_wait_revoked on a lock not made with mutex_options::revocable
    lease_expired,          ///< lost by loss_policy::lease: no reply to a request sent within the lease
    sequence_overflow,      ///< the lock path's sequence counter has wrapped: the order of contenders is unknown
    create_retries_exhausted, ///< the lock node's create kept failing with connection loss
    internal_error,         ///< an exception inside zklock (e.g. out of memory): the operation was abandoned
    lock_lost,              ///< async_commit: the lock was not held at the commit; nothing was applied
    // -- one path, one lock: recipes that cannot share a path --
    path_used_by_semaphore = 70, ///< a mutex or read/write lock on a path whose semaphore has leases
    path_used_by_lock,           ///< a semaphore on a path that holds mutex or read/write lock nodes
    strategy_conflict,           ///< lock_strategy::unique_node and the sequential strategies on one path
    // -- bad input, one code per mistake (nothing was sent to ZooKeeper) --
    invalid_session_timeout = 80, ///< session_options::session_timeout outside [100 ms, 2^31 - 1 ms]
    invalid_connect_timeout,      ///< session_options::connect_timeout not positive
    invalid_chroot,               ///< the connect string's chroot (after the first '/') is not a valid path
    chroot_missing,               ///< the connect string's chroot does not exist on the server
    invalid_max_leases,           ///< semaphore: max_leases below 1
    semaphore_size_mismatch,      ///< semaphore: max_leases differs from the N the path stores
    invalid_local_handoff,        ///< mutex_options::local_handoff above 4096
    local_handoff_unsupported,    ///< mutex_options::local_handoff on a read/write lock
    multi_lock_empty,             ///< async_acquire_all with no lock
    multi_lock_duplicate_path,    ///< async_acquire_all with two locks on one path
    not_a_write_guard,            ///< async_downgrade of a guard that is not a held write lock of this path
    invalid_version,              ///< a transaction operation's version below -1
    // -- TLS (session_options::tls); the details: session::last_connect_attempts() and the log --
    tls_config_invalid = 100,        ///< a CA, certificate or key that cannot be read or does not fit
    tls_unknown_ca,                  ///< the server's certificate is not signed by a trusted CA
    tls_server_name_mismatch,        ///< the server's certificate does not name the server
    tls_certificate_expired,         ///< the server's certificate has expired (or is not valid yet)
    tls_client_certificate_required, ///< the server requires a client certificate, and none is set
    tls_client_certificate_rejected, ///< the server refused the client certificate
    tls_not_tls_server,              ///< the server did not answer the TLS handshake (a plain port?)
    tls_handshake_failed,            ///< the TLS handshake failed for another reason
};

/// Input limits, checked before anything is sent. ZooKeeper closes the connection on a request
/// larger than its jute.maxbuffer (1 MiB by default) instead of answering it, which would look
/// like a connection loss and be retried; these caps stay far below it.
inline constexpr std::size_t max_path_length = 4096; ///< bytes of a lock path
inline constexpr std::size_t max_node_data = 65536;  ///< bytes of node data (the holder description)

/// The "zklock" category.
ZKLOCK_DECL const boost::system::error_category& error_category() noexcept;

inline error_code make_error_code(errc e) noexcept {
    return {static_cast<int>(e), error_category()};
}

/// ZooKeeper's return codes (values as in the C client's zookeeper.h).
enum class zk_errc {
    ok = 0,
    system_error = -1,
    runtime_inconsistency = -2,
    data_inconsistency = -3,
    connection_loss = -4,
    marshalling_error = -5,
    unimplemented = -6,
    operation_timeout = -7,
    bad_arguments = -8,
    invalid_state = -9,
    new_config_no_quorum = -13,
    reconfig_in_progress = -14,
    api_error = -100,
    no_node = -101,
    no_auth = -102,
    bad_version = -103,
    no_children_for_ephemerals = -108,
    node_exists = -110,
    not_empty = -111,
    session_expired = -112,
    invalid_callback = -113,
    invalid_acl = -114,
    auth_failed = -115,
    closing = -116,
    nothing = -117,
    session_moved = -118,
    not_read_only = -119,
    ephemeral_on_local_session = -120,
    no_watcher = -121,
    reconfig_disabled = -123,
    session_closed_require_sasl_auth = -124,
    quota_exceeded = -125,
    throttled_op = -127,
};

/// The "zookeeper" category: the server's and the C client's return codes.
ZKLOCK_DECL const boost::system::error_category& zookeeper_category() noexcept;

inline error_code make_error_code(zk_errc e) noexcept {
    return {static_cast<int>(e), zookeeper_category()};
}

/// True when the error means the session (and every lock it held) is gone for good:
/// session expired or closed, authentication failed. Retrying with the same session is pointless.
ZKLOCK_DECL bool is_fatal(const error_code& ec) noexcept;

/// True when the outcome of a write is unknown (connection loss, operation timeout):
/// the request may or may not have been applied by the server.
ZKLOCK_DECL bool is_connection_error(const error_code& ec) noexcept;

} // namespace zklock

template <>
struct boost::system::is_error_code_enum<zklock::errc> : std::true_type {};
template <>
struct boost::system::is_error_code_enum<zklock::zk_errc> : std::true_type {};
