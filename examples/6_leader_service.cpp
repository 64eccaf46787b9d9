// 6_leader_service.cpp: a replicated Asio + Beast HTTP service in which only the elected leader
// serves writes. Every replica campaigns on <root>/leader with its own address as the value, and
// stands again whenever its leadership is lost; in the background it follows the current leader
// (election::async_observe), to send clients there. The counter lives in ZooKeeper: the leader
// writes it with leadership::async_commit (guarded: a deposed leader, paused or cut off, cannot
// write) and a version check (no lost update), storing its fencing token with the value; it
// refuses to write over a newer leader's token.
//
//   POST /counter/increment   the leader: adds one, 200 {"value":N,"token":T}; a follower: 307 to the
//                             leader (Location, and the leader in a JSON body), 503 + Retry-After
//                             while it knows of none; a leader that lost its leadership meanwhile: 503
//   GET  /counter             any replica: the value and the fencing token of the leader that wrote it
//   GET  /leader              any replica: the leader's address and token, and whether this one leads
//
//   zklock_leader_service --port N [--connect host:port] [--root /zklock-demo/leader-svc]
//                         [--session-timeout-ms 4000]
// Run three on different ports (--port 0: any free one, printed) against one ZooKeeper, then kill
// or SIGSTOP the leader: another leads within about a session timeout, and the count stays exact.
#include <zklock.hpp>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/experimental/channel.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http.hpp>

#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <tuple>

namespace asio = boost::asio;
namespace http = boost::beast::http;
using asio::awaitable;
using asio::use_awaitable;
using zklock::error_code;
using namespace std::chrono_literals;

namespace {

using request = http::request<http::string_body>;
using response = http::response<http::string_body>;

response reply(const request& req, http::status status, std::string body) {
    response res{status, req.version()};
    res.set(http::field::content_type, "application/json");
    res.body() = std::move(body) + "\n";
    return res;
}

std::string json_string(std::string_view s) {
    std::string out = "\"";
    for (char c : s) {
        if (c == '"' || c == '\\') out += '\\';
        if (static_cast<unsigned char>(c) < 0x20) {
            char esc[8];
            std::snprintf(esc, sizeof esc, "\\u%04x", static_cast<unsigned>(c));
            out += esc;
        } else {
            out += c;
        }
    }
    return out + "\"";
}

/// The value stored in the counter's node: "<value> <fencing token of the leader that wrote it>".
struct counter {
    std::int64_t value = 0;
    std::int64_t token = 0;
};

std::optional<counter> parse_counter(const std::string& s) {
    counter c;
    auto sp = s.find(' ');
    if (sp == std::string::npos) return std::nullopt;
    auto r1 = std::from_chars(s.data(), s.data() + sp, c.value);
    auto r2 = std::from_chars(s.data() + sp + 1, s.data() + s.size(), c.token);
    if (r1.ec != std::errc() || r2.ec != std::errc()) return std::nullopt;
    return c;
}

std::string counter_data(counter c) { return std::to_string(c.value) + " " + std::to_string(c.token); }

std::string counter_json(counter c) {
    return R"({"value":)" + std::to_string(c.value) + R"(,"token":)" + std::to_string(c.token) + "}";
}

/// A leadership this replica may act on: still held, and not known to be lost (is_lost reads the
/// lease's clock, so it is exact right after a pause, before the loss signal had a chance to run).
bool leads(const zklock::leadership& l) { return l.owns_lock() && !l.is_lost(); }

class service {
public:
    service(zklock::session& zk, std::string root, std::string self)
        : zk_(zk), root_(std::move(root)), self_(std::move(self)), election_(zk, root_ + "/leader"),
          turn_(zk.get_executor(), 1) {}

