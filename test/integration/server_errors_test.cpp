// Errors from the server and every recipe under faults: ACLs that
// forbid a create, a lock path under an ephemeral node, a chroot that does not exist, expiry and
// connection loss for shared_mutex, semaphore, reentrant_mutex and multi-locks, a node deleted
// while its holder was disconnected.
#include <zklock/multi_lock.hpp>
#include <zklock/mutex.hpp>
#include <zklock/reentrant_mutex.hpp>
#include <zklock/semaphore.hpp>
#include <zklock/shared_mutex.hpp>

#include "common.hpp"
#include "proxy.hpp"
#include "raw_zk.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/detached.hpp>

using namespace zt;
using zklock::errc;
using zklock::session_state;
using zklock::zk_errc;

namespace {

// (GCC 12 rejects braced lists of class objects inside a coroutine: "array used as initializer".)
std::vector<zklock::mutex> two_locks(zklock::session& s, const std::string& p1, const std::string& p2) {
    std::vector<zklock::mutex> v;
    v.emplace_back(s, p1);
    v.emplace_back(s, p2);
    return v;
}
/// The paths of one lock of each recipe: read/write, semaphore, reentrant, a multi-lock of two.
struct recipe_paths {
    std::string rw = unique_path("rw"), sem = unique_path("sem"), re = unique_path("re");
    std::string m1 = unique_path("m1"), m2 = unique_path("m2");
};

/// `s` takes one of each: the write (or, with `read`, a read) lock, a lease of a semaphore of 1,
/// the reentrant lock (`reentries` + 1 times, owner 1), the multi-lock.
awaitable<std::vector<zklock::guard>> hold_every_recipe(zklock::session& s, const recipe_paths& p, bool read,
                                                        int reentries) {
    std::vector<zklock::guard> held;
    zklock::shared_mutex rw(s, p.rw);
    if (read) // (not a conditional expression around co_await: GCC 12 mishandles its temporaries)
        held.push_back(co_await rw.async_acquire_shared(use_awaitable));
    else
        held.push_back(co_await rw.async_acquire(use_awaitable));
    zklock::semaphore sem(s, p.sem, 1);
    held.push_back(co_await sem.async_acquire(use_awaitable));
    zklock::reentrant_mutex re(s, p.re);
    for (int i = 0; i <= reentries; ++i) held.push_back(co_await re.async_acquire(1, use_awaitable));
    auto multi = co_await zklock::async_acquire_all(two_locks(s, p.m1, p.m2), use_awaitable);
    for (auto& g : multi) held.push_back(std::move(g));
    co_return held;
}

awaitable<void> expect_every_recipe_empty(zklock::session& s, const recipe_paths& p) {
    co_await expect_no_leftovers(s, p.rw);
    co_await expect_no_leftovers(s, p.re);
    co_await expect_no_leftovers(s, p.m1);
    co_await expect_no_leftovers(s, p.m2);
    co_await expect_no_leftovers(s, p.sem + "/leases");
    co_await expect_no_leftovers(s, p.sem + "/locks");
}

} // namespace

using ServerErrors = zt::zk_test;
using RecipesUnderFaults = zt::zk_test;
using Faults = zt::zk_test;

