// The session: connecting, its timeouts and cancellation, and the guaranteed deletes it runs
// in the background.
#include <zklock/mutex.hpp>
#include <zklock/multi_lock.hpp>
#include <zklock/semaphore.hpp>
#include <zklock/shared_mutex.hpp>
#include <zklock/znode.hpp>

#include "common.hpp"
#include "session_faults.hpp"
#include "proxy.hpp"
#include "raw_zk.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/deferred.hpp>
#include <boost/asio/detached.hpp>

using namespace zt;
using zklock::errc;
using zklock::session_state;

using Session = zt::zk_test;

namespace {
/// An async_connect bound to `sig`: `done` and `ec` are set when it completes.
struct connect_outcome {
    bool done = false;
    zklock::error_code ec;
};
std::shared_ptr<connect_outcome> connect_with(zklock::session& s, asio::cancellation_signal& sig) {
    auto o = std::make_shared<connect_outcome>();
    s.async_connect(asio::bind_cancellation_slot(sig.slot(), [o](zklock::error_code ec) {
        o->ec = ec;
        o->done = true;
    }));
    return o;
}
} // namespace

TEST_F(Session, ARenewedSessionHasAConnectTimeout) {
    // After an expiry the new session has a connect timeout too. Without one, with no server
    // reachable it would stay "connecting" forever and acquires without a deadline would hang.
    run_test([&]() -> awaitable<void> {
        tcp_proxy proxy(first_port(zk_connect()));
        auto path = lock_path();
        auto o = through(proxy);
        o.session_timeout = 2000ms;
        o.connect_timeout = 2000ms;
        o.loss = zklock::loss_policy::on_expiry();
        auto a = co_await connect(o);
        auto b = co_await connect();
        zklock::mutex ma(*a, path), mb(*b, path);
        auto g = co_await ma.async_acquire(use_awaitable);
        proxy.blackhole(true);
        auto gb = co_await mb.async_acquire_for(10s, use_awaitable); // the server expired A's session
        EXPECT_TRUE(gb.owns_lock());
        proxy.refuse_after(1); // one reconnect (to learn of the expiry), then the server is gone
        proxy.blackhole(false);
        co_await eventually([&] { return g.is_lost(); }, 5000ms);
        EXPECT_EQ(g.loss_reason(), errc::session_expired) << g.loss_reason().message();
        co_await eventually([&] { return a->state() == session_state::disconnected; }, 6000ms);
        EXPECT_EQ(a->state(), session_state::disconnected) << zklock::to_string(a->state());
        auto [ec, none] = co_await ma.async_acquire(boost::asio::as_tuple(use_awaitable)); // no deadline
        EXPECT_EQ(ec, errc::not_connected) << ec.message();
        co_await g.async_release(use_awaitable);
        co_await gb.async_release(use_awaitable);
    });
}

TEST_F(Session, ConnectIsCancellable) {
    // Guards against async_connect's documented cancellation not being installed.
    run_test([&]() -> awaitable<void> {
        auto o = options("127.0.0.1:1"); // nothing listens: the C client would retry until the timeout
        o.connect_timeout = 30s;
        zklock::session s(co_await asio::this_coro::executor, o);
        asio::cancellation_signal sig;
        auto c = connect_with(s, sig);
        co_await sleep_for(200ms);
        EXPECT_EQ(s.state(), session_state::connecting);
        sig.emit(asio::cancellation_type::terminal);
        co_await eventually([&] { return c->done; }, 3000ms);
        EXPECT_TRUE(c->done) << "the cancel did not reach the connect";
        EXPECT_EQ(c->ec, asio::error::operation_aborted) << c->ec.message();
        EXPECT_EQ(s.state(), session_state::disconnected) << zklock::to_string(s.state());
        // and a cancel emitted at once, before the strand ran the connect
        asio::cancellation_signal sig2;
        auto c2 = connect_with(s, sig2);
        sig2.emit(asio::cancellation_type::terminal);
        co_await eventually([&] { return c2->done; }, 3000ms);
        EXPECT_TRUE(c2->done);
        EXPECT_EQ(c2->ec, asio::error::operation_aborted) << c2->ec.message();
        co_await eventually([&] { return s.state() == session_state::disconnected; }, 1000ms);
        EXPECT_EQ(s.state(), session_state::disconnected) << zklock::to_string(s.state());
    });
}