    /// Campaigns forever: leads until the leadership is lost, then stands again.
    awaitable<void> campaign() {
        asio::steady_timer pause(zk_.get_executor());
        while (!stopping_) {
            auto [ec, l] = co_await election_.async_campaign(self_, asio::as_tuple(use_awaitable));
            if (ec) {
                if (stopping_) co_return;
                // Disconnected, or the session expired (a new one is being made): stand again once back.
                std::cerr << self_ << ": campaign failed (" << ec.message() << "), standing again\n";
                pause.expires_after(500ms);
                co_await pause.async_wait(asio::as_tuple(use_awaitable));
                co_await zk_.async_connect(asio::as_tuple(use_awaitable));
                continue;
            }
            auto mine = std::make_shared<zklock::leadership>(std::move(l));
            lead_ = mine;
            std::cerr << self_ << ": leading, fencing token " << mine->fencing_token() << "\n";
            auto [lost] = co_await mine->async_wait_lost(asio::as_tuple(use_awaitable));
            if (lead_ == mine) lead_.reset();
            std::cerr << self_ << ": leadership ended (" << lost.message() << ")\n";
            // Lost: completes at once (the node is gone, or its delete goes on in the background).
            // Increments in flight that hold `mine` find it empty, and answer 503.
            co_await mine->async_resign(asio::as_tuple(use_awaitable));
        }
    }

    /// Follows the leader (every replica, the leader too), to redirect clients there.
    awaitable<void> observe() {
        asio::steady_timer pause(zk_.get_executor());
        while (!stopping_) {
            auto [ec, now] = co_await election_.async_observe(leader_, asio::as_tuple(use_awaitable));
            if (stopping_) co_return;
            if (ec) { // disconnected: look again in a moment
                pause.expires_after(200ms);
                co_await pause.async_wait(asio::as_tuple(use_awaitable));
                continue;
            }
            std::cerr << self_ << ": the leader is " << (now ? now->value : "nobody") << "\n";
            leader_ = std::move(now);
        }
    }

    /// SIGINT/SIGTERM: resign (the next candidate leads at once), then close the session.
    awaitable<void> stop() {
        stopping_ = true;
        if (auto l = std::exchange(lead_, nullptr)) co_await l->async_resign(asio::as_tuple(use_awaitable));
        co_await zk_.async_close(asio::as_tuple(use_awaitable));
    }

    awaitable<response> handle(const request& req) {
        std::string_view target = req.target();
        if (target == "/counter/increment" && req.method() == http::verb::post) co_return co_await increment(req);
        if (target == "/counter" && req.method() == http::verb::get) co_return co_await read(req);
        if (target == "/leader" && req.method() == http::verb::get) co_return leader(req);
        co_return reply(req, http::status::not_found, R"({"error":"no such resource"})");
    }

private:
    std::string counter_node() const { return root_ + "/counter"; }

    awaitable<response> increment(const request& req) {
        auto l = lead_; // this leadership, even if a new one replaces it meanwhile
        if (!l || !leads(*l)) co_return not_leader(req);
        // One increment at a time: the leader does not race itself for the counter's version, so a
        // version conflict means another writer, and a lost reply can be read back unambiguously.
        co_await turn_.async_send(error_code{}, asio::as_tuple(use_awaitable)); // waits for the turn
        auto res = co_await write(req, *l);
        turn_.try_receive([](error_code) {}); // passes the turn on
        co_return res;
    }

    awaitable<response> write(const request& req, zklock::leadership& l) {
        const std::int64_t token = l.fencing_token();
        for (int attempt = 0; attempt < 3; ++attempt) {
            if (!leads(l)) co_return lost(req);
            auto [ec, current] = co_await read_counter(true);
            if (ec) co_return reply(req, http::status::service_unavailable, R"({"error":)" + json_string(ec.message()) + "}");
            auto c = parse_counter(current.data);
            if (!c) co_return reply(req, http::status::internal_server_error, R"({"error":"corrupt counter record"})");
            // Fencing: a newer leader wrote (we were paused past our loss, say): do not overwrite it.
            if (c->token > token) {
                ++stale_;
                co_return lost(req, "stale fencing token: a newer leader wrote");
            }
            const counter next{c->value + 1, token};
            // Guarded and version-checked, in one ZooKeeper transaction: it lands only while our
            // node exists (we lead), and only over the value we read.
            auto [cec, result] = co_await l.async_commit(
                zklock::transaction{}.set_data(counter_node(), counter_data(next), current.version),
                asio::as_tuple(use_awaitable));
            if (!cec) {
                ++writes_;
                co_return reply(req, http::status::ok, counter_json(next));
            }
            if (cec == zklock::zk_errc::bad_version) continue; // another writer came between: read again
            if (cec == zklock::errc::lock_lost || cec == zklock::errc::not_held) co_return lost(req);
            if (cec == zklock::zk_errc::connection_loss || cec == zklock::zk_errc::operation_timeout)
                co_return co_await settle(req, current, next);
            co_return reply(req, http::status::service_unavailable, R"({"error":)" + json_string(cec.message()) + "}");
        }
        co_return reply(req, http::status::service_unavailable, R"({"error":"counter contended, retry"})");
    }

