// The TLS relay (see bridge/tls_relay.hpp).
#include "bridge/tls_relay.hpp"

#include <boost/asio/bind_executor.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/write.hpp>

#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include <fcntl.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <map>
#include <mutex>
#include <set>

namespace zklock::detail {

namespace ssl = asio::ssl;
using asio::ip::tcp;

namespace {

/// Loopback port of a listener -> its server's name, for the C client's log lines.
std::mutex g_names_mu;
std::map<unsigned short, std::pair<const void*, std::string>> g_names; // (owner: the relay)
std::atomic<bool> g_any_names{false};

bool is_ip(std::string_view host) {
    error_code ec;
    (void)asio::ip::make_address(std::string(host), ec);
    return !ec;
}

/// A TCP socket for `protocol`, close-on-exec from its creation. Asio's open() makes it without
/// SOCK_CLOEXEC: a fork+exec on another thread before a later fcntl would hand a child process
/// the relay's connections (no reset, no EOF would reach the other side) or its listeners.
template <class Socket>
void open_cloexec(Socket& sock, const tcp& protocol, error_code& ec) {
    const int fd = ::socket(protocol.family(), SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0) {
        ec.assign(errno, asio::error::get_system_category());
        return;
    }
    sock.assign(protocol, fd, ec);
    if (ec) ::close(fd);
}

/// Resets `fd` (RST, not FIN: a graceful close would read as an EOF) and closes it.
void reset_close(int fd) {
    linger l{1, 0};
    ::setsockopt(fd, SOL_SOCKET, SO_LINGER, &l, sizeof l);
    ::close(fd);
}

/// TLS 1.2's suites: forward secrecy (ECDHE, DHE) and AEAD (AES-GCM, ChaCha20-Poly1305) only;
/// no RSA key exchange, CBC or SHA-1 MACs. TLS 1.3's are OpenSSL's defaults (all of them AEAD
/// with forward secrecy).
constexpr const char* tls12_ciphers = "ECDHE+AESGCM:ECDHE+CHACHA20:DHE+AESGCM:DHE+CHACHA20:!aNULL";

void cleanse(std::string& secret) {
    if (!secret.empty()) OPENSSL_cleanse(secret.data(), secret.size());
    secret.clear();
    secret.shrink_to_fit();
}

std::string openssl_words(const error_code& ec) {
    auto m = ec.message();
    return m.empty() ? "error " + std::to_string(ec.value()) : m;
}

} // namespace

std::string tls_target::name() const {
    return (host.find(':') != std::string::npos ? "[" + host + "]" : host) + ":" + std::to_string(port);
}

// ---------------------------------------------------------------------------------------------

struct tls_relay::impl_state {
    ssl::context ctx{ssl::context::tls_client};
    tls_options opts;
    bool sends_certificate = false;
    ~impl_state() { // (a make() that failed half-way)
        cleanse(opts.private_key_password);
        cleanse(opts.private_key_pem);
    }
};

// ---------------------------------------------------------------------------------------------

void client_socket_slot::begin(const void* owner) {
    std::lock_guard lk(mu_);
    owner_ = owner;
    opening_ = true;
    local_.reset();
}

void client_socket_slot::end(const void* owner, std::optional<endpoints> now, bool known,
                             std::optional<tcp::endpoint> local) {
    std::lock_guard lk(mu_);
    if (owner_ != owner) return;
    now_ = now;
    opening_ = !known;
    local_ = local;
}

void client_socket_slot::clear(const void* owner) {
    std::lock_guard lk(mu_);
    if (owner_ != owner) return;
    owner_ = nullptr;
    now_.reset();
    opening_ = false;
    local_.reset();
}

client_socket_slot::verdict client_socket_slot::check(const tcp::endpoint& peer,
                                                      const tcp::endpoint& here) const {
    std::lock_guard lk(mu_);
    if (now_ && now_->first == peer && now_->second == here) return verdict::match;
    // (while a socket is being made: a connection from any other address than its own is a
    // stranger's, once that address is known)
    if (!opening_ || (local_ && *local_ != peer)) return verdict::stranger;
    return verdict::unsure;
}

std::optional<client_socket_slot::endpoints> client_socket_slot::current() const {
    std::lock_guard lk(mu_);
    return now_;
}

// ---------------------------------------------------------------------------------------------

struct tls_relay::listener {
    explicit listener(const strand_type& s) : acceptor(s) {}
    /// The acceptor is waited on and accepted from off the strand (a stranger's connection is
    /// refused there), and closed on it: this orders the two.
    std::mutex mu;
    tls_target target;
    std::string name; // target.name()
    tcp::acceptor acceptor;
    unsigned short port = 0;
    std::optional<tls_failure> failure; // since new_attempt: the last attempt's, if definitive
    std::optional<tls_failure> last;    // since new_attempt: the last attempt's failure
    std::string outcome;                // the last connection's, since new_attempt
    bool closed = false;
};

/// One relayed connection: the C client's socket (local) and the TLS stream to the server.
class tls_relay::link : public std::enable_shared_from_this<link> {
public:
    link(strand_type strand, std::shared_ptr<impl_state> st, tcp::socket local, std::shared_ptr<listener> l,
         std::weak_ptr<tls_relay> relay, std::pair<tcp::endpoint, tcp::endpoint> peer)
        : strand_(strand), st_(std::move(st)), local_(std::move(local)), remote_(strand, st_->ctx),
          timer_(strand), l_(std::move(l)), relay_(std::move(relay)), peer_(peer) {}

