// The platform seam's other half (session/platform.hpp has time, timers and randomness): one
// connection generation to a ZooKeeper ensemble, as the session sees it. The session hands it
// requests (zk_request) with their completion handlers, and hears from it through zk_link_events:
// session events, the credentials' verdict, node watches, a round of failed connection attempts,
// a lease renewal to look at. Production's link is the bridge's zk_handle (the C client,
// libzookeeper_st, bridge/zk_handle.hpp), made by the real platform; another platform may give
// another (a simulated ensemble). The vocabulary is ZooKeeper's own: its error codes, its Stat,
// its create flags, session states and event types (from the C client's header, which defines
// them as the server's protocol does).
#pragma once

#include "session/lease.hpp"

#include <zklock/acl.hpp>
#include <zklock/transaction.hpp>

#include <boost/asio/any_completion_handler.hpp>
#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/strand.hpp>

#include <zookeeper/zookeeper.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace zklock::detail {

namespace asio = boost::asio;

/// What a ZooKeeper request returned.
struct zk_result {
    int rc = 0;                        ///< ZOK or a ZooKeeper error code
    std::string path;                  ///< create: the created path
    Stat stat{};                       ///< create2, exists, get: the node's stat
    std::vector<std::string> children; ///< get_children, create_and_list
    std::optional<std::int32_t>
        cversion; ///< get_children, create_and_list: the parent's cversion, read with the children
    /// multi: one per operation (its code; a create's path; a set's new version)
    struct op_outcome {
        int rc = ZOK;
        std::string path;
        std::int32_t version = -1;
    };
    std::vector<op_outcome> multi;
    std::string data;  ///< get_data
    int list_rc = ZOK; ///< create_and_list: the getChildren's code
};
using zk_handler = asio::any_completion_handler<void(zk_result)>;

/// The requests the session sends.
enum class zk_op : std::uint8_t {
    create,             ///< create2 (path, data, flags, node_acl)
    create_and_list,    ///< create2 then getChildren2(parent) in the same flight
    get_children,       ///< getChildren2 (watch_id: a child watch)
    get_data,           ///< getData (watch_id: a data watch)
    exists,             ///< exists (watch_id: an existence watch)
    remove,             ///< delete (version)
    set_data,           ///< setData (data, version)
    multi,              ///< multi (ops), all or nothing
    remove_watch,       ///< removeWatches of the one watcher watch_id (child_watch: its kind) on path
    remove_all_watches, ///< removeWatches of every data watch of the session on path, at the server
};

/// One request. Only the fields its kind names are read.
struct zk_request {
    zk_op op = zk_op::exists;
    std::string path;
    std::string data;
    int flags = 0;                       ///< create: ZOO_EPHEMERAL, ZOO_SEQUENCE, ZOO_CONTAINER
    int version = -1;                    ///< remove, set_data (-1: any)
    std::uint64_t watch_id = 0;          ///< the session's watch (0: none): its event goes to on_watch
    bool child_watch = false;            ///< remove_watch: the watch is a child watch
    std::string parent;                  ///< create_and_list: the path listed
    std::shared_ptr<const acl> node_acl; ///< create, create_and_list (null: open)
    std::vector<transaction::op> ops;    ///< multi
    /// A lease heartbeat: not a write whose reply may bring a grant (zk_link::write_in_flight).
    bool heartbeat = false;
};

/// A request of kind `op` on `path`; the caller sets the other fields its kind reads.
inline zk_request make_request(zk_op op, std::string path) {
    zk_request r;
    r.op = op;
    r.path = std::move(path);
    return r;
}

/// What a successful reply to a request of kind `op` proves to the lease: a write is a commit.
constexpr vouch vouch_of(zk_op op) noexcept {
    switch (op) {
    case zk_op::create:
    case zk_op::create_and_list: // (the create's reply; the listing's renews nothing)
    case zk_op::remove:
    case zk_op::set_data:
    case zk_op::multi:
        return vouch::commit;
    default:
        return vouch::touch;
    }
}

/// What a link tells its session, each on the session's strand.
class zk_link_events {
public:
    /// A session event (ZOO_CONNECTED_STATE, ZOO_EXPIRED_SESSION_STATE...) of link generation `gen`.
    virtual void on_session_event(std::uint64_t gen, int state) = 0;
    /// The server's verdict on the credentials given to init().
    virtual void on_auth_result(std::uint64_t gen, int rc) = 0;
    /// The node watch `id` fired with event `type`.
    virtual void on_watch(std::uint64_t id, int type) = 0;
    /// Every server of the connect string failed once.
    virtual void on_round_failed(std::uint64_t gen) = 0;
    /// A reply renewed the lease after it had lapsed (session_lease::on_reply said so).
    virtual void check_lease() = 0;

protected:
    ~zk_link_events() = default;
};

class client_socket_slot; // (bridge/tls_relay.hpp)
class platform;           // (session/platform.hpp)

/// What a link is made with.
struct zk_link_params {
    std::weak_ptr<zk_link_events> events;
    asio::strand<asio::any_io_executor> strand; ///< the session's: completions and events run on it
    std::uint64_t generation = 0;               ///< told back with the events
    /// The session's lease: the link notes every reply in it (session_lease::on_reply, with the
    /// request's send time and the reply's, on the platform's lease clock) as soon as the reply
    /// is read, before its result reaches the strand, and the connection's handshake
    /// (on_connected) before the replies that follow it.
    std::shared_ptr<session_lease> lease;
    /// The session's platform: its lease clock (platform::boot_now) stamps requests and replies.
    std::shared_ptr<platform> plat;
    /// With TLS: the relay's record of the link's socket (null without).
    std::shared_ptr<client_socket_slot> relay_slot;
};

/// One connection generation (the session makes a new one for a new session).
class zk_link {
public:
    virtual ~zk_link() = default;
    /// Takes the connect string (addresses, maybe a chroot), the session timeout asked for, and
    /// the credentials to present on every connection; false if it refuses them (errno set).
    virtual bool init(const std::string& connect, int timeout_ms, const std::vector<credentials>& auth) = 0;
    /// Starts connecting.
    virtual void start() = 0;
    /// Sends `r`; `h` gets its result on the strand, in the order ZooKeeper answers this
    /// session's requests, never inside this call (ZINVALIDSTATE, ZCLOSING...: refused).
    virtual void submit(zk_request r, zk_handler h) = 0;
    /// Ends the session at the server without waiting, and completes every request still in
    /// flight with ZCLOSING. Any thread.
    virtual void close() = 0;
    /// True while a write other than a heartbeat has not completed. Any thread.
    virtual bool write_in_flight() const = 0;
    /// Moves to another server list (addresses, no chroot).
    virtual void set_servers(const std::string& hosts) = 0;
    /// The session id and negotiated timeout, unless closed.
    virtual bool session_info(std::int64_t& id, int& timeout_ms) = 0;
    /// The local and peer addresses of the current connection's socket, if it has one.
    virtual std::optional<std::pair<asio::ip::tcp::endpoint, asio::ip::tcp::endpoint>>
    client_socket_address() = 0;
    /// What the last connection attempt to each server got, for a connect that times out.
    virtual std::string attempts() const = 0;
};

/// A line of zklock's own to the log handler (set_log_handler), if any. Any thread.
void log_line(std::string_view line);

/// The longest time one call into the ZooKeeper C client held its thread, in this process so
/// far (ns; the bridge's).
std::int64_t longest_client_call_ns() noexcept;

} // namespace zklock::detail
