// TLS to ZooKeeper's secure client port (session_options::tls), through zklock's relay, against
// real servers of scripts/zk.sh start --tls: locks over TLS, x509 identities, each handshake
// failure's error, the relay's refusal of strangers, a silent TLS server, and the close.
#include "common.hpp"
#include "proxy.hpp"

#include <zklock/acl.hpp>
#include <zklock/inspect.hpp>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/bind_executor.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/write.hpp>

#include <fstream>
#include <mutex>
#include <sstream>

namespace {

using namespace zt;
using zklock::errc;
using zklock::zk_errc;

std::string env(const char* name) {
    const char* v = std::getenv(name);
    if (!v || !*v) ADD_FAILURE() << name << " is not set: run the suite with scripts/test.sh";
    return v ? v : "";
}

/// The suite's server's secure port (zk.sh start --tls), and its throwaway PKI.
std::string tls_connect() { return env("ZK_TLS_CONNECT"); }
std::string pki(const std::string& file) { return env("ZK_DIR") + "/tls/" + file; }

std::string read_file(const std::string& f) {
    std::ifstream in(f);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
}

/// Session options for TLS with the test CA, as `who` (client, other, stranger; "" for no
/// client certificate).
zklock::session_options tls(std::string connect = tls_connect(), const std::string& who = "client") {
    auto o = options(std::move(connect));
    zklock::tls_options t;
    t.ca_file = pki("ca.pem");
    if (!who.empty()) {
        t.certificate_file = pki(who + ".pem");
        t.private_key_file = pki(who + ".key");
    }
    o.tls = t;
    return o;
}

/// A standalone TLS server of its own (scripts/zk.sh start --tls ...), stopped with the object.
class tls_server {
public:
    explicit tls_server(const std::string& args) {
        zk_sh_ = env("ZKLOCK_SCRIPTS") + "/zk.sh";
        FILE* out = ::popen((zk_sh_ + " start --tls " + args).c_str(), "r");
        if (!out) return;
        char line[512];
        while (std::fgets(line, sizeof line, out)) {
            std::string l(line);
            if (!l.empty() && l.back() == '\n') l.pop_back();
            if (l.rfind("ZK_TLS_CONNECT=", 0) == 0) tls_connect_ = l.substr(15);
            if (l.rfind("ZK_DIR=", 0) == 0) dir_ = l.substr(7);
        }
        EXPECT_EQ(::pclose(out), 0) << "zk.sh start --tls " << args << " failed";
    }
    ~tls_server() {
        if (!dir_.empty()) (void)std::system((zk_sh_ + " stop " + dir_ + " >/dev/null").c_str());
    }
    tls_server(const tls_server&) = delete;
    tls_server& operator=(const tls_server&) = delete;
    const std::string& connect() const { return tls_connect_; }
    std::string pki(const std::string& f) const { return dir_ + "/tls/" + f; }
    void pause() const { (void)std::system((zk_sh_ + " pause " + dir_ + " 1").c_str()); }
    void kill() const { (void)std::system((zk_sh_ + " kill " + dir_ + " 1").c_str()); }
    bool restart() const { return std::system((zk_sh_ + " restart " + dir_ + " 1 >/dev/null").c_str()) == 0; }

private:
    std::string zk_sh_, tls_connect_, dir_;
};

/// async_connect's outcome, and how long it took.
struct connect_outcome {
    zklock::error_code ec;
    std::chrono::milliseconds took{};
    std::string attempts;
};

awaitable<connect_outcome> try_connect(zklock::session_options o) {
    auto s = std::make_unique<zklock::session>(co_await asio::this_coro::executor, std::move(o));
    const auto t0 = std::chrono::steady_clock::now();
    auto [ec] = co_await s->async_connect(asio::as_tuple(use_awaitable));
    connect_outcome r{
        ec, std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0),
        s->last_connect_attempts()};
    co_await s->async_close(asio::as_tuple(use_awaitable));
    co_return r;
}

} // namespace

using Tls = zt::zk_test;

