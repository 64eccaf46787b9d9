// Faults on a real ZooKeeper: connection loss, partitions, expiry, deleted nodes, closing,
// unreachable servers, bad input.
#include <zklock/mutex.hpp>

#include "common.hpp"
#include "proxy.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/detached.hpp>

using namespace zt;
using zklock::errc;
using zklock::session_state;

namespace {

/// Follows the session's state changes into `seen` until `stop` is set.
awaitable<void> record_states(zklock::session& s, std::vector<session_state>& seen, bool& stop) {
    auto st = s.state();
    while (!stop) {
        auto [ec, next] = co_await s.async_wait_state(st, boost::asio::as_tuple(use_awaitable));
        if (ec) co_return;
        seen.push_back(next);
        st = next;
        if (next == session_state::closed) co_return;
    }
}

} // namespace

using Faults = zt::zk_test;

TEST_F(Faults, ConnectionLossAndReconnectKeepTheLockHeldAndExclusive) {
    run_test([&]() -> awaitable<void> {
        tcp_proxy proxy(first_port(zk_connect()));
        auto path = lock_path();
        auto a = co_await connect(through(proxy));
        auto b = co_await connect();
        std::vector<session_state> seen;
        bool stop = false;
        asio::co_spawn(co_await asio::this_coro::executor, record_states(*a, seen, stop),
                       boost::asio::detached);
        auto id = a->session_id();
        zklock::mutex ma(*a, path), mb(*b, path);
        auto g = co_await ma.async_acquire(use_awaitable);
        proxy.drop();
        for (int i = 0;
             i < 300 && std::find(seen.begin(), seen.end(), session_state::suspended) == seen.end(); ++i)
            co_await sleep_for(10ms);
        EXPECT_NE(std::find(seen.begin(), seen.end(), session_state::suspended), seen.end())
            << "no suspension seen";
        co_await wait_state(*a, session_state::connected, 3000ms);
        EXPECT_EQ(a->session_id(), id) << "not the same session";
        EXPECT_FALSE(g.is_lost()) << g.loss_reason().message();
        auto [ec, g2] = co_await mb.async_try_acquire(boost::asio::as_tuple(use_awaitable));
        EXPECT_EQ(ec, errc::lock_busy);
        // an acquire waiting across a connection loss is granted after the reconnect
        zklock::guard gb;
        bool b_done = false;
        mb.async_acquire([&](zklock::error_code ec, zklock::guard x) {
            EXPECT_FALSE(ec);
            gb = std::move(x);
            b_done = true;
        });
        co_await wait_for_children(*a, path, 2);
        proxy.drop();
        co_await wait_state(*a, session_state::connected, 3000ms);
        EXPECT_FALSE(b_done);
        co_await g.async_release(use_awaitable);
        co_await eventually([&] { return b_done; }, 3000ms);
        EXPECT_TRUE(b_done);
        co_await gb.async_release(use_awaitable);
        stop = true;
        EXPECT_NE(std::find(seen.begin(), seen.end(), session_state::suspended), seen.end());
        co_await expect_no_leftovers(*b, path);
        co_await a->async_close(use_awaitable); // ends record_states
        EXPECT_EQ(seen.back(), session_state::closed);
    });
}

