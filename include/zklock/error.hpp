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
    ok = 0, ///< success (an error_code made from it is empty)
    // -- bad input (nothing was sent to ZooKeeper) --
    path_empty = 1,         ///< a path (lock or data path) is empty
    path_not_absolute,      ///< a path does not start with '/'
    path_trailing_slash,    ///< a path ends with '/'
    path_empty_segment,     ///< a path contains "//"
    path_relative_segment,  ///< a path contains a "." or ".." segment
    path_bad_character,     ///< a path contains a character ZooKeeper refuses, or bytes that are not UTF-8
    path_reserved,          ///< a path is in ZooKeeper's reserved /zookeeper tree (or is "/" itself)
    invalid_connect_string, ///< the connect string is not host:port[,host:port...][/chroot]
    /// Another argument is out of range (a session timeout <= 0, say). No longer returned by
    /// zklock: every such mistake has an errc of its own (e.g. errc::invalid_session_timeout).
    invalid_argument,
    path_too_long,          ///< a path is longer than max_path_length bytes
    data_too_large,         ///< node data is larger than max_node_data bytes
    invalid_lease_fraction, ///< loss_policy::lease(f) with f outside (0.1, 0.45]
    not_a_lock_node,        ///< async_break_lock: the path does not name a lock node (nothing was deleted)
    transaction_empty,      ///< async_commit: the transaction has no operation
    transaction_too_large,  ///< async_commit: the transaction is over max_transaction_bytes
    // -- session --
    connect_timeout = 20, ///< no ZooKeeper server answered within the connect timeout
    not_connected,        ///< the operation needs a session, and async_connect has not completed
    session_expired,      ///< the ZooKeeper session expired: every lock it held is gone
    session_closed,       ///< the session was closed by this process
    // -- locks --
    lock_busy = 40,        ///< try-acquire: another contender holds the lock
    acquire_timeout,       ///< the acquire deadline passed before the lock was granted
    lock_lost_suspended,   ///< lost by loss_policy::on_disconnect: the connection to ZooKeeper dropped
    lock_node_deleted,     ///< the holder's (or waiter's) node was deleted by someone else
    lock_released,         ///< the lock was released by its holder (loss waiters complete with this)
    not_held,              ///< the guard holds no lock (moved-from, released or never acquired)
    upgrade_not_supported, ///< a read lock cannot be upgraded to a write lock (it would deadlock)
    revocation_requested,  ///< another client asked the holder of a revocable lock to let go
    not_revocable,         ///< async_wait_revoked on a lock not made with mutex_options::revocable
    lease_expired,         ///< lost by loss_policy::lease: no reply to a request sent within the lease
    /// The lock path's sequence counter has wrapped: the order of contenders is unknown.
    sequence_overflow,
    create_retries_exhausted, ///< the lock node's create kept failing with connection loss
    internal_error, ///< an exception inside zklock (e.g. out of memory): the operation was abandoned
    lock_lost,      ///< async_commit: the lock was not held at the commit; nothing was applied
    /// The lease's renewal before a grant (a committed check of the acquire's own node) was
    /// refused with ZNOAUTH: the node's ACL gives the session no READ, so loss_policy::lease could
    /// never vouch for the grant.
    lease_check_denied,
    // -- one path, one lock: recipes that cannot share a path --
    path_used_by_semaphore = 70, ///< a mutex or read/write lock on a path whose semaphore has leases
    path_used_by_lock,           ///< a semaphore on a path that holds mutex or read/write lock nodes
    strategy_conflict,           ///< lock_strategy::unique_node and the sequential strategies on one path
    /// An election's path holds a candidate named in another dialect (Curator's LeaderSelector,
    /// Curator's LeaderLatch, kazoo's Election): each sees only its own naming, so two of them
    /// could lead at once.
    election_dialect_mixed,
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
    invalid_connect_separator,    ///< the connect string separates its servers with ';': the separator is ','
    invalid_lease_timeout_cap, ///< session_options::lease_timeout_cap neither 0 nor in [100 ms, 2^31 - 1 ms]
    /// async_create_node, async_set_data: the path and data are over max_write_bytes (ZooKeeper
    /// would close the connection, under every lock of the session; nothing was sent)
    write_too_large,
    // -- TLS (session_options::tls); the details: session::last_connect_attempts() and the log --
    tls_config_invalid = 100,        ///< a CA, certificate or key that cannot be read or does not fit
    tls_unknown_ca,                  ///< the server's certificate is not signed by a trusted CA
    tls_server_name_mismatch,        ///< the server's certificate does not name the server
    tls_certificate_expired,         ///< the server's certificate has expired (or is not valid yet)
    tls_client_certificate_required, ///< the server requires a client certificate, and none is set
    tls_client_certificate_rejected, ///< the server refused the client certificate
    tls_not_tls_server,              ///< the server did not answer the TLS handshake (a plain port?)
    tls_handshake_failed,            ///< the TLS handshake failed for another reason
    /// With TLS, the C client would have been given a server that is not one of the relay's
    /// loopback listeners (its password and digest credentials would cross the network in clear):
    /// refused, nothing was sent.
    tls_relay_bypassed,
    /// The server's answer to the connect names no session (session id 0 or negotiated timeout
    /// 0): not a ZooKeeper server, whatever its certificate says. The connection is dropped.
    no_session_granted,
};