TEST_F(Tls, LockReleaseAndHandOffOverTls) {
    run_test([&]() -> awaitable<void> {
        auto path = lock_path("tls");
        auto a = co_await connect(tls());
        auto b = co_await connect(tls());
        EXPECT_NE(a->impl()->relay(), nullptr);
        zklock::mutex ma(*a, path), mb(*b, path);
        auto ga = co_await ma.async_acquire(use_awaitable);
        EXPECT_TRUE(ga.owns_lock());
        auto waiting = in_background([&](auto h) { mb.async_acquire_for(10s, h); });
        co_await wait_for_children(*a, path, 2);
        EXPECT_FALSE(waiting->done);
        co_await ga.async_release(use_awaitable);
        co_await eventually([&] { return waiting->done; }, 5000ms);
        EXPECT_TRUE(waiting->granted()) << waiting->ec.message();
        co_await waiting->guard.async_release(use_awaitable);
        // the requests went through the relay, nothing else did (a handshake slower than the
        // deadline under load would make two relayed connections: not a failure)
        EXPECT_GE(a->impl()->relay()->relayed(), 1u);
        EXPECT_EQ(a->impl()->relay()->refused(), 0u);
        co_await a->async_close(use_awaitable);
        co_await b->async_close(use_awaitable);
    });
}

TEST_F(Tls, HostNamesAreVerifiedAgainstTheCertificate) {
    run_test([&]() -> awaitable<void> {
        // The server's certificate names localhost and 127.0.0.1 (zk.sh's PKI)
        auto port = tls_connect().substr(tls_connect().rfind(':') + 1);
        auto by_name = co_await try_connect(tls("localhost:" + port));
        EXPECT_FALSE(by_name.ec) << by_name.ec.message() << " / " << by_name.attempts;
        auto o = tls();
        o.tls->server_name = "zk.wrong.example";
        auto wrong = co_await try_connect(o);
        EXPECT_EQ(wrong.ec, errc::tls_server_name_mismatch) << wrong.ec.message();
        EXPECT_NE(wrong.attempts.find("does not name zk.wrong.example"), std::string::npos) << wrong.attempts;
        EXPECT_LT(wrong.took, 3000ms);     // every server refused: no wait for the connect timeout
        o.tls->verify_server_name = false; // (then any certificate the CA signed will do)
        auto unchecked = co_await try_connect(o);
        EXPECT_FALSE(unchecked.ec) << unchecked.ec.message();
    });
}

TEST_F(Tls, EachHandshakeFailureHasItsOwnError) {
    run_test([&]() -> awaitable<void> {
        { // a CA that did not sign the server's certificate
            auto o = tls();
            o.tls->ca_file = pki("stranger-ca.pem");
            auto r = co_await try_connect(o);
            EXPECT_EQ(r.ec, errc::tls_unknown_ca) << r.ec.message() << " / " << r.attempts;
            EXPECT_NE(r.attempts.find("not signed by a trusted CA"), std::string::npos) << r.attempts;
            EXPECT_LT(r.took, 3000ms);
        }
        { // no client certificate, and the server requires one
            auto r = co_await try_connect(tls(tls_connect(), ""));
            EXPECT_EQ(r.ec, errc::tls_client_certificate_required) << r.ec.message() << " / " << r.attempts;
            EXPECT_LT(r.took, 3000ms);
        }
        { // a client certificate the server does not trust
            auto r = co_await try_connect(tls(tls_connect(), "stranger"));
            EXPECT_EQ(r.ec, errc::tls_client_certificate_rejected) << r.ec.message() << " / " << r.attempts;
            EXPECT_LT(r.took, 3000ms);
        }
        {
            // TLS to the plain client port: the server closes the connection in the handshake,
            // as a TLS server not serving yet would; so it is no verdict: named at the connect timeout
            auto o = tls(zk_connect());
            o.connect_timeout = 1500ms;
            auto r = co_await try_connect(o);
            EXPECT_EQ(r.ec, errc::tls_not_tls_server) << r.ec.message() << " / " << r.attempts;
            EXPECT_NE(r.attempts.find("closed the connection during the TLS handshake"), std::string::npos)
                << r.attempts;
            EXPECT_LT(r.took, 3000ms);
        }
    });
}