    void start(std::chrono::milliseconds handshake, std::chrono::milliseconds flush,
               std::chrono::milliseconds stall) {
        flush_ = flush;
        handshake_ = handshake;
        stall_ = stall;
        error_code ig;
        local_.set_option(tcp::no_delay(true), ig);
        timer_.expires_after(handshake);
        timer_.async_wait([self = shared_from_this()](error_code ec) {
            if (!ec) self->on_deadline();
        });
        tcp::endpoint server(asio::ip::make_address(l_->target.address, ig), l_->target.port);
        open_cloexec(remote_.next_layer(), server.protocol(), ig);
        remote_.next_layer().async_connect(
            server, [self = shared_from_this()](error_code ec) { self->on_connected(ec); });
    }

    ~link() {
        if (auto r = relay_.lock()) r->claimed_.erase(peer_);
    }

private:
    enum class phase { handshake, relaying, flushing, done };

    const std::string& verify_name() const {
        return st_->opts.server_name.empty() ? l_->target.host : st_->opts.server_name;
    }

    /// A write to the server begins: it must end within stall_ (the timer is free while relaying).
    void arm_stall_timer() {
        writing_ = true;
        write_started_ = std::chrono::steady_clock::now();
        if (!stall_armed_ && phase_ == phase::relaying) stall_check_at(write_started_ + stall_);
    }
    void stall_check_at(std::chrono::steady_clock::time_point at) {
        stall_armed_ = true;
        timer_.expires_at(at);
        timer_.async_wait([self = shared_from_this()](error_code ec) {
            self->stall_armed_ = false;
            if (ec || self->phase_ != phase::relaying || !self->writing_) return;
            const auto due = self->write_started_ + self->stall_;
            if (std::chrono::steady_clock::now() >= due) return self->finish(true); // stalled: reset
            self->stall_check_at(due); // (a later write than the one the timer was armed for)
        });
    }

    void on_deadline() {
        if (phase_ == phase::handshake) {
            timed_out_ = true;
            error_code ig;
            remote_.next_layer().close(ig); // the connect or handshake ends with operation_aborted
        } else if (phase_ == phase::flushing) {
            finish(false);
        }
    }

