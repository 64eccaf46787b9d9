// What a new user runs into: acquires while the ensemble cannot be reached complete within
// their bound; a zero deadline is one try; a closed session says so.
#include <zklock/election.hpp>
#include <zklock/mutex.hpp>
#include <zklock/transaction.hpp>
#include <zklock/znode.hpp>
#include <zklock/path.hpp>

#include "common.hpp"
#include "proxy.hpp"
#include "raw_zk.hpp"

#include "session/session_impl.hpp"

#include <boost/asio/as_tuple.hpp>

#include <cstdio>
#include <optional>
#include <thread>

using namespace zt;
using zklock::errc;
using zklock::session_state;
using clk = std::chrono::steady_clock;

using Outage = zt::zk_test;

TEST_F(Outage, ATryAcquireOrADeadlineEndsWithinItsBoundWhileDisconnected) {
    // Before: a try-acquire during an outage waited until the server came back (7.2 s, no bound).
    run_test([&]() -> awaitable<void> {
        tcp_proxy proxy(first_port(zk_connect()));
        auto path = lock_path("outage");
        auto o = through(proxy);
        o.session_timeout = 4000ms;
        auto a = co_await connect(o);
        zklock::mutex m(*a, path);
        proxy.blackhole(true);
        proxy.drop(); // the client notices at once and cannot reconnect
        co_await wait_state(*a, session_state::suspended, 3000ms);
        CO_REQUIRE(a->state() == session_state::suspended);
        auto t0 = clk::now();
        auto [ec, g] = co_await m.async_try_acquire(boost::asio::as_tuple(use_awaitable));
        auto took = clk::now() - t0;
        EXPECT_EQ(ec, zklock::zk_errc::connection_loss) << ec.message();
        EXPECT_NE(ec.message().find("onnection"), std::string::npos) << ec.message();
        EXPECT_LT(took, 200ms) << "the try-acquire waited for the reconnect";
        EXPECT_FALSE(g.owns_lock());
        t0 = clk::now();
        auto [ec2, g2] = co_await m.async_acquire_for(300ms, boost::asio::as_tuple(use_awaitable));
        took = clk::now() - t0;
        EXPECT_EQ(ec2, errc::acquire_timeout) << ec2.message();
        EXPECT_LT(took, 300ms + 100ms) << "the deadline was not kept while disconnected";
        proxy.blackhole(false);
        co_await wait_state(*a, session_state::connected, 5000ms);
        // once back, a try-acquire works again
        auto [ec3, g3] = co_await m.async_try_acquire(boost::asio::as_tuple(use_awaitable));
        EXPECT_FALSE(ec3) << ec3.message();
        EXPECT_TRUE(g3.owns_lock());
        co_await g3.async_release(use_awaitable);
    });
}

using NewUser = zt::zk_test;

TEST_F(NewUser, AZeroDeadlineIsOneTry) {
    // Before: async_acquire_for(0ms) failed with acquire_timeout on a free lock.
    run_test([&]() -> awaitable<void> {
        auto a = co_await connect();
        auto b = co_await connect();
        auto path = lock_path("zero");
        zklock::mutex ma(*a, path), mb(*b, path);
        auto [ec, g] = co_await ma.async_acquire_for(0ms, boost::asio::as_tuple(use_awaitable));
        EXPECT_FALSE(ec) << ec.message();
        CO_REQUIRE(g.owns_lock());
        auto t0 = clk::now();
        auto [ec2, g2] = co_await mb.async_acquire_for(0ms, boost::asio::as_tuple(use_awaitable));
        EXPECT_EQ(ec2, errc::acquire_timeout) << ec2.message();
        EXPECT_LT(clk::now() - t0, 1000ms);
        EXPECT_FALSE(g2.owns_lock());
        co_await wait_for_children(*a, path, 1); // the try's node is gone
        co_await g.async_release(use_awaitable);
    });
}