TEST_F(ServerErrors, AParentThatForbidsCreatesFailsEveryRecipeWithNoAuth) {
    run_test([&]() -> awaitable<void> {
        auto base = unique_path("readonly");
        raw_zk raw;
        raw.create_parents(base);
        CO_REQUIRE(raw.create(base, 0, &ZOO_READ_ACL_UNSAFE) == ZOK); // world: read only
        auto a = co_await connect();
        auto before = a->statistics().creates;
        zklock::mutex m(*a, base + "/lock");
        auto [ec1, g1] = co_await m.async_acquire_for(5s, boost::asio::as_tuple(use_awaitable));
        EXPECT_EQ(ec1, zk_errc::no_auth) << ec1.message();
        zklock::shared_mutex rw(*a, base + "/rw");
        auto [ec2, g2] = co_await rw.async_acquire_shared_for(5s, boost::asio::as_tuple(use_awaitable));
        EXPECT_EQ(ec2, zk_errc::no_auth) << ec2.message();
        zklock::semaphore sem(*a, base + "/sem", 2);
        auto [ec3, g3] = co_await sem.async_acquire_for(5s, boost::asio::as_tuple(use_awaitable));
        EXPECT_EQ(ec3, zk_errc::no_auth) << ec3.message();
        EXPECT_FALSE(zklock::is_fatal(ec1)) << "the session itself is fine";
        EXPECT_EQ(a->state(), session_state::connected);
        EXPECT_LT(a->statistics().creates - before, 20u) << "a refused create was retried";
        EXPECT_TRUE((co_await children_of(*a, base)).empty()) << "something was created";
        EXPECT_EQ(raw.remove(base), ZOK);
    });
}

TEST_F(ServerErrors, ALockPathUnderAnEphemeralNodeFailsClearly) {
    run_test([&]() -> awaitable<void> {
        auto base = unique_path("ephemeral");
        raw_zk raw;
        raw.create_parents(base);
        CO_REQUIRE(raw.create(base, ZOO_EPHEMERAL) == ZOK);
        auto a = co_await connect();
        zklock::mutex direct(*a, base + "/lock");     // the lock nodes would be its children
        zklock::mutex deeper(*a, base + "/a/b/lock"); // a parent would be its child
        auto [ec1, g1] = co_await direct.async_acquire_for(5s, boost::asio::as_tuple(use_awaitable));
        EXPECT_EQ(ec1, zk_errc::no_children_for_ephemerals) << ec1.message();
        auto [ec2, g2] = co_await deeper.async_acquire_for(5s, boost::asio::as_tuple(use_awaitable));
        EXPECT_EQ(ec2, zk_errc::no_children_for_ephemerals) << ec2.message();
        EXPECT_EQ(a->state(), session_state::connected);
        EXPECT_TRUE((co_await children_of(*a, base)).empty());
        EXPECT_EQ(raw.remove(base), ZOK);
    });
}

TEST_F(ServerErrors, AChrootThatDoesNotExistFailsTheConnectAndTheAcquireWithoutAHang) {
    run_test([&]() -> awaitable<void> {
        auto chroot = unique_path("no-such-chroot");
        auto ex = co_await asio::this_coro::executor;
        auto a = std::make_unique<zklock::session>(ex, options(zk_connect() + chroot));
        // async_connect says so (it connected, then found no chroot): not only the first acquire
        auto [cec] = co_await a->async_connect(boost::asio::as_tuple(use_awaitable));
        EXPECT_EQ(cec, zklock::errc::chroot_missing) << cec.message();
        EXPECT_EQ(a->state(), session_state::connected);
        auto [cec2] = co_await a->async_connect(boost::asio::as_tuple(use_awaitable)); // asks again
        EXPECT_EQ(cec2, zklock::errc::chroot_missing) << cec2.message();
        zklock::mutex m(*a, "/locks/x");
        auto t0 = std::chrono::steady_clock::now();
        auto [ec, g] = co_await m.async_acquire_for(20s, boost::asio::as_tuple(use_awaitable));
        EXPECT_EQ(ec, zklock::errc::chroot_missing) << ec.message(); // (not a bare "no node")
        EXPECT_LT(std::chrono::steady_clock::now() - t0, 5s) << "the acquire kept retrying";
        auto admin = co_await connect();
        EXPECT_TRUE((co_await children_of(*admin, chroot)).empty()) << "the chroot was created";
        // made now: the next async_connect of the same session succeeds
        co_await zklock::async_create_node(*admin, chroot, "", use_awaitable);
        auto [cec3] = co_await a->async_connect(boost::asio::as_tuple(use_awaitable));
        EXPECT_FALSE(cec3) << cec3.message();
        co_await a->async_close(use_awaitable);
        co_await zklock::async_delete_node(*admin, chroot, -1, use_awaitable);
    });
}

