// The C-client bridge and the session state machine.
#include "detail/session_impl.hpp"
#include "detail/held_lock.hpp"

#include "detail/protocol.hpp"

#include <zklock/detail/deadline.hpp>

#include <zklock/path.hpp>

#include <boost/asio/bind_executor.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>

#include <algorithm>
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
        // Lines logged without a handle bypass the callback: send them nowhere.
        if (FILE* devnull = std::fopen("/dev/null", "w")) zoo_set_log_stream(devnull);
        zoo_set_debug_level(ZOO_LOG_LEVEL_WARN);
    });
}
} // namespace

// ---------------------------------------------------------------- C callbacks
/// What a multi-op's C call points into until its completion: the operations, their results, the
/// created paths' buffers and the set operations' stats (sized once: the pointers must not move).
struct multi_buffers {
    std::vector<zoo_op_t> ops;
    std::vector<zoo_op_result_t> results;
    std::vector<std::vector<char>> paths;
    std::vector<Stat> stats;
};

struct c_op {
    zk_handle* owner = nullptr; // valid until the op is taken or swept
    std::optional<zk_handler> h;
    zk_result res;
    std::atomic<int> remaining{1}; // C completions still to come (2 for create_and_list)
    bool pipelined = false;        // create_and_list: the listing's code goes to res.list_rc
    vouch renews = vouch::touch;   // what a successful reply proves (the lease: see proves_commit)
    lease_ns sent = 0;             // when the request was handed to the C client (lease_clock)
    bool heartbeat = false;        // a lease heartbeat (not counted by zk_handle::write_in_flight)
    std::unique_ptr<multi_buffers> multi; // multi: what the C client writes the results into
};

namespace {

void post_result(const asio::strand<asio::any_io_executor>& strand, c_op* op) {
    asio::post(strand, [p = std::unique_ptr<c_op>(op)]() mutable {
        zk_handler h = std::move(*p->h);
        zk_result r = std::move(p->res);
        p.reset();
        std::move(h)(std::move(r));
    });
}

/// Every reply of the server is evidence for the lease (session_lease::on_reply): a touch of the
/// session, and for a committed write a proof that the leader still led with a quorum. It is
/// noted as soon as zookeeper_process reads it (before its result is posted to the strand). A
/// renewal that comes after the lease had lapsed is recorded as a gap (the lapse is final), and
/// the strand is told at once, not at its next timer.
void note_reply(c_op* op, int rc) {
    if (!is_server_reply(rc)) return;
    zk_handle* h = op->owner;
    const bool commit = proves_commit(op->renews, rc);
    if (h->lease->on_reply(op->sent, commit, commit ? lease_clock::now() : 0))
        asio::post(h->strand, [w = h->session] {
            if (auto s = w.lock()) s->check_lease();
        });
}

void finish(c_op* op) {
    if (op->remaining.fetch_sub(1, std::memory_order_acq_rel) != 1) return;
    zk_handle* owner = op->owner;
    if (owner->take(op)) post_result(owner->strand, op);
}

c_op* as_op(const void* data) { return static_cast<c_op*>(const_cast<void*>(data)); }

/// A request's code as the recipes should read it. ZRUNTIMEINCONSISTENCY on a whole request means
/// the C client dropped the connection after a reply it could not match to its oldest request
/// (after a send failed inside a request call, the single-threaded client closes its socket
/// without failing the requests in flight): what happened to the request is unknown, as on a
/// connection loss.
int reply_rc(int rc) noexcept { return rc == ZRUNTIMEINCONSISTENCY ? ZCONNECTIONLOSS : rc; }

void on_string_stat(int rc, const char* value, const Stat* stat, const void* data) {
    rc = reply_rc(rc);
    auto* op = as_op(data);
    note_reply(op, rc);
    op->res.rc = rc;
    if (rc == ZOK) {
        if (value) op->res.path = value;
        if (stat) op->res.stat = *stat;
    }
    finish(op);
}

/// getChildren2: the children with the parent's stat, whose cversion tells which suffixes a
/// sequential create can have made (protocol.hpp, classify_child).
void on_strings(int rc, const String_vector* strings, const Stat* stat, const void* data) {
    rc = reply_rc(rc);
    auto* op = as_op(data);
    if (!op->pipelined) note_reply(op, rc); // (create_and_list: the create's reply vouches, not this)
    (op->pipelined ? op->res.list_rc : op->res.rc) = rc;
    if (rc == ZOK && strings) {
        op->res.children.reserve(static_cast<std::size_t>(strings->count));
        for (int i = 0; i < strings->count; ++i) op->res.children.emplace_back(strings->data[i]);
    }
    if (rc == ZOK && stat) op->res.cversion = stat->cversion;
    finish(op);
}

/// zoo_amulti: each operation's outcome. After a failure the server reports the failed operation's
/// code (the ones before it ZOK, after it ZRUNTIMEINCONSISTENCY); after a failure of the whole
/// request (connection loss, ...) the results were never filled in: res.multi stays empty.
void on_multi(int rc, const void* data) {
    rc = reply_rc(rc);
    auto* op = as_op(data);
    note_reply(op, rc);
    op->res.rc = rc;
    auto& b = *op->multi;
    const bool answered = rc == ZOK || std::any_of(b.results.begin(), b.results.end(), [](const zoo_op_result_t& r) {
        return r.err != ZOK && r.err != ZRUNTIMEINCONSISTENCY && r.err != 1;
    });
    if (answered) op->res.multi.resize(b.results.size());
    for (std::size_t i = 0; answered && i < b.results.size(); ++i) {
        auto& r = b.results[i];
        auto& m = op->res.multi[i];
        m.rc = r.err != 1 ? r.err : rc;
        if (rc != ZOK) continue;
        if (b.ops[i].type == ZOO_CREATE_OP && r.value) m.path = r.value;
        if (b.ops[i].type == ZOO_SETDATA_OP) m.version = b.stats[i].version;
    }
    finish(op);
}

void on_data(int rc, const char* value, int len, const Stat* stat, const void* data) {
    rc = reply_rc(rc);
    auto* op = as_op(data);
    note_reply(op, rc);
    op->res.rc = rc;
    if (rc == ZOK) {
        if (value && len > 0) op->res.data.assign(value, static_cast<std::size_t>(len));
        if (stat) op->res.stat = *stat;
    }
    finish(op);
}

void on_stat(int rc, const Stat* stat, const void* data) {
    rc = reply_rc(rc);
    auto* op = as_op(data);
    note_reply(op, rc);
    op->res.rc = rc;
    if (rc == ZOK && stat) op->res.stat = *stat;
    finish(op);
}


void on_void(int rc, const void* data) {
    rc = reply_rc(rc);
    auto* op = as_op(data);
    note_reply(op, rc);
    op->res.rc = rc;
    finish(op);
}

void global_watcher(zhandle_t* zh, int type, int state, const char*, void* ctx) {
    if (type != ZOO_SESSION_EVENT) return;
    auto* h = static_cast<zk_handle*>(ctx);
    // (At once, inside zookeeper_process: the replies that follow are this connection's.)
    if (state == ZOO_CONNECTED_STATE) h->lease->on_connected(static_cast<lease_ns>(zoo_recv_timeout(zh)) * 1'000'000);
    asio::post(h->strand, [w = h->session, gen = h->generation, state] {
        if (auto s = w.lock()) s->on_session_event(gen, state);
    });
}

void on_auth(int rc, const void* data) {
    auto* h = static_cast<const zk_handle*>(data);
    asio::post(h->strand, [w = h->session, gen = h->generation, rc] {
        if (auto s = w.lock()) s->on_auth_result(gen, rc);
    });
}

void node_watcher(zhandle_t* zh, int type, int, const char*, void* ctx) {
    // Per-call watchers also receive every session event while armed: the global watcher
    // handles those. Only the one node event matters here.
    if (type == ZOO_SESSION_EVENT) return;
    auto* h = static_cast<zk_handle*>(const_cast<void*>(zoo_get_context(zh)));
    if (!h) return;
    auto id = static_cast<std::uint64_t>(reinterpret_cast<std::uintptr_t>(ctx));
    asio::post(h->strand, [w = h->session, id, type] {
        if (auto s = w.lock()) s->on_watch(id, type);
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
        auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - t0_).count();
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
            std::fprintf(f, "%lld ns %s: cpu %lld ns, context switches %ld voluntary (slept) %ld involuntary (preempted); %s\n",
                         static_cast<long long>(ns), g_longest_what, static_cast<long long>(g_longest_cpu_ns),
                         g_longest_voluntary, g_longest_involuntary, n > 0 ? exe : "?");
            std::fclose(f);
        }
    }
} g_longest_call_report;
} // namespace

