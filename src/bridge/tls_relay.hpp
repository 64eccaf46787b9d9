// The TLS relay: TLS to ZooKeeper's secure client port, done by zklock with Boost.Asio's ssl
// between the C client's plain socket and the server. Debian's C client has no TLS; this keeps
// it untouched, and keeps the handshake off the C client (on the strand, with a deadline).
//
//   C client --plain, loopback--> listener (one per server, per session) --TLS--> server
//
// The C client is given the listeners' loopback addresses instead of the servers', so its own
// rotation, timeouts and reconnects stay as they are. A listener accepts only the connection
// whose peer is the C client's current socket (its local address, read on the strand right
// after the C client made it), once; anything else is reset before a byte is read, off the
// session's strand and without the C client's lock (client_socket_slot).
#pragma once

#include <zklock/error.hpp>
#include <zklock/tls.hpp>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/strand.hpp>

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

namespace zklock::detail {

namespace asio = boost::asio;

/// A server the relay connects to: its host as the connect string names it (verified against
/// the certificate and sent as SNI, unless tls_options::server_name is set), and one address.
struct tls_target {
    std::string host; ///< without brackets
    std::string address;
    unsigned short port = 0;
    /// "host:port" ("[v6]:port"), as logs and attempts name the server.
    std::string name() const;
    friend bool operator==(const tls_target&, const tls_target&) = default;
};

/// What a failed connection through the relay got: a TLS verdict (definitive: the same server
/// will refuse again the same way), or a network failure (refused, reset, timed out).
struct tls_failure {
    error_code ec;      ///< an errc::tls_* code, or a system error
    std::string detail; ///< in words, with OpenSSL's reason ("certificate verify failed: ...")
    bool definitive = false;
};

/// Classifies a failed TLS handshake (or a first read that failed right after it, as a TLS 1.3
/// server's refusal of the client certificate arrives). `verify_result`: OpenSSL's
/// SSL_get_verify_result. Pure: unit-tested.
tls_failure classify_tls_failure(const error_code& ec, long verify_result, bool sent_certificate,
                                 std::string_view server_name);

/// The C client's current socket as the relay's listeners check it: set by the session's
/// zk_handle (under the C client's lock, on the strand) right after zookeeper_interest made or
/// kept it; read by the listeners on any thread, under a lock of its own, so that a stranger's
/// connection is refused without the strand or the C client's lock.
class client_socket_slot {
public:
    using endpoints = std::pair<asio::ip::tcp::endpoint, asio::ip::tcp::endpoint>; // (local, peer)
    enum class verdict { match, stranger, unsure };
    /// A zookeeper_interest that may open a socket begins (`begin`) or ended, having reported
    /// `now` (nullopt: no socket) for `owner` (the handle).
    void begin(const void* owner);
    /// (A socket whose connect is still under way has no peer yet: `now` nullopt and `known`
    /// false leave the slot unsure until the next end() of a connection from `local`, the
    /// socket's own address; any other is a stranger's.)
    void end(const void* owner, std::optional<endpoints> now, bool known = true,
             std::optional<asio::ip::tcp::endpoint> local = std::nullopt);
    /// The handle `owner` is gone: no socket is expected from it.
    void clear(const void* owner);
    /// `peer` connected to `here`: the C client's socket, not it, or unsure (a zookeeper_interest
    /// under way may have opened it, or it comes from the C client's new socket, whose connect
    /// has not ended yet: the strand decides, after it).
    verdict check(const asio::ip::tcp::endpoint& peer, const asio::ip::tcp::endpoint& here) const;
    std::optional<endpoints> current() const;

private:
    mutable std::mutex mu_;
    const void* owner_ = nullptr;
    std::optional<endpoints> now_;
    std::optional<asio::ip::tcp::endpoint> local_; // while opening_: the new socket's, once known
    bool opening_ = false;
};

class tls_relay : public std::enable_shared_from_this<tls_relay> {
public:
    using strand_type = asio::strand<asio::any_io_executor>;

    /// The relay of one session, with the TLS context made of `opts`. Null, with `ec`
    /// (errc::tls_config_invalid) and `why`, if a file or PEM text cannot be read or does not fit.
    static std::shared_ptr<tls_relay> make(strand_type strand, const tls_options& opts, error_code& ec,
                                           std::string& why);
    ~tls_relay();
    tls_relay(const tls_relay&) = delete;
    tls_relay& operator=(const tls_relay&) = delete;