TEST_F(NewUser, AClosedSessionSaysItIsClosed) {
    // Before: an acquire or async_connect on a closed session completed with a bare
    // "Operation canceled" (system:125).
    run_test([&]() -> awaitable<void> {
        auto a = co_await connect();
        co_await a->async_close(use_awaitable);
        auto [ec] = co_await a->async_connect(boost::asio::as_tuple(use_awaitable));
        EXPECT_EQ(ec, errc::session_closed) << ec.message();
        zklock::mutex m(*a, lock_path("closed"));
        auto [ec2, g] = co_await m.async_acquire(boost::asio::as_tuple(use_awaitable));
        EXPECT_EQ(ec2, errc::session_closed) << ec2.message();
        EXPECT_NE(ec2.message().find("closed"), std::string::npos) << ec2.message();
    });
}

/// The path check refuses what the server refuses, no more: each candidate name is created by the
/// raw C client (which checks only ASCII control characters itself) and the server's answer is
/// compared with validate_lock_path's. Guards against the check that took only ASCII controls: a
/// path with U+0085, a private-use character or an emoji reached the server, which refused the
/// create with a bare "bad arguments". A mutex on such a path fails at once, naming it.
TEST_F(NewUser, ThePathCheckRefusesWhatTheServerRefuses) {
    run_test([&]() -> awaitable<void> {
        const auto parent = lock_path("utf8");
        raw_zk raw;
        raw.create_parents(parent + "/x"); // (the parent itself)
        const std::vector<std::string> names = {
            // accepted
            "caf\xc3\xa9",
            "\xe9\x94\x81",
            "\xc2\xa0",
            "\xef\xbf\xaf",
            "~",
            "\xed\x9f\xbf",
            "\xef\xa4\x80",
            "\xc2\xa1",
            "\xdf\xbf",
            "\xe0\xa0\x80",
            // C1 controls (and DEL)
            "a\x7f",
            "a\xc2\x80",
            "a\xc2\x85",
            "a\xc2\x9f",
            // private use
            "a\xee\x80\x80",
            "a\xef\xa3\xbf",
            // U+FFF0-U+FFFF
            "a\xef\xbf\xb0",
            "a\xef\xbf\xbd",
            "a\xef\xbf\xbf",
            // past U+FFFF
            "a\xf0\x9f\x94\x92",
            "a\xf4\x8f\xbf\xbf",
            // not UTF-8: an encoded surrogate, overlong, a stray continuation, truncated, never UTF-8
            "a\xed\xa0\x80",
            "a\xc0\xaf",
            "a\xe0\x80\xaf",
            "a\x80",
            "a\xc3",
            "a\xff",
        };
        int refused = 0;
        for (const auto& name : names) {
            std::string hex;
            for (unsigned char c : name) {
                char b[8];
                std::snprintf(b, sizeof b, c < 0x80 ? "%c" : "\\x%02x", c);
                hex += b;
            }
            const auto path = parent + "/" + name;
            const int rc = raw.create(path);
            const bool refused_here = zklock::validate_lock_path(path) == errc::path_bad_character;
            EXPECT_EQ(rc != ZOK, refused_here) << hex << ": the server said " << zerror(rc);
            if (rc == ZOK)
                EXPECT_EQ(raw.remove(path), ZOK) << hex;
            else
                EXPECT_EQ(rc, ZBADARGUMENTS) << hex;
            refused += refused_here;
        }
        EXPECT_EQ(refused, 17);
        auto a = co_await connect();
        zklock::mutex m(*a, parent + "/a\xc2\x85");
        auto [ec, g] = co_await m.async_acquire(boost::asio::as_tuple(use_awaitable));
        EXPECT_EQ(ec, errc::path_bad_character) << ec.message();
        EXPECT_NE(ec.message().find("UTF-8"), std::string::npos) << ec.message();
    });
}

