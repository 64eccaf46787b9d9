// The C-client bridge's link (session/zk_link.hpp): one zhandle_t of libzookeeper_st, driven from
// the session's strand. zk_handle.cpp drives it, c_requests.cpp builds its requests,
// c_callbacks.cpp completes them (bridge/c_op.hpp: a request in flight).
#pragma once

#include "bridge/tls_relay.hpp"
#include "session/lease.hpp"
#include "session/platform.hpp"
#include "session/zk_link.hpp"

#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>

#include <zookeeper/zookeeper.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <unordered_set>
#include <utility>
#include <variant>
#include <vector>

namespace zklock::detail {

struct c_op;

/// One zhandle_t generation of the single-threaded C client (libzookeeper_st), driven from the
/// session's strand: a reactor wait on (a duplicate of) the client's socket for the interest
/// that zookeeper_interest reports, a timer for its timeout, zookeeper_process on readiness.
/// Neither zklock nor the C client starts a thread; the C client's callbacks run inside
/// zookeeper_process, on the strand, and post their results to it.
/// Every call into the C client holds one process-wide lock: the strands of several sessions
/// may run on several threads, and the client's request ids come from one unguarded global
/// counter. close() may come from any thread (the session's destructor).
class zk_handle final : public zk_link, public std::enable_shared_from_this<zk_handle> {
public:
    /// (The real platform's make_link.)
    explicit zk_handle(zk_link_params p);
    ~zk_handle() override;
    /// zookeeper_init2; false (with errno) if the C client refused the arguments. Then start().
    /// `auth`: added with zoo_add_auth before the first connection (the C client presents them
    /// again on every reconnect); their outcome reaches session_impl::on_auth_result.
    bool init(const std::string& connect, int timeout_ms, const std::vector<credentials>& auth) override;
    /// Starts driving the C client on the strand (the first zookeeper_interest connects).
    void start() override;
    /// Builds the C client's request for `r` (bridge/c_requests.cpp) and hands it over.
    void submit(zk_request r, zk_handler h) override;
    /// Registers `op` and runs `call(zh, op)` unless closed. Returns the synchronous code.
    /// (Defined in bridge/c_op.hpp: a thin wrapper over submit_call.)
    template <class F>
    int submit(c_op* op, F&& call);
    using request_call = int (*)(void* ctx, zhandle_t* zh, c_op* op);
    /// submit's body: `call(ctx, zh, op)` runs the C client's request call.
    int submit_call(c_op* op, request_call call, void* ctx);
    /// Ends the session at the server without waiting for its answer, frees the C handle, and
    /// completes every request still registered with ZCLOSING. Any thread; never blocks on the
    /// network (see close_without_waiting in the .cpp).
    void close() override;
    /// Called by a C completion: true if `op` was still registered (caller owns it now).
    bool take(c_op* op);
    /// (Inside the C client's calls) `op`'s handler gets its result on the strand: at the end of
    /// the drive whose zookeeper_process completed it, in order with the drive's other results
    /// and events; else (a close, a read inside a request call) posted.
    void complete(c_op* op);
    /// The same for a session event, a watch, an auth result...
    void to_strand(std::function<void()> fn);
    /// True while a write (vouch::commit) other than a lease heartbeat, handed to the C client,
    /// has not completed: a grant may come at its reply. Any thread.
    bool write_in_flight() const override;
    /// zoo_set_servers: the C client moves to the new list (addresses, no chroot).
    void set_servers(const std::string& hosts) override;
    /// The session id and negotiated timeout, unless closed.
    bool session_info(std::int64_t& id, int& timeout_ms) override;
    /// The local and peer addresses of the C client's current socket (strand: right after the
    /// drive that made it), for the TLS relay to know its connection from any other.
    std::optional<std::pair<asio::ip::tcp::endpoint, asio::ip::tcp::endpoint>>
    client_socket_address() override;
    /// What the last connection attempt to each server got ("127.0.0.1:1: connection refused",
    /// one per server, in the order first tried), for a connect that times out. Any thread.
    std::string attempts() const override;