TEST_F(Faults, SessionExpiryFiresTheLossSignalAndFreesTheLock) {
    run_test([&]() -> awaitable<void> {
        tcp_proxy proxy(first_port(zk_connect()));
        auto path = lock_path();
        auto o = through(proxy);
        o.session_timeout = 2000ms;
        o.loss = zklock::loss_policy::on_expiry(); // only the confirmed expiry counts here
        auto a = co_await connect(o);
        auto b = co_await connect();
        auto old_id = a->session_id();
        zklock::mutex ma(*a, path), mb(*b, path);
        auto g = co_await ma.async_acquire(use_awaitable);
        zklock::error_code lost;
        bool lost_done = false;
        g.async_wait_lost([&](zklock::error_code ec) {
            lost = ec;
            lost_done = true;
        });
        co_await sleep_for(100ms);
        proxy.blackhole(true); // partition: the server expires the session after ~2 s
        auto t0 = std::chrono::steady_clock::now();
        auto gb = co_await mb.async_acquire_for(15s, use_awaitable);
        auto waited = std::chrono::steady_clock::now() - t0;
        EXPECT_TRUE(gb.owns_lock());
        EXPECT_LT(waited, 2000ms + 3000ms) << "the lock was not freed within the session timeout";
        EXPECT_FALSE(lost_done) << "the partitioned holder cannot know yet";
        proxy.blackhole(false); // the holder reconnects and learns of the expiry
        co_await eventually([&] { return lost_done; }, 5000ms);
        EXPECT_TRUE(lost_done);
        EXPECT_EQ(lost, errc::session_expired) << lost.message();
        EXPECT_TRUE(g.is_lost());
        EXPECT_TRUE(zklock::is_fatal(lost));
        // a new session is made automatically
        co_await wait_state(*a, session_state::connected, 5000ms);
        EXPECT_NE(a->session_id(), old_id);
        co_await g.async_release(use_awaitable); // releasing a lost lock is fine
        co_await gb.async_release(use_awaitable);
    });
}

TEST_F(Faults, HandOffQueueThroughSessionExpiry) {
    // A hand-off queue's session expires: the grant that is out is lost, the local waiters fail
    // as their own nodes would have, and the queue works again on the renewed session.
    run_test([&]() -> awaitable<void> {
        tcp_proxy proxy(first_port(zk_connect()));
        auto path = lock_path();
        auto o = through(proxy);
        o.session_timeout = 2000ms;
        o.loss = zklock::loss_policy::on_expiry(); // only the confirmed expiry counts here
        auto a = co_await connect(o);
        auto b = co_await connect();
        zklock::mutex_options ho;
        ho.local_handoff = 16;
        zklock::mutex ma(*a, path, ho), mb(*b, path);
        auto g = co_await ma.async_acquire(use_awaitable);
        int failed = 0;
        std::vector<zklock::error_code> errors;
        for (int i = 0; i < 3; ++i)
            asio::co_spawn(
                co_await asio::this_coro::executor,
                [&]() -> awaitable<void> {
                    auto [ec, w] = co_await ma.async_acquire(asio::as_tuple(use_awaitable));
                    errors.push_back(ec);
                    ++failed;
                },
                asio::detached);
        co_await sleep_for(100ms);
        proxy.blackhole(true); // the server expires the session after ~2 s
        auto gb = co_await mb.async_acquire_for(15s, use_awaitable);
        EXPECT_TRUE(gb.owns_lock());
        proxy.blackhole(false);
        co_await eventually([&] { return g.is_lost() && failed == 3; }, 8000ms);
        EXPECT_EQ(g.loss_reason(), errc::session_expired);
        CO_REQUIRE(failed == 3);
        for (auto& ec : errors) EXPECT_EQ(ec, errc::session_expired) << ec.message();
        co_await wait_state(*a, session_state::connected, 5000ms);
        const auto remote_token = gb.fencing_token();
        co_await gb.async_release(use_awaitable);
        // The queue works again on the renewed session, with a new node, even while the lost
        // guard is still held...
        auto g2 = co_await ma.async_acquire_for(5s, use_awaitable);
        EXPECT_EQ(g2.local_grant(), 0u);
        EXPECT_EQ(g2.session_id(), a->session_id());
        EXPECT_GT(g2.fencing_token(), remote_token);
        auto w3 = in_background([&](auto h) { ma.async_acquire_for(5s, h); });
        auto& g3 = w3->guard;
        co_await sleep_for(50ms);
        // ...and releasing the lost guard of the old node passes nothing on: g2 still holds
        co_await g.async_release(use_awaitable);
        co_await sleep_for(200ms);
        EXPECT_FALSE(w3->done) << "the lost guard's release handed the lock on while g2 held it";
        const auto g2_token = g2.fencing_token();
        co_await g2.async_release(use_awaitable);
        co_await eventually([&] { return w3->done; });
        CO_REQUIRE(w3->granted());
        EXPECT_GT(g3.fencing_token(), g2_token);
        EXPECT_EQ(g3.local_grant(), 1u); // handed off under g2's node
        co_await g3.async_release(use_awaitable);
    });
}

