// 4_http_server.cpp: an Asio + Beast HTTP service whose every write takes the lock of the
// resource it changes. All connections share one io_context and one ZooKeeper session; the
// locks use the in-process hand-off (many requests of this process for one account share one
// lock node) and a bounded wait (503 + Retry-After when the lock cannot be had in time).
//
//   POST /accounts/<id>/deposit?amount=N  add N to the balance (kept in ZooKeeper, written with
//                                          guard::async_commit, so only while the lock is held, and
//                                          with the lock's fencing token; an older token is refused)
//   GET  /accounts/<id>                   the balance and the token that last wrote it
//   GET  /locks/<id>                      the account lock's contenders (holder first)
//   GET  /metrics                         the session's lock metrics (Prometheus text format)
//
//   zklock_http_server [--port N] [--connect host:port] [--root /zklock-demo/bank] [--wait-ms 2000]
// Run two of them on different ports against one ZooKeeper: the balances stay exact.
#include <zklock.hpp>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http.hpp>

#include <charconv>
#include <cstdlib>
#include <iostream>
#include <optional>
#include <string>

namespace asio = boost::asio;
namespace http = boost::beast::http;
using asio::awaitable;
using asio::use_awaitable;
using zklock::error_code;

namespace {

using request = http::request<http::string_body>;
using response = http::response<http::string_body>;

response reply(const request& req, http::status status, std::string body, const char* type = "application/json") {
    response res{status, req.version()};
    res.set(http::field::content_type, type);
    res.body() = std::move(body) + "\n";
    return res;
}

bool valid_id(std::string_view id) {
    if (id.empty() || id.size() > 64) return false;
    for (char c : id)
        if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '_') return false;
    return true;
}

/// The value stored in an account's node: "<balance> <fencing token of the writer>".
struct account {
    std::int64_t balance = 0;
    std::uint64_t token = 0;
};

std::optional<account> parse_account(const std::string& s) {
    account a;
    auto sp = s.find(' ');
    if (sp == std::string::npos) return std::nullopt;
    auto r1 = std::from_chars(s.data(), s.data() + sp, a.balance);
    auto r2 = std::from_chars(s.data() + sp + 1, s.data() + s.size(), a.token);
    if (r1.ec != std::errc() || r2.ec != std::errc()) return std::nullopt;
    return a;
}

class service {
public:
    service(zklock::session& zk, std::string root, std::chrono::milliseconds wait)
        : zk_(zk), root_(std::move(root)), wait_(wait) {}

    awaitable<response> handle(const request& req) {
        std::string_view target = req.target();
        std::string_view query;
        if (auto q = target.find('?'); q != std::string_view::npos) {
            query = target.substr(q + 1);
            target = target.substr(0, q);
        }
        constexpr std::string_view accounts = "/accounts/", locks = "/locks/", deposit = "/deposit";
        if (req.method() == http::verb::get && target == "/metrics") co_return metrics(req);
        if (target.starts_with(locks) && req.method() == http::verb::get) co_return co_await list(req, target.substr(locks.size()));
        if (target.starts_with(accounts)) {
            auto rest = target.substr(accounts.size());
            if (req.method() == http::verb::get) co_return co_await read(req, rest);
            if (req.method() == http::verb::post && rest.ends_with(deposit))
                co_return co_await add(req, rest.substr(0, rest.size() - deposit.size()), query);
        }
        co_return reply(req, http::status::not_found, R"({"error":"no such resource"})");
    }

private:
    std::string account_node(std::string_view id) const { return root_ + "/accounts/" + std::string(id); }
    std::string lock_path(std::string_view id) const { return root_ + "/locks/" + std::string(id); }