    void on_connected(error_code ec) {
        if (phase_ != phase::handshake) return;
        if (timed_out_ || ec) return fail(ec);
        error_code ig;
        remote_.next_layer().set_option(tcp::no_delay(true), ig);
        SSL* s = remote_.native_handle();
        const std::string& name = verify_name();
        const bool ip = is_ip(name);
        if (!ip) SSL_set_tlsext_host_name(s, name.c_str()); // SNI (not for addresses: RFC 6066)
        // The subject alternative names only (RFC 6125: a CN is not checked, as the docs say), and
        // a wildcard only as a whole left-most label ("*.example", not "z*.example").
        SSL_set_hostflags(s, X509_CHECK_FLAG_NEVER_CHECK_SUBJECT | X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS);
        if (st_->opts.verify_server_name &&
            (ip ? X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(s), name.c_str())
                : SSL_set1_host(s, name.c_str())) != 1) {
            // (an address OpenSSL cannot check, such as an IPv6 one with a scope: refuse rather
            // than accept any certificate)
            tls_failure f;
            f.ec = errc::tls_handshake_failed;
            f.detail = "TLS: cannot check the server's certificate against the name " + name +
                       " (set tls_options::server_name to a name its certificate carries)";
            f.definitive = true;
            report(f);
            reset_local();
            close_remote();
            mark_done();
            timer_.cancel();
            return;
        }
        remote_.async_handshake(ssl::stream_base::client,
                                [self = shared_from_this()](error_code ec) { self->on_handshake(ec); });
    }

    void on_handshake(error_code ec) {
        if (phase_ != phase::handshake) return;
        if (timed_out_ || ec) return fail(ec);
        phase_ = phase::relaying;
        timer_.cancel();
        read_local();
        read_remote();
    }

    /// The connection could not be made: the C client sees a reset at once, and tries its next
    /// server; the relay and the session hear why.
    void fail(error_code ec) {
        tls_failure f;
        if (timed_out_) {
            f.ec = asio::error::timed_out;
            f.detail = "timed out (no TLS connection within " + std::to_string(handshake_.count()) + " ms)";
        } else {
            f = classify_tls_failure(ec, SSL_get_verify_result(remote_.native_handle()),
                                     st_->sends_certificate, verify_name());
        }
        report(f);
        reset_local();
        close_remote();
        mark_done();
        timer_.cancel();
    }

    void report(const tls_failure& f) {
        l_->outcome = f.detail;
        l_->last = f;
        if (f.definitive)
            l_->failure = f;
        else
            l_->failure.reset(); // (the last attempt is what counts)
        if (auto r = relay_.lock(); r && r->on_failure) r->on_failure(l_->name, f);
    }

    void read_local() {
        local_.async_read_some(asio::buffer(up_), [self = shared_from_this()](error_code ec, std::size_t n) {
            if (self->phase_ == phase::done) return;
            if (ec == asio::error::eof) return self->local_closed();
            if (ec) return self->finish(true); // the C client reset its connection: so do we
            // A server that stops reading (frozen, its window full) must not hold the connection
            // forever: while this write waits, the C client's close is not seen.
            self->arm_stall_timer();
            asio::async_write(self->remote_, asio::buffer(self->up_, n), [self](error_code ec, std::size_t) {
                if (self->phase_ == phase::done) return;
                self->writing_ = false;
                if (ec) return self->remote_failed(ec);
                self->read_local();
            });
        });
    }

    void read_remote() {
        remote_.async_read_some(asio::buffer(down_), [self = shared_from_this()](error_code ec,
                                                                                 std::size_t n) {
            if (self->phase_ == phase::done) return;
            if (ec) return self->remote_failed(ec);
            if (!self->answered_) {
                self->answered_ = true;
                self->l_->outcome = "connected";
                self->l_->failure.reset();
            }
            asio::async_write(self->local_, asio::buffer(self->down_, n), [self](error_code ec, std::size_t) {
                if (self->phase_ == phase::done) return;
                if (ec) return self->finish(true);
                self->read_remote();
            });
        });
    }

    /// The C client closed its socket (or its sending side): what it sent has gone to the server
    /// (each read waits for the previous write). The server gets a FIN after it; replies still
    /// reach the C client until the server closes, for flush_ at most.
    void local_closed() {
        if (phase_ == phase::flushing) return finish(false);
        phase_ = phase::flushing;
        error_code ig;
        remote_.next_layer().shutdown(tcp::socket::shutdown_send, ig);
        timer_.expires_after(flush_);
        timer_.async_wait([self = shared_from_this()](error_code ec) {
            if (!ec) self->on_deadline();
        });
    }