TEST_F(RecipesUnderFaults, EveryRecipeReportsExpiryAndItsLocksGoToOthers) {
    run_test(
        [&]() -> awaitable<void> {
            tcp_proxy proxy(first_port(zk_connect()));
            auto o = through(proxy);
            o.session_timeout = 2000ms;
            o.loss = zklock::loss_policy::on_expiry(); // only the expiry itself, to test that signal
            auto a = co_await connect(o);
            auto b = co_await connect();
            recipe_paths p;
            zklock::shared_mutex rw_b(*b, p.rw);
            zklock::semaphore sem_b(*b, p.sem, 1);
            zklock::reentrant_mutex re_b(*b, p.re);
            auto held = co_await hold_every_recipe(*a, p, false, 1); // (the reentrant lock twice)
            int lost = 0;
            std::vector<zklock::error_code> why(held.size());
            for (std::size_t i = 0; i < held.size(); ++i)
                held[i].async_wait_lost([&, i](zklock::error_code ec) {
                    why[i] = ec;
                    ++lost;
                });
            co_await sleep_for(100ms);
            proxy.blackhole(true); // the server expires a's session after ~2 s
            // b gets every one of them once the server has expired a's session
            auto w = co_await rw_b.async_acquire_shared_for(15s, use_awaitable);
            auto s = co_await sem_b.async_acquire_for(15s, use_awaitable);
            auto r = co_await re_b.async_acquire(7, use_awaitable); // (no deadline form: run()'s limit)
            auto m = co_await zklock::async_acquire_all_for(two_locks(*b, p.m1, p.m2), 15s, use_awaitable);
            EXPECT_EQ(lost, 0) << "the partitioned holder cannot know yet";
            proxy.blackhole(false);
            co_await eventually([&] { return lost == static_cast<int>(held.size()); }, 8000ms);
            EXPECT_EQ(lost, static_cast<int>(held.size()));
            for (std::size_t i = 0; i < held.size(); ++i) {
                EXPECT_EQ(why[i], errc::session_expired) << "guard " << i << ": " << why[i].message();
                EXPECT_TRUE(held[i].is_lost()) << "guard " << i;
            }
            co_await wait_state(*a, session_state::connected, 5000ms);    // a new session
            for (auto& g : held) co_await g.async_release(use_awaitable); // a lost lock releases at once
            // a's new session can take part again
            zklock::semaphore sem_a2(*a, p.sem, 1);
            co_await w.async_release(use_awaitable);
            co_await s.async_release(use_awaitable);
            auto s2 = co_await sem_a2.async_acquire_for(10s, use_awaitable);
            EXPECT_TRUE(s2.owns_lock());
            co_await s2.async_release(use_awaitable);
            co_await r.async_release(use_awaitable);
            for (auto& g : m) co_await g.async_release(use_awaitable);
            co_await expect_every_recipe_empty(*b, p);
        },
        90s);
}

