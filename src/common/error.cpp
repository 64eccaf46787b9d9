#include <zklock/error.hpp>

#include <zookeeper/zookeeper.h>

#include <string>

namespace zklock {
namespace {

class zklock_category_impl final : public boost::system::error_category {
public:
    const char* name() const noexcept override { return "zklock"; }
    std::string message(int ev) const override {
        switch (static_cast<errc>(ev)) {
        case errc::ok:
            return "success";
        case errc::path_empty:
            return "invalid path: the path is empty";
        case errc::path_not_absolute:
            return "invalid path: the path must start with '/'";
        case errc::path_trailing_slash:
            return "invalid path: the path must not end with '/'";
        case errc::path_empty_segment:
            return "invalid path: the path contains an empty segment (\"//\")";
        case errc::path_relative_segment:
            return "invalid path: the path contains a \".\" or \"..\" segment";
        case errc::path_bad_character:
            return "invalid path: a character ZooKeeper refuses (NUL, a control character, U+E000-U+F8FF, "
                   "U+FFF0-U+FFFF, one past U+FFFF, or bytes that are not UTF-8)";
        case errc::path_reserved:
            return "invalid path: \"/\" and the /zookeeper tree are reserved";
        case errc::invalid_connect_string:
            return "invalid connect string: expected host:port[,host:port...][/chroot] with ports 1-65535 "
                   "(no scheme such as http://)";
        case errc::invalid_argument:
            return "invalid argument (no longer returned by zklock: every mistake has an errc of its own)";
        case errc::invalid_lease_fraction:
            return "invalid lease fraction: loss_policy::lease(f) needs f in (0.1, 0.45] (above the "
                   "heartbeat's period, T/10; at most 0.45, which leaves the holder (0.5875 - f) T = 0.1375 "
                   "T "
                   "to stop)";
        case errc::not_a_lock_node:
            return "not a lock node: the name has none of the lock markers (\"lock-\", \"__lock__\", "
                   "\"__READ__\", \"__WRIT__\", \"__rlock__\", \"latch-\", a semaphore's \"-lease-\"), so "
                   "break "
                   "refuses "
                   "to delete it";
        case errc::transaction_empty:
            return "empty transaction: async_commit needs at least one operation";
        case errc::transaction_too_large:
            return "transaction too large: its paths and data are over zklock::max_transaction_bytes (900 "
                   "KiB, 64 bytes per operation included); ZooKeeper would drop the connection";
        case errc::lock_lost:
            return "lock lost: the lock node was gone when the transaction was committed (or the guard was "
                   "already lost); nothing was applied";
        case errc::connect_timeout:
            return "connect timeout: no ZooKeeper server answered within the connect timeout";
        case errc::not_connected:
            return "not connected: call async_connect and wait for it to complete first";
        case errc::session_expired:
            return "ZooKeeper session expired: every lock held by it is lost";
        case errc::session_closed:
            return "the ZooKeeper session was closed";
        case errc::lock_busy:
            return "lock busy: another contender holds or waits for the lock";
        case errc::acquire_timeout:
            return "acquire timed out: the lock was not granted before the deadline";
        case errc::lock_lost_suspended:
            return "lock lost: the connection to ZooKeeper dropped (loss policy on_disconnect)";
        case errc::lock_node_deleted:
            return "lock lost: the lock node was deleted by another client";
        case errc::lock_released:
            return "the lock was released by its holder";
        case errc::not_held:
            return "the guard holds no lock (empty, moved-from or released)";
        case errc::revocation_requested:
            return "revocation requested: another client asked the holder to release the lock";
        case errc::not_revocable:
            return "the lock was not acquired with mutex_options::revocable";
        case errc::path_too_long:
            return "path too long (more than zklock::max_path_length = 4096 bytes)";
        case errc::data_too_large:
            return "node data too large (more than zklock::max_node_data = 65536 bytes); ZooKeeper would "
                   "drop the connection";
        case errc::sequence_overflow:
            return "the lock path's sequence counter has overflowed (2^31 creates under one parent): the "
                   "order of its contenders is unknown; let the path empty (its container is then recreated "
                   "with a fresh counter) or use a new path";
        case errc::create_retries_exhausted:
            return "creating the lock node (or its parents) failed with connection loss 5 times in a row";
        case errc::internal_error:
            return "an unexpected exception inside zklock (e.g. out of memory): the operation was abandoned "
                   "and its node is deleted in the background";
        case errc::lease_check_denied:
            return "the lease's renewal was refused (ZNOAUTH): loss_policy::lease renews before a grant with "
                   "a "
                   "committed check of the acquire's own node, and that node's ACL (mutex_options::node_acl) "
                   "gives this session no READ; give the creator READ, or use another loss policy";
        case errc::lease_expired:
            return "lock lost: no request sent within the lease (loss_policy::lease) got a reply that went "
                   "through the ZooKeeper leader, so the server may expire the session soon";
        case errc::path_used_by_semaphore:
            return "recipe conflict: the lock path is a semaphore's (it has leases under <path>/leases); a "
                   "mutex or read/write lock cannot share a path with a semaphore";
        case errc::path_used_by_lock:
            return "recipe conflict: the semaphore path holds nodes of a mutex or read/write lock; a "
                   "semaphore cannot share a path with them";
        case errc::strategy_conflict:
            return "recipe conflict: lock_strategy::unique_node (one node \"<path>/lock\") and the "
                   "sequential lock nodes of the other strategies and recipes cannot share a path";
        case errc::election_dialect_mixed:
            return "recipe conflict: the election path holds a candidate named in another dialect "
                   "(\"-lock-\": Curator's LeaderSelector, \"-latch-\": Curator's LeaderLatch, \"__lock__\": "
                   "kazoo's Election); each peer sees only its own naming, so they could lead at once: set "
                   "election_options::dialect to the one already on the path";
        case errc::invalid_session_timeout:
            return "invalid session_options::session_timeout: it must be between 100 ms and 2147483647 ms "
                   "(the server then negotiates it into [2, 20] x its tickTime)";
        case errc::invalid_connect_timeout:
            return "invalid session_options::connect_timeout: it must be positive";
        case errc::invalid_chroot:
            return "invalid connect string: the chroot (the part after the first '/') must be an absolute "
                   "path without empty segments, \".\" or \"..\" segments, a trailing '/', or a character "
                   "ZooKeeper refuses (control characters, U+E000-U+F8FF, U+FFF0-U+FFFF, one past U+FFFF, "
                   "bytes that are not UTF-8)";
        case errc::chroot_missing:
            return "the connect string's chroot does not exist on the server: create it first (zklock "
                   "creates lock paths, never the chroot)";
        case errc::invalid_max_leases:
            return "invalid semaphore max_leases: it must be at least 1";
        case errc::semaphore_size_mismatch:
            return "semaphore max_leases differs from the N stored in <path>/leases by the path's first "
                   "acquire: every client of a path must use the same N (delete the path to change it)";
        case errc::invalid_local_handoff:
            return "invalid mutex_options::local_handoff: it must be between 0 and 4096 grants per node";
        case errc::local_handoff_unsupported:
            return "mutex_options::local_handoff is for the exclusive mutex only: the read/write lock does "
                   "not hand off in process";
        case errc::multi_lock_empty:
            return "async_acquire_all: the list of locks is empty";
        case errc::multi_lock_duplicate_path:
            return "async_acquire_all: two locks of the list have the same path (a multi-lock would wait for "
                   "itself)";
        case errc::not_a_write_guard:
            return "async_downgrade: the guard is not a held write lock of this shared_mutex's path (it has "
                   "been released)";
        case errc::invalid_version:
            return "invalid transaction version: it must be -1 (any version) or a node version (0 or more)";
        case errc::write_too_large:
            return "node write too large: its path and data are over zklock::max_write_bytes (921600 bytes, "
                   "64 "
                   "included for the request's other fields), under ZooKeeper's default jute.maxbuffer of "
                   "1048575 bytes, past which the server closes the connection (under every lock of the "
                   "session); nothing was sent";
        case errc::invalid_lease_timeout_cap:
            return "invalid session_options::lease_timeout_cap: it must be 0 (no cap) or between 100 ms and "
                   "2147483647 ms (the smallest maxSessionTimeout of the servers the session can reach)";
        case errc::invalid_connect_separator:
            return "invalid connect string: its servers are separated by ';', and the separator is a comma: "
                   "host:port,host:port[/chroot]";
        case errc::tls_config_invalid:
            return "invalid TLS options: a CA, certificate or key that cannot be read or does not fit "
                   "(session::last_connect_attempts() says which)";
        case errc::tls_unknown_ca:
            return "TLS: the server's certificate is not signed by a trusted CA (tls_options::ca_file)";
        case errc::tls_server_name_mismatch:
            return "TLS: the server's certificate does not name the server (host name or address mismatch; "
                   "see tls_options::server_name)";
        case errc::tls_certificate_expired:
            return "TLS: the server's certificate has expired or is not valid yet";
        case errc::tls_client_certificate_required:
            return "TLS: the server requires a client certificate, and none is set "
                   "(tls_options::certificate_file)";
        case errc::tls_client_certificate_rejected:
            return "TLS: the server refused the client certificate";
        case errc::tls_not_tls_server:
            return "TLS: the server did not answer the TLS handshake (a plain, non-TLS port?)";
        case errc::tls_handshake_failed:
            return "TLS: the handshake with the server failed (session::last_connect_attempts() says why)";
        case errc::tls_relay_bypassed:
            return "TLS: the C client would have connected somewhere other than the TLS relay (the "
                   "credentials would have gone in clear): refused";
        case errc::no_session_granted:
            return "the server's answer to the connect named no session (session id 0 or timeout 0): not a "
                   "ZooKeeper server";
        case errc::upgrade_not_supported:
            return "a read lock cannot be upgraded to a write lock (it would wait for itself): release it, "
                   "then acquire the write lock";
        }
        return "zklock error " + std::to_string(ev);
    }
};

class zookeeper_category_impl final : public boost::system::error_category {
public:
    const char* name() const noexcept override { return "zookeeper"; }
    std::string message(int ev) const override {
        std::string s = "ZooKeeper: ";
        s += zerror(ev);
        return s;
    }
};

} // namespace

const boost::system::error_category& error_category() noexcept {
    static const zklock_category_impl c;
    return c;
}

const boost::system::error_category& zookeeper_category() noexcept {
    static const zookeeper_category_impl c;
    return c;
}

bool is_fatal(const error_code& ec) noexcept {
    return ec == errc::session_expired || ec == errc::session_closed || ec == zk_errc::session_expired ||
           ec == zk_errc::auth_failed || ec == zk_errc::closing || ec == zk_errc::invalid_state;
}

bool is_connection_error(const error_code& ec) noexcept {
    return ec == zk_errc::connection_loss || ec == zk_errc::operation_timeout;
}

} // namespace zklock