    /// With TLS: the relay's record of the C client's socket, kept up to date by each drive (set
    /// before start()).
    std::shared_ptr<client_socket_slot> relay_slot;
    /// Where its events go (the session).
    const std::weak_ptr<zk_link_events> events;
    const asio::strand<asio::any_io_executor> strand;
    const std::uint64_t generation;
    /// The session's lease: replies to this handle's requests renew it.
    const std::shared_ptr<session_lease> lease;
    /// The session's platform: the lease's clock stamps requests and replies.
    const std::shared_ptr<platform> plat;

private:
    /// (strand) Hands the readiness `events` (ZOOKEEPER_READ / _WRITE, 0 for the timer) of socket
    /// generation `sock_gen` to zookeeper_process, then asks zookeeper_interest what to wait for.
    void drive(int events, std::uint64_t sock_gen);
    /// Any thread: a drive soon on the strand (a request was queued), at most one pending.
    void schedule_drive();
    /// (strand) Waits for what `interest` asks on socket `fd` (-1: none), and at most `tv`.
    /// `connected`: the C client's state was connected after that zookeeper_interest.
    void wait_for(int fd, int interest, const timeval& tv, bool connected);
    /// (strand, outside the client lock) Runs what a drive collected, in order.
    void run_ready(std::vector<std::variant<c_op*, std::function<void()>>>& ready);
    void drop_socket(); // (strand)
    void stop_waits();  // (strand)

    zhandle_t* zh_ = nullptr;            // under the client lock
    bool closed_ = false;                // under the client lock
    std::unordered_set<c_op*> inflight_; // under the client lock
    int writes_in_flight_ = 0; // under the client lock: those of inflight_ that are writes, not heartbeats
    int last_fd_ = -1, last_interest_ = 0; // under the client lock: zookeeper_interest's last answer
    /// Under the client lock: server -> what its last failed connection attempt got.
    std::vector<std::pair<std::string, std::string>> attempts_;
    void note_failed_attempt(int err); // (under the client lock)
    /// (Under the client lock) zookeeper_interest reported `fd` (-1: none); `fresh`: it may be a
    /// socket not seen yet. Sets FD_CLOEXEC on it, and tells relay_slot its addresses.
    void note_socket(int fd, bool fresh);
    int noted_fd_ = -1;        // under the client lock: the socket note_socket saw last
    bool noted_known_ = false; // ... and whether its addresses were known then
    /// Under the client lock: the servers in the connect string, the connection attempts that
    /// failed since the last connected state or failed round, and whether a round just failed.
    int servers_ = 1, failed_in_row_ = 0;
    bool failed_round_ = false;
    /// Under the client lock: the socket that requests are queued on with TCP_CORK set (-1: none).
    /// The next drive takes the cork off, and the requests of one strand turn go out together.
    int corked_fd_ = -1;
    /// Under the client lock: a drive is in zookeeper_process / zookeeper_interest, and what they
    /// complete is collected in ready_ (run when the drive lets go of the lock: no post each).
    bool collecting_ = false;
    std::vector<std::variant<c_op*, std::function<void()>>> ready_;
    /// (Under the client lock) zookeeper_process(READ) until the socket has nothing more or the
    /// connection failed: true; false if it stopped at max_replies_per_drive with more to read.
    bool read_replies();
    void uncork(); // (under the client lock)
    // strand only:
    asio::posix::stream_descriptor sd_;    // a duplicate of the C client's socket (it closes its own)
    std::uint64_t ino_ = 0;                // which socket sd_ duplicates (its inode)
    int sd_of_ = -1;                       // ... and the C client's number for it
    bool checked_while_connected_ = false; // the last check of that socket was in the connected state
    std::uint64_t sock_gen_ = 0;           // moves whenever the socket changes: stale readiness is ignored
    bool read_waiting_ = false, write_waiting_ = false, timer_waiting_ = false;
    bool out_registered_ = false; // a write wait was made on sd_: the reactor watches EPOLLOUT too
    asio::steady_timer timer_;
    std::chrono::steady_clock::time_point timer_at_{};
    std::atomic<bool> drive_posted_{false};
};

} // namespace zklock::detail