TEST_F(Faults, HandOffWaitsForTheConnection) {
    // The promise of docs/guarantees.md: a hand-off happens only while the session is connected. A holder
    // that releases while the connection is down passes nothing on; the local waiter gets the
    // lock on a new node once the session is back.
    run_test([&]() -> awaitable<void> {
        tcp_proxy proxy(first_port(zk_connect()));
        auto path = lock_path();
        auto o = through(proxy);
        o.loss = zklock::loss_policy::on_expiry(); // the lock stays held while suspended
        auto a = co_await connect(o);
        auto b = co_await connect();
        zklock::mutex_options ho;
        ho.local_handoff = 8;
        zklock::mutex m(*a, path, ho);
        auto g1 = co_await m.async_acquire(use_awaitable);
        const auto first_node = g1.node_path();
        auto w = in_background([&](auto h) { m.async_acquire_for(10s, h); });
        auto& g2 = w->guard;
        co_await sleep_for(50ms);
        proxy.blackhole(true);
        proxy.drop(); // the client sees the loss at once and cannot reconnect
        co_await wait_state(*a, session_state::suspended, 3000ms);
        g1.release_in_background();
        co_await sleep_for(300ms);
        EXPECT_FALSE(w->done) << "handed off while the connection was down";
        proxy.blackhole(false);
        co_await eventually([&] { return w->done; }, 5000ms);
        CO_REQUIRE(w->granted());
        EXPECT_NE(g2.node_path(), first_node);
        EXPECT_EQ(g2.local_grant(), 0u);
        auto kids = co_await children_of(*b, path);
        CO_REQUIRE(kids.size() == 1u);
        EXPECT_EQ(path + "/" + kids[0], g2.node_path()) << "the first node outlived the reconnect";
        co_await g2.async_release(use_awaitable);
    });
}

TEST_F(Faults, OnDisconnectPolicyReportsTheLossAndBindsWorkToIt) {
    run_test([&]() -> awaitable<void> {
        tcp_proxy proxy(first_port(zk_connect()));
        auto path = lock_path();
        auto o = through(proxy);
        o.session_timeout = 3000ms;
        o.loss = zklock::loss_policy::on_disconnect();
        auto a = co_await connect(o);
        zklock::mutex ma(*a, path);
        auto g = co_await ma.async_acquire(use_awaitable);
        // a critical section bound to the lock: cancelled when the lock is lost
        asio::steady_timer work(co_await asio::this_coro::executor, 60s);
        zklock::error_code work_ec;
        bool work_done = false;
        work.async_wait(g.bind_loss(co_await asio::this_coro::executor, [&](zklock::error_code ec) {
            work_ec = ec;
            work_done = true;
        }));
        co_await sleep_for(100ms);
        auto t0 = std::chrono::steady_clock::now();
        proxy.drop();
        proxy.blackhole(true);
        auto [ec] = co_await g.async_wait_lost(boost::asio::as_tuple(use_awaitable));
        auto took = std::chrono::steady_clock::now() - t0;
        EXPECT_EQ(ec, errc::lock_lost_suspended) << ec.message();
        EXPECT_LT(took, 2000ms);
        co_await eventually([&] { return work_done; }, 1000ms);
        EXPECT_TRUE(work_done);
        EXPECT_EQ(work_ec, asio::error::operation_aborted);
        proxy.blackhole(false);
        // whether the session survived or not, the lost lock's node must go
    });
}