    void remote_failed(error_code ec) {
        const bool eof = ec == asio::error::eof || ec == ssl::error::stream_truncated;
        if (!answered_ && phase_ == phase::relaying) {
            // The first read after the handshake: a TLS 1.3 server refuses a client certificate
            // (or its absence) here, with an alert, after the client's side of the handshake ended.
            if (ec.category() == asio::error::get_ssl_category()) {
                report(classify_tls_failure(ec, X509_V_OK, st_->sends_certificate, verify_name()));
            } else {
                tls_failure f;
                f.ec = ec;
                f.detail = eof ? "the server closed the connection before it answered"
                               : "connection lost before the server answered (" + ec.message() + ")";
                report(f);
            }
        }
        if (eof && phase_ != phase::flushing) {
            // The server closed its side: the C client reads an EOF after what was relayed.
            error_code ig;
            local_.shutdown(tcp::socket::shutdown_send, ig);
            phase_ = phase::flushing;
            timer_.expires_after(flush_);
            timer_.async_wait([self = shared_from_this()](error_code ec) {
                if (!ec) self->on_deadline();
            });
            return;
        }
        finish(!eof); // a TLS error or a reset reaches the C client as a reset
    }

    /// The connection is over: the relay counts it out (close waits for the last).
    void mark_done() {
        if (phase_ == phase::done) return;
        phase_ = phase::done;
        if (auto r = relay_.lock()) r->link_ended();
    }

    void reset_local() {
        error_code ig;
        if (!local_.is_open()) return;
        local_.set_option(asio::socket_base::linger(true, 0), ig);
        local_.close(ig);
    }

    void close_remote() {
        error_code ig;
        remote_.next_layer().close(ig);
    }

    void finish(bool reset) {
        if (phase_ == phase::done) return;
        mark_done();
        timer_.cancel();
        error_code ig;
        if (reset)
            reset_local();
        else
            local_.close(ig);
        close_remote();
    }

    strand_type strand_;
    std::shared_ptr<impl_state> st_; // (the context outlives the stream)
    tcp::socket local_;
    ssl::stream<tcp::socket> remote_;
    asio::steady_timer timer_;
    std::shared_ptr<listener> l_;
    std::weak_ptr<tls_relay> relay_;
    std::pair<tcp::endpoint, tcp::endpoint> peer_; // (the C client's end, the listener's)
    std::chrono::milliseconds flush_{1000}, handshake_{3000}, stall_{10000};
    phase phase_ = phase::handshake;
    bool timed_out_ = false, answered_ = false;
    bool writing_ = false, stall_armed_ = false; // a write to the server is under way
    std::chrono::steady_clock::time_point write_started_{};
    std::array<char, 64 * 1024> up_{}, down_{};
};

// ---------------------------------------------------------------------------------------------

tls_relay::tls_relay(strand_type strand) : strand_(std::move(strand)) {}

tls_relay::~tls_relay() {
    std::lock_guard lk(g_names_mu);
    for (auto& l : listeners_)
        if (auto it = g_names.find(l->port); it != g_names.end() && it->second.first == this)
            g_names.erase(it);
    g_any_names = !g_names.empty();
}

