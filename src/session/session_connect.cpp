// Making the connection: async_connect's checks, host names resolved asynchronously (never by
// the C client on the io_context), the TLS relay, the connect timeout, abandoning an attempt.
#include "session/session_impl.hpp"

#include "protocol/protocol.hpp"

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

void session_impl::connect(pending<void(error_code)> h) {
    // Cancellation (terminal, partial): this waiter completes with operation_aborted; if it was
    // the last one of an attempt still connecting, the attempt is abandoned (disconnected).
    auto id = next_state_waiter_.fetch_add(1, std::memory_order_relaxed);
    h.on_cancel([w = weak_from_this(), id](asio::cancellation_type type) {
        // Total cancellation promises no side effect, and abandoning the attempt is one.
        if ((type & (asio::cancellation_type::terminal | asio::cancellation_type::partial)) ==
            asio::cancellation_type::none)
            return;
        auto s = w.lock();
        if (!s) return;
        asio::post(s->strand_, [s, id] { s->cancel_connect(id); });
    });
    asio::post(strand_, [self = shared_from_this(), h = std::move(h), id]() mutable {
        auto& s = *self;
        if (s.connects_cancelled_early_.erase(id)) return h.complete(asio::error::operation_aborted);
        switch (session_fsm::on_connect(s.fsm_facts())) {
        case session_fsm::connect_decision::succeed:
            if (s.chroot_seen_) return h.complete({});
            s.connect_waiters_.emplace_back(id, std::move(h)); // (once the chroot is seen to exist)
            return s.connect_waiters_connected();
        case session_fsm::connect_decision::fail_closed:
            return h.complete(errc::session_closed);
        case session_fsm::connect_decision::wait:
            s.connect_waiters_.emplace_back(id, std::move(h));
            return;
        case session_fsm::connect_decision::start:
            break;
        }
        if (auto ec = validate_connect_string(s.opts_.connect)) return h.complete(ec);
        // Below 100 ms, the C client's connection attempts, timed by the requested timeout until
        // the server negotiates one, can expire before a handshake completes: a session timeout
        // of 2 ms never connected in a test (the server grants at least 2 tickTime anyway).
        if (s.opts_.session_timeout.count() < 100 || s.opts_.session_timeout.count() > INT32_MAX)
            return h.complete(errc::invalid_session_timeout);
        if (s.opts_.connect_timeout.count() <= 0) return h.complete(errc::invalid_connect_timeout);
        if (const auto cap = s.opts_.lease_timeout_cap.count(); cap != 0 && (cap < 100 || cap > INT32_MAX))
            return h.complete(errc::invalid_lease_timeout_cap);
        s.lease_->set_timeout_cap(std::chrono::nanoseconds(s.opts_.lease_timeout_cap).count());
        if (auto ec = s.opts_.loss.validate()) return h.complete(ec);
        {
            std::lock_guard lk(s.attempts_mu_);
            s.last_attempts_.clear(); // (a new attempt: the last one's news is stale)
        }
        if (error_code ec; !s.make_relay(ec)) return h.complete(ec);
        // (With TLS the C client gets the relay's loopback listeners, made once the addresses are known.)
        if (!s.resolved_connect_.empty() || (!needs_resolution(s.opts_.connect) && !s.relay_)) {
            if (auto ec = s.start_handle()) return h.complete(ec);
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
        const auto deadline = s.steady_deadline(s.opts_.connect_timeout);
        s.resolve_hosts([self = s.shared_from_this(), epoch = s.resolve_epoch_, deadline](error_code ec) {
            auto& s = *self;
            if (epoch != s.resolve_epoch_ || s.state() != session_state::connecting || s.handle_)
                return; // abandoned
            if (!ec) ec = s.start_handle();
            if (ec) {
                s.set_state(session_state::disconnected);
                s.complete_connect_waiters(ec);
                s.notify(session_event::state_changed);
                return;
            }
            s.arm_connect_timer(deadline); // (start_handle moved the generation the first timer checks)
        });
    });
}

void session_impl::on_round_failed(std::uint64_t gen) {
    if (gen != generation() || !handle_) return;
    // Every server failed once: what each got is news for last_connect_attempts while the attempt
    // goes on (a program can say "every server refused" long before the connect timeout).
    if (attempt_in_progress())
        if (auto tried = relay_ ? relay_->attempts() : handle_->attempts(); !tried.empty()) {
            std::lock_guard lk(attempts_mu_);
            last_attempts_ = std::move(tried);
        }
    if (round_resolution_ || !needs_resolution(opts_.connect)) return;
    const auto now = plat_->steady_now();
    if (now - last_round_resolution_ < std::chrono::seconds(1)) return; // (at most once a second)
    round_resolution_ = true;
    last_round_resolution_ = now;
    const auto before = resolved_connect_;
    resolve_hosts([self = shared_from_this(), gen, before](error_code ec) {
        self->round_resolution_ = false;
        // (A handle started since the lookup began has an older list perhaps: it gets this one too.
        // With TLS it must: the listeners of the addresses that went are closed.)
        if (ec || !self->handle_ || (gen == self->generation() && self->resolved_connect_ == before)) return;
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
        std::string failed; // "host:port: the resolver's answer, ..." (for last_connect_attempts)
        std::function<void(error_code)> then;
    };
    auto spec = parse_connect_string(opts_.connect);
    auto r = std::make_shared<resolution>(strand_);
    r->per_host.resize(spec.hosts.size());
    r->left = spec.hosts.size();
    r->then = std::move(then);
    std::vector<std::string> names;
    for (auto& h : spec.hosts)
        names.push_back(h.host.size() > 1 && h.host.front() == '[' ? h.host.substr(1, h.host.size() - 2)
                                                                   : h.host);
    auto done = [this, r, chroot = spec.chroot, names] {
        if (--r->left != 0) return;
        std::vector<std::pair<std::string, unsigned short>> all;
        for (auto& v : r->per_host) all.insert(all.end(), v.begin(), v.end());
        if (all.empty()) {
            if (!r->failed.empty()) {
                log_line("zklock: no host of " + opts_.connect + " resolves: " + r->failed);
                std::lock_guard lk(attempts_mu_);
                last_attempts_ = r->failed;
            }
            return r->then(r->error ? r->error : make_error_code(asio::error::host_not_found));
        }
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
        auto port = static_cast<unsigned short>(std::stoi(h.port));          // (validated: 1..65535)
        std::string overridden = tap ? tap->resolve(h.host) : std::string(); // (a test's DNS)
        if (is_address_literal(h.host) || !overridden.empty()) {
            auto a = overridden.empty() ? h.host : overridden;
            if (a.front() == '[') a = a.substr(1, a.size() - 2);
            r->per_host[i].emplace_back(a, port);
            asio::post(strand_, done);
            continue;
        }
        r->resolver.async_resolve(
            h.host, h.port, asio::ip::tcp::resolver::numeric_service,
            [r, i, port, done, name = h.host + ":" + h.port](error_code ec,
                                                             asio::ip::tcp::resolver::results_type res) {
                if (ec) {
                    r->error = ec;
                    r->failed +=
                        (r->failed.empty() ? "" : ", ") + name + ": cannot resolve (" + ec.message() + ")";
                }
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
    relay_->handshake_timeout = opts_.tls->handshake_timeout.count() > 0
                                    ? opts_.tls->handshake_timeout
                                    : std::max(opts_.session_timeout / 3, std::chrono::milliseconds(100));
    relay_->flush_timeout = std::min(std::chrono::milliseconds(1000), relay_->handshake_timeout);
    relay_->stall_timeout = opts_.session_timeout;
    relay_->client_socket = [w = weak_from_this()]()
        -> std::optional<std::pair<asio::ip::tcp::endpoint, asio::ip::tcp::endpoint>> {
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
    auto it = std::find_if(connect_waiters_.begin(), connect_waiters_.end(),
                           [&](auto& w) { return w.first == id; });
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
    if (why == errc::connect_timeout && relay_ && relay_->all_closed_in_handshake())
        why = errc::tls_not_tls_server;
    std::shared_ptr<zk_link> old;
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
            log_line("zklock: no ZooKeeper server of " + opts_.connect +
                     " answered within the connect timeout" +
                     (tried.empty() ? std::string(" (no attempt failed outright: the servers accepted the "
                                                  "connection but never answered the handshake)")
                                    : "; the last attempts: " + tried));
    }
    generation_.fetch_add(1); // events the abandoned handle already posted are stale
    ++resolve_epoch_;         // and so is a resolution still under way
    connect_timer_.cancel();
    close_handle(std::move(old));
    set_state(session_state::disconnected);
    complete_connect_waiters(why);
    notify(session_event::state_changed); // acquires waiting for the connection give up
}

bool session_impl::attempt_in_progress() const noexcept {
    return session_fsm::attempt_in_progress(fsm_facts());
}

void session_impl::arm_connect_timer(std::optional<std::chrono::steady_clock::time_point> at) {
    // No server answering: abandon the attempt (the C client would retry forever). For a first
    // connect and for the renewal after an expiry alike.
    connect_timer_.expires_at(at ? *at : steady_deadline(opts_.connect_timeout));
    connect_timer_.async_wait([w = weak_from_this(), gen = generation()](error_code ec) {
        auto s = w.lock();
        if (ec || !s || s->generation() != gen || !s->attempt_in_progress()) return;
        s->abandon_attempt(errc::connect_timeout);
    });
}

} // namespace zklock::detail