TEST_F(Faults, NodeDeletedBySomeoneElseFiresTheLossSignal) {
    run_test([&]() -> awaitable<void> {
        auto path = lock_path();
        auto a = co_await connect();
        auto b = co_await connect();
        zklock::mutex ma(*a, path);
        auto g = co_await ma.async_acquire(use_awaitable);
        zklock::error_code lost;
        bool done = false;
        g.async_wait_lost([&](zklock::error_code ec) {
            lost = ec;
            done = true;
        });
        co_await sleep_for(100ms);
        auto& bi = *b->impl();
        auto r = co_await asio::co_spawn(bi.strand(), bi.async_remove(g.node_path(), use_awaitable),
                                         use_awaitable);
        EXPECT_EQ(r.rc, ZOK);
        co_await eventually([&] { return done; }, 3000ms);
        EXPECT_TRUE(done);
        EXPECT_EQ(lost, errc::lock_node_deleted) << lost.message();
        co_await g.async_release(use_awaitable);
    });
}

TEST_F(Faults, WaitLostCompletesWithReleasedAndIsCancellable) {
    run_test([&]() -> awaitable<void> {
        auto path = lock_path();
        auto a = co_await connect();
        zklock::mutex ma(*a, path);
        auto g = co_await ma.async_acquire(use_awaitable);
        asio::cancellation_signal sig;
        zklock::error_code first, second;
        int n = 0;
        g.async_wait_lost(asio::bind_cancellation_slot(sig.slot(), [&](zklock::error_code ec) {
            first = ec;
            ++n;
        }));
        g.async_wait_lost([&](zklock::error_code ec) {
            second = ec;
            ++n;
        });
        co_await sleep_for(50ms);
        sig.emit(asio::cancellation_type::terminal);
        co_await sleep_for(50ms);
        EXPECT_EQ(first, asio::error::operation_aborted);
        EXPECT_FALSE(g.is_lost());
        co_await g.async_release(use_awaitable);
        co_await sleep_for(50ms);
        EXPECT_EQ(second, errc::lock_released);
        EXPECT_EQ(n, 2);
        auto [ec] = co_await g.async_wait_lost(boost::asio::as_tuple(use_awaitable));
        EXPECT_EQ(ec, errc::not_held);
    });
}

TEST_F(Faults, CloseAbortsOperationsInFlightAndReleasesLocks) {
    run_test([&]() -> awaitable<void> {
        auto c = co_await two_contenders();
        auto ga = co_await c.ma.async_acquire(use_awaitable);
        zklock::error_code b_ec;
        bool b_done = false;
        c.mb.async_acquire([&](zklock::error_code ec, zklock::guard) {
            b_ec = ec;
            b_done = true;
        });
        co_await wait_for_children(*c.a, c.path, 2);
        zklock::error_code lost;
        ga.async_wait_lost([&](zklock::error_code ec) { lost = ec; });
        co_await c.b->async_close(use_awaitable);
        // (the aborted acquire's completion is not ordered with the close's: it may come after)
        co_await eventually([&] { return b_done; });
        EXPECT_TRUE(b_done);
        EXPECT_EQ(b_ec, asio::error::operation_aborted);
        EXPECT_EQ(c.b->state(), session_state::closed);
        co_await c.b->async_close(use_awaitable); // idempotent
        co_await c.a->async_close(use_awaitable);
        co_await eventually([&] { return bool(lost); });
        EXPECT_EQ(lost, errc::session_closed);
    });
}