TEST_F(Session, ATotalCancelLeavesTheConnectGoingOn) {
    // Total cancellation promises no side effect; abandoning the attempt would be one. So a
    // connect that gets only a total cancel goes on, and completes when the server answers.
    run_test([&]() -> awaitable<void> {
        zklock::session s(co_await asio::this_coro::executor, options());
        asio::cancellation_signal sig;
        auto c = connect_with(s, sig);
        sig.emit(asio::cancellation_type::total);
        co_await eventually([&] { return c->done; }, 5000ms);
        EXPECT_TRUE(c->done);
        EXPECT_FALSE(c->ec) << c->ec.message();
        EXPECT_EQ(s.state(), session_state::connected) << zklock::to_string(s.state());
        co_await s.async_close(use_awaitable);
    });
}

using GuaranteedDelete = zt::zk_test;

TEST_F(GuaranteedDelete, NeverGivesUpWhileTheSessionLives) {
    // A background delete whose request fails, with the session alive and connected, tries
    // again (a capped back-off) until the node is gone, and counts each retry. Guards against it
    // stopping on an unexpected code (the node would stay until the session ended) and, on a
    // connection loss seen while still connected, waiting for a reconnect that does not come.
    run_test([&]() -> awaitable<void> {
        auto a = co_await connect();
        for (int rc : {ZMARSHALLINGERROR, ZOPERATIONTIMEOUT, ZCONNECTIONLOSS, ZNOAUTH}) {
            auto path = lock_path("rc" + std::to_string(-rc));
            zklock::mutex m(*a, path);
            auto g = co_await m.async_acquire(use_awaitable);
            const auto before = a->metrics().background_delete_retries;
            zt::faults(*a).cleanup_error_rc = rc;
            zt::faults(*a).cleanup_errors = 3;
            g.release_in_background(); // the guaranteed delete: its first 3 requests fail
            co_await expect_no_leftovers(*a, path);
            EXPECT_EQ(a->state(), session_state::connected);
            EXPECT_GE(a->metrics().background_delete_retries - before, 3u) << "rc " << rc;
            co_await eventually([&] { return a->impl()->background_deletes() == 0; }, 2000ms);
            EXPECT_EQ(a->impl()->background_deletes(), 0u) << "rc " << rc;
        }
    });
}

TEST_F(Session, AColdIdleSessionSendsOnlyTheCClientsPingsAndStillGrants) {
    // session_options::keep_lease_warm = false: while nothing is held and nothing acquired, no
    // touches (the C client's pings keep the session); an acquire is then granted once the
    // lease has a reply 5T/16 old (a renewal after its create), and touches resume while it
    // holds or waits; after the release the session goes quiet again. (Issue 46: 4,000 idle
    // sessions sent 2.5 touches a second each, where the C client alone pings 0.75 times.)
    run_test([&]() -> awaitable<void> {
        auto o = options();
        o.session_timeout = 2000ms;
        o.keep_lease_warm = false;
        auto s = co_await connect_session(o);
        CO_REQUIRE(s->negotiated_timeout() == 2000ms);
        co_await sleep_for(1000ms); // (the connection's own requests answered)
        const auto idle0 = s->statistics();
        co_await sleep_for(1500ms); // 7 heartbeat periods
        const auto idle1 = s->statistics();
        EXPECT_EQ(idle1.touches, idle0.touches) << "touches while idle and cold";
        EXPECT_EQ(idle1.heartbeats, idle0.heartbeats);
        EXPECT_EQ(idle1.requests(), idle0.requests()) << "requests while idle and cold";
        EXPECT_EQ(s->state(), zklock::session_state::connected);

        auto path = unique_path("cold");
        zklock::mutex m(*s, path);
        const auto a0 = std::chrono::steady_clock::now();
        auto g = co_await m.async_acquire_for(5s, use_awaitable);
        const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - a0).count();
        std::printf("  granted %.3f s after the acquire began (5T/16 = 0.625 s)\n", took);
        EXPECT_TRUE(g.owns_lock());
        EXPECT_FALSE(g.is_lost());
        EXPECT_GE(took, 0.5) << "granted before the lease could vouch for it by a reply 5T/16 old";
        const auto held0 = s->statistics();
        co_await sleep_for(1000ms);
        EXPECT_GE(s->statistics().heartbeats, held0.heartbeats + 3) << "no heartbeats while holding";
        EXPECT_FALSE(g.is_lost());
        co_await g.async_release(use_awaitable);
        co_await sleep_for(600ms); // (the release's delete answered, a last touch or heartbeat)
        const auto after0 = s->statistics();
        co_await sleep_for(1500ms);
        const auto after1 = s->statistics();
        EXPECT_EQ(after1.touches, after0.touches) << "touches after the release";
        EXPECT_EQ(after1.requests(), after0.requests());
        co_await expect_no_leftovers(*s, path);
    });
}