TEST_F(NewUser, ConnectStringAndOptionMistakesAreNamedAtOnce) {
    // Each mistake is named at once. Guards against the misleading reports: "http://..." as "an
    // empty segment" of a lock path, a chroot with a trailing '/' as "must not end with '/'", a
    // missing chroot as "ZooKeeper: no node"; a session timeout of 0 or a connect timeout of 0 as
    // "a timeout or option is out of range", and one of 1 ms hanging until the connect timeout.
    run_test([&]() -> awaitable<void> {
        auto ex = co_await asio::this_coro::executor;
        auto refused = [&](zklock::session_options o) -> awaitable<zklock::error_code> {
            zklock::session s(ex, std::move(o));
            auto start = clk::now();
            auto [ec] = co_await s.async_connect(boost::asio::as_tuple(use_awaitable));
            EXPECT_LT(clk::now() - start, 1s) << "a mistake must be refused at once";
            co_return ec;
        };
        EXPECT_EQ(co_await refused(options("http://127.0.0.1:2181")), errc::invalid_connect_string);
        EXPECT_EQ(co_await refused(options(zk_connect() + "/chroot/")), errc::invalid_chroot);
        EXPECT_EQ(co_await refused(options(zk_connect() + "/a//b")), errc::invalid_chroot);
        for (auto t : {0ms, -5000ms, 1ms, 2ms, 99ms}) {
            auto o = options();
            o.session_timeout = t;
            EXPECT_EQ(co_await refused(o), errc::invalid_session_timeout) << t.count();
        }
        auto o = options();
        o.connect_timeout = 0ms;
        EXPECT_EQ(co_await refused(o), errc::invalid_connect_timeout);
        for (auto cap : {-1ms, 1ms, 99ms}) {
            auto oc = options();
            oc.lease_timeout_cap = cap;
            EXPECT_EQ(co_await refused(oc), errc::invalid_lease_timeout_cap) << cap.count();
        }
        // 100 ms is accepted (the server negotiates its minimum)
        auto two = options();
        two.session_timeout = 100ms;
        auto s2 = co_await connect(two);
        EXPECT_GE(s2->negotiated_timeout(), 100ms);
        co_await s2->async_close(use_awaitable);

        // a chroot that does not exist: async_connect names it, and so does the acquire
        auto missing =
            std::make_unique<zklock::session>(ex, options(zk_connect() + unique_path("no-such-chroot")));
        auto [cec] = co_await missing->async_connect(boost::asio::as_tuple(use_awaitable));
        EXPECT_EQ(cec, errc::chroot_missing) << cec.message();
        zklock::mutex m(*missing, "/locks/x");
        auto [ec, g] = co_await m.async_acquire_for(5s, boost::asio::as_tuple(use_awaitable));
        EXPECT_EQ(ec, errc::chroot_missing) << ec.message();
        co_await missing->async_close(use_awaitable);
    });
}

TEST_F(NewUser, AStallLongerThanTheSessionReportsTheExpiryNotADeletionOrALapse) {
    // A holder stopped for 2 T, then resumed, reports the expiry. Guards against it reporting
    // lock_node_deleted ("deleted by another client": the server's expiry had deleted it, and the
    // watch event was waiting in the socket) or lease_expired ("the server may expire the session
    // soon": it had expired T earlier), whichever of the socket and the lease timer the io_context
    // served first.
    // The stall here blocks the io_context's only thread, as SIGSTOP, a debugger or a swap storm
    // would; with and without a loss waiter (and its watch) armed before it.
    for (bool armed_before : {true, false}) {
        run_test([&]() -> awaitable<void> {
            auto o = options();
            o.session_timeout = 2000ms;
            auto s = co_await connect(o);
            zklock::mutex m(*s, lock_path("stalled"));
            auto g = co_await m.async_acquire(use_awaitable);
            const auto T = s->negotiated_timeout();
            std::optional<zklock::error_code> why;
            auto wait = [&] { g.async_wait_lost([&](zklock::error_code ec) { why = ec; }); };
            if (armed_before) {
                wait();
                co_await sleep_for(100ms); // (the watch's getData is answered)
            }
            std::this_thread::sleep_for(T * 5 / 2); // the process stalls: nothing of it runs
            if (!armed_before) wait();
            for (int i = 0; i < 500 && !why; ++i) co_await sleep_for(10ms);
            EXPECT_TRUE(why.has_value()) << "no loss reported after the stall";
            if (why)
                EXPECT_EQ(*why, errc::session_expired)
                    << (armed_before ? "armed: " : "not armed: ") << why->message();
            EXPECT_EQ(g.loss_reason(), errc::session_expired) << g.loss_reason().message();
        });
    }
}

