// The C-client bridge (zk_handle): one zhandle_t of libzookeeper_st driven from the session's
// strand, every call into it under one process-wide lock; and the C client's log.
#include "bridge/c_op.hpp"

#include "protocol/protocol.hpp"

#include <zklock/detail/deadline.hpp>

#include <zklock/path.hpp>

#include <boost/asio/bind_executor.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>

#include <algorithm>
#include <string_view>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <shared_mutex>

#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

namespace zklock::detail {

// ---------------------------------------------------------------- logging
namespace {
std::shared_mutex g_log_mu;
std::function<void(std::string_view)> g_log;

void log_callback(const char* message) {
    std::shared_lock lk(g_log_mu);
    // (Through the TLS relay the C client knows its servers as 127.0.0.1:<port>: name them.)
    if (g_log) g_log(name_relayed_servers(message ? std::string_view(message) : std::string_view()));
}

} // namespace

void log_line(std::string_view line) {
    std::shared_lock lk(g_log_mu);
    if (g_log) g_log(line);
}

namespace {

void init_client_library() {
    static std::once_flag once;
    std::call_once(once, [] {
        // Lines logged without a handle bypass the callback: send them nowhere ("e": close-on-exec).
        if (FILE* devnull = std::fopen("/dev/null", "we")) zoo_set_log_stream(devnull);
        zoo_set_debug_level(ZOO_LOG_LEVEL_WARN);
    });
}
} // namespace

// ---------------------------------------------------------------- zk_handle
namespace {

/// Every call into the C client, from any session: see zk_handle. Recursive: the client runs
/// completions inside zookeeper_process and zookeeper_close, and they call zk_handle::take.
std::recursive_mutex& client_lock() {
    static std::recursive_mutex m;
    return m;
}

std::atomic<std::int64_t> g_longest_call_ns{0};
// With ZKLOCK_LONGEST_CALL_FILE set (measurement runs only: two getrusage calls per C-client
// call), the longest call's kind and what the thread did meanwhile: its CPU time, and its context
// switches. Voluntary ones mean it slept in a system call (blocked); involuntary ones mean the
// scheduler took the core away (a loaded machine), which the call could not help.
const bool g_call_details = [] {
    const char* f = std::getenv("ZKLOCK_LONGEST_CALL_FILE");
    return f && *f;
}();
std::mutex g_longest_mu;
const char* g_longest_what = "";
std::int64_t g_longest_cpu_ns = 0;
long g_longest_voluntary = 0, g_longest_involuntary = 0;

struct thread_usage {
    std::int64_t cpu_ns = 0;
    long voluntary = 0, involuntary = 0;
    static thread_usage now() noexcept {
        rusage ru{};
        ::getrusage(RUSAGE_THREAD, &ru); // (its CPU times are tick-grained: the clock below is not)
        timespec ts{};
        ::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
        return {static_cast<std::int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec, ru.ru_nvcsw, ru.ru_nivcsw};
    }
};

/// Times one stretch of calls into the C client (the longest_client_call_ns hook).
class call_timer {
public:
    explicit call_timer(const char* what) : what_(what), t0_(std::chrono::steady_clock::now()) {
        if (g_call_details) u0_ = thread_usage::now();
    }
    ~call_timer() {
        auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - t0_)
                      .count();
        if (ns <= g_longest_call_ns.load(std::memory_order_relaxed)) return;
        const thread_usage u = g_call_details ? thread_usage::now() : thread_usage{};
        std::lock_guard lk(g_longest_mu);
        if (ns <= g_longest_call_ns.load(std::memory_order_relaxed)) return;
        g_longest_call_ns.store(ns, std::memory_order_relaxed);
        g_longest_what = what_;
        g_longest_cpu_ns = u.cpu_ns - u0_.cpu_ns;
        g_longest_voluntary = u.voluntary - u0_.voluntary;
        g_longest_involuntary = u.involuntary - u0_.involuntary;
    }
    call_timer(const call_timer&) = delete;
    call_timer& operator=(const call_timer&) = delete;

private:
    const char* what_;
    std::chrono::steady_clock::time_point t0_;
    thread_usage u0_;
};

/// At most this many replies per readiness before the strand runs other work (the rest is
/// taken in a drive posted behind it: the reactor is edge-triggered, nothing would wake us).
constexpr int max_replies_per_drive = 64;

} // namespace