TEST_F(Session, AWarmIdleSessionTouchesEveryPeriod) {
    // The default (keep_lease_warm): a period (T/10) after the last request, a read of "/".
    run_test([&]() -> awaitable<void> {
        auto o = options();
        o.session_timeout = 2000ms;
        auto s = co_await connect_session(o);
        co_await sleep_for(500ms);
        const auto t0 = s->statistics().touches;
        co_await sleep_for(1500ms);
        const auto n = s->statistics().touches - t0;
        EXPECT_GE(n, 3u) << "a touch every 200 ms: about 7 in 1.5 s (fewer if the timers run late)";
        EXPECT_LE(n, 9u);
    });
}

TEST_F(Session, AWaitForAChangeFromClosedEndsWithTheSession) {
    // No state follows closed. Before: a wait with last_seen = closed on a closed (or destroyed)
    // session was never completed: its handler was dropped and io.run() returned (a coroutine
    // awaiting it never resumed). Now it completes with errc::session_closed, at once when the
    // session is closed already; a loop of waits (the pattern of a state logger) ends with it.
    run_test([&]() -> awaitable<void> {
        auto a = co_await connect();
        // a logger's loop: wait for each change until there is none
        auto seen = std::make_shared<std::vector<session_state>>();
        auto ended = std::make_shared<zklock::error_code>();
        auto done = std::make_shared<bool>(false);
        // (the state as parameters, not captures: a lambda's captures die with the lambda object,
        // before the coroutine it started has finished)
        auto logger = [](zklock::session* s, std::shared_ptr<std::vector<session_state>> seen,
                         std::shared_ptr<zklock::error_code> ended,
                         std::shared_ptr<bool> done) -> awaitable<void> {
            auto st = s->state();
            for (;;) {
                auto [ec, next] = co_await s->async_wait_state(st, asio::as_tuple(use_awaitable));
                if (ec) {
                    *ended = ec;
                    break;
                }
                seen->push_back(next);
                st = next;
            }
            *done = true;
        };
        asio::co_spawn(co_await asio::this_coro::executor, logger(a.get(), seen, ended, done),
                       asio::detached);
        co_await sleep_for(50ms);
        co_await a->async_close(use_awaitable);
        co_await eventually([&] { return *done; }, 3000ms);
        EXPECT_TRUE(*done) << "the loop never ended";
        EXPECT_EQ(*ended, errc::session_closed) << ended->message();
        CO_REQUIRE(!seen->empty());
        EXPECT_EQ(seen->back(), session_state::closed);
        // a wait started on the closed session completes at once
        auto [ec, st] = co_await a->async_wait_state(session_state::closed, asio::as_tuple(use_awaitable));
        EXPECT_EQ(ec, errc::session_closed);
        EXPECT_EQ(st, session_state::closed);
        // and so does one started before the session object is destroyed
        auto b = co_await connect();
        co_await b->async_close(use_awaitable);
        auto pending = std::make_shared<std::optional<zklock::error_code>>();
        b->async_wait_state(session_state::closed,
                            [pending](zklock::error_code e, session_state) { *pending = e; });
        b.reset();
        co_await eventually([&] { return pending->has_value(); }, 3000ms);
        EXPECT_TRUE(pending->has_value()) << "the handler was dropped";
        CO_REQUIRE(pending->has_value());
        EXPECT_EQ(**pending, errc::session_closed);
    });
}