    /// The commit's reply was lost with the connection, so its outcome is unknown: read the counter
    /// back (once connected again, or on the session that replaced an expired one) to tell.
    awaitable<response> settle(const request& req, const zklock::node_data& before, counter next) {
        asio::steady_timer pause(zk_.get_executor());
        for (int i = 0; i < 50; ++i) {
            auto [ec, now] = co_await zklock::async_get_data(zk_, counter_node(), asio::as_tuple(use_awaitable));
            if (!ec) {
                if (now.version == before.version) co_return lost(req, "write not applied (connection lost)");
                if (now.version == before.version + 1 && now.data == counter_data(next)) {
                    ++writes_;
                    co_return reply(req, http::status::ok, counter_json(next));
                }
                break; // others wrote since: whether ours came first cannot be told
            }
            pause.expires_after(100ms);
            co_await pause.async_wait(asio::as_tuple(use_awaitable));
        }
        co_return reply(req, http::status::gateway_timeout, R"({"error":"outcome unknown: the connection was lost"})");
    }

    awaitable<std::tuple<error_code, zklock::node_data>> read_counter(bool create) {
        auto [ec, d] = co_await zklock::async_get_data(zk_, counter_node(), asio::as_tuple(use_awaitable));
        if (ec != zklock::zk_errc::no_node || !create) co_return std::tuple{ec, std::move(d)};
        auto [cec] = co_await zklock::async_create_node(zk_, counter_node(), counter_data({}),
                                                         asio::as_tuple(use_awaitable));
        if (cec) co_return std::tuple{cec, zklock::node_data{}};
        co_return co_await zklock::async_get_data(zk_, counter_node(), asio::as_tuple(use_awaitable));
    }

    awaitable<response> read(const request& req) {
        auto [ec, d] = co_await read_counter(false);
        if (ec == zklock::zk_errc::no_node) co_return reply(req, http::status::ok, counter_json({}));
        if (ec) co_return reply(req, http::status::service_unavailable, R"({"error":)" + json_string(ec.message()) + "}");
        auto c = parse_counter(d.data);
        if (!c) co_return reply(req, http::status::internal_server_error, R"({"error":"corrupt counter record"})");
        co_return reply(req, http::status::ok, counter_json(*c));
    }

    /// The leader as this replica knows it: itself while it leads, else the one it observed last.
    std::string leader_fields() const {
        if (lead_ && leads(*lead_))
            return R"("leader":)" + json_string(self_) + R"(,"token":)" + std::to_string(lead_->fencing_token());
        if (leader_)
            return R"("leader":)" + json_string(leader_->value) + R"(,"token":)" + std::to_string(leader_->fencing_token);
        return R"("leader":null,"token":null)";
    }

    response leader(const request& req) const {
        const bool leading = lead_ && leads(*lead_);
        return reply(req, http::status::ok,
                     R"({"self":)" + json_string(self_) + R"(,"leading":)" + (leading ? "true" : "false") + "," +
                         leader_fields() + R"(,"writes":)" + std::to_string(writes_) + R"(,"stale_refused":)" +
                         std::to_string(stale_) + "}");
    }

    /// A follower's answer: 307 to the leader it knows of, or 503 while it knows of none (or the
    /// one it knows is itself, between a loss and the news of the next leader).
    response not_leader(const request& req) const {
        if (leader_ && leader_->value != self_) {
            auto res = reply(req, http::status::temporary_redirect, R"({"error":"not the leader",)" + leader_fields() + "}");
            res.set(http::field::location, "http://" + leader_->value + std::string(req.target()));
            return res;
        }
        // (none known, or the one known is itself: its leadership was lost, the next one's news is on its way)
        auto res = reply(req, http::status::service_unavailable,
                         leader_ ? R"({"error":"leadership lost, the next leader not known yet","leader":null})"
                                 : R"({"error":"no leader known","leader":null})");
        res.set(http::field::retry_after, "1");
        return res;
    }