std::int64_t longest_client_call_ns() noexcept { return g_longest_call_ns.load(std::memory_order_relaxed); }

namespace {
/// With ZKLOCK_LONGEST_CALL_FILE set, each process appends its longest C-client call to that
/// file when it exits ("<ns> <program>"): how the suite and the benchmarks measure it.
struct longest_call_report {
    ~longest_call_report() {
        const char* file = std::getenv("ZKLOCK_LONGEST_CALL_FILE");
        const auto ns = g_longest_call_ns.load(std::memory_order_relaxed);
        if (!file || !*file || ns == 0) return;
        if (FILE* f = std::fopen(file, "a")) {
            char exe[256] = {};
            ssize_t n = ::readlink("/proc/self/exe", exe, sizeof exe - 1);
            std::lock_guard lk(g_longest_mu);
            std::fprintf(f,
                         "%lld ns %s: cpu %lld ns, context switches %ld voluntary (slept) %ld involuntary "
                         "(preempted); %s\n",
                         static_cast<long long>(ns), g_longest_what, static_cast<long long>(g_longest_cpu_ns),
                         g_longest_voluntary, g_longest_involuntary, n > 0 ? exe : "?");
            std::fclose(f);
        }
    }
} g_longest_call_report;
} // namespace

zk_handle::zk_handle(zk_link_params p)
    : relay_slot(std::move(p.relay_slot)), events(std::move(p.events)), strand(std::move(p.strand)),
      generation(p.generation), lease(std::move(p.lease)), plat(std::move(p.plat)), sd_(strand),
      timer_(strand) {}

zk_handle::~zk_handle() { close(); }

bool zk_handle::init(const std::string& connect, int timeout_ms, const std::vector<credentials>& auth) {
    init_client_library();
    std::lock_guard lk(client_lock());
    call_timer timed("init");
    if (closed_) return false; // shutdown() closed this handle before it was created
    const auto hosts = std::string_view(connect).substr(0, connect.find('/'));
    servers_ = static_cast<int>(std::count(hosts.begin(), hosts.end(), ',')) + 1;
    // (No connection yet: the single-threaded client connects in the first zookeeper_interest.)
    const std::string for_c = c_client_connect_string(connect); // ([::1]:2181 -> ::1:2181)
    zhandle_t* zh = zookeeper_init2(for_c.c_str(), global_watcher, timeout_ms, nullptr, this,
                                    ZOO_NO_LOG_CLIENTENV, log_callback);
    if (!zh) return false;
    // Queued now, sent by the C client right after the session is established and again on every
    // reconnect. The completion runs once, with the server's verdict on the first connection.
    for (const auto& c : auth) {
        int rc = zoo_add_auth(zh, c.scheme.c_str(), c.secret.data(), static_cast<int>(c.secret.size()),
                              on_auth, this);
        if (rc != ZOK) {
            zookeeper_close(zh);
            errno = EINVAL;
            return false;
        }
    }
    // By default the client resolves host names on every zookeeper_interest. -1 turns that off
    // while connected only: the C client (3.8, update_addrs) still resolves the host names again
    // before every connection attempt, so a server whose address changed is found on reconnect.
    zoo_set_servers_resolution_delay(zh, -1);
    zh_ = zh;
    return true;
}

void zk_handle::start() {
    asio::post(strand, [self = shared_from_this()] { self->drive(0, self->sock_gen_); });
}