    /// (strand) A loopback listener for each target (a target that had one keeps it, and its
    /// port), and the connect string the C client gets: "127.0.0.1:p1,127.0.0.1:p2". Listeners of
    /// targets no longer listed are closed (their relayed connections go on): the descriptors
    /// stay bounded when the servers' addresses churn. The caller gives the C client the new
    /// string before its next zookeeper_interest (the drive is on the same strand).
    std::string listen(const std::vector<tls_target>& targets, error_code& ec);

    /// The C client's current socket, which the session's handles keep up to date.
    const std::shared_ptr<client_socket_slot>& slot() const noexcept { return slot_; }
    /// (strand) Set by the session before listen():
    /// The local and the peer address of the C client's current socket, if it has one, read
    /// now (under the C client's lock): only for a connection the slot is unsure of.
    std::function<std::optional<std::pair<asio::ip::tcp::endpoint, asio::ip::tcp::endpoint>>()> client_socket;
    /// A connection to `server` failed (in its TCP connect, its TLS handshake, or the first read).
    std::function<void(const std::string& server, const tls_failure&)> on_failure;
    /// The most from a relayed connection's accept to the end of its handshake.
    std::chrono::milliseconds handshake_timeout{3000};
    /// How long a connection the C client closed may take to deliver what it sent last (the
    /// close request) to the server.
    std::chrono::milliseconds flush_timeout{1000};
    /// The most a write to the server may take while relaying (a server that stopped reading):
    /// then the connection is reset.
    std::chrono::milliseconds stall_timeout{10000};

    /// (strand) The last listen()'s connect string ("127.0.0.1:p1,..."; "" before the first).
    const std::string& connect_string() const noexcept { return connect_; }
    /// (strand) A new connection attempt begins: forget the failures seen so far.
    void new_attempt();
    /// (strand) The TLS failure every server of the last listen() got since new_attempt(), if each
    /// got a definitive one (the first server's); else nothing.
    std::optional<tls_failure> all_failed() const;
    /// (strand) What the last connection to each server got since new_attempt(), in the
    /// listen() order: "zk1:2281: TLS: the server's certificate has expired, zk2:2281: ...".
    std::string attempts() const;
    /// (strand) True if the last attempt on every server of the last listen() ended with the
    /// server closing the connection during the handshake (a plain port, most likely).
    bool all_closed_in_handshake() const;
    /// (strand) Runs `fn` (posted) once no relayed connection is left, at most flush_timeout
    /// from now: what the C client sent last (its close request) has reached the servers.
    void when_drained(std::function<void()> fn);
    /// (strand) Connections relayed so far, and connections refused (not the C client's).
    std::uint64_t relayed() const noexcept { return relayed_; }
    std::uint64_t refused() const noexcept { return refused_.load(std::memory_order_relaxed); }
    /// (strand) Listeners open now (bounded by the last listen()'s targets).
    std::size_t listeners() const noexcept { return listeners_.size(); }
    /// True if the relay still holds the private key's password or PEM text (it should not,
    /// once the context is loaded: they are cleansed). For tests.
    bool holds_secrets() const;
    /// (strand) Stops listening. Relayed connections end on their own: when the C client closes
    /// its socket, what it sent is delivered within flush_timeout.
    void close();

private:
    struct impl_state;
    struct listener;
    class link;
    explicit tls_relay(strand_type strand);
    void accept(const std::shared_ptr<listener>& l);
    void accept_now(const std::shared_ptr<listener>& l);
    void take(const std::shared_ptr<listener>& l, int fd, const asio::ip::tcp::endpoint& peer);
    void close_listener(listener& l);
    void link_ended();
    void fire_drained();

    strand_type strand_;
    std::shared_ptr<impl_state> st_;
    /// The (C client's end, listener's end) of live relayed connections.
    std::set<std::pair<asio::ip::tcp::endpoint, asio::ip::tcp::endpoint>> claimed_;
    int active_ = 0; // relayed connections not over yet
    std::vector<std::function<void()>> drain_waiters_;
    std::vector<std::shared_ptr<listener>> listeners_;
    std::vector<std::shared_ptr<listener>> current_; // the last listen()'s, in order
    std::string connect_;                            // the last listen()'s connect string
    std::shared_ptr<client_socket_slot> slot_ = std::make_shared<client_socket_slot>();
    std::uint64_t relayed_ = 0;
    std::atomic<std::uint64_t> refused_{0}; // (counted by the listeners, on any thread)
    bool closed_ = false;
};

/// Replaces each "127.0.0.1:<port>" of a relay listener in `line` with its server's name, so that
/// the C client's log lines name the real server. Any thread.
std::string name_relayed_servers(std::string_view line);

} // namespace zklock::detail
