// A TCP proxy on loopback that can drop every connection or turn into a black hole:
// the way the fault tests inject connection loss and network partitions.
#pragma once

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/write.hpp>

#include <array>
#include <chrono>
#include <atomic>
#include <list>
#include <memory>
#include <mutex>
#include <thread>

namespace zt {

class tcp_proxy {
public:
    /// Listens on `listen` (an address literal; "::1" for IPv6 loopback), any free port.
    explicit tcp_proxy(unsigned short target_port, const char* listen = "127.0.0.1")
        : target_(boost::asio::ip::make_address("127.0.0.1"), target_port),
          acceptor_(io_, {boost::asio::ip::make_address(listen), 0}) {
        accept();
        thread_ = std::thread([this] { io_.run(); });
    }
    ~tcp_proxy() {
        boost::asio::post(io_, [this] {
            acceptor_.close();
            close_all();
        });
        io_.stop();
        thread_.join();
    }
    unsigned short port() const { return acceptor_.local_endpoint().port(); }

    /// Closes every open connection: the client sees a connection loss and reconnects.
    void drop() {
        boost::asio::post(io_, [this] { close_all(); });
    }
    /// on: traffic is silently discarded, in both directions, on old and new connections
    /// (a partition). off: the held connections are closed so the client reconnects at once.
    void blackhole(bool on) {
        blackhole_ = on;
        if (!on) drop();
    }
    /// on: the server's replies are silently discarded (requests still reach it): a reply lost
    /// on the wire, the client's write applied. off: the held connections are closed, as above.
    void mute_replies(bool on) {
        mute_replies_ = on;
        if (!on) drop();
    }
    /// on: on every connection, the server's first reply (the session handshake) is passed on and
    /// every later one discarded: a server that took the session and then went silent.
    void mute_after_handshake(bool on) { mute_after_handshake_ = on; }
    /// Holds every forwarded chunk back for `d` before passing it on (0: no delay).
    void delay(std::chrono::milliseconds d) { delay_ms_ = static_cast<int>(d.count()); }
    /// Stalls both directions for `d` from now: what arrives meanwhile is passed on when the
    /// stall ends, in one burst (a TCP stall on the client's link: retransmissions, a full
    /// window, a paused middlebox).
    void stall(std::chrono::milliseconds d) {
        stall_until_ns_ = (std::chrono::steady_clock::now() + d).time_since_epoch().count();
    }
    /// Lets `n` more connections through, then closes every new one at once (a server that went
    /// away). A negative n lets all through again.
    void refuse_after(int n) {
        allowed_ = n;
        limited_ = n >= 0;
    }

    /// Connections accepted so far (the refused ones included).
    int accepted() const { return accepted_.load(); }

    /// When the server last sent the client anything that was passed on (0: never).
    std::chrono::steady_clock::time_point last_reply() const {
        return std::chrono::steady_clock::time_point(
            std::chrono::steady_clock::duration(last_reply_ns_.load()));
    }

private:
    struct conn {
        explicit conn(boost::asio::io_context& io) : client(io), server(io) {}
        boost::asio::ip::tcp::socket client, server;
        std::array<char, 16384> up{}, down{};
        int replies = 0; // server-to-client chunks seen
    };

    void accept() {
        acceptor_.async_accept([this](boost::system::error_code ec, boost::asio::ip::tcp::socket s) {
            if (ec) return;
            accepted_.fetch_add(1);
            if (limited_ && allowed_.fetch_sub(1) <= 0) { // refused: close it, keep accepting
                boost::system::error_code ignored;
                s.close(ignored);
                return accept();
            }
            auto c = std::make_shared<conn>(io_);
            c->client = std::move(s);
            conns_.push_back(c);
            c->server.async_connect(target_, [this, c](boost::system::error_code ec) {
                if (ec) return close(c);
                pump(c, c->client, c->server, c->up);
                pump(c, c->server, c->client, c->down);
            });
            accept();
        });
    }
    void pump(std::shared_ptr<conn> c, boost::asio::ip::tcp::socket& from, boost::asio::ip::tcp::socket& to,
              std::array<char, 16384>& buf) {
        from.async_read_some(boost::asio::buffer(buf), [this, c, &from, &to,
                                                        &buf](boost::system::error_code ec, std::size_t n) {
            if (ec) return close(c);
            const bool reply = &buf == &c->down;
            const bool later_reply = reply && c->replies++ > 0;
            if (blackhole_ || (reply && mute_replies_) || (later_reply && mute_after_handshake_))
                return pump(c, from, to, buf); // swallow
            if (reply) last_reply_ns_ = std::chrono::steady_clock::now().time_since_epoch().count();
            auto forward = [this, c, &from, &to, &buf, n] {
                boost::asio::async_write(
                    to, boost::asio::buffer(buf, n),
                    [this, c, &from, &to, &buf](boost::system::error_code ec, std::size_t) {
                        if (ec) return close(c);
                        pump(c, from, to, buf);
                    });
            };
            auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(delay_ms_.load());
            const auto stalled = std::chrono::steady_clock::time_point(
                std::chrono::steady_clock::duration(stall_until_ns_.load()));
            if (stalled > until) until = stalled;
            if (until > std::chrono::steady_clock::now()) {
                auto t = std::make_shared<boost::asio::steady_timer>(io_, until);
                return t->async_wait([t, forward](boost::system::error_code) { forward(); });
            }
            forward();
        });
    }
    void close(const std::shared_ptr<conn>& c) {
        boost::system::error_code ignored;
        c->client.close(ignored);
        c->server.close(ignored);
        conns_.remove(c);
    }
    void close_all() {
        auto all = conns_;
        for (auto& c : all) close(c);
    }

    boost::asio::io_context io_;
    boost::asio::ip::tcp::endpoint target_;
    std::atomic<int> accepted_{0};
    boost::asio::ip::tcp::acceptor acceptor_;
    std::list<std::shared_ptr<conn>> conns_;
    std::atomic<bool> blackhole_{false};
    std::atomic<bool> mute_replies_{false};
    std::atomic<bool> mute_after_handshake_{false};
    std::atomic<int> allowed_{0};
    std::atomic<int> delay_ms_{0};
    std::atomic<bool> limited_{false};
    std::atomic<std::chrono::steady_clock::rep> last_reply_ns_{0};
    std::atomic<std::chrono::steady_clock::rep> stall_until_ns_{0};
    std::thread thread_;
};

/// The port of the first server of a connect string.
inline unsigned short first_port(const std::string& connect) {
    auto colon = connect.find(':');
    return static_cast<unsigned short>(std::stoi(connect.substr(colon + 1)));
}

} // namespace zt