TEST_F(Tls, AnExpiredServerCertificateIsRefused) {
    tls_server expired("--tls-server-cert expired");
    run_test([&]() -> awaitable<void> {
        CO_REQUIRE(!expired.connect().empty());
        auto o = tls(expired.connect());
        o.tls->ca_file = expired.pki("ca.pem"); // (a server of its own has a PKI of its own)
        o.tls->certificate_file = expired.pki("client.pem");
        o.tls->private_key_file = expired.pki("client.key");
        auto r = co_await try_connect(o);
        EXPECT_EQ(r.ec, errc::tls_certificate_expired) << r.ec.message() << " / " << r.attempts;
        EXPECT_NE(r.attempts.find("not valid now"), std::string::npos) << r.attempts;
        EXPECT_LT(r.took, 3000ms);
    });
}

TEST_F(Tls, BadOptionsAreNamedBeforeAnythingIsSent) {
    run_test([&]() -> awaitable<void> {
        auto expect_invalid = [&](zklock::session_options o, const std::string& words) -> awaitable<void> {
            auto r = co_await try_connect(std::move(o));
            EXPECT_EQ(r.ec, errc::tls_config_invalid) << r.ec.message();
            EXPECT_NE(r.attempts.find(words), std::string::npos)
                << "'" << r.attempts << "' lacks '" << words << "'";
        };
        auto o = tls();
        o.tls->ca_file = "/nonexistent/ca.pem";
        co_await expect_invalid(o, "cannot read the CA file /nonexistent/ca.pem");
        o = tls();
        o.tls->ca_file.clear();
        co_await expect_invalid(o, "no CA");
        o = tls();
        o.tls->private_key_file.clear();
        co_await expect_invalid(o, "without its private key");
        o = tls();
        o.tls->private_key_file = pki("other.key");
        co_await expect_invalid(o, "does not belong to the certificate");
        o = tls();
        o.tls->private_key_file = pki("client-enc.key"); // encrypted, no password
        co_await expect_invalid(o, "if it is encrypted, set private_key_password");
        o.tls->private_key_password = "wrong";
        co_await expect_invalid(o, "a wrong private_key_password");
        o.tls->private_key_password = "secret";
        auto r = co_await try_connect(o);
        EXPECT_FALSE(r.ec) << r.ec.message() << " / " << r.attempts;
        // PEM text instead of files
        o = tls();
        o.tls->ca_file.clear();
        o.tls->ca_pem = read_file(pki("ca.pem"));
        o.tls->certificate_file.clear();
        o.tls->certificate_pem = read_file(pki("client.pem"));
        o.tls->private_key_file.clear();
        o.tls->private_key_pem = read_file(pki("client.key"));
        r = co_await try_connect(o);
        EXPECT_FALSE(r.ec) << r.ec.message() << " / " << r.attempts;
        o.tls->ca_file = pki("ca.pem");
        co_await expect_invalid(o, "both ca_file and ca_pem");
    });
}