std::shared_ptr<tls_relay> tls_relay::make(strand_type strand, const tls_options& o, error_code& ec,
                                           std::string& why) {
    ec = {};
    auto bad = [&](std::string w) -> std::shared_ptr<tls_relay> {
        ec = errc::tls_config_invalid;
        why = "TLS options: " + std::move(w);
        return nullptr;
    };
    if (!o.ca_file.empty() && !o.ca_pem.empty()) return bad("both ca_file and ca_pem are set: give one");
    if (o.ca_file.empty() && o.ca_pem.empty() && !o.use_system_ca_store)
        return bad("no CA to verify the servers with: set ca_file or ca_pem (or use_system_ca_store)");
    if (!o.certificate_file.empty() && !o.certificate_pem.empty())
        return bad("both certificate_file and certificate_pem are set: give one");
    if (!o.private_key_file.empty() && !o.private_key_pem.empty())
        return bad("both private_key_file and private_key_pem are set: give one");
    const bool cert = !o.certificate_file.empty() || !o.certificate_pem.empty();
    const bool key = !o.private_key_file.empty() || !o.private_key_pem.empty();
    if (cert != key)
        return bad(cert ? "a client certificate without its private key"
                        : "a private key without its certificate");
    if (o.handshake_timeout.count() < 0) return bad("handshake_timeout is negative");
    if (o.server_name.find_first_of(" ,/") != std::string::npos) return bad("server_name is not a host name");

    std::shared_ptr<tls_relay> r(new tls_relay(std::move(strand)));
    auto st = std::make_shared<impl_state>();
    st->opts = o;
    st->sends_certificate = cert;
    auto& ctx = st->ctx;
    SSL_CTX* native = ctx.native_handle();
    SSL_CTX_set_min_proto_version(native, TLS1_2_VERSION);
    SSL_CTX_set_options(native, SSL_OP_NO_RENEGOTIATION);
    if (SSL_CTX_set_cipher_list(native, tls12_ciphers) != 1)
        return bad("OpenSSL has none of the TLS 1.2 suites");
    ctx.set_verify_mode(ssl::verify_peer);
    error_code e;
    ERR_clear_error();
    if (!o.ca_file.empty() && ctx.load_verify_file(o.ca_file, e))
        return bad("cannot read the CA file " + o.ca_file + " (" + openssl_words(e) + ")");
    if (!o.ca_pem.empty() && ctx.add_certificate_authority(asio::buffer(o.ca_pem), e))
        return bad("ca_pem holds no readable certificate (" + openssl_words(e) + ")");
    if (o.use_system_ca_store && ctx.set_default_verify_paths(e))
        return bad("cannot use the system's CA store (" + openssl_words(e) + ")");
    if (cert) {
        // Always a callback: without one, OpenSSL asks for an encrypted key's password on the
        // terminal, blocking the thread (the io_context).
        // (It reads the relay's copy, cleansed once the key is loaded: the context asks no more.)
        ctx.set_password_callback([pw = &st->opts.private_key_password](
                                      std::size_t, ssl::context::password_purpose) { return *pw; });
        if (!o.certificate_file.empty() && ctx.use_certificate_chain_file(o.certificate_file, e))
            return bad("cannot read the certificate file " + o.certificate_file + " (" + openssl_words(e) +
                       ")");
        if (!o.certificate_pem.empty() && ctx.use_certificate_chain(asio::buffer(o.certificate_pem), e))
            return bad("certificate_pem holds no readable certificate (" + openssl_words(e) + ")");
        auto key_problem = [&](const std::string& what) {
            if (ERR_GET_LIB(static_cast<unsigned long>(e.value())) == ERR_LIB_X509 &&
                ERR_GET_REASON(static_cast<unsigned long>(e.value())) == X509_R_KEY_VALUES_MISMATCH)
                return bad("the private key " + what + " does not belong to the certificate");
            return bad("cannot read the private key " + what + " (" + openssl_words(e) +
                       (o.private_key_password.empty() ? "; if it is encrypted, set private_key_password)"
                                                       : "; a wrong private_key_password?)"));
        };
        if (!o.private_key_file.empty() && ctx.use_private_key_file(o.private_key_file, ssl::context::pem, e))
            return key_problem("file " + o.private_key_file);
        if (!o.private_key_pem.empty() &&
            ctx.use_private_key(asio::buffer(o.private_key_pem), ssl::context::pem, e))
            return key_problem("of private_key_pem");
        if (SSL_CTX_check_private_key(native) != 1)
            return bad("the private key does not belong to the certificate");
    }
    // The context holds the key now: the relay's copy of the secrets goes (the password, the key's
    // PEM text), wiped, not just freed. (The application's tls_options are its own.)
    cleanse(st->opts.private_key_password);
    cleanse(st->opts.private_key_pem);
    r->st_ = std::move(st);
    return r;
}