    /// A leader that lost its leadership on the way: 503, naming the leader it knows of, if another.
    response lost(const request& req, std::string_view why = "leadership lost") const {
        std::string fields = leader_ && leader_->value != self_ ? "," + leader_fields() : "";
        auto res = reply(req, http::status::service_unavailable, R"({"error":)" + json_string(why) + fields + "}");
        res.set(http::field::retry_after, "1");
        return res;
    }

    zklock::session& zk_;
    std::string root_, self_;
    zklock::election election_;
    std::shared_ptr<zklock::leadership> lead_;     // while this replica leads (shared with its increments)
    std::optional<zklock::leader_info> leader_;    // the leader as last observed
    asio::experimental::channel<void(error_code)> turn_; // holds one token: whose turn it is to increment
    bool stopping_ = false;
    std::uint64_t writes_ = 0, stale_ = 0; // (one thread runs the io_context)
};

awaitable<void> serve(service& svc, asio::ip::tcp::socket socket) {
    boost::beast::flat_buffer buffer;
    for (;;) {
        request req;
        auto [ec, n] = co_await http::async_read(socket, buffer, req, asio::as_tuple(use_awaitable));
        if (ec) co_return; // closed, or a malformed request
        auto res = co_await svc.handle(req);
        res.keep_alive(req.keep_alive());
        res.prepare_payload();
        auto [wec, wn] = co_await http::async_write(socket, res, asio::as_tuple(use_awaitable));
        if (wec || !res.keep_alive()) co_return;
    }
}

awaitable<void> accept_loop(service& svc, asio::ip::tcp::acceptor& acceptor) {
    for (;;) {
        auto [ec, socket] = co_await acceptor.async_accept(asio::as_tuple(use_awaitable));
        if (ec == asio::error::operation_aborted) co_return;
        if (ec) continue;
        asio::co_spawn(acceptor.get_executor(), serve(svc, std::move(socket)), asio::detached);
    }
}

} // namespace

int main(int argc, char** argv) {
    long port = -1;
    std::string connect = std::getenv("ZK_CONNECT") ? std::getenv("ZK_CONNECT") : "127.0.0.1:2181";
    std::string root = "/zklock-demo/leader-svc";
    long timeout_ms = 4000;
    bool ok = true;
    for (int i = 1; i + 1 < argc && ok; i += 2) {
        std::string_view k = argv[i];
        if (k == "--port") port = std::atol(argv[i + 1]);
        else if (k == "--connect") connect = argv[i + 1];
        else if (k == "--root") root = argv[i + 1];
        else if (k == "--session-timeout-ms") timeout_ms = std::atol(argv[i + 1]);
        else ok = false;
    }
    if (!ok || argc % 2 == 0 || port < 0 || port > 65535 || timeout_ms < 100) {
        std::cerr << "usage: " << argv[0]
                  << " --port N [--connect host:port] [--root /path] [--session-timeout-ms N]\n";
        return 64;
    }
    asio::io_context io;
    zklock::session zk(io.get_executor(), {.connect = connect, .session_timeout = std::chrono::milliseconds(timeout_ms)});
    asio::ip::tcp::acceptor acceptor(io, {asio::ip::make_address("127.0.0.1"), static_cast<unsigned short>(port)});
    // The replica's address is the value it campaigns with: what followers send clients to.
    const std::string self = "127.0.0.1:" + std::to_string(acceptor.local_endpoint().port());
    service svc(zk, root, self);
    asio::signal_set stop(io, SIGINT, SIGTERM);
    int rc = 0;
    asio::co_spawn(io, [&]() -> awaitable<void> {
        auto [ec] = co_await zk.async_connect(asio::as_tuple(use_awaitable));
        if (ec) {
            std::cerr << "cannot connect to ZooKeeper at " << connect << ": " << ec.message() << "\n";
            rc = 69;
            stop.cancel();
            acceptor.close();
            co_return;
        }
        std::cout << "listening on " << self << std::endl;
        asio::co_spawn(io, svc.campaign(), asio::detached);
        asio::co_spawn(io, svc.observe(), asio::detached);
        co_await accept_loop(svc, acceptor);
    }, asio::detached);
    stop.async_wait([&](error_code ec, int) {
        if (ec) return;
        acceptor.close();
        asio::co_spawn(io, svc.stop(), [&](std::exception_ptr) { io.stop(); });
    });
    io.run();
    return rc;
}