TEST_F(Faults, DestroyingASessionWithPendingOperationsIsSafe) {
    auto path = lock_path();
    zklock::error_code b_ec;
    bool b_done = false;
    zklock::guard kept;
    run_test([&]() -> awaitable<void> {
        auto a = co_await connect();
        auto b = co_await connect();
        zklock::mutex ma(*a, path);
        auto mb = std::make_unique<zklock::mutex>(*b, path);
        kept = co_await ma.async_acquire(use_awaitable);
        mb->async_acquire([&](zklock::error_code ec, zklock::guard) {
            b_ec = ec;
            b_done = true;
        });
        co_await wait_for_children(*a, path, 2);
        mb.reset(); // the mutex object may go first
        b.reset();  // destroys the session with the acquire pending
        co_await eventually([&] { return b_done; }, 2000ms);
        EXPECT_TRUE(b_done);
        EXPECT_EQ(b_ec, asio::error::operation_aborted);
        kept.release_in_background();
    });
}

TEST_F(Faults, UnreachableServerFailsWithConnectTimeout) {
    run_test([&]() -> awaitable<void> {
        // a port nobody listens on
        asio::ip::tcp::acceptor probe(co_await asio::this_coro::executor,
                                      {asio::ip::make_address("127.0.0.1"), 0});
        auto port = probe.local_endpoint().port();
        probe.close();
        auto o = options("127.0.0.1:" + std::to_string(port));
        o.connect_timeout = 500ms;
        zklock::session s(co_await asio::this_coro::executor, o);
        auto t0 = std::chrono::steady_clock::now();
        auto [ec] = co_await s.async_connect(boost::asio::as_tuple(use_awaitable));
        EXPECT_EQ(ec, errc::connect_timeout) << ec.message();
        EXPECT_LT(std::chrono::steady_clock::now() - t0, 3s);
        EXPECT_EQ(s.state(), session_state::disconnected);
        // a lock on a session that never connected fails clearly, without hanging
        zklock::mutex m(s, "/x");
        auto [ec2, g] = co_await m.async_acquire(boost::asio::as_tuple(use_awaitable));
        EXPECT_EQ(ec2, errc::not_connected) << ec2.message();
    });
}

TEST_F(Faults, BadInputGetsNamedErrorsAndTouchesNothing) {
    run_test([&]() -> awaitable<void> {
        for (const char* bad : {"", "localhost", "h:99999", "h:1,,h:2", "h:1/bad//chroot"}) {
            zklock::session s(co_await asio::this_coro::executor, options(bad));
            auto [ec] = co_await s.async_connect(boost::asio::as_tuple(use_awaitable));
            EXPECT_TRUE(ec == errc::invalid_connect_string || ec == errc::invalid_chroot)
                << bad << ": " << ec.message();
        }
        auto o = options();
        o.session_timeout = 0ms;
        zklock::session s0(co_await asio::this_coro::executor, o);
        auto [ec0] = co_await s0.async_connect(boost::asio::as_tuple(use_awaitable));
        EXPECT_EQ(ec0, errc::invalid_session_timeout);
        for (double f : {0.55, 0.51, 0.1, 0.0}) { // outside (0.1, 0.5]
            auto of = options();
            of.loss = zklock::loss_policy::lease(f);
            zklock::session sf(co_await asio::this_coro::executor, of);
            auto [ecf] = co_await sf.async_connect(boost::asio::as_tuple(use_awaitable));
            EXPECT_EQ(ecf, errc::invalid_lease_fraction) << f << ": " << ecf.message();
        }

        auto s = co_await connect();
        auto before = s->statistics().requests();
        for (std::string bad :
             {std::string(""), std::string("rel/path"), std::string("/trailing/"), std::string("/a//b"),
              std::string("/a/../b"), std::string("/nul\0x", 6), std::string("/zookeeper/config")}) {
            zklock::mutex m(*s, bad);
            auto [ec, g] = co_await m.async_acquire(boost::asio::as_tuple(use_awaitable));
            EXPECT_TRUE(ec) << "path accepted: " << bad;
            EXPECT_EQ(&ec.category(), &zklock::error_category());
            EXPECT_NE(ec.message().find("invalid path"), std::string::npos) << ec.message();
            EXPECT_FALSE(g.owns_lock());
        }
        EXPECT_EQ(s->statistics().requests(), before) << "a bad path reached ZooKeeper";
    });
}