TEST_F(Tls, OnlyTheCertificatesIdentityCanTouchAnX509ProtectedLock) {
    run_test([&]() -> awaitable<void> {
        auto path = lock_path("x509");
        auto owner = co_await connect(tls());
        auto other = co_await connect(tls(tls_connect(), "other")); // same CA, CN=zklock-other
        zklock::mutex_options mo;
        mo.node_acl = zklock::acl::x509_all_world_read("CN=zklock-client");
        zklock::mutex m(*owner, path, mo);
        auto g = co_await m.async_acquire(use_awaitable);
        // the other identity can list the contenders...
        auto [lec, cs] =
            co_await zklock::async_list_contenders(*other, path, {}, asio::as_tuple(use_awaitable));
        EXPECT_FALSE(lec) << lec.message();
        EXPECT_EQ(cs.size(), 1u);
        // ...but not break the lock, nor contend
        auto [bec] = co_await zklock::async_break_lock(*other, g.node_path(), asio::as_tuple(use_awaitable));
        EXPECT_EQ(bec, zk_errc::no_auth) << bec.message();
        zklock::mutex mo2(*other, path);
        auto [aec, ag] = co_await mo2.async_acquire_for(5s, asio::as_tuple(use_awaitable));
        EXPECT_EQ(aec, zk_errc::no_auth) << aec.message();
        // a second session with the owner's certificate is the same identity: it may contend
        auto twin = co_await connect(tls());
        zklock::mutex mt(*twin, path, mo);
        auto [tec, tg] = co_await mt.async_try_acquire(asio::as_tuple(use_awaitable));
        EXPECT_EQ(tec, errc::lock_busy) << tec.message();
        co_await g.async_release(use_awaitable);
        co_await twin->async_close(use_awaitable);
        co_await other->async_close(use_awaitable);
        // the path node itself carries the ACL: the plain test session cannot delete it; the owner does
        co_await owner->async_close(use_awaitable);
    });
    // (TearDown lists the path on the plain server: reading is open to everyone)
}

TEST_F(Tls, TheRelayResetsAnyConnectionButTheClients) {
    run_test([&]() -> awaitable<void> {
        auto path = lock_path("stranger");
        auto s = co_await connect(tls());
        // the listeners' loopback ports, as the C client was given them
        std::string given;
        co_await asio::post(asio::bind_executor(s->impl()->strand(), use_awaitable));
        given = s->impl()->client_connect_string();
        auto port = static_cast<unsigned short>(std::stoi(given.substr(given.find(':') + 1)));
        // Another socket of this very process connects to the listener, sends nothing, and waits:
        // it is reset (not closed: a graceful close would read as EOF), and nothing is relayed.
        asio::ip::tcp::socket stranger(co_await asio::this_coro::executor);
        co_await stranger.async_connect({asio::ip::address_v4::loopback(), port}, use_awaitable);
        char c;
        auto [rec, n] =
            co_await asio::async_read(stranger, asio::buffer(&c, 1), asio::as_tuple(use_awaitable));
        EXPECT_EQ(rec, asio::error::connection_reset) << rec.message();
        co_await eventually([&] { return s->impl()->relay()->refused() == 1u; });
        EXPECT_EQ(s->impl()->relay()->relayed(), 1u);
        // the session's own connection was not disturbed
        zklock::mutex m(*s, path);
        auto g = co_await m.async_acquire_for(5s, use_awaitable);
        EXPECT_TRUE(g.owns_lock());
        co_await g.async_release(use_awaitable);
        co_await s->async_close(use_awaitable);
    });
}

TEST_F(Tls, CloseDeliversTheCloseRequestThroughTheRelay) {
    run_test([&]() -> awaitable<void> {
        auto path = lock_path("close");
        auto watcher = co_await connect(); // plain
        for (bool destroy : {false, true}) {
            zklock::guard g; // (held through the close: only the close request removes its node)
            auto s = co_await connect(tls()); // session timeout 4 s
            zklock::mutex m(*s, path);
            g = co_await m.async_acquire(use_awaitable);
            CO_REQUIRE(g.owns_lock());
            const auto t0 = std::chrono::steady_clock::now();
            if (destroy) {
                s.reset(); // the destructor: the close request goes out behind what was sent
            } else {
                co_await s->async_close(use_awaitable);
            }
            // The server ends the session at the close request, not at its timeout (4 s)
            co_await wait_for_children(*watcher, path, 0);
            EXPECT_LT(std::chrono::steady_clock::now() - t0, 2000ms) << (destroy ? "destroyed" : "closed");
        }
        co_await watcher->async_close(use_awaitable);
    });
}