std::string tls_relay::listen(const std::vector<tls_target>& targets, error_code& ec) {
    ec = {};
    std::vector<std::shared_ptr<listener>> now;
    std::string connect;
    for (const auto& t : targets) {
        std::shared_ptr<listener> l;
        for (auto& x : listeners_)
            if (x->target == t) l = x;
        if (!l) {
            l = std::make_shared<listener>(strand_);
            l->target = t;
            l->name = t.name();
            tcp::endpoint loop(asio::ip::address_v4::loopback(), 0);
            open_cloexec(l->acceptor, loop.protocol(), ec);
            if (!ec) l->acceptor.bind(loop, ec);
            if (!ec) l->acceptor.listen(asio::socket_base::max_listen_connections, ec);
            if (!ec) l->port = l->acceptor.local_endpoint(ec).port();
            if (ec) {
                close_listener(*l);
                return {};
            }
            {
                std::lock_guard lk(g_names_mu);
                g_names[l->port] = {this, l->name};
                g_any_names = true;
            }
            listeners_.push_back(l);
            accept(l);
        }
        now.push_back(l);
        connect += (connect.empty() ? "" : ",") + std::string("127.0.0.1:") + std::to_string(l->port);
    }
    // The listeners of addresses no longer listed go (their live connections stay with their
    // links). The caller hands the C client the new list before it connects again: this strand
    // runs its drives, so it never connects to a port closed here (which another local user could
    // then bind, and read the session's credentials from).
    std::erase_if(listeners_, [&](const std::shared_ptr<listener>& l) {
        if (std::find(now.begin(), now.end(), l) != now.end()) return false;
        close_listener(*l);
        return true;
    });
    current_ = std::move(now);
    connect_ = connect;
    return connect;
}

void tls_relay::close_listener(listener& l) {
    {
        std::lock_guard lk(l.mu);
        l.closed = true;
        error_code ig;
        l.acceptor.close(ig);
    }
    std::lock_guard lk(g_names_mu);
    if (auto it = g_names.find(l.port); it != g_names.end() && it->second.first == this) g_names.erase(it);
    g_any_names = !g_names.empty();
}

void tls_relay::accept(const std::shared_ptr<listener>& l) {
    std::lock_guard lk(l->mu);
    if (l->closed) return;
    // Off the strand (on its inner executor): a stranger's connection is refused there.
    l->acceptor.async_wait(
        tcp::acceptor::wait_read,
        asio::bind_executor(strand_.get_inner_executor(), [self = shared_from_this(), l](error_code ec) {
            if (ec == asio::error::operation_aborted) return;
            self->accept_now(l);
        }));
}

void tls_relay::accept_now(const std::shared_ptr<listener>& l) {
    // (Any thread.) A stranger's connection is reset here, with no more than the slot's lock:
    // not on the session's strand, not under the C client's lock. Only the C client's (or one
    // that came while a zookeeper_interest may just have made it) goes to the strand. accept4
    // makes each close-on-exec from its creation.
    error_code ec;
    {
        std::lock_guard lk(l->mu);
        if (l->closed) return;
        const tcp::endpoint here(asio::ip::address_v4::loopback(), l->port);
        for (int n = 0;; ++n) {
            if (n == 64) { // more may be waiting: go on after what else is queued
                asio::post(strand_.get_inner_executor(),
                           [self = shared_from_this(), l] { self->accept_now(l); });
                return;
            }
            sockaddr_in peer{};
            socklen_t len = sizeof peer;
            const int fd = ::accept4(l->acceptor.native_handle(), reinterpret_cast<sockaddr*>(&peer), &len,
                                     SOCK_CLOEXEC | SOCK_NONBLOCK);
            if (fd < 0) {
                if (errno == EINTR || errno == ECONNABORTED) continue;
                if (errno != EAGAIN && errno != EWOULDBLOCK)
                    ec.assign(errno, asio::error::get_system_category());
                break;
            }
            const tcp::endpoint from(asio::ip::address_v4(ntohl(peer.sin_addr.s_addr)), ntohs(peer.sin_port));
            if (peer.sin_family != AF_INET ||
                slot_->check(from, here) == client_socket_slot::verdict::stranger) {
                // Not the C client's current socket (another process, or a socket it gave up):
                // reset before reading a byte, so nothing reaches the server with this session's
                // certificate.
                refused_.fetch_add(1, std::memory_order_relaxed);
                reset_close(fd);
                continue;
            }
            asio::post(strand_, [self = shared_from_this(), l, fd, from] { self->take(l, fd, from); });
        }
    }
    if (!ec) return accept(l); // drained: wait for the next
    // (out of descriptors, say: try again a little later)
    auto t =
        std::make_shared<asio::steady_timer>(strand_.get_inner_executor(), std::chrono::milliseconds(50));
    t->async_wait([self = shared_from_this(), l, t](error_code) { self->accept(l); });
}