/// Input limits, checked before anything is sent. ZooKeeper closes the connection on a request
/// larger than its jute.maxbuffer (1 MiB by default) instead of answering it, which would look
/// like a connection loss and be retried; these caps stay far below it.
inline constexpr std::size_t max_path_length = 4096; ///< bytes of a lock path
inline constexpr std::size_t max_node_data = 65536;  ///< bytes of node data (the holder description)
/// Bytes of one plain node write, its path and data (async_create_node, async_set_data; 64 of them
/// for the request's other fields): under ZooKeeper's default jute.maxbuffer (1 MiB - 1), past
/// which a server closes the connection of the request (a connection loss under every lock of the
/// session) instead of refusing it. Transactions have their own cap, max_transaction_bytes.
inline constexpr std::size_t max_write_bytes = 900 * 1024;

/// The "zklock" category.
ZKLOCK_DECL const boost::system::error_category& error_category() noexcept;

/// An error_code of the "zklock" category for `e` (what lets `ec == errc::...` compile).
inline error_code make_error_code(errc e) noexcept { return {static_cast<int>(e), error_category()}; }

/// ZooKeeper's return codes (values as in the C client's zookeeper.h).
enum class zk_errc {
    ok = 0,                            ///< success
    system_error = -1,                 ///< ZSYSTEMERROR: a system error
    runtime_inconsistency = -2,        ///< ZRUNTIMEINCONSISTENCY: a runtime inconsistency
    data_inconsistency = -3,           ///< ZDATAINCONSISTENCY: a data inconsistency
    connection_loss = -4,              ///< ZCONNECTIONLOSS: connection lost (a write's outcome is unknown)
    marshalling_error = -5,            ///< ZMARSHALLINGERROR: error (un)marshalling data
    unimplemented = -6,                ///< ZUNIMPLEMENTED: the operation is not implemented
    operation_timeout = -7,            ///< ZOPERATIONTIMEOUT: timed out (a write's outcome is unknown)
    bad_arguments = -8,                ///< ZBADARGUMENTS: invalid arguments
    invalid_state = -9,                ///< ZINVALIDSTATE: the C client's handle is unusable (e.g. closed)
    new_config_no_quorum = -13,        ///< ZNEWCONFIGNOQUORUM: no quorum of the new configuration
    reconfig_in_progress = -14,        ///< ZRECONFIGINPROGRESS: another reconfiguration is in progress
    api_error = -100,                  ///< ZAPIERROR: an API error
    no_node = -101,                    ///< ZNONODE: the node does not exist
    no_auth = -102,                    ///< ZNOAUTH: not authenticated (the ACL refuses this session)
    bad_version = -103,                ///< ZBADVERSION: version conflict
    no_children_for_ephemerals = -108, ///< ZNOCHILDRENFOREPHEMERALS: ephemeral nodes have no children
    node_exists = -110,                ///< ZNODEEXISTS: the node already exists
    not_empty = -111,                  ///< ZNOTEMPTY: the node has children
    session_expired = -112,            ///< ZSESSIONEXPIRED: the server expired the session
    invalid_callback = -113,           ///< ZINVALIDCALLBACK: invalid callback
    invalid_acl = -114,                ///< ZINVALIDACL: invalid ACL (e.g. "auth" without credentials)
    auth_failed = -115,                ///< ZAUTHFAILED: client authentication failed
    closing = -116,                    ///< ZCLOSING: the session is closing
    nothing = -117,                    ///< ZNOTHING: no server responses to process (not an error)
    session_moved = -118,              ///< ZSESSIONMOVED: the session moved to another server
    not_read_only = -119,              ///< ZNOTREADONLY: a write sent to a read-only server
    ephemeral_on_local_session = -120, ///< ZEPHEMERALONLOCALSESSION: ephemeral create on a local session
    no_watcher = -121,                 ///< ZNOWATCHER: the watcher could not be found
    reconfig_disabled = -123,          ///< ZRECONFIGDISABLED: reconfiguration is disabled
    /// ZSESSIONCLOSEDREQUIRESASLAUTH: the server closed the session: it requires SASL
    /// authentication, which the client lacks or failed.
    session_closed_require_sasl_auth = -124,
    quota_exceeded = -125, ///< ZQUOTAEXCEEDED: a quota was exceeded
    throttled_op = -127,   ///< ZTHROTTLEDOP: throttled by the server, not run (retry)
};

/// The "zookeeper" category: the server's and the C client's return codes.
ZKLOCK_DECL const boost::system::error_category& zookeeper_category() noexcept;

/// An error_code of the "zookeeper" category for `e` (what lets `ec == zk_errc::...` compile).
inline error_code make_error_code(zk_errc e) noexcept { return {static_cast<int>(e), zookeeper_category()}; }

/// True when the error means the session (and every lock it held) is gone for good:
/// session expired or closed, authentication failed. Retrying with the same session is pointless.
/// The codes: errc::session_expired, errc::session_closed, zk_errc::session_expired,
/// zk_errc::auth_failed, zk_errc::closing and zk_errc::invalid_state.
ZKLOCK_DECL bool is_fatal(const error_code& ec) noexcept;

/// True when the outcome of a write is unknown (connection loss, operation timeout):
/// the request may or may not have been applied by the server. The codes:
/// zk_errc::connection_loss and zk_errc::operation_timeout.
ZKLOCK_DECL bool is_connection_error(const error_code& ec) noexcept;

} // namespace zklock

/// \cond INTERNAL
template <>
struct boost::system::is_error_code_enum<zklock::errc> : std::true_type {};
template <>
struct boost::system::is_error_code_enum<zklock::zk_errc> : std::true_type {};
/// \endcond