TEST_F(NewUser, AStallShorterThanTheSessionStillReportsTheLapseAtOnce) {
    // The other side of the above: a stall past the lease but short of the earliest expiry (0.8 T)
    // is reported as lease_expired at once, with no question asked of the server.
    run_test([&]() -> awaitable<void> {
        auto o = options();
        o.session_timeout = 4000ms;
        auto s = co_await connect(o);
        zklock::mutex m(*s, lock_path("stalled"));
        auto g = co_await m.async_acquire(use_awaitable);
        const auto T = s->negotiated_timeout();
        const auto id = s->session_id();
        std::optional<zklock::error_code> why;
        g.async_wait_lost([&](zklock::error_code ec) { why = ec; });
        co_await sleep_for(100ms);
        std::this_thread::sleep_for(T * 8 / 10);
        EXPECT_TRUE(g.is_lost()) << "the lease lapsed during the stall";
        for (int i = 0; i < 100 && !why; ++i) co_await sleep_for(10ms);
        EXPECT_TRUE(why.has_value());
        if (why) EXPECT_EQ(*why, errc::lease_expired) << why->message();
        // The session survived: not expired, the same one. (Its connection may have been dropped
        // and made again meanwhile: nothing was received for 0.8 T, and the C client gives a
        // connection up after 2/3 T without a reply; which of that and the loss signal the strand
        // runs first after the stall is the reactor's order. Failed in a loaded suite run with
        // "suspended" here: the connection was being made again, the session alive.)
        const auto state_after = s->state();
        co_await eventually([&] { return s->state() == zklock::session_state::connected; }, 5000ms);
        EXPECT_EQ(s->state(), zklock::session_state::connected) << "the session survived the stall";
        EXPECT_EQ(s->session_id(), id) << "a new session: the old one expired";
        std::printf("  after the stall: %s at the loss signal, %llu reconnect(s)\n",
                    state_after == zklock::session_state::connected ? "connected" : "reconnecting",
                    static_cast<unsigned long long>(s->metrics().reconnects));
    });
}

TEST_F(NewUser, AConnectTimeoutSaysWhatEachServerGot) {
    // Guards against a bare "no ZooKeeper server answered" for a port that refused every attempt.
    run_test([&]() -> awaitable<void> {
        asio::ip::tcp::acceptor bound(co_await asio::this_coro::executor);
        bound.open(asio::ip::tcp::v4());
        bound.bind({asio::ip::make_address("127.0.0.1"), 0}); // bound, never listening: refused
        const auto port = bound.local_endpoint().port();
        auto o = options("127.0.0.1:" + std::to_string(port));
        o.connect_timeout = 1000ms;
        zklock::session s(co_await asio::this_coro::executor, o);
        auto [ec] = co_await s.async_connect(boost::asio::as_tuple(use_awaitable));
        EXPECT_EQ(ec, errc::connect_timeout) << ec.message();
        EXPECT_EQ(s.last_connect_attempts(), "127.0.0.1:" + std::to_string(port) + ": connection refused");
    });
}