int zk_handle::submit_call(c_op* op, request_call call, void* ctx) {
    int rc;
    bool corked = false;
    {
        std::lock_guard lk(client_lock());
        if (closed_ || !zh_) return ZCLOSING;
        call_timer timed("request");
        // A connection the server has closed: let the C client find out by reading first. Else
        // the request's send fails, and the single-threaded client then closes its socket without
        // failing the requests in flight or telling anyone (nonblocking_send).
        if (last_fd_ >= 0 && zoo_state(zh_) == ZOO_CONNECTED_STATE) {
            pollfd p{last_fd_, POLLIN | POLLRDHUP, 0};
            if (::poll(&p, 1, 0) == 1 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR))) read_replies();
        }
        const bool was_connected = zoo_state(zh_) == ZOO_CONNECTED_STATE;
        // The C client sends each request as two writes (its length, then its body), each its own
        // TCP segment with TCP_NODELAY: twice the packets, and the server woken twice. Corked,
        // the requests queued until the next drive (one strand turn) leave as one segment.
        if (was_connected && last_fd_ >= 0 && corked_fd_ < 0) {
            int on = 1;
            if (::setsockopt(last_fd_, IPPROTO_TCP, TCP_CORK, &on, sizeof on) == 0) corked_fd_ = last_fd_;
        }
        op->owner = this;
        if (op->sent == 0) op->sent = plat->boot_now();
        inflight_.insert(op);
        rc = call(ctx, zh_, op);
        if (rc != ZOK)
            inflight_.erase(op);
        else if (op->renews == vouch::commit && !op->heartbeat)
            ++writes_in_flight_;
        if (was_connected && zoo_state(zh_) == 999 /* ZOO_NOTCONNECTED_STATE */)
            log_line("zklock: a send failed and the C client dropped its connection; it reconnects, and the "
                     "requests in flight end as on a connection loss");
        if (rc == ZINVALIDSTATE) {
            // The handle is dead (the C client refuses every call once its state is
            // unrecoverable), but the session event that says why may still be on its way to the
            // strand: say why here, so a request that loses this race still ends for the right
            // reason (auth_failed, not a bare "invalid zhandle state").
            const int state = zoo_state(zh_);
            if (state == ZOO_AUTH_FAILED_STATE)
                rc = ZAUTHFAILED;
            else if (state == ZOO_EXPIRED_SESSION_STATE)
                rc = ZSESSIONEXPIRED;
        }
        corked = corked_fd_ >= 0;
        lease->saw_state(op->sent, zoo_state(zh_) == ZOO_CONNECTED_STATE); // (sent: read before the state)
        if (rc == ZOK) lease->note_send(op->sent, op->renews == vouch::commit);
    }
    // The request is in the socket (corked) if it took it; the next drive sends it, and what is
    // left (a full socket buffer, no connection yet, a send that failed and closed the socket).
    if (rc == ZOK || corked) schedule_drive();
    return rc;
}

void zk_handle::set_servers(const std::string& hosts) {
    {
        std::lock_guard lk(client_lock());
        if (closed_ || !zh_) return;
        call_timer timed("set_servers");
        zoo_set_servers(zh_, hosts.c_str()); // (addresses only: no resolver call)
    }
    schedule_drive();
}

bool zk_handle::session_info(std::int64_t& id, int& timeout_ms) {
    std::lock_guard lk(client_lock());
    if (closed_ || !zh_) return false;
    if (const clientid_t* c = zoo_client_id(zh_)) id = c->client_id;
    timeout_ms = zoo_recv_timeout(zh_);
    return true;
}

void zk_handle::note_failed_attempt(int err) {
    if (++failed_in_row_ >= servers_) {
        failed_in_row_ = 0;
        failed_round_ = true;
    }
    // (right after the failure the C client still names the server it tried: it moves on at the
    // next zookeeper_interest)
    const char* server = zoo_get_current_server(zh_);
    if (!server || !*server) return;
    std::string what;
    switch (err) {
    case ECONNREFUSED:
        what = "connection refused";
        break;
    case ETIMEDOUT:
        what = "timed out";
        break;
    case ECONNRESET:
        what = "connection reset";
        break;
    case EHOSTUNREACH:
        what = "host unreachable";
        break;
    case ENETUNREACH:
        what = "network unreachable";
        break;
    case 0:
        what = "connection lost";
        break;
    default:
        what = std::strerror(err);
    }
    for (auto& [s, w] : attempts_)
        if (s == server) {
            w = std::move(what);
            return;
        }
    if (attempts_.size() < 64) attempts_.emplace_back(server, std::move(what));
}