    awaitable<response> add(const request& req, std::string_view id, std::string_view query) {
        std::int64_t amount = 0;
        constexpr std::string_view key = "amount=";
        auto at = query.find(key);
        auto value = at == std::string_view::npos ? std::string_view() : query.substr(at + key.size());
        value = value.substr(0, value.find('&'));
        auto r = std::from_chars(value.data(), value.data() + value.size(), amount);
        if (!valid_id(id)) co_return reply(req, http::status::bad_request, R"({"error":"bad account id"})");
        if (r.ec != std::errc() || r.ptr != value.data() + value.size() || amount <= 0 || amount > 1'000'000'000)
            co_return reply(req, http::status::bad_request, R"({"error":"amount must be an integer in 1..1000000000"})");

        // The account's lock: hand-off between this process's requests, a bounded wait.
        zklock::mutex m(zk_, lock_path(id), {.local_handoff = 64});
        auto [ec, g] = co_await m.async_acquire_for(wait_, asio::as_tuple(use_awaitable));
        if (ec == zklock::errc::acquire_timeout) {
            ++busy_;
            auto res = reply(req, http::status::service_unavailable, R"({"error":"account busy, retry"})");
            res.set(http::field::retry_after, "1");
            co_return res;
        }
        if (ec) co_return reply(req, http::status::service_unavailable, R"({"error":")" + ec.message() + "\"}");

        auto res = co_await update(req, id, amount, g);
        co_await g.async_release(asio::as_tuple(use_awaitable)); // (a lost lock releases at once)
        co_return res;
    }