void tls_relay::take(const std::shared_ptr<listener>& l, int fd, const tcp::endpoint& peer) {
    const tcp::endpoint here(asio::ip::address_v4::loopback(), l->port);
    auto expected = slot_->current();
    // (One that came while the C client's socket was being made: read its addresses now.)
    if ((!expected || expected->first != peer) && client_socket) expected = client_socket();
    // The C client's current socket, connected to this very listener (its local port may be one
    // it also uses towards another listener), and not relayed yet.
    if (closed_ || l->closed || !expected || peer != expected->first || expected->second != here ||
        claimed_.count({peer, here})) {
        refused_.fetch_add(1, std::memory_order_relaxed);
        reset_close(fd);
        return;
    }
    tcp::socket sock(strand_);
    error_code e;
    sock.assign(tcp::v4(), fd, e);
    if (e) {
        ::close(fd);
        return;
    }
    ++relayed_;
    ++active_;
    claimed_.insert({peer, here});
    auto ln = std::make_shared<link>(strand_, st_, std::move(sock), l, weak_from_this(),
                                     std::make_pair(peer, here));
    ln->start(handshake_timeout, flush_timeout, stall_timeout);
}

void tls_relay::new_attempt() {
    for (auto& l : listeners_) {
        l->failure.reset();
        l->last.reset();
        l->outcome.clear();
    }
}

std::optional<tls_failure> tls_relay::all_failed() const {
    if (current_.empty()) return std::nullopt;
    for (auto& l : current_)
        if (!l->failure) return std::nullopt;
    return current_.front()->failure;
}

bool tls_relay::all_closed_in_handshake() const {
    if (current_.empty()) return false;
    for (auto& l : current_)
        if (!l->last || l->last->ec != errc::tls_not_tls_server) return false;
    return true;
}

std::string tls_relay::attempts() const {
    std::string out;
    for (auto& l : current_)
        if (!l->outcome.empty()) out += (out.empty() ? "" : ", ") + l->name + ": " + l->outcome;
    return out;
}

void tls_relay::link_ended() {
    if (active_ > 0 && --active_ == 0) fire_drained();
}

void tls_relay::fire_drained() {
    auto w = std::move(drain_waiters_);
    drain_waiters_.clear();
    for (auto& f : w) f();
}

void tls_relay::when_drained(std::function<void()> fn) {
    if (active_ == 0) return asio::post(strand_, std::move(fn));
    drain_waiters_.push_back(std::move(fn));
    // (bounded: a connection still in its handshake ends only at its deadline)
    auto t = std::make_shared<asio::steady_timer>(strand_, flush_timeout + std::chrono::milliseconds(100));
    t->async_wait([t, w = weak_from_this()](error_code) {
        if (auto r = w.lock()) r->fire_drained();
    });
}

void tls_relay::close() {
    closed_ = true;
    for (auto& l : listeners_) {
        std::lock_guard lk(l->mu);
        l->closed = true;
        error_code ig;
        l->acceptor.close(ig);
    }
}

bool tls_relay::holds_secrets() const {
    return st_ && (!st_->opts.private_key_password.empty() || !st_->opts.private_key_pem.empty());
}

std::string name_relayed_servers(std::string_view line) {
    std::string out(line);
    if (!g_any_names.load(std::memory_order_relaxed)) return out;
    static constexpr std::string_view loop = "127.0.0.1:";
    std::lock_guard lk(g_names_mu);
    for (std::size_t at = out.find(loop); at != std::string::npos; at = out.find(loop, at + 1)) {
        std::size_t end = at + loop.size();
        unsigned port = 0;
        while (end < out.size() && end - at - loop.size() < 5 && out[end] >= '0' && out[end] <= '9')
            port = port * 10 + static_cast<unsigned>(out[end++] - '0');
        if (end == at + loop.size() || port > 65535 ||
            (end < out.size() && out[end] >= '0' && out[end] <= '9'))
            continue;
        auto it = g_names.find(static_cast<unsigned short>(port));
        if (it == g_names.end()) continue;
        out.replace(at, end - at, it->second.second);
        at += it->second.second.size() - 1;
    }
    return out;
}

} // namespace zklock::detail