void zk_handle::note_socket(int fd, bool fresh) {
    if (!fresh) return;
    noted_fd_ = fd;
    noted_known_ = true;
    if (fd >= 0) {
        // The C client makes its sockets without SOCK_CLOEXEC: a program that execs would hand
        // the child the session's connection. Set here, right after the zookeeper_interest that
        // made it; the window left is that call (a fork+exec on another thread inside it).
        const int flags = ::fcntl(fd, F_GETFD);
        if (flags >= 0 && !(flags & FD_CLOEXEC)) ::fcntl(fd, F_SETFD, flags | FD_CLOEXEC);
    }
    if (!relay_slot) return;
    if (fd < 0) return relay_slot->end(this, std::nullopt);
    sockaddr_in here{}, there{};
    socklen_t a = sizeof here, b = sizeof there;
    auto v4 = [](const sockaddr_in& in) {
        return asio::ip::tcp::endpoint(asio::ip::address_v4(ntohl(in.sin_addr.s_addr)), ntohs(in.sin_port));
    };
    // A connect still under way has no peer yet: the slot stays unsure of connections from the
    // socket's own address (the strand decides those), and refuses any other. (Asked again at
    // the next drive.)
    if (::getsockname(fd, reinterpret_cast<sockaddr*>(&here), &a) != 0 || here.sin_family != AF_INET) {
        noted_known_ = false;
        return relay_slot->end(this, std::nullopt, false);
    }
    if (::getpeername(fd, reinterpret_cast<sockaddr*>(&there), &b) != 0 || there.sin_family != AF_INET) {
        noted_known_ = false;
        return relay_slot->end(this, std::nullopt, false, v4(here));
    }
    relay_slot->end(this, std::make_pair(v4(here), v4(there)));
}

std::optional<std::pair<asio::ip::tcp::endpoint, asio::ip::tcp::endpoint>>
zk_handle::client_socket_address() {
    std::lock_guard lk(client_lock());
    if (closed_ || !zh_ || last_fd_ < 0) return std::nullopt;
    auto v4 = [](const sockaddr_storage& ss) {
        const auto& in = reinterpret_cast<const sockaddr_in&>(ss);
        return asio::ip::tcp::endpoint(asio::ip::address_v4(ntohl(in.sin_addr.s_addr)), ntohs(in.sin_port));
    };
    sockaddr_storage here{}, there{};
    socklen_t a = sizeof here, b = sizeof there;
    if (::getsockname(last_fd_, reinterpret_cast<sockaddr*>(&here), &a) != 0 || here.ss_family != AF_INET)
        return std::nullopt;
    if (::getpeername(last_fd_, reinterpret_cast<sockaddr*>(&there), &b) != 0 || there.ss_family != AF_INET)
        return std::nullopt;
    return std::make_pair(v4(here), v4(there));
}

std::string zk_handle::attempts() const {
    std::lock_guard lk(client_lock());
    std::string out;
    for (const auto& [s, w] : attempts_) out += (out.empty() ? "" : ", ") + s + ": " + w;
    return out;
}

bool zk_handle::take(c_op* op) {
    std::lock_guard lk(client_lock());
    if (inflight_.erase(op) != 1) return false;
    if (op->renews == vouch::commit && !op->heartbeat) --writes_in_flight_;
    return true;
}

bool zk_handle::write_in_flight() const {
    std::lock_guard lk(client_lock());
    return writes_in_flight_ > 0;
}

bool zk_handle::read_replies() {
    // One reply per zookeeper_process call: until the socket has nothing more (ZNOTHING) or the
    // connection failed, at most max_replies_per_drive.
    for (int n = 0; n < max_replies_per_drive; ++n)
        if (zookeeper_process(zh_, ZOOKEEPER_READ) != ZOK) return true;
    return false;
}

void zk_handle::uncork() {
    if (corked_fd_ < 0) return;
    // Corked in a connected state, uncorked before the next zookeeper_interest (the first thing a
    // drive does), so no new socket can have been opened in between. Still connected: it is the
    // same socket, open. Not connected: the C client may have closed it (an error found while
    // reading), and its number may name someone else's file by now: leave it alone.
    if (zh_ && zoo_state(zh_) == ZOO_CONNECTED_STATE) {
        int off = 0;
        ::setsockopt(corked_fd_, IPPROTO_TCP, TCP_CORK, &off, sizeof off);
    }
    corked_fd_ = -1;
}