    awaitable<response> update(const request& req, std::string_view id, std::int64_t amount, zklock::guard& g) {
        auto node = account_node(id);
        auto [ec, current] = co_await zklock::async_get_data(zk_, node, asio::as_tuple(use_awaitable));
        if (ec == zklock::zk_errc::no_node) {
            auto [cec] = co_await zklock::async_create_node(zk_, node, "0 0", asio::as_tuple(use_awaitable));
            if (cec) co_return reply(req, http::status::internal_server_error, R"({"error":")" + cec.message() + "\"}");
            std::tie(ec, current) = co_await zklock::async_get_data(zk_, node, asio::as_tuple(use_awaitable));
        }
        if (ec) co_return reply(req, http::status::service_unavailable, R"({"error":")" + ec.message() + "\"}");
        auto acct = parse_account(current.data);
        if (!acct) co_return reply(req, http::status::internal_server_error, R"({"error":"corrupt account record"})");
        // Fencing: a write made under a newer grant than ours means ours is stale (we were
        // paused past our lock's loss, say): refuse instead of overwriting.
        const auto token = g.fencing_token();
        if (acct->token >= token) {
            ++stale_;
            co_return reply(req, http::status::conflict, R"({"error":"stale fencing token"})");
        }
        if (g.is_lost()) co_return reply(req, http::status::service_unavailable, R"({"error":"lock lost, retry"})");
        acct->balance += amount;
        acct->token = token;
        // Committed with a check of our lock node in the same ZooKeeper transaction: the balance is
        // written only while we hold the lock, however long this coroutine was held up.
        auto [sec, result] = co_await g.async_commit(
            zklock::transaction{}.set_data(node, std::to_string(acct->balance) + " " + std::to_string(token), current.version),
            asio::as_tuple(use_awaitable));
        if (sec == zklock::errc::lock_lost)
            co_return reply(req, http::status::service_unavailable, R"({"error":"lock lost, retry"})");
        if (sec) co_return reply(req, http::status::service_unavailable, R"({"error":")" + sec.message() + "\"}");
        ++deposits_;
        co_return reply(req, http::status::ok,
                        R"({"account":")" + std::string(id) + R"(","balance":)" + std::to_string(acct->balance) +
                            R"(,"token":)" + std::to_string(token) + "}");
    }

    awaitable<response> read(const request& req, std::string_view id) {
        if (!valid_id(id)) co_return reply(req, http::status::bad_request, R"({"error":"bad account id"})");
        auto [ec, d] = co_await zklock::async_get_data(zk_, account_node(id), asio::as_tuple(use_awaitable));
        if (ec == zklock::zk_errc::no_node) co_return reply(req, http::status::not_found, R"({"error":"no such account"})");
        if (ec) co_return reply(req, http::status::service_unavailable, R"({"error":")" + ec.message() + "\"}");
        auto acct = parse_account(d.data);
        if (!acct) co_return reply(req, http::status::internal_server_error, R"({"error":"corrupt account record"})");
        co_return reply(req, http::status::ok,
                        R"({"account":")" + std::string(id) + R"(","balance":)" + std::to_string(acct->balance) +
                            R"(,"token":)" + std::to_string(acct->token) + "}");
    }

    awaitable<response> list(const request& req, std::string_view id) {
        if (!valid_id(id)) co_return reply(req, http::status::bad_request, R"({"error":"bad account id"})");
        auto [ec, cs] = co_await zklock::async_list_contenders(zk_, lock_path(id), asio::as_tuple(use_awaitable));
        if (ec) co_return reply(req, http::status::service_unavailable, R"({"error":")" + ec.message() + "\"}");
        std::string body = "[";
        for (auto& c : cs)
            body += std::string(body.size() > 1 ? "," : "") + R"({"node":")" + c.node_path + R"(","holder":)" +
                    (c.holder ? "true" : "false") + R"(,"age_ms":)" + std::to_string(c.age.count()) + "}";
        co_return reply(req, http::status::ok, body + "]");
    }

    response metrics(const request& req) const {
        // The session's lock metrics (per account lock: waits, holds, outcomes, losses), then
        // this service's own counters, in the Prometheus text format.
        std::string out = zklock::to_prometheus(zk_.metrics());
        auto line = [&](const char* name, const char* help, std::uint64_t v) {
            out += std::string("# HELP ") + name + " " + help + "\n# TYPE " + name + " counter\n" + name + " " +
                   std::to_string(v) + "\n";
        };
        line("bank_deposits_total", "deposits applied", deposits_);
        line("bank_busy_total", "deposits answered 503 (lock not had in time)", busy_);
        line("bank_stale_total", "deposits refused for a stale fencing token", stale_);
        return reply(req, http::status::ok, out, "text/plain; version=0.0.4");
    }

    zklock::session& zk_;
    std::string root_;
    std::chrono::milliseconds wait_;
    std::uint64_t deposits_ = 0, busy_ = 0, stale_ = 0; // (one thread runs the io_context)
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
    unsigned short port = 8080;
    std::string connect = std::getenv("ZK_CONNECT") ? std::getenv("ZK_CONNECT") : "127.0.0.1:2181";
    std::string root = "/zklock-demo/bank";
    long wait_ms = 2000;
    for (int i = 1; i + 1 < argc; i += 2) {
        std::string_view k = argv[i];
        if (k == "--port") port = static_cast<unsigned short>(std::atoi(argv[i + 1]));
        else if (k == "--connect") connect = argv[i + 1];
        else if (k == "--root") root = argv[i + 1];
        else if (k == "--wait-ms") wait_ms = std::atol(argv[i + 1]);
        else {
            std::cerr << "usage: " << argv[0] << " [--port N] [--connect host:port] [--root /path] [--wait-ms N]\n";
            return 64;
        }
    }
    asio::io_context io;
    zklock::session zk(io.get_executor(), {.connect = connect, .session_timeout = std::chrono::seconds(10)});
    service svc(zk, root, std::chrono::milliseconds(wait_ms));
    asio::ip::tcp::acceptor acceptor(io, {asio::ip::make_address("127.0.0.1"), port});
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
        std::cout << "listening on 127.0.0.1:" << acceptor.local_endpoint().port() << std::endl;
        co_await accept_loop(svc, acceptor);
    }, asio::detached);
    stop.async_wait([&](error_code ec, int) {
        if (ec) return;
        acceptor.close();
        zk.async_close([&](error_code) { io.stop(); }); // ends the locks and the connections' waits
    });
    io.run();
    return rc;
}