TEST_F(NewUser, AnOversizedWriteIsRefusedBeforeItIsSentOnEveryEntryPoint) {
    // A write over the server's packet limit (jute.maxbuffer, 1 MiB - 1 by default) makes the
    // server close the connection instead of refusing the request: a connection loss under every
    // lock of the session. Before: async_create_node and async_set_data sent 1.1 MB and completed
    // with "connection loss". Every entry point refuses it before sending, with its own errc;
    // the session keeps its one connection and its held lock throughout.
    run_test([&]() -> awaitable<void> {
        auto s = co_await connect();
        auto path = lock_path("oversized");
        zklock::mutex m(*s, path);
        auto g = co_await m.async_acquire(use_awaitable);
        const auto connected_at = s->impl()->lease_view().connected;
        auto state_changed = std::make_shared<bool>(false);
        s->async_wait_state(session_state::connected,
                            [state_changed](zklock::error_code ec, session_state) { *state_changed = !ec; });
        const std::string big(1'100'000, 'x');
        const auto node = unique_path("oversized-node");
        {
            auto [ec] =
                co_await zklock::async_create_node(*s, node, big, boost::asio::as_tuple(use_awaitable));
            EXPECT_EQ(ec, errc::write_too_large) << ec.message();
            EXPECT_NE(ec.message().find("921600"), std::string::npos) << ec.message();
        }
        {
            // the largest write that fits is sent, and the server takes it
            const std::string fits(zklock::max_write_bytes - node.size() - 64, 'y');
            auto [ec] =
                co_await zklock::async_create_node(*s, node, fits, boost::asio::as_tuple(use_awaitable));
            EXPECT_FALSE(ec) << ec.message();
            auto [ec2] = co_await zklock::async_set_data(*s, node, fits + "z", -1,
                                                         boost::asio::as_tuple(use_awaitable));
            EXPECT_EQ(ec2, errc::write_too_large) << "one byte over";
            auto [ec3] =
                co_await zklock::async_set_data(*s, node, big, -1, boost::asio::as_tuple(use_awaitable));
            EXPECT_EQ(ec3, errc::write_too_large) << ec3.message();
            auto [ec4] =
                co_await zklock::async_delete_node(*s, node, -1, boost::asio::as_tuple(use_awaitable));
            EXPECT_FALSE(ec4) << ec4.message();
        }
        {
            auto [ec, r] = co_await g.async_commit(zklock::transaction{}.create(node, big),
                                                   boost::asio::as_tuple(use_awaitable));
            EXPECT_EQ(ec, errc::transaction_too_large) << ec.message();
        }
        {
            zklock::mutex other(*s, path + "-data", zklock::mutex_options{.node_data = big});
            auto [ec, g2] = co_await other.async_acquire(boost::asio::as_tuple(use_awaitable));
            EXPECT_EQ(ec, errc::data_too_large) << ec.message();
        }
        {
            zklock::election e(*s, path + "-election");
            auto [ec, l] = co_await e.async_campaign(big, boost::asio::as_tuple(use_awaitable));
            EXPECT_EQ(ec, errc::data_too_large) << ec.message();
            auto [ec2, l2] = co_await e.async_campaign("me", boost::asio::as_tuple(use_awaitable));
            CO_REQUIRE(!ec2);
            auto [ec3] = co_await l2.async_proclaim(big, boost::asio::as_tuple(use_awaitable));
            EXPECT_EQ(ec3, errc::data_too_large) << ec3.message();
            co_await l2.async_resign(use_awaitable);
        }
        co_await sleep_for(300ms); // (a connection the server closed would show by now)
        EXPECT_FALSE(*state_changed) << "the session left the connected state";
        EXPECT_EQ(s->state(), session_state::connected);
        EXPECT_EQ(s->impl()->lease_view().connected, connected_at) << "the session connected again";
        EXPECT_FALSE(g.is_lost());
        co_await g.async_release(use_awaitable);
        co_await expect_no_leftovers(*s, path);
        co_await expect_no_leftovers(*s, path + "-election");
        auto [gone, nd] = co_await zklock::async_get_data(*s, node, boost::asio::as_tuple(use_awaitable));
        EXPECT_EQ(gone, zklock::zk_errc::no_node);
        co_await s->async_close(use_awaitable);
    });
}

TEST_F(NewUser, AnIPv6LiteralInBracketsConnects) {
    // "[::1]:2181" is how an IPv6 address and its port are written. Before: it passed the check,
    // then the C client refused it ("[::1]" went to its resolver) and async_connect failed with
    // the generic "invalid connect string". The C client takes IPv6 literals; zklock now hands
    // them over without brackets. (The server listens on 127.0.0.1: a proxy on ::1 in front.)
    run_test([&]() -> awaitable<void> {
        tcp_proxy v6(first_port(zk_connect()), "::1");
        auto s = co_await connect(options("[::1]:" + std::to_string(v6.port())));
        EXPECT_EQ(s->state(), session_state::connected);
        auto path = lock_path("ipv6");
        zklock::mutex m(*s, path);
        auto g = co_await m.async_acquire(use_awaitable);
        co_await g.async_release(use_awaitable);
        EXPECT_GE(v6.accepted(), 1);
        co_await expect_no_leftovers(*s, path);
        co_await s->async_close(use_awaitable);
    });
}