zk_handle::zk_handle(std::weak_ptr<session_impl> s, asio::strand<asio::any_io_executor> st, std::uint64_t gen,
                     std::shared_ptr<session_lease> l)
    : session(std::move(s)), strand(std::move(st)), generation(gen), lease(std::move(l)), sd_(strand),
      timer_(strand) {}

zk_handle::~zk_handle() { close(); }

bool zk_handle::init(const std::string& connect, int timeout_ms, const std::vector<credentials>& auth) {
    init_client_library();
    std::lock_guard lk(client_lock());
    call_timer timed("init");
    if (closed_) return false; // shutdown() closed this handle before it was created
    // (No connection yet: the single-threaded client connects in the first zookeeper_interest.)
    zhandle_t* zh = zookeeper_init2(connect.c_str(), global_watcher, timeout_ms, nullptr, this,
                                    ZOO_NO_LOG_CLIENTENV, log_callback);
    if (!zh) return false;
    // Queued now, sent by the C client right after the session is established and again on every
    // reconnect. The completion runs once, with the server's verdict on the first connection.
    for (const auto& c : auth) {
        int rc = zoo_add_auth(zh, c.scheme.c_str(), c.secret.data(), static_cast<int>(c.secret.size()), on_auth, this);
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

template <class F>
int zk_handle::submit(c_op* op, bool, F&& call) {
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
        if (op->sent == 0) op->sent = lease_clock::now();
        inflight_.insert(op);
        rc = call(zh_, op);
        if (rc != ZOK) inflight_.erase(op);
        else if (op->renews == vouch::commit && !op->heartbeat) ++writes_in_flight_;
        if (was_connected && zoo_state(zh_) == 999 /* ZOO_NOTCONNECTED_STATE */)
            log_line("zklock: a send failed and the C client dropped its connection; it reconnects, and the "
                     "requests in flight end as on a connection loss");
        if (rc == ZINVALIDSTATE) {
            // The handle is dead (the C client refuses every call once its state is
            // unrecoverable), but the session event that says why may still be on its way to the
            // strand: say why here, so a request that loses this race still ends for the right
            // reason (auth_failed, not a bare "invalid zhandle state").
            const int state = zoo_state(zh_);
            if (state == ZOO_AUTH_FAILED_STATE) rc = ZAUTHFAILED;
            else if (state == ZOO_EXPIRED_SESSION_STATE) rc = ZSESSIONEXPIRED;
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
    // (right after the failure the C client still names the server it tried: it moves on at the
    // next zookeeper_interest)
    const char* server = zoo_get_current_server(zh_);
    if (!server || !*server) return;
    std::string what;
    switch (err) {
    case ECONNREFUSED: what = "connection refused"; break;
    case ETIMEDOUT: what = "timed out"; break;
    case ECONNRESET: what = "connection reset"; break;
    case EHOSTUNREACH: what = "host unreachable"; break;
    case ENETUNREACH: what = "network unreachable"; break;
    case 0: what = "connection lost"; break;
    default: what = std::strerror(err);
    }
    for (auto& [s, w] : attempts_)
        if (s == server) {
            w = std::move(what);
            return;
        }
    if (attempts_.size() < 64) attempts_.emplace_back(server, std::move(what));
}

std::optional<std::pair<asio::ip::tcp::endpoint, asio::ip::tcp::endpoint>> zk_handle::client_socket_address() {
    std::lock_guard lk(client_lock());
    if (closed_ || !zh_ || last_fd_ < 0) return std::nullopt;
    auto v4 = [](const sockaddr_storage& ss) {
        const auto& in = reinterpret_cast<const sockaddr_in&>(ss);
        return asio::ip::tcp::endpoint(asio::ip::address_v4(ntohl(in.sin_addr.s_addr)), ntohs(in.sin_port));
    };
    sockaddr_storage here{}, there{};
    socklen_t a = sizeof here, b = sizeof there;
    if (::getsockname(last_fd_, reinterpret_cast<sockaddr*>(&here), &a) != 0 || here.ss_family != AF_INET) return std::nullopt;
    if (::getpeername(last_fd_, reinterpret_cast<sockaddr*>(&there), &b) != 0 || there.ss_family != AF_INET) return std::nullopt;
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
    int fd = -1, interest = 0;
    timeval tv{};
    bool more = false, dead = false, round_failed = false, connected = false;
    {
        std::lock_guard lk(client_lock());
        uncork();
        if (closed_ || !zh_) return;
        call_timer timed("process+interest");
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
        // little before the next round). The session may look its host names up again.
        round_failed = rc == ZOK && fd < 0 && (tv.tv_sec != 0 || tv.tv_usec != 0);
        if (dead) fd = -1;
        if (!dead && fd < 0 && tv.tv_sec == 0 && tv.tv_usec == 0) tv = {0, 10'000};
        last_fd_ = fd;
        last_interest_ = dead ? 0 : interest;
        const lease_ns t = lease_clock::now(); // (before the state is read: see saw_state)
        connected = zoo_state(zh_) == ZOO_CONNECTED_STATE;
        lease->saw_state(t, connected);
    }
    if (dead) { // nothing will happen on this handle any more: the session replaces or closes it
        stop_waits();
        return;
    }
    if (round_failed)
        asio::post(strand, [w = session, gen = generation] {
            if (auto s = w.lock()) s->on_round_failed(gen);
        });
    wait_for(fd, interest, tv, connected);
    if (more)
        asio::post(strand, [self = shared_from_this(), g = sock_gen_] { self->drive(ZOOKEEPER_READ, g); });
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
        struct stat st{};
        const bool same = sd_.is_open() && ::fstat(fd, &st) == 0 && static_cast<std::uint64_t>(st.st_ino) == ino_;
        if (!same) {
            drop_socket();
            if (::fstat(fd, &st) == 0) {
                // Our own duplicate: the C client closes its descriptor whenever it likes, and a
                // reactor must never hold a number that may already name another file.
                int dup = ::fcntl(fd, F_DUPFD_CLOEXEC, 0);
                if (dup >= 0) {
                    error_code ec;
                    sd_.assign(dup, ec);
                    if (ec) ::close(dup);
                    else ino_ = static_cast<std::uint64_t>(st.st_ino);
                }
            }
        }
        sd_of_ = fd;
        checked_while_connected_ = connected && sd_.is_open();
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
    auto at = std::chrono::steady_clock::now() + std::chrono::seconds(tv.tv_sec) + std::chrono::microseconds(tv.tv_usec);
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
                if (zoo_state(zh_) == ZOO_CONNECTED_STATE && zookeeper_interest(zh_, &fd, &interest, &tv) == ZOK && fd >= 0) {
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

// ---------------------------------------------------------------- session_impl
session_impl::session_impl(asio::any_io_executor ex, session_options opts)
    : ex_(ex), strand_(asio::make_strand(ex)), opts_(std::move(opts)), connect_timer_(strand_),
      lease_timer_(strand_), heartbeat_timer_(strand_) {}

session_impl::~session_impl() {
    std::shared_ptr<zk_handle> h;
    {
        std::lock_guard lk(handle_mu_);
        h = std::move(handle_);
    }
    if (h) h->close();
}

void session_impl::meter_acquire(const std::string& path, pending<void(error_code, guard)>& p) {
    if (!opts_.metrics) return;
    auto m = metrics_.path(path);
    m->started.fetch_add(1, std::memory_order_relaxed);
    m->waiting.fetch_add(1, std::memory_order_relaxed);
    p.observe([m, t0 = std::chrono::steady_clock::now()](const error_code& ec, const guard& g) {
        m->waiting.fetch_sub(1, std::memory_order_relaxed);
        if (!ec && g.owns_lock()) {
            auto now = std::chrono::steady_clock::now();
            m->granted.fetch_add(1, std::memory_order_relaxed);
            m->wait.observe(now - t0);
            if (g.local_grant() > 0) m->handoff.fetch_add(1, std::memory_order_relaxed);
            // (Completions run on the session's strand: the held_lock is the strand's too.)
            if (auto& h = g.state(); h && !h->metrics) {
                h->metrics = m;
                h->granted_at = now;
            }
        } else if (ec == errc::acquire_timeout) {
            m->timed_out.fetch_add(1, std::memory_order_relaxed);
        } else if (ec == errc::lock_busy) {
            m->busy.fetch_add(1, std::memory_order_relaxed);
        } else if (ec == asio::error::operation_aborted) {
            m->cancelled.fetch_add(1, std::memory_order_relaxed);
        } else {
            m->failed.fetch_add(1, std::memory_order_relaxed);
        }
    });
}

metrics_snapshot session_impl::metrics_snapshot_now() const {
    metrics_snapshot out;
    metrics_.snapshot(out);
    out.reconnects = n_reconnects.load(std::memory_order_relaxed);
    out.expiries = n_expiries.load(std::memory_order_relaxed);
    out.background_delete_retries = n_cleanup_retries.load(std::memory_order_relaxed);
    out.background_deletes_pending = n_cleanups_pending.load(std::memory_order_relaxed);
    if (auto t = oldest_cleanup_ns.load(std::memory_order_relaxed); t != 0 && out.background_deletes_pending > 0) {
        auto now = std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch()).count();
        out.oldest_background_delete_age = std::chrono::milliseconds(std::max<std::int64_t>(0, (now - t) / 1'000'000));
    }
    out.requests = statistics();
    return out;
}

session_statistics session_impl::statistics() const noexcept {
    session_statistics s;
    s.creates = n_create.load();
    s.deletes = n_delete.load();
    s.get_children = n_children.load();
    s.get_data = n_get.load();
    s.exists = n_exists.load();
    s.set_data = n_set.load();
    s.watch_events = n_watch.load();
    s.heartbeats = n_heartbeat.load();
    s.lease_renewals = n_renewal.load();
    s.slowest_write = std::chrono::microseconds(lease_->slowest_commit() / 1000);
    s.touches = n_touch.load();
    s.multis = n_multi.load();
    s.watch_removals = n_unwatch.load();
    return s;
}

void session_impl::set_state(session_state s) {
    state_.store(s, std::memory_order_release);
    for (auto it = state_waiters_.begin(); it != state_waiters_.end();) {
        if (it->second.first != s) {
            it->second.second.complete({}, s);
            it = state_waiters_.erase(it);
        } else {
            ++it;
        }
    }
}

void session_impl::notify(session_event e) {
    auto copy = listeners_; // listeners remove themselves while notified
    for (auto& [id, w] : copy) {
        if (auto l = w.lock())
            l->on_session_event(e);
        else
            listeners_.erase(id);
    }
}

std::uint64_t session_impl::add_listener(std::weak_ptr<session_listener> l) {
    auto id = next_id_++;
    listeners_.emplace(id, std::move(l));
    return id;
}

std::uint64_t session_impl::add_watch(std::function<void(int)> fn) {
    auto id = next_id_++;
    watches_.emplace(id, watch_entry{std::move(fn), {}, false});
    return id;
}

void session_impl::drop_watch(std::uint64_t id, bool armed) {
    auto it = watches_.find(id);
    if (it == watches_.end()) return; // fired already: the C client forgot it too
    auto path = std::move(it->second.path);
    bool child = it->second.child;
    watches_.erase(it);
    if (!armed || path.empty()) return;
    // ZOO_CHECK_WATCHES for this one watcher (the server keeps its own watch, which fires once
    // at most); the C client drops its watcher when the reply arrives. Fire and forget: a
    // refusal (ZNOWATCHER: it fired meanwhile; connection loss) leaves at most that one watcher.
    zk_handler done = [](zk_result) {};
    submit(done, [&](zhandle_t* zh, c_op* op) -> int {
        // The C client declares the completion as `void_completion_t*` but stores and calls it
        // as the function pointer itself (do_create_completion_entry casts it back).
        auto* completion = reinterpret_cast<void_completion_t*>(reinterpret_cast<void*>(&on_void));
        return zoo_aremove_watches(zh, path.c_str(), child ? ZWATCHTYPE_CHILD : ZWATCHTYPE_DATA, node_watcher,
                                   reinterpret_cast<void*>(static_cast<std::uintptr_t>(id)), 0, completion, op);
    }, n_unwatch);
}

void session_impl::on_watch(std::uint64_t id, int type) {
    n_watch.fetch_add(1, std::memory_order_relaxed);
    auto it = watches_.find(id);
    if (it == watches_.end()) return; // stale: its waiter moved on
    auto fn = std::move(it->second.fn);
    watches_.erase(it);
    fn(type);
}

void session_impl::start_handle() {
    refused_ = false;
    auto gen = generation_.fetch_add(1) + 1;
    lease_->start(lease_clock::now()); // a new session: nothing of the old one vouches for it
    auto h = std::make_shared<zk_handle>(weak_from_this(), strand_, gen, lease_);
    {
        std::lock_guard lk(handle_mu_);
        if (shut_down_) return;
        handle_ = h;
    }
    auto ms = static_cast<int>(opts_.session_timeout.count());
    auth_confirmed_ = opts_.auth.empty();
    auth_probe_needed_ = auth_probe_in_flight_ = false;
    if (relay_) relay_->new_attempt();
    if (!h->init(resolved_connect_.empty() ? opts_.connect : resolved_connect_, ms, opts_.auth)) {
        std::lock_guard lk(handle_mu_);
        handle_.reset();
        return;
    }
    h->start();
}

void session_impl::close_handle(std::shared_ptr<zk_handle> h) {
    if (h) h->close();
}

void session_impl::connect(pending<void(error_code)> h) {
    // Cancellation (terminal, partial): this waiter completes with operation_aborted; if it was
    // the last one of an attempt still connecting, the attempt is abandoned (disconnected).
    auto id = next_state_waiter_.fetch_add(1, std::memory_order_relaxed);
    h.on_cancel([w = weak_from_this(), id](asio::cancellation_type) {
        auto s = w.lock();
        if (!s) return;
        asio::post(s->strand_, [s, id] { s->cancel_connect(id); });
    });
    asio::post(strand_, [self = shared_from_this(), h = std::move(h), id]() mutable {
        auto& s = *self;
        if (s.connects_cancelled_early_.erase(id)) return h.complete(asio::error::operation_aborted);
        switch (s.state()) {
        case session_state::connected:
            if (!s.auth_confirmed_) s.connect_waiters_.emplace_back(id, std::move(h));
            else h.complete({});
            return;
        case session_state::closed: h.complete(errc::session_closed); return; // (issue 31: not a bare "canceled")
        case session_state::connecting:
        case session_state::suspended:
        case session_state::expired: s.connect_waiters_.emplace_back(id, std::move(h)); return;
        case session_state::disconnected: break;
        }
        if (auto ec = validate_connect_string(s.opts_.connect)) return h.complete(ec);
        // Below 100 ms, the C client's connection attempts, timed by the requested timeout until
        // the server negotiates one, can expire before a handshake completes: a session timeout
        // of 2 ms never connected in a test (the server grants at least 2 tickTime anyway).
        if (s.opts_.session_timeout.count() < 100 || s.opts_.session_timeout.count() > INT32_MAX)
            return h.complete(errc::invalid_session_timeout);
        if (s.opts_.connect_timeout.count() <= 0) return h.complete(errc::invalid_connect_timeout);
        if (auto ec = s.opts_.loss.validate()) return h.complete(ec);
        if (error_code ec; !s.make_relay(ec)) return h.complete(ec);
        // (With TLS the C client gets the relay's loopback listeners, made once the addresses are known.)
        if (!s.resolved_connect_.empty() || (!needs_resolution(s.opts_.connect) && !s.relay_)) {
            s.start_handle();
            if (!s.handle_) return h.complete(errc::invalid_connect_string);
            s.connect_waiters_.emplace_back(id, std::move(h));
            s.set_state(session_state::connecting);
            s.arm_connect_timer();
            return;
        }
        // Host names: resolved here, asynchronously, and the C client gets addresses (it would
        // call a blocking getaddrinfo on the io_context before every connection attempt). The
        // connect timeout covers the resolution too.
        s.connect_waiters_.emplace_back(id, std::move(h));
        s.set_state(session_state::connecting);
        s.arm_connect_timer();
        const auto deadline = deadline_after(s.opts_.connect_timeout);
        s.resolve_hosts([self = s.shared_from_this(), epoch = s.resolve_epoch_, deadline](error_code ec) {
            auto& s = *self;
            if (epoch != s.resolve_epoch_ || s.state() != session_state::connecting || s.handle_) return; // abandoned
            if (!ec) s.start_handle();
            if (ec || !s.handle_) {
                s.set_state(session_state::disconnected);
                for (auto& [cid, w] : s.connect_waiters_) w.complete(ec ? ec : make_error_code(errc::invalid_connect_string));
                s.connect_waiters_.clear();
                s.notify(session_event::state_changed);
                return;
            }
            s.arm_connect_timer(deadline); // (start_handle moved the generation the first timer checks)
        });
    });
}

void session_impl::on_round_failed(std::uint64_t gen) {
    if (gen != generation() || !handle_ || round_resolution_ || !needs_resolution(opts_.connect)) return;
    const auto now = std::chrono::steady_clock::now();
    if (now - last_round_resolution_ < std::chrono::seconds(1)) return; // (at most once a second)
    round_resolution_ = true;
    last_round_resolution_ = now;
    const auto before = resolved_connect_;
    resolve_hosts([self = shared_from_this(), gen, before](error_code ec) {
        self->round_resolution_ = false;
        if (ec || gen != self->generation() || !self->handle_ || self->resolved_connect_ == before) return;
        // (zoo_set_servers takes the hosts without the chroot)
        auto hosts = self->resolved_connect_.substr(0, self->resolved_connect_.find('/'));
        log_line("zklock: the servers' addresses changed: " + name_relayed_servers(hosts));
        self->handle_->set_servers(hosts);
    });
}

void session_impl::resolve_hosts(std::function<void(error_code)> then) {
    struct resolution {
        explicit resolution(const strand_type& st) : resolver(st) {}
        asio::ip::tcp::resolver resolver;
        std::vector<std::vector<std::pair<std::string, unsigned short>>> per_host;
        std::size_t left = 0;
        error_code error;
        std::function<void(error_code)> then;
    };
    auto spec = parse_connect_string(opts_.connect);
    auto r = std::make_shared<resolution>(strand_);
    r->per_host.resize(spec.hosts.size());
    r->left = spec.hosts.size();
    r->then = std::move(then);
    std::vector<std::string> names;
    for (auto& h : spec.hosts) names.push_back(h.host.size() > 1 && h.host.front() == '[' ? h.host.substr(1, h.host.size() - 2) : h.host);
    auto done = [this, r, chroot = spec.chroot, names] {
        if (--r->left != 0) return;
        std::vector<std::pair<std::string, unsigned short>> all;
        for (auto& v : r->per_host) all.insert(all.end(), v.begin(), v.end());
        if (all.empty()) return r->then(r->error ? r->error : make_error_code(asio::error::host_not_found));
        if (relay_) {
            // One loopback listener per address, which keeps the host name it came from (the
            // name the server's certificate must carry).
            std::vector<tls_target> targets;
            for (std::size_t i = 0; i < r->per_host.size(); ++i)
                for (auto& [addr, port] : r->per_host[i]) targets.push_back({names[i], addr, port});
            error_code ec;
            auto loopback = relay_->listen(targets, ec);
            if (ec) {
                log_line("zklock: TLS: cannot listen on loopback for the relay: " + ec.message());
                return r->then(ec);
            }
            resolved_connect_ = loopback + chroot;
            return r->then({});
        }
        resolved_connect_ = numeric_connect_string(all, chroot);
        r->then({});
    };
    for (std::size_t i = 0; i < spec.hosts.size(); ++i) {
        auto& h = spec.hosts[i];
        auto port = static_cast<unsigned short>(std::stoi(h.port)); // (validated: 1..65535)
        std::string overridden = faults.resolve_override ? faults.resolve_override(h.host) : std::string();
        if (is_address_literal(h.host) || !overridden.empty()) {
            auto a = overridden.empty() ? h.host : overridden;
            if (a.front() == '[') a = a.substr(1, a.size() - 2);
            r->per_host[i].emplace_back(a, port);
            asio::post(strand_, done);
            continue;
        }
        r->resolver.async_resolve(h.host, h.port, asio::ip::tcp::resolver::numeric_service,
                                  [r, i, port, done](error_code ec, asio::ip::tcp::resolver::results_type res) {
                                      if (ec) r->error = ec;
                                      for (auto& e : res) r->per_host[i].emplace_back(e.endpoint().address().to_string(), port);
                                      done();
                                  });
    }
}

bool session_impl::make_relay(error_code& ec) {
    if (!opts_.tls || relay_) return true;
    std::string why;
    relay_ = tls_relay::make(strand_, *opts_.tls, ec, why);
    if (!relay_) {
        log_line("zklock: " + why);
        std::lock_guard lk(attempts_mu_);
        last_attempts_ = why;
        return false;
    }
    // The handshake's deadline: within the C client's own budget for a connection (the server's
    // answer to its handshake within 2/3 T), so that a silent TLS server costs a failover no
    // more than a silent plain one.
    relay_->handshake_timeout = opts_.tls->handshake_timeout.count() > 0 ? opts_.tls->handshake_timeout
                                                                          : std::max(opts_.session_timeout / 3, std::chrono::milliseconds(100));
    relay_->flush_timeout = std::min(std::chrono::milliseconds(1000), relay_->handshake_timeout);
    relay_->stall_timeout = opts_.session_timeout;
    relay_->client_socket = [w = weak_from_this()]() -> std::optional<std::pair<asio::ip::tcp::endpoint, asio::ip::tcp::endpoint>> {
        auto s = w.lock();
        if (!s || !s->handle_) return std::nullopt;
        return s->handle_->client_socket_address();
    };
    relay_->on_failure = [w = weak_from_this()](const std::string& server, const tls_failure& f) {
        if (auto s = w.lock()) s->on_tls_failure(server, f);
    };
    return true;
}

void session_impl::on_tls_failure(const std::string& server, const tls_failure& f) {
    log_line("zklock: " + server + ": " + f.detail);
    if (!f.definitive || !attempt_in_progress() || !relay_) return;
    // Every server refused the handshake for a reason that does not pass (a CA, a name, a date, a
    // certificate): waiting for the connect timeout would only hide it.
    if (auto all = relay_->all_failed()) abandon_attempt(all->ec);
}

void session_impl::cancel_connect(std::uint64_t id) {
    auto it = std::find_if(connect_waiters_.begin(), connect_waiters_.end(), [&](auto& w) { return w.first == id; });
    if (it == connect_waiters_.end()) {
        if (state() == session_state::disconnected || state() == session_state::connecting)
            connects_cancelled_early_.insert(id); // not queued yet (or completed: harmless)
        return;
    }
    auto p = std::move(it->second);
    connect_waiters_.erase(it);
    p.complete(asio::error::operation_aborted);
    if (connect_waiters_.empty() && attempt_in_progress()) abandon_attempt(asio::error::operation_aborted);
}

void session_impl::abandon_attempt(error_code why) {
    // Every server closed the connection in the TLS handshake, to the end: most likely plain ports.
    if (why == errc::connect_timeout && relay_ && relay_->all_closed_in_handshake()) why = errc::tls_not_tls_server;
    std::shared_ptr<zk_handle> old;
    {
        std::lock_guard lk(handle_mu_);
        old = std::move(handle_);
    }
    if (old && (why == errc::connect_timeout || (relay_ && why.category() == error_category()))) {
        auto tried = relay_ ? relay_->attempts() : old->attempts();
        {
            std::lock_guard lk(attempts_mu_);
            last_attempts_ = tried;
        }
        if (why != errc::connect_timeout)
            log_line("zklock: every server of " + opts_.connect + " refused the TLS handshake: " + tried);
        else
            log_line("zklock: no ZooKeeper server of " + opts_.connect + " answered within the connect timeout" +
                     (tried.empty() ? std::string(" (no attempt failed outright: the servers accepted the connection but never answered the handshake)")
                                    : "; the last attempts: " + tried));
    }
    generation_.fetch_add(1); // events the abandoned handle already posted are stale
    ++resolve_epoch_;         // and so is a resolution still under way
    connect_timer_.cancel();
    close_handle(std::move(old));
    set_state(session_state::disconnected);
    for (auto& [cid, w] : connect_waiters_) w.complete(why);
    connect_waiters_.clear();
    notify(session_event::state_changed); // acquires waiting for the connection give up
}

bool session_impl::attempt_in_progress() const noexcept {
    auto st = state();
    return st == session_state::connecting ||
           (!auth_confirmed_ && (st == session_state::connected || st == session_state::suspended));
}

void session_impl::arm_connect_timer(std::optional<std::chrono::steady_clock::time_point> at) {
    // No server answering: abandon the attempt (the C client would retry forever). For a first
    // connect and for the renewal after an expiry alike.
    connect_timer_.expires_at(at ? *at : deadline_after(opts_.connect_timeout));
    connect_timer_.async_wait([w = weak_from_this(), gen = generation()](error_code ec) {
        auto s = w.lock();
        if (ec || !s || s->generation() != gen || !s->attempt_in_progress()) return;
        s->abandon_attempt(errc::connect_timeout);
    });
}

void session_impl::on_session_event(std::uint64_t gen, int zstate) {
    if (gen != generation() || state() == session_state::closed) return;
    if (zstate == ZOO_AUTH_FAILED_STATE || zstate == ZOO_EXPIRED_SESSION_STATE) {
        if (int ms = faults.delay_end_event_ms.exchange(0, std::memory_order_relaxed); ms > 0) {
            // Injected fault: the news of the end arrives late (see fault_injection).
            auto t = std::make_shared<asio::steady_timer>(strand_, std::chrono::milliseconds(ms));
            t->async_wait([t, w = weak_from_this(), gen, zstate](error_code) {
                if (auto s = w.lock()) s->on_session_event(gen, zstate);
            });
            return;
        }
    }
    if (zstate == ZOO_CONNECTED_STATE) {
        auto prev = state();
        if (handle_) {
            std::int64_t id = 0;
            int ms = 0;
            if (handle_->session_info(id, ms)) {
                session_id_ = id;
                timeout_ms_ = ms; // (the lease took T at the connection's event: on_connected)
                // The relay's handshake deadline follows the negotiated T (the server may cut it)
                if (relay_ && ms > 0 && opts_.tls->handshake_timeout.count() == 0)
                    relay_->handshake_timeout = std::max(std::chrono::milliseconds(ms / 3), std::chrono::milliseconds(100));
            }
        }
        if (prev == session_state::suspended) n_reconnects.fetch_add(1, std::memory_order_relaxed);
        set_state(session_state::connected);
        if (auth_confirmed_) { // else on_auth_result completes them
            connect_timer_.cancel();
            for (auto& [cid, w] : connect_waiters_) w.complete({});
            connect_waiters_.clear();
        }
        (void)prev;
        if (auth_probe_needed_) probe_auth();
        notify(session_event::reconnected); // waiters re-check their node and re-arm watches
        run_cleanups();
        arm_heartbeat(true); // renew the lease at once (or touch: evidence needs answered sends)
        arm_lease_timer(); // T may have been renegotiated: the deadlines moved
    } else if (zstate == ZOO_CONNECTING_STATE || zstate == ZOO_ASSOCIATING_STATE) {
        if (state() != session_state::connected) return;
        set_state(session_state::suspended);
        notify(session_event::suspended); // on_disconnect locks are lost; lease locks wait for their lease
    } else if (zstate == ZOO_AUTH_FAILED_STATE) {
        fail_auth();
    } else if (zstate == ZOO_EXPIRED_SESSION_STATE) {
        n_expiries.fetch_add(1, std::memory_order_relaxed);
        set_state(session_state::expired);
        end_reason_ = errc::session_expired;
        notify(session_event::expired);
        fire_lapse_waiters(true);
        watches_.clear();
        finish_all_cleanups(); // the server deleted our ephemeral nodes
        std::shared_ptr<zk_handle> old;
        {
            std::lock_guard lk(handle_mu_);
            old = std::move(handle_);
        }
        close_handle(std::move(old));
        if (opts_.renew_after_expiry) start_handle();
        if (handle_) {
            set_state(session_state::connecting);
            arm_connect_timer();
        } else {
            // No new session (not wanted, or the C client refused to start one): nothing will
            // change by itself any more.
            set_state(session_state::disconnected);
            for (auto& [cid, w] : connect_waiters_) w.complete(errc::session_expired);
            connect_waiters_.clear();
            notify(session_event::state_changed);
        }
    }
}

void session_impl::on_auth_result(std::uint64_t gen, int rc) {
    if (gen != generation() || state() == session_state::closed) return;
    if (rc == ZAUTHFAILED) return fail_auth(); // the server's verdict: refused
    if (rc != ZOK) {
        // No verdict: the C client calls the completion with the connection's error when the
        // connection drops (or times out) before the server's answer came. It presents the
        // credentials again on its next connection, but this completion is spent: ask there.
        auth_probe_needed_ = true;
        if (state() == session_state::connected) probe_auth();
        return;
    }
    auth_probe_needed_ = false;
    auth_confirmed_ = true;
    if (state() == session_state::connected) {
        connect_timer_.cancel();
        for (auto& [cid, w] : connect_waiters_) w.complete({});
        connect_waiters_.clear();
    }
}

void session_impl::probe_auth() {
    // The C client sends the credentials first on every connection and the server answers them
    // in order, closing the connection if it refuses them (the session then sees
    // ZOO_AUTH_FAILED_STATE). So any server reply to a request sent now means they were accepted.
    // A request that fails with the connection is asked again on the next connection.
    if (auth_confirmed_ || auth_probe_in_flight_ || !handle_) return;
    auth_probe_in_flight_ = true;
    auto* op = new c_op;
    op->h.emplace([w = weak_from_this(), gen = generation()](zk_result r) {
        auto s = w.lock();
        if (!s || s->generation() != gen) return;
        s->auth_probe_in_flight_ = false;
        if (is_server_reply(r.rc)) s->on_auth_result(gen, ZOK);
    });
    int rc = handle_->submit(op, true, [](zhandle_t* zh, c_op* op) -> int { return zoo_aexists(zh, "/", 0, on_stat, op); });
    if (rc != ZOK) {
        op->res.rc = rc;
        post_result(strand_, op);
    }
}

void session_impl::fail_auth() {
    // The server refused our credentials: the C client gives the handle up for good. Retrying
    // with the same credentials would be refused again, so the session ends here (no renewal);
    // locks it held are reported lost (the server deletes their nodes when the session times out).
    if (state() == session_state::disconnected || state() == session_state::closed) return;
    connect_timer_.cancel();
    end_reason_ = zk_errc::auth_failed; // what was held or awaited ends for that reason
    notify(session_event::expired);
    fire_lapse_waiters(true);
    watches_.clear();
    // No delete can succeed on a refused session: its nodes go when the server expires it (its
    // client is gone). Retrying them would knock on a closed door for as long as the object
    // lives. (finish_all_cleanups moves the cleanup epoch: replies still in flight see it.) Nor
    // are new ones taken (refused_): what ends now because of the refusal would queue them.
    refused_ = true;
    finish_all_cleanups();
    std::shared_ptr<zk_handle> old;
    {
        std::lock_guard lk(handle_mu_);
        old = std::move(handle_);
    }
    close_handle(std::move(old));
    set_state(session_state::disconnected);
    for (auto& [cid, w] : connect_waiters_) w.complete(zk_errc::auth_failed);
    connect_waiters_.clear();
    notify(session_event::state_changed);
}

void session_impl::wait_state(session_state last_seen, pending<void(error_code, session_state)> h) {
    // The cancellation is installed here, in the initiating function: a cancel that reaches the
    // strand before the waiter is parked is remembered, not lost.
    auto id = next_state_waiter_.fetch_add(1, std::memory_order_relaxed);
    h.on_cancel([w = weak_from_this(), id](asio::cancellation_type) {
        auto s = w.lock();
        if (!s) return;
        asio::post(s->strand_, [s, id] {
            auto it = s->state_waiters_.find(id);
            if (it == s->state_waiters_.end()) {
                s->state_waits_cancelled_early_.insert(id);
                return;
            }
            auto st = it->second.first;
            it->second.second.complete(asio::error::operation_aborted, st);
            s->state_waiters_.erase(it);
        });
    });
    asio::post(strand_, [self = shared_from_this(), last_seen, id, h = std::move(h)]() mutable {
        auto now = self->state();
        if (self->state_waits_cancelled_early_.erase(id)) return h.complete(asio::error::operation_aborted, now);
        if (now != last_seen) return h.complete({}, now);
        self->state_waiters_.emplace(id, std::make_pair(last_seen, std::move(h)));
    });
}

void session_impl::enter_closed() {
    if (closed_done_) return;
    closed_done_ = true;
    if (relay_) relay_->close(); // (relayed connections still deliver what the C client sent last)
    connect_timer_.cancel();
    lease_timer_.cancel();
    heartbeat_timer_.cancel();
    set_state(session_state::closed);
    for (auto& [cid, w] : connect_waiters_) w.complete(asio::error::operation_aborted);
    connect_waiters_.clear();
    notify(session_event::closed);
    fire_lapse_waiters(true);
    watches_.clear();
    finish_all_cleanups();
}

void session_impl::close(pending<void(error_code)> h) {
    asio::post(strand_, [self = shared_from_this(), h = std::move(h)]() mutable {
        auto& s = *self;
        if (s.closed_done_) return h.complete({});
        s.enter_closed();
        std::shared_ptr<zk_handle> old;
        {
            std::lock_guard lk(s.handle_mu_);
            old = std::move(s.handle_);
        }
        close_handle(std::move(old));
        if (!s.relay_) return h.complete({});
        // The close request is in the relay's loopback socket: complete once it has reached the
        // server (bounded), so that a caller who stops its io_context next loses nothing.
        auto p = std::make_shared<pending<void(error_code)>>(std::move(h));
        s.relay_->when_drained([p] { p->complete({}); });
    });
}

void session_impl::shutdown() noexcept {
    if (shut_down_.exchange(true)) return;
    std::shared_ptr<zk_handle> h;
    {
        std::lock_guard lk(handle_mu_);
        h = handle_;
    }
    if (h) h->close(); // afterwards no request can reach the C client
    try {
        asio::post(strand_, [self = shared_from_this()] { self->enter_closed(); });
    } catch (...) {
    }
    state_.store(session_state::closed, std::memory_order_release);
}

// ---------------------------------------------------------------- the lease
bool session_impl::lease_lapsed(double fraction) const noexcept {
    return lease_->lapsed(lease_clock::now(), fraction);
}

bool session_impl::lease_too_short_to_grant(double fraction) const noexcept {
    return lease_->too_short_to_grant(lease_clock::now(), fraction);
}

bool session_impl::lease_lapsed_since(lease_ns since, double fraction) const noexcept {
    return lease_->lapsed_since(since, lease_clock::now(), fraction);
}

lease_ns session_impl::lease_handover_at() const noexcept { return lease_->earliest_expiry(); }

std::uint64_t session_impl::lease_register(double fraction, std::string node, std::function<void()> on_gone) {
    const bool first = held_.empty();
    lease_fractions_.insert(fraction);
    lease_->set_watch_fraction(*lease_fractions_.begin());
    const auto id = next_id_++;
    held_.emplace(id, held_node{fraction, std::move(node), std::move(on_gone)});
    // The first lock: heartbeats from now on, the first one when a steady one would be due (at
    // once if that has passed): its reply then comes while the lease still runs whenever the
    // steady state's would (session_lease::first_heartbeat_at).
    if (first && state() == session_state::connected && lease_->timeout() > 0) {
        const lease_ns now = lease_clock::now();
        const lease_ns at = lease_->first_heartbeat_at(now, lease_->last_commit_send());
        if (at <= now) arm_heartbeat(true, true);
        else schedule_heartbeat(at);
    }
    arm_lease_timer();
    return id;
}

void session_impl::lease_unregister(std::uint64_t id) {
    auto h = held_.find(id);
    if (h == held_.end()) return;
    auto it = lease_fractions_.find(h->second.fraction);
    if (it != lease_fractions_.end()) lease_fractions_.erase(it);
    held_.erase(h);
    lease_->set_watch_fraction(lease_fractions_.empty() ? 0 : *lease_fractions_.begin());
}

void session_impl::renew_lease(zk_handler h) {
    // A multi holding one check of "/": a write, so the leader proposes it and a quorum logs it
    // before the reply (a sync would be answered by a leader cut off from its quorum).
    multi(transaction{}.check("/", -1).ops(), std::move(h), n_renewal);
}

std::uint64_t session_impl::on_lease_lapse(double fraction, std::function<void()> fn) {
    if (state() == session_state::closed || state() == session_state::expired) {
        fn();
        return 0;
    }
    auto id = next_id_++;
    lapse_waiters_.emplace(id, std::make_pair(fraction, std::move(fn)));
    arm_lease_timer();
    return id;
}

void session_impl::cancel_lease_lapse(std::uint64_t id) { lapse_waiters_.erase(id); }

void session_impl::fire_lapse_waiters(bool all) {
    for (auto it = lapse_waiters_.begin(); it != lapse_waiters_.end();) {
        if (all || lease_lapsed(it->second.first)) {
            auto fn = std::move(it->second.second);
            it = lapse_waiters_.erase(it);
            fn();
        } else {
            ++it;
        }
    }
}

void session_impl::arm_lease_timer() {
    // The earliest deadline in use: the smallest fraction's (lapse waiters included).
    std::optional<double> f;
    if (!lease_fractions_.empty()) f = *lease_fractions_.begin();
    for (auto& [id, w] : lapse_waiters_) f = f ? std::min(*f, w.first) : w.first;
    if (!f) {
        lease_timer_.cancel();
        return;
    }
    // One nanosecond past the deadline is "lapsed"; never spin on a deadline already gone. The
    // timer counts CLOCK_BOOTTIME, like the deadline: a suspend does not hold it back.
    const lease_ns now = lease_clock::now();
    lease_ns at = std::max(session_lease::deadline(lease_->vouched(), lease_->timeout(), *f) + 1, now + 1'000'000);
    at += static_cast<lease_ns>(faults.lease_timer_late_ms.load(std::memory_order_relaxed)) * 1'000'000;
    if (lease_timer_.expiry() > now && std::abs(lease_timer_.expiry() - at) < 100'000) return;
    lease_timer_.expires_at(at);
    lease_timer_.async_wait([w = weak_from_this()](error_code ec) {
        if (ec) return;
        if (auto s = w.lock()) s->on_lease_timer();
    });
}

void session_impl::check_lease() { on_lease_timer(); }

void session_impl::on_lease_timer() {
    if (state() == session_state::closed) return;
    notify(session_event::lease_check); // lease locks whose lease lapsed report their loss
    fire_lapse_waiters(false);
    arm_lease_timer();
}

void session_impl::arm_heartbeat(bool now, bool restart) {
    const lease_ns t = lease_->timeout();
    if (t <= 0 || state() == session_state::closed) return;
    if (now && state() == session_state::connected) send_heartbeat();
    if (heartbeat_armed_ && !now && !restart) return;
    // Holding: every period. Holding nothing: a touch a period after the last send, whatever it
    // was, so that the session's sends stay at most a period apart (session_lease::next_touch_at);
    // and while a write is in flight (an acquire's create, a renewal: a grant may come at its
    // reply), a heartbeat a period after the last write (session_lease::next_heartbeat_at).
    const lease_ns now_t = lease_clock::now();
    if (!held_.empty()) return schedule_heartbeat(now_t + session_lease::heartbeat_interval(t));
    lease_ns at = session_lease::next_touch_at(lease_->last_send(), now_t, t);
    if (handle_ && handle_->write_in_flight())
        at = std::min(at, session_lease::next_heartbeat_at(lease_->last_commit_send(), now_t, t));
    schedule_heartbeat(at);
}

void session_impl::schedule_heartbeat(lease_ns at) {
    heartbeat_armed_ = true;
    heartbeat_timer_.expires_at(at);
    heartbeat_timer_.async_wait([w = weak_from_this()](error_code ec) {
        if (ec) return;
        auto s = w.lock();
        if (!s) return;
        s->heartbeat_armed_ = false;
        // (not connected: the next connection's event re-arms it)
        if (s->state() == session_state::connected) s->arm_heartbeat(true);
    });
}

void session_impl::send_heartbeat() {
    if (!handle_ || heartbeats_in_flight_ >= 8) return;
    auto w = weak_from_this();
    if (held_.empty() && handle_->write_in_flight() &&
        lease_clock::now() - lease_->last_commit_send() >= session_lease::heartbeat_interval(lease_->timeout())) {
        // Nothing held, but a write has been in flight for a period (a slow reply to an acquire's
        // create or renewal, at which a grant may come): a heartbeat, as if a lock were held, so
        // that the lease does not wait a round trip after that grant for its next commit
        // (docs/lease.md, "Liveness"). A multi holding one check of "/", as renew_lease sends.
        ++heartbeats_in_flight_;
        multi(transaction{}.check("/", -1).ops(), zk_handler([w](zk_result) {
            if (auto s = w.lock()) --s->heartbeats_in_flight_;
        }), n_heartbeat);
        return;
    }
    if (held_.empty()) {
        // Nothing held: a touch, only when nothing else was sent for a period, so that the
        // session's sends stay at most a period apart (session_lease::next_touch_at): a later
        // grant's commit then finds evidence (b) as a heartbeat does. A read: the server the
        // session is connected to answers it, and the C client sends no pings of its own while
        // these go (the C client's pings, every T/3, are too sparse and cannot be seen).
        if (!session_lease::touch_due(lease_->last_send(), lease_clock::now(), lease_->timeout())) return;
        ++heartbeats_in_flight_;
        zk_handler h([w](zk_result) {
            if (auto s = w.lock()) --s->heartbeats_in_flight_;
        });
        submit(h, [](zhandle_t* zh, c_op* op) -> int { return zoo_aexists(zh, "/", 0, on_stat, op); }, n_touch);
        return;
    }
    // A lock is held: a multi that checks every held node. It is a write: the leader proposes
    // it and a quorum logs it before the reply, so only a leader that still leads with a quorum
    // answers it (a deposed or isolated one cannot); and a check that fails names a node that
    // is gone.
    transaction checks;
    std::vector<std::string> nodes;
    for (auto& [id, n] : held_)
        if (std::find(nodes.begin(), nodes.end(), n.node) == nodes.end()) nodes.push_back(n.node);
    for (auto& n : nodes) checks.check(n, -1);
    ++heartbeats_in_flight_;
    multi(checks.ops(), zk_handler([w, nodes = std::move(nodes)](zk_result r) {
        auto s = w.lock();
        if (!s) return;
        --s->heartbeats_in_flight_;
        if (r.rc != ZNONODE) return;
        bool gone = false;
        for (std::size_t i = 0; i < r.multi.size() && i < nodes.size(); ++i) {
            if (r.multi[i].rc != ZNONODE) continue;
            // (the holders' on_gone unregister them: collect first)
            std::vector<std::function<void()>> fns;
            for (auto& [id, n] : s->held_)
                if (n.node == nodes[i]) fns.push_back(n.on_gone);
            for (auto& fn : fns) fn();
            gone = true;
        }
        if (gone && !s->held_.empty()) s->send_heartbeat(); // the others' lease, at once
    }), n_heartbeat);
}

// ---------------------------------------------------------------- requests
template <class F>
void session_impl::submit(zk_handler& h, F&& call, std::atomic<std::uint64_t>& counter) {
    auto* op = new c_op;
    op->h.emplace(std::move(h));
    op->heartbeat = &counter == &n_heartbeat;
    counter.fetch_add(1, std::memory_order_relaxed);
    int rc = handle_ ? handle_->submit(op, true, std::forward<F>(call)) : ZINVALIDSTATE;
    if (rc != ZOK) {
        // A call refused synchronously never runs its completion: complete it ourselves, posted.
        op->res.rc = rc;
        post_result(strand_, op);
    }
}

namespace {
/// A zklock::acl as the C client's ACL_vector; the strings stay in the acl object, which
/// outlives the call (the C client serialises the request before returning).
class c_acl {
public:
    explicit c_acl(const std::shared_ptr<const acl>& a) {
        if (a) init(*a);
    }
    explicit c_acl(const acl& a) { init(a); }
    c_acl(const c_acl&) = delete;
    c_acl& operator=(const c_acl&) = delete;
    ACL_vector* get() noexcept { return vec_; }

private:
    void init(const acl& a) {
        if (a.is_open()) return;
        for (auto& e : a.entries())
            entries_.push_back(ACL{e.perms, Id{const_cast<char*>(e.scheme.c_str()), const_cast<char*>(e.id.c_str())}});
        own_.count = static_cast<std::int32_t>(entries_.size());
        own_.data = entries_.data();
        vec_ = &own_;
    }

    std::vector<ACL> entries_;
    ACL_vector own_{};
    ACL_vector* vec_ = &ZOO_OPEN_ACL_UNSAFE;
};
} // namespace

void session_impl::create(const std::string& path, const std::string& data, int flags, zk_handler h,
                          const std::shared_ptr<const acl>& a) {
    c_acl acl_vec(a);
    submit(h, [&](zhandle_t* zh, c_op* op) -> int {
        op->renews = vouch::commit;
        return zoo_acreate2(zh, path.c_str(), data.data(), static_cast<int>(data.size()), acl_vec.get(),
                            flags, on_string_stat, op);
    }, n_create);
}

void session_impl::create_and_list(const std::string& path, const std::string& data, int flags,
                                   const std::string& parent, zk_handler h, const std::shared_ptr<const acl>& a) {
    c_acl acl_vec(a);
    if (fault_injection::take(faults.drop_creates)) {
        // Injected fault (faults.drop_creates): the request "never reached the server"; the
        // caller sees a connection loss.
        auto* lost = new c_op;
        lost->h.emplace(std::move(h));
        lost->res.rc = ZCONNECTIONLOSS;
        lost->res.list_rc = ZCONNECTIONLOSS;
        return post_result(strand_, lost);
    }
    auto* op = new c_op;
    if (faults.lose_create_replies.load(std::memory_order_relaxed) > 0 ||
        faults.lose_list_replies.load(std::memory_order_relaxed) > 0) {
        // (Boost 1.81: an any_completion_handler must not be assigned to; wrap into the op.)
        op->h.emplace([this, h = std::move(h)](zk_result r) mutable {
            if (r.rc == ZOK && fault_injection::take(faults.lose_create_replies)) {
                r.rc = ZCONNECTIONLOSS;
                r.list_rc = ZCONNECTIONLOSS;
            } else if (r.rc == ZOK && fault_injection::take(faults.lose_list_replies)) {
                r.list_rc = ZCONNECTIONLOSS;
                r.children.clear();
                r.cversion.reset();
            }
            std::move(h)(std::move(r));
        });
    } else {
        op->h.emplace(std::move(h));
    }
    op->remaining = 2;
    op->pipelined = true;
    op->renews = vouch::commit; // (the create's reply; the listing's renews nothing)
    n_create.fetch_add(1, std::memory_order_relaxed);
    n_children.fetch_add(1, std::memory_order_relaxed);
    bool finish_here = false;
    int rc = !handle_ ? ZINVALIDSTATE : handle_->submit(op, true, [&](zhandle_t* zh, c_op* op) -> int {
        int rc = zoo_acreate2(zh, path.c_str(), data.data(), static_cast<int>(data.size()), acl_vec.get(),
                              flags, on_string_stat, op);
        if (rc != ZOK) return rc;
        int rc2 = zoo_aget_children2(zh, parent.c_str(), 0, on_strings, op);
        if (rc2 != ZOK) {
            op->res.list_rc = rc2;
            // (The C client runs completions only inside zookeeper_process, never inside a
            // request call; counted down here all the same.)
            if (op->remaining.fetch_sub(1) == 1) finish_here = true;
        }
        return ZOK;
    });
    if (rc != ZOK) {
        op->res.rc = rc;
        op->res.list_rc = rc;
        post_result(strand_, op);
    } else if (finish_here && op->owner->take(op)) {
        post_result(strand_, op);
    }
}

void session_impl::multi(const std::vector<transaction::op>& ops, zk_handler h) { multi(ops, std::move(h), n_multi); }

void session_impl::multi(const std::vector<transaction::op>& ops, zk_handler h, std::atomic<std::uint64_t>& counter) {
    auto b = std::make_unique<multi_buffers>();
    b->ops.resize(ops.size());
    b->results.resize(ops.size());
    b->paths.resize(ops.size());
    b->stats.resize(ops.size());
    for (auto& r : b->results) r.err = 1; // (not a ZooKeeper code: "not filled in")
    std::vector<std::unique_ptr<c_acl>> acls; // (until the C client has serialised the request)
    for (std::size_t i = 0; i < ops.size(); ++i) {
        const auto& o = ops[i];
        auto* z = &b->ops[i];
        switch (o.what) {
        case transaction::kind::create: {
            int flags = 0;
            if (o.mode == create_mode::ephemeral || o.mode == create_mode::ephemeral_sequential) flags |= ZOO_EPHEMERAL;
            if (o.mode == create_mode::persistent_sequential || o.mode == create_mode::ephemeral_sequential)
                flags |= ZOO_SEQUENCE;
            b->paths[i].resize(o.path.size() + 16);
            acls.push_back(std::make_unique<c_acl>(o.node_acl));
            zoo_create_op_init(z, o.path.c_str(), o.data.data(), static_cast<int>(o.data.size()), acls.back()->get(),
                               flags, b->paths[i].data(), static_cast<int>(b->paths[i].size()));
            break;
        }
        case transaction::kind::set_data:
            zoo_set_op_init(z, o.path.c_str(), o.data.data(), static_cast<int>(o.data.size()), o.version, &b->stats[i]);
            break;
        case transaction::kind::remove: zoo_delete_op_init(z, o.path.c_str(), o.version); break;
        case transaction::kind::check: zoo_check_op_init(z, o.path.c_str(), o.version); break;
        }
    }
    // (the C client serialises the operations before returning: `ops` need not outlive the call)
    submit(h, [&](zhandle_t* zh, c_op* op) -> int {
        op->renews = vouch::commit;
        op->multi = std::move(b);
        return zoo_amulti(zh, static_cast<int>(op->multi->ops.size()), op->multi->ops.data(),
                          op->multi->results.data(), on_multi, op);
    }, counter);
}

void session_impl::get_children(const std::string& path, zk_handler h, std::uint64_t watch_id) {
    note_watch_path(watch_id, path, true);
    submit(h, [&](zhandle_t* zh, c_op* op) -> int {
        if (watch_id == 0) return zoo_aget_children2(zh, path.c_str(), 0, on_strings, op);
        return zoo_awget_children2(zh, path.c_str(), node_watcher,
                                  reinterpret_cast<void*>(static_cast<std::uintptr_t>(watch_id)), on_strings, op);
    }, n_children);
}

void session_impl::get_data(const std::string& path, std::uint64_t watch_id, zk_handler h) {
    note_watch_path(watch_id, path, false);
    submit(h, [&](zhandle_t* zh, c_op* op) -> int {
        return zoo_awget(zh, path.c_str(), watch_id ? node_watcher : nullptr,
                         reinterpret_cast<void*>(static_cast<std::uintptr_t>(watch_id)), on_data, op);
    }, n_get);
}

void session_impl::note_watch_path(std::uint64_t watch_id, const std::string& path, bool child) {
    if (watch_id == 0) return;
    auto it = watches_.find(watch_id);
    if (it == watches_.end()) return;
    it->second.path = path;
    it->second.child = child;
}

void session_impl::exists(const std::string& path, zk_handler h) {
    submit(h, [&](zhandle_t* zh, c_op* op) -> int { return zoo_aexists(zh, path.c_str(), 0, on_stat, op); }, n_exists);
}

void session_impl::remove(const std::string& path, int version, zk_handler h) {
    submit(h, [&](zhandle_t* zh, c_op* op) -> int {
        op->renews = vouch::commit;
        return zoo_adelete(zh, path.c_str(), version, on_void, op);
    }, n_delete);
}

void session_impl::set_data(const std::string& path, const std::string& data, int version, zk_handler h) {
    submit(h, [&](zhandle_t* zh, c_op* op) -> int {
        op->renews = vouch::commit;
        return zoo_aset(zh, path.c_str(), data.data(), static_cast<int>(data.size()), version, on_stat, op);
    }, n_set);
}

// ---------------------------------------------------------------- guaranteed deletes
void session_impl::delete_in_background(std::string node, std::optional<pending<void(error_code)>> done,
                                        std::int64_t owner_czxid) {
    if (state() == session_state::closed || state() == session_state::expired || refused_) {
        if (done) done->complete({}); // the server deletes the session's ephemeral nodes
        return;
    }
    cleanup_job job;
    job.node = std::move(node);
    job.owner_czxid = owner_czxid;
    if (done) job.waiters.push_back(std::move(*done));
    cleanups_.push_back(std::move(job));
    cleanup_gauges();
    if (state() == session_state::connected) run_cleanup(std::prev(cleanups_.end()));
}

void session_impl::delete_by_guid_in_background(std::string parent, std::string guid) {
    if (state() == session_state::closed || state() == session_state::expired || refused_) return;
    cleanup_job job;
    job.parent = std::move(parent);
    job.guid = std::move(guid);
    cleanups_.push_back(std::move(job));
    cleanup_gauges();
    if (state() == session_state::connected) run_cleanup(std::prev(cleanups_.end()));
}

void session_impl::run_cleanups() {
    for (auto it = cleanups_.begin(); it != cleanups_.end(); ++it)
        if (!it->running) run_cleanup(it);
}

void session_impl::finish_cleanup(std::list<cleanup_job>::iterator it, error_code ec) {
    if (it->backoff) it->backoff->cancel();
    for (auto& w : it->waiters) w.complete(ec);
    cleanups_.erase(it);
    cleanup_gauges();
}

void session_impl::finish_all_cleanups() {
    ++cleanup_epoch_; // replies to the jobs' requests still in flight must not touch them
    while (!cleanups_.empty()) finish_cleanup(cleanups_.begin(), {});
}

bool session_impl::cleanup_alive(std::uint64_t gen, std::uint64_t epoch) const noexcept {
    // finish_all_cleanups() ran if the session ended, was renewed, or its credentials were
    // refused since the job started: then the job is gone
    return generation() == gen && cleanup_epoch_ == epoch && state() != session_state::closed && state() != session_state::expired;
}

template <class F>
void session_impl::cleanup_request(F&& send, zk_handler h) {
    if (fault_injection::take(faults.cleanup_errors)) { // injected: the request fails unsent
        auto* op = new c_op;
        op->h.emplace(std::move(h));
        op->res.rc = faults.cleanup_error_rc.load(std::memory_order_relaxed);
        return post_result(strand_, op);
    }
    std::forward<F>(send)(std::move(h));
}

void session_impl::retry_cleanup(std::list<cleanup_job>::iterator it, int rc) {
    it->running = false;
    ++it->failures;
    n_cleanup_retries.fetch_add(1, std::memory_order_relaxed);
    if (state() != session_state::connected && (rc == ZCONNECTIONLOSS || rc == ZOPERATIONTIMEOUT))
        return; // run_cleanups retries it on the reconnect
    // Connected, or an error the connection does not explain (ZMARSHALLINGERROR, ZNOAUTH, ...):
    // again after 50 ms, doubling up to 5 s, until the node is gone or the session ends.
    const auto wait = std::chrono::milliseconds(50) * (1 << std::min(it->failures - 1, 7));
    it->running = true; // (not run_cleanups' to start meanwhile)
    it->backoff = std::make_shared<asio::steady_timer>(strand_, std::min<std::chrono::milliseconds>(wait, std::chrono::seconds(5)));
    it->backoff->async_wait([w = weak_from_this(), gen = generation(), ep = cleanup_epoch_, it](error_code ec) {
        auto s = w.lock();
        if (ec || !s || !s->cleanup_alive(gen, ep)) return;
        it->running = false;
        if (s->state() == session_state::connected) s->run_cleanup(it); // else on the reconnect
    });
}

void session_impl::run_cleanup(std::list<cleanup_job>::iterator it) {
    // The job is named by its iterator: it stays valid until finish_cleanup erases it, which
    // happens on the strand after the job's own reply, or in finish_all_cleanups when the
    // session ends or is renewed (then cleanup_alive() is false when the reply arrives).
    it->running = true;
    auto gen = generation();
    auto ep = cleanup_epoch_;
    auto w = weak_from_this();
    if (!it->node.empty() && it->owner_czxid != 0) {
        // A fixed name: check that the node is still ours (an admin may have broken it and
        // someone else created it again), then delete exactly that version of it.
        cleanup_request([&](zk_handler h) { exists(it->node, std::move(h)); }, zk_handler([w, gen, ep, it](zk_result r) {
            auto s = w.lock();
            if (!s || !s->cleanup_alive(gen, ep)) return;
            if (r.rc == ZNONODE || (r.rc == ZOK && r.stat.czxid != it->owner_czxid)) return s->finish_cleanup(it, {}); // gone, or not ours
            if (r.rc == ZCLOSING || r.rc == ZINVALIDSTATE || r.rc == ZSESSIONEXPIRED || r.rc == ZAUTHFAILED) return s->finish_cleanup(it, {});
            if (r.rc != ZOK) return s->retry_cleanup(it, r.rc);
            s->cleanup_request([&](zk_handler h) { s->remove(it->node, r.stat.version, std::move(h)); },
                               zk_handler([w, gen, ep, it](zk_result r2) {
                auto s = w.lock();
                if (!s || !s->cleanup_alive(gen, ep)) return;
                if (r2.rc == ZBADVERSION) return s->run_cleanup(it); // its data changed: look again
                if (r2.rc == ZOK || r2.rc == ZNONODE) return s->finish_cleanup(it, {});
                if (r2.rc == ZCLOSING || r2.rc == ZINVALIDSTATE || r2.rc == ZSESSIONEXPIRED || r2.rc == ZAUTHFAILED)
                    return s->finish_cleanup(it, {}); // the handle is gone: so is the session's node
                s->retry_cleanup(it, r2.rc);
            }));
        }));
        return;
    }
    if (!it->node.empty()) {
        cleanup_request([&](zk_handler h) { remove(it->node, -1, std::move(h)); }, zk_handler([w, gen, ep, it](zk_result r) {
            auto s = w.lock();
            if (!s || !s->cleanup_alive(gen, ep)) return;
            if (r.rc == ZOK || r.rc == ZNONODE || r.rc == ZCLOSING || r.rc == ZINVALIDSTATE ||
                r.rc == ZSESSIONEXPIRED || r.rc == ZAUTHFAILED) // (a dead handle: the node goes with its session)
                return s->finish_cleanup(it, {});
            // Anything else, the node may still be there: never give up while the session lives
            // (connection loss waits for the reconnect; other errors retry with a back-off).
            s->retry_cleanup(it, r.rc);
        }));
        return;
    }
    cleanup_request([&](zk_handler h) { get_children(it->parent, std::move(h)); }, zk_handler([w, gen, ep, it](zk_result r) {
        auto s = w.lock();
        if (!s || !s->cleanup_alive(gen, ep)) return;
        if (r.rc == ZCLOSING || r.rc == ZINVALIDSTATE || r.rc == ZSESSIONEXPIRED || r.rc == ZAUTHFAILED) return s->finish_cleanup(it, {});
        if (r.rc != ZOK && r.rc != ZNONODE) return s->retry_cleanup(it, r.rc);
        std::optional<std::string> found;
        if (r.rc == ZOK) found = find_by_guid(r.children, it->guid);
        if (!found) return s->finish_cleanup(it, {}); // never created, or the parent is gone
        it->node = it->parent + "/" + *found;
        s->run_cleanup(it);
    }));
}

} // namespace zklock::detail

namespace zklock {

void set_log_handler(std::function<void(std::string_view)> handler) {
    std::unique_lock lk(detail::g_log_mu);
    detail::g_log = std::move(handler);
}

} // namespace zklock