TEST_F(RecipesUnderFaults, EveryRecipeKeepsItsLockThroughAShortConnectionLoss) {
    run_test(
        [&]() -> awaitable<void> {
            tcp_proxy proxy(first_port(zk_connect()));
            auto a = co_await connect(through(proxy)); // the default lease
            auto b = co_await connect();
            recipe_paths p;
            zklock::shared_mutex rw_b(*b, p.rw);
            zklock::semaphore sem_b(*b, p.sem, 1);
            zklock::reentrant_mutex re_b(*b, p.re);
            zklock::mutex m1_b(*b, p.m1);
            auto held = co_await hold_every_recipe(*a, p, true, 0); // (a read lock)
            int lost = 0;
            for (auto& g : held)
                g.async_wait_lost([&](zklock::error_code ec) {
                    if (ec != errc::lock_released) ++lost;
                });
            // waiters of b behind each of them, while a's connection drops twice
            std::vector<std::shared_ptr<background_acquire>> waiters{
                in_background([&](auto h) { rw_b.async_acquire_for(20s, h); }), // a writer behind the reader
                in_background([&](auto h) { sem_b.async_acquire_for(20s, h); }),
                in_background([&](auto h) { re_b.async_acquire(7, h); }),
                in_background([&](auto h) { m1_b.async_acquire_for(20s, h); })};
            auto granted = [&] {
                int n = 0;
                for (auto& w : waiters) n += w->granted();
                return n;
            };
            co_await sleep_for(200ms);
            for (int i = 0; i < 2; ++i) {
                proxy.drop();
                co_await wait_state(*a, session_state::connected, 5000ms);
                co_await sleep_for(200ms);
            }
            EXPECT_EQ(lost, 0) << "a short connection loss lost a lock";
            EXPECT_EQ(granted(), 0) << "a waiter was granted a lock that is still held";
            for (auto& g : held) {
                EXPECT_FALSE(g.is_lost());
                co_await g.async_release(use_awaitable);
            }
            co_await eventually([&] { return granted() == 4; }, 10000ms);
            EXPECT_EQ(granted(), 4);
            for (auto& w : waiters) co_await w->guard.async_release(use_awaitable);
            co_await expect_every_recipe_empty(*b, p);
        },
        90s);
}

TEST_F(Faults, ANodeDeletedWhileItsHolderWasDisconnectedIsSeenAfterTheReconnect) {
    run_test([&]() -> awaitable<void> {
        tcp_proxy proxy(first_port(zk_connect()));
        auto o = through(proxy);
        o.loss = zklock::loss_policy::on_expiry(); // the disconnect itself is no loss here
        auto a = co_await connect(o);
        auto admin = co_await connect();
        auto path = lock_path();
        zklock::mutex m(*a, path);
        auto g = co_await m.async_acquire(use_awaitable);
        zklock::error_code why;
        bool lost = false;
        g.async_wait_lost([&](zklock::error_code ec) {
            why = ec;
            lost = true;
        });
        co_await sleep_for(100ms);
        auto old_id = a->session_id();
        proxy.refuse_after(0);
        proxy.drop(); // a is disconnected and cannot reconnect
        co_await wait_state(*a, session_state::suspended, 5000ms);
        auto [ec] =
            co_await zklock::async_break_lock(*admin, g.node_path(), boost::asio::as_tuple(use_awaitable));
        EXPECT_FALSE(ec) << ec.message();
        co_await sleep_for(200ms);
        EXPECT_FALSE(lost) << "a disconnected holder cannot have seen the delete";
        proxy.refuse_after(-1); // a reconnects, within the session timeout
        co_await wait_state(*a, session_state::connected, 5000ms);
        EXPECT_EQ(a->session_id(), old_id) << "the session should have survived";
        co_await eventually([&] { return lost; }, 5000ms);
        EXPECT_TRUE(lost);
        EXPECT_EQ(why, errc::lock_node_deleted) << why.message();
        EXPECT_TRUE(g.is_lost());
        co_await g.async_release(use_awaitable);
    });
}