TEST_F(Tls, ASilentTlsServerCostsAFailoverNoMoreThanASilentPlainOne) {
    // A server that accepts TCP connections and never answers: SIGSTOPped, its kernel still
    // completes the TCP handshake. Through the relay, each attempt on it ends at the handshake
    // deadline (T/3) with a reset, and the C client moves on to the next server.
    tls_server silent("");
    run_test([&]() -> awaitable<void> {
        CO_REQUIRE(!silent.connect().empty());
        silent.pause();
        // With a live server beside it, the connect takes at most the deadline plus a handshake,
        // whichever of the two the C client tries first (it shuffles the list).
        for (int i = 0; i < 4; ++i) {
            auto o = tls(silent.connect() + "," + tls_connect());
            o.session_timeout = 3000ms; // handshake deadline T/3 = 1 s
            o.connect_timeout = 10000ms;
            auto r = co_await try_connect(o);
            EXPECT_FALSE(r.ec) << r.ec.message() << " / " << r.attempts;
            EXPECT_LT(r.took, 3000ms) << r.attempts; // (deadline 1 s, then a handshake and a session)
            std::printf("  silent + live TLS server: connected in %lld ms\n",
                        static_cast<long long>(r.took.count()));
        }
    });
    run_test([&]() -> awaitable<void> {
        // The same silence, plain and TLS, counted in attempts: a black-holing proxy in front of
        // the suite's plain port and one in front of its TLS port, each alone in its connect
        // string, for the same 6 s. Each TLS attempt costs no more than a plain one.
        const auto plain_port =
            static_cast<unsigned short>(std::stoi(zk_connect().substr(zk_connect().rfind(':') + 1)));
        const auto tls_port =
            static_cast<unsigned short>(std::stoi(tls_connect().substr(tls_connect().rfind(':') + 1)));
        tcp_proxy plain_hole(plain_port), tls_hole(tls_port);
        plain_hole.blackhole(true);
        tls_hole.blackhole(true);
        auto o = options("127.0.0.1:" + std::to_string(plain_hole.port()));
        o.session_timeout = 3000ms;
        o.connect_timeout = 6000ms;
        auto plain = co_await try_connect(o);
        EXPECT_EQ(plain.ec, errc::connect_timeout) << plain.ec.message();
        auto t = tls("127.0.0.1:" + std::to_string(tls_hole.port()));
        t.session_timeout = 3000ms;
        t.connect_timeout = 6000ms;
        auto tr = co_await try_connect(t);
        EXPECT_EQ(tr.ec, errc::connect_timeout) << tr.ec.message();
        EXPECT_NE(tr.attempts.find("no TLS connection within 1000 ms"), std::string::npos) << tr.attempts;
        std::printf("  6 s against a silent server: %d plain attempts, %d TLS attempts\n",
                    plain_hole.accepted(), tls_hole.accepted());
        EXPECT_GE(tls_hole.accepted(), plain_hole.accepted());
        EXPECT_GE(tls_hole.accepted(),
                  3); // (one per deadline of 1 s, and the C client's pause between rounds)
    });
}

TEST_F(Tls, LogLinesNameTheRealServerNotTheRelay) {
    // The C client knows its servers as the relay's loopback listeners; its log lines (and
    // zklock's) must name the server the user gave.
    auto lines = std::make_shared<std::vector<std::string>>();
    auto mu = std::make_shared<std::mutex>();
    zklock::set_log_handler([lines, mu](std::string_view l) {
        std::lock_guard lk(*mu);
        lines->emplace_back(l);
    });
    run_test([&]() -> awaitable<void> {
        // A connection that fails makes the C client log it (it is silent when all goes well):
        // a silent server, whose connections the relay resets at the handshake deadline.
        tcp_proxy hole(
            static_cast<unsigned short>(std::stoi(tls_connect().substr(tls_connect().rfind(':') + 1))));
        hole.blackhole(true);
        const auto port = std::to_string(hole.port());
        auto o = tls("localhost:" + port);
        o.session_timeout = 600ms; // deadline 200 ms
        o.connect_timeout = 1500ms;
        auto s = std::make_unique<zklock::session>(co_await asio::this_coro::executor, o);
        auto [ec] = co_await s->async_connect(asio::as_tuple(use_awaitable));
        EXPECT_EQ(ec, errc::connect_timeout) << ec.message();
        co_await asio::post(asio::bind_executor(s->impl()->strand(), use_awaitable));
        const auto given = s->impl()->client_connect_string(); // 127.0.0.1:<listener>
        EXPECT_EQ(given.rfind("127.0.0.1:", 0), 0u) << given;
        co_await s->async_close(use_awaitable);
        std::lock_guard lk(*mu);
        bool named = false;
        for (auto& l : *lines) {
            EXPECT_EQ(l.find(given), std::string::npos) << "a log line names the relay: " << l;
            // (a line of the C client's own, not one of zklock's: those name the server anyway)
            named = named || (l.find("localhost:" + port) != std::string::npos && l.rfind("zklock:", 0) != 0);
        }
        EXPECT_TRUE(named) << "no line of the C client names localhost:" << port << " (" << lines->size()
                           << " lines)";
    });
    zklock::set_log_handler(nullptr);
}