void zk_handle::schedule_drive() {
    if (drive_posted_.exchange(true, std::memory_order_acq_rel)) return;
    asio::post(strand, [self = shared_from_this()] {
        self->drive_posted_.store(false, std::memory_order_release);
        self->drive(0, self->sock_gen_);
    });
}

void zk_handle::drive(int events, std::uint64_t gen) {
    std::vector<std::variant<c_op*, std::function<void()>>> ready;
    int fd = -1, interest = 0;
    timeval tv{};
    bool more = false, dead = false, round_failed = false, connected = false;
    {
        std::lock_guard lk(client_lock());
        uncork();
        if (closed_ || !zh_) return;
        call_timer timed("process+interest");
        collecting_ = true;
        if (gen != sock_gen_) events = 0; // the readiness of a socket that is gone
        // No reactor wait on the connection (a socket the duplicate could not be made of, or one
        // dropped after an error the C client kept it open through): read on every timer drive.
        if (events == 0 && !sd_.is_open() && zoo_state(zh_) == ZOO_CONNECTED_STATE) events = ZOOKEEPER_READ;
        if (events & ZOOKEEPER_WRITE) {
            // (a connection attempt's outcome: a refused connect shows here, with its errno)
            const bool attempting = zoo_state(zh_) != ZOO_CONNECTED_STATE;
            errno = 0;
            const int wrc = zookeeper_process(zh_, ZOOKEEPER_WRITE);
            if (attempting && wrc != ZOK && wrc != ZNOTHING) note_failed_attempt(errno);
        }
        // The reactor reports a readiness once (edge-triggered): read it all.
        if (events & ZOOKEEPER_READ) more = !read_replies();
        // What to wait for next. It also connects (a new socket each attempt), sends the pings,
        // and ends a connection whose server stopped answering; after an error (connection lost,
        // refused, timed out) it is asked again at once: the next call tries the next server.
        int rc = ZOK;
        // (Connected, zookeeper_interest keeps the socket it has; else it may open one.)
        const bool may_open = zoo_state(zh_) != ZOO_CONNECTED_STATE;
        if (may_open && relay_slot) relay_slot->begin(this);
        for (int tries = 0;; ++tries) {
            fd = -1;
            interest = 0;
            tv = {};
            errno = 0;
            rc = zookeeper_interest(zh_, &fd, &interest, &tv);
            if (rc == ZOK || rc == ZNOTHING || rc == ZINVALIDSTATE) break;
            note_failed_attempt(errno);
            if (rc == ZSYSTEMERROR || tries == 8) { // (no address resolved; or a burst of refusals)
                fd = -1;
                interest = 0;
                tv = {0, rc == ZSYSTEMERROR ? 100'000 : 10'000};
                break;
            }
        }
        dead = rc == ZINVALIDSTATE; // expired or refused for good: the session event says which
        // No socket but a pause: every server of the list failed once (the C client waits a
        // little before the next round). The session may look its host names up again. As many
        // failed attempts in a row as there are servers count too: the C client tries them in
        // turn, and with two or more refusing servers it never pauses (seen: ~1000 connects/s).
        round_failed = (rc == ZOK && fd < 0 && (tv.tv_sec != 0 || tv.tv_usec != 0)) || failed_round_;
        failed_round_ = false;
        if (dead) fd = -1;
        note_socket(fd, may_open || fd != noted_fd_ || !noted_known_);
        if (!dead && fd < 0 && tv.tv_sec == 0 && tv.tv_usec == 0) tv = {0, 10'000};
        last_fd_ = fd;
        last_interest_ = dead ? 0 : interest;
        const lease_ns t = plat->boot_now(); // (before the state is read: see saw_state)
        connected = zoo_state(zh_) == ZOO_CONNECTED_STATE;
        if (connected) failed_in_row_ = 0;
        lease->saw_state(t, connected);
        collecting_ = false;
        ready.swap(ready_);
    }
    if (dead) { // nothing will happen on this handle any more: the session replaces or closes it
        stop_waits();
        run_ready(ready);
        return;
    }
    if (round_failed)
        asio::post(strand, [w = this->events, gen = generation] {
            if (auto s = w.lock()) s->on_round_failed(gen);
        });
    wait_for(fd, interest, tv, connected);
    if (more)
        asio::post(strand, [self = shared_from_this(), g = sock_gen_] { self->drive(ZOOKEEPER_READ, g); });
    run_ready(ready); // (last: a handler may close this handle)
}

void zk_handle::complete(c_op* op) {
    if (collecting_)
        ready_.emplace_back(op);
    else
        post_result(strand, op);
}

void zk_handle::to_strand(std::function<void()> fn) {
    if (collecting_)
        ready_.emplace_back(std::move(fn));
    else
        asio::post(strand, std::move(fn));
}

void zk_handle::run_ready(std::vector<std::variant<c_op*, std::function<void()>>>& ready) {
    // The drive ran on the strand, and runs these on it now, as a post of each would have done
    // one by one (the C client's lock is free again: a handler may send the next request). A
    // handler that throws leaves the rest posted, as they would have been.
    std::size_t i = 0;
    try {
        for (; i < ready.size(); ++i) {
            if (auto* op = std::get_if<c_op*>(&ready[i]))
                run_result(std::exchange(*op, nullptr));
            else
                std::exchange(std::get<std::function<void()>>(ready[i]), {})();
        }
    } catch (...) {
        for (++i; i < ready.size(); ++i) {
            if (auto* op = std::get_if<c_op*>(&ready[i]))
                post_result(strand, *op);
            else
                asio::post(strand, std::move(std::get<std::function<void()>>(ready[i])));
        }
        throw;
    }
}

void zk_handle::wait_for(int fd, int interest, const timeval& tv, bool connected) {
    if (fd < 0) {
        drop_socket();
    } else if (!(connected && checked_while_connected_ && fd == sd_of_ && sd_.is_open())) {
        // The C client opens a new socket for each connection attempt, often under the number
        // of the one it just closed: the inode tells them apart. That check is skipped while the
        // state stays connected: a socket is only ever replaced through a state that is not.
        // zookeeper_interest opens the next socket (connecting) as the last call of a drive, and
        // this drive's check sees that state; only a later zookeeper_process completes the
        // handshake. (On the connected path that saves a system call per drive.)
        struct stat st {};
        const bool same =
            sd_.is_open() && ::fstat(fd, &st) == 0 && static_cast<std::uint64_t>(st.st_ino) == ino_;
        if (!same) {
            drop_socket();
            if (::fstat(fd, &st) == 0) {
                // Our own duplicate: the C client closes its descriptor whenever it likes, and a
                // reactor must never hold a number that may already name another file.
                int dup = ::fcntl(fd, F_DUPFD_CLOEXEC, 0);
                if (dup >= 0) {
                    error_code ec;
                    sd_.assign(dup, ec);
                    if (ec)
                        ::close(dup);
                    else
                        ino_ = static_cast<std::uint64_t>(st.st_ino);
                }
            }
        }
        sd_of_ = fd;
        checked_while_connected_ = connected && sd_.is_open();
    }
    if (sd_.is_open() && connected && out_registered_ && !(interest & ZOOKEEPER_WRITE) && !write_waiting_) {
        // Asio keeps EPOLLOUT in the descriptor's registration once a write wait was made on it
        // (the connect's), and re-arms every read wait with that registration: each re-arm then
        // reports the always-writable socket, a wake-up for nothing, once per reply. Connected
        // with nothing to send, the descriptor is registered again, for reading only. (A new
        // generation: the read wait cancelled here is stale.)
        ++sock_gen_;
        read_waiting_ = false;
        out_registered_ = false;
        error_code ec;
        const int dup = sd_.release();
        sd_.assign(dup, ec);
        if (ec) {
            ::close(dup);
            ino_ = 0;
            sd_of_ = -1;
            checked_while_connected_ = false;
        }
    }
    if (sd_.is_open()) {
        if ((interest & ZOOKEEPER_READ) && !read_waiting_) {
            read_waiting_ = true;
            sd_.async_wait(asio::posix::stream_descriptor::wait_read,
                           [self = shared_from_this(), g = sock_gen_](error_code ec) {
                               if (g != self->sock_gen_) return; // (that socket's waits are over)
                               self->read_waiting_ = false;
                               if (ec == asio::error::operation_aborted) return;
                               self->drive(ec ? 0 : ZOOKEEPER_READ, g);
                           });
        }
        if ((interest & ZOOKEEPER_WRITE) && !write_waiting_) {
            write_waiting_ = true;
            out_registered_ = true;
            sd_.async_wait(asio::posix::stream_descriptor::wait_write,
                           [self = shared_from_this(), g = sock_gen_](error_code ec) {
                               if (g != self->sock_gen_) return;
                               self->write_waiting_ = false;
                               if (ec == asio::error::operation_aborted) return;
                               self->drive(ec ? 0 : ZOOKEEPER_WRITE, g);
                           });
        }
    }
    // The timeout: the next ping, the server's silence, the next connection attempt. Waking up
    // earlier than asked is harmless (zookeeper_interest recomputes it); later is not.
    auto at = std::chrono::steady_clock::now() + std::chrono::seconds(tv.tv_sec) +
              std::chrono::microseconds(tv.tv_usec);
    if (!timer_waiting_ || at < timer_at_) {
        timer_waiting_ = true;
        timer_at_ = at;
        timer_.expires_at(at);
        timer_.async_wait([self = shared_from_this()](error_code ec) {
            if (ec == asio::error::operation_aborted) return;
            self->timer_waiting_ = false;
            self->drive(0, self->sock_gen_);
        });
    }
}

void zk_handle::drop_socket() {
    if (!sd_.is_open()) return;
    ++sock_gen_;
    read_waiting_ = write_waiting_ = false;
    out_registered_ = false;
    error_code ec;
    sd_.close(ec); // our duplicate: the waits on it end with operation_aborted
    ino_ = 0;
    sd_of_ = -1;
    checked_while_connected_ = false;
}

void zk_handle::stop_waits() {
    drop_socket();
    timer_waiting_ = false;
    timer_.cancel();
}

void zk_handle::close() {
    std::unordered_set<c_op*> rest;
    {
        std::lock_guard lk(client_lock());
        if (closed_) return;
        closed_ = true;
        uncork(); // (the requests queued so far go before the close request)
        if (zh_) {
            call_timer timed("close");
            // zookeeper_close of the single-threaded client blocks while connected: it sends the
            // close request (polling up to 3 s for the socket to take it), then polls up to 1.5 s
            // for any answer, which it does not read. So: first take the replies already there
            // (their completions run now, with their results); then shut the socket's reading
            // side, which makes that second poll return at once. The close request still goes
            // out, the C client's own, behind every request sent before it. If the socket cannot
            // even take it (requests still unsent: the server stopped reading), the whole socket
            // is shut: nothing more is sent, and the server ends the session only at its timeout.
            if (zoo_state(zh_) == ZOO_CONNECTED_STATE && last_fd_ >= 0) {
                read_replies();
                int fd = -1, interest = 0;
                timeval tv{};
                if (zoo_state(zh_) == ZOO_CONNECTED_STATE &&
                    zookeeper_interest(zh_, &fd, &interest, &tv) == ZOK && fd >= 0) {
                    pollfd p{fd, POLLOUT, 0};
                    const bool writable = ::poll(&p, 1, 0) == 1 && (p.revents & POLLOUT);
                    if ((interest & ZOOKEEPER_WRITE) || !writable) {
                        log_line("zklock: closing a session whose connection takes no more data: the server "
                                 "ends the session at its timeout");
                        ::shutdown(fd, SHUT_RDWR);
                    } else {
                        ::shutdown(fd, SHUT_RD);
                    }
                }
            }
            zookeeper_close(zh_); // (completions of what is still pending run here, with ZCLOSING)
            zh_ = nullptr;
        }
        rest.swap(inflight_);
        writes_in_flight_ = 0;
        if (relay_slot) relay_slot->clear(this);
    }
    for (c_op* op : rest) {
        op->res.rc = ZCLOSING;
        post_result(strand, op);
    }
    // The waits belong to the strand (this may be another thread, or the destructor).
    if (auto self = weak_from_this().lock()) {
        try {
            asio::post(strand, [self] { self->stop_waits(); });
        } catch (...) {
        }
    }
}

} // namespace zklock::detail

namespace zklock {

void set_log_handler(std::function<void(std::string_view)> handler) {
    std::unique_lock lk(detail::g_log_mu);
    detail::g_log = std::move(handler);
}

} // namespace zklock