namespace {

/// A session (through a proxy) whose lock node create reaches the server and is applied, while
/// its reply, and every later one, is lost on the wire: the proxy mutes the server's replies.
struct lost_create_reply {
    std::unique_ptr<tcp_proxy> proxy;
    std::unique_ptr<zklock::session> a, admin;
    std::unique_ptr<raw_zk> raw;
    std::string path;
    std::shared_ptr<background_acquire> acquire;
    std::vector<std::string> applied; ///< the lock path's children once the create was applied
};

awaitable<lost_create_reply> start_create_whose_reply_is_lost(std::chrono::milliseconds session_timeout,
                                                              std::chrono::seconds acquire_timeout) {
    lost_create_reply t;
    t.proxy = std::make_unique<tcp_proxy>(first_port(zk_connect()));
    auto o = through(*t.proxy);
    o.session_timeout = session_timeout;
    t.a = co_await connect(o);
    t.admin = co_await connect();
    t.path = unique_path("lock");
    // The parent exists (persistent: an empty container could be reaped meanwhile), so that the
    // create is the one request that matters.
    t.raw = std::make_unique<raw_zk>();
    t.raw->create_parents(t.path);
    EXPECT_EQ(t.raw->create(t.path), ZOK);
    t.proxy->mute_replies(true);
    zklock::mutex m(*t.a, t.path);
    t.acquire = in_background([&](auto h) { m.async_acquire_for(acquire_timeout, h); });
    co_await wait_for_children(*t.admin, t.path, 1); // applied at the server
    t.applied = co_await children_of(*t.admin, t.path);
    co_return t;
}

} // namespace

TEST_F(Faults, ACreateWhoseReplyIsLostOnTheWireIsFoundByItsGuid) {
    // Not the test hook: the create really reaches the server and is applied; its reply (and
    // the listing's) never comes back; the client times out, reconnects, and must adopt the node
    // it cannot know it made, not create a second one (which would wait on the first forever).
    run_test([&]() -> awaitable<void> {
        auto t = co_await start_create_whose_reply_is_lost(4000ms, 20s);
        auto& w = *t.acquire;
        co_await sleep_for(200ms);
        EXPECT_FALSE(w.done) << "granted without a reply";
        t.proxy->mute_replies(false); // the connection is cut; the client reconnects
        co_await eventually([&] { return w.done; }, 10000ms);
        CO_REQUIRE(w.granted());
        auto now = co_await children_of(*t.admin, t.path);
        EXPECT_EQ(now.size(), 1u) << "a second node was created";
        CO_REQUIRE(t.applied.size() == 1u);
        EXPECT_EQ(w.guard.node_path(), t.path + "/" + t.applied[0])
            << "the node made before the reply was lost was not adopted";
        co_await w.guard.async_release(use_awaitable);
        co_await expect_no_leftovers(*t.admin, t.path);
        EXPECT_EQ(t.raw->remove(t.path), ZOK);
    });
}

TEST_F(Faults, ACreateWhoseReplyIsLostAndWhoseSessionThenExpiresFailsCleanly) {
    run_test(
        [&]() -> awaitable<void> {
            auto t = co_await start_create_whose_reply_is_lost(2000ms, 30s);
            auto& w = *t.acquire;
            auto old_id = t.a->session_id();
            t.proxy->blackhole(true);                        // now nothing at all: the session expires
            co_await wait_for_children(*t.admin, t.path, 0); // the server deleted it with the session
            EXPECT_FALSE(w.done);
            t.proxy->mute_replies(false);
            t.proxy->blackhole(false); // reconnect: expired; the waiting acquire fails (as documented)
            co_await eventually([&] { return w.done; }, 15000ms);
            CO_REQUIRE(w.done);
            EXPECT_EQ(w.ec, errc::session_expired) << w.ec.message();
            EXPECT_FALSE(w.guard.owns_lock());
            co_await eventually([&] { return t.a->state() == session_state::connected; }, 5000ms);
            EXPECT_NE(t.a->session_id(), old_id);
            EXPECT_TRUE((co_await children_of(*t.admin, t.path)).empty())
                << "a node of the failed acquire is left";
            // the renewed session acquires normally: one node, ours
            zklock::mutex m(*t.a, t.path);
            auto g2 = co_await m.async_acquire_for(10s, use_awaitable);
            EXPECT_EQ((co_await children_of(*t.admin, t.path)).size(), 1u);
            co_await g2.async_release(use_awaitable);
            co_await expect_no_leftovers(*t.admin, t.path);
            EXPECT_EQ(t.raw->remove(t.path), ZOK);
        },
        90s);
}