TEST_F(Tls, TheServersEndReachesTheClientAtOnceAndTheListenerOutlivesIt) {
    // The server dies: the kernel closes its connections, and the relay passes the end on at
    // once (the C client would otherwise notice only after 2/3 T of silence). The server comes
    // back on the same port: the session reconnects through the same listener, same session.
    tls_server server("");
    run_test([&]() -> awaitable<void> {
        CO_REQUIRE(!server.connect().empty());
        auto o = tls(server.connect());
        o.tls->ca_file = server.pki("ca.pem");
        o.tls->certificate_file = server.pki("client.pem");
        o.tls->private_key_file = server.pki("client.key");
        o.session_timeout = 10000ms; // 2/3 T = 6.7 s of silence before the C client would give up
        auto s = co_await connect(o);
        const auto id = s->session_id();
        const auto t0 = std::chrono::steady_clock::now();
        server.kill();
        co_await eventually([&] { return s->state() != zklock::session_state::connected; }, 8000ms);
        const auto noticed = std::chrono::steady_clock::now() - t0;
        EXPECT_EQ(s->state(), zklock::session_state::suspended);
        EXPECT_LT(noticed, 1500ms) << "the end of the server's connection was not passed on at once";
        std::printf(
            "  the server was killed: the session suspended after %lld ms\n",
            static_cast<long long>(std::chrono::duration_cast<std::chrono::milliseconds>(noticed).count()));
        CO_REQUIRE(server.restart());
        co_await eventually([&] { return s->state() == zklock::session_state::connected; }, 8000ms);
        EXPECT_EQ(s->state(), zklock::session_state::connected);
        EXPECT_EQ(s->session_id(), id);
        EXPECT_GE(s->impl()->relay()->relayed(), 2u); // through the same listener
        EXPECT_EQ(s->impl()->relay()->refused(), 0u);
        co_await s->async_close(use_awaitable);
    });
}

TEST_F(Tls, AsyncCloseCompletesOnceTheCloseRequestHasGoneThroughTheRelay) {
    // A program that stops its io_context as soon as async_close completes (the CLI does) must
    // not leave its close request in the relay's loopback socket: the server would keep the
    // session, and its locks, until the session timeout.
    auto path = lock_path("closed");
    asio::io_context own; // the TLS session's: run only until the close completes
    std::unique_ptr<zklock::session> s;
    zklock::guard g;
    bool closed = false;
    run(own, [&]() -> awaitable<void> {
        s = co_await connect(tls()); // T = 4 s
        zklock::mutex m(*s, path);
        g = co_await m.async_acquire(use_awaitable);
    }());
    ASSERT_TRUE(g.owns_lock());
    own.restart();
    s->async_close([&](zklock::error_code) { closed = true; });
    while (!closed && own.run_one()) {
    }
    ASSERT_TRUE(closed);
    const auto t0 = std::chrono::steady_clock::now();
    run_test([&]() -> awaitable<void> { // (own is not run again)
        auto watcher = co_await connect();
        co_await wait_for_children(*watcher, path, 0);
        EXPECT_LT(std::chrono::steady_clock::now() - t0, 2000ms)
            << "the server ended the session at its timeout";
        co_await watcher->async_close(use_awaitable);
    });
    g = {};
    s.reset();
}
