// A contended hand-off in one round trip: a waiter whose predecessor was the only
// node in its way is granted on that node's deletion, without listing the children again.
#include <zklock/mutex.hpp>
#include <zklock/shared_mutex.hpp>

#include "common.hpp"
#include "session_faults.hpp"
#include "raw_zk.hpp"

#include <boost/asio/as_tuple.hpp>

using namespace zt;

using RoundTrip = zt::zk_test;

TEST_F(RoundTrip, AContendedCycleTakesFourRequests) {
    // Two sessions pass one lock back and forth, each always waiting behind the other: per cycle
    // a create and its listing, a getData watch on the holder's node, the holder's delete. The
    // re-list after the deletion (a fifth request, on the hand-off's critical path) is gone.
    run_test([&]() -> awaitable<void> {
        auto c = co_await two_contenders();
        auto g = co_await c.ma.async_acquire(use_awaitable); // (parents made; not counted)
        const auto a0 = c.a->statistics(), b0 = c.b->statistics();
        const int cycles = 40;
        bool a_holds = true;
        for (int i = 0; i < cycles; ++i) {
            // the other one queues behind the holder, then the holder lets go
            auto& next = a_holds ? c.mb : c.ma;
            auto& next_s = a_holds ? *c.b : *c.a;
            // (wait until it has listed and armed its watch: it sends the getData only then; a
            // release before its listing was processed would make this cycle uncontended)
            const auto armed = next_s.statistics().get_data;
            auto w = in_background([&](auto h) { next.async_acquire_for(10s, h); });
            co_await eventually([&] { return next_s.statistics().get_data > armed; }, 5000ms);
            CO_REQUIRE(next_s.statistics().get_data > armed);
            co_await g.async_release(use_awaitable);
            co_await eventually([&] { return w->done; }, 5000ms);
            CO_REQUIRE(w->granted());
            g = std::move(w->guard);
            a_holds = !a_holds;
        }
        const auto a1 = c.a->statistics(), b1 = c.b->statistics(); // (the last release is no cycle's)
        co_await g.async_release(use_awaitable);
        auto diff = [](const zklock::session_statistics& x, const zklock::session_statistics& y) {
            zklock::session_statistics d;
            d.creates = y.creates - x.creates;
            d.deletes = y.deletes - x.deletes;
            d.get_children = y.get_children - x.get_children;
            d.get_data = y.get_data - x.get_data;
            d.exists = y.exists - x.exists;
            d.lease_renewals = y.lease_renewals - x.lease_renewals;
            d.watch_removals = y.watch_removals - x.watch_removals;
            return d;
        };
        auto da = diff(a0, a1), db = diff(b0, b1);
        const auto creates = da.creates + db.creates, listings = da.get_children + db.get_children;
        const auto total = da.creates + db.creates + da.deletes + db.deletes + listings + da.get_data +
                           db.get_data + da.exists + db.exists + da.lease_renewals + db.lease_renewals +
                           da.watch_removals + db.watch_removals;
        std::printf("  %d cycles: %llu creates, %llu listings, %llu getData, %llu deletes, %llu other: %.2f "
                    "requests per cycle\n",
                    cycles, (unsigned long long)creates, (unsigned long long)listings,
                    (unsigned long long)(da.get_data + db.get_data),
                    (unsigned long long)(da.deletes + db.deletes),
                    (unsigned long long)(da.exists + db.exists + da.lease_renewals + db.lease_renewals +
                                         da.watch_removals + db.watch_removals),
                    double(total) / cycles);
        EXPECT_EQ(creates, static_cast<std::uint64_t>(cycles));
        EXPECT_EQ(listings, creates) << "a waiter listed the children again after its predecessor went";
        EXPECT_EQ(total, 4u * cycles);
    });
}

TEST_F(RoundTrip, APeersNodeAheadIsWaitedForAndOnesBehindNeverOvertake) {
    // Curator and kazoo name their nodes from the same parent counter: a peer's node made before
    // ours has a lower suffix, one made after a higher one, whatever its name. So the one-round-trip
    // grant is right with peers on the path too.
    run_test([&]() -> awaitable<void> {
        auto path = lock_path();
        auto a = co_await connect();
        auto watcher = co_await connect();
        raw_zk peer;
        peer.create_parents(path + "/x");
        (void)peer.create(path);
        auto curator = peer.create_sequential(path + "/_c_0f0e0d0c-0b0a-4908-8706-050403020100-lock-");
        CO_REQUIRE(!curator.empty());
        zklock::mutex m(*a, path);
        const auto before = a->statistics();
        auto w = in_background([&](auto h) { m.async_acquire_for(10s, h); });
        co_await wait_for_children(*watcher, path, 2);
        auto kazoo_after = peer.create_sequential(path + "/0123456789abcdef0123456789abcdef__lock__");
        std::vector<std::string> kids;
        CO_REQUIRE(peer.children(path, kids) == ZOK);
        std::string ours;
        for (auto& k : kids)
            if (k.find("_c_0f0e") == std::string::npos && k.find("__lock__") == std::string::npos)
                ours = path + "/" + k;
        CO_REQUIRE(!ours.empty());
        EXPECT_LT(suffix_of(curator), suffix_of(ours)) << "a peer's earlier node sorts first";
        EXPECT_GT(suffix_of(kazoo_after), suffix_of(ours)) << "a peer's later node sorts after ours";
        co_await sleep_for(100ms);
        EXPECT_FALSE(w->done) << "granted while Curator's node is ahead";
        EXPECT_EQ(peer.remove(curator), ZOK);
        co_await eventually([&] { return w->done; }, 5000ms);
        CO_REQUIRE(w->granted());
        EXPECT_EQ(w->guard.node_path(), ours);
        EXPECT_EQ(a->statistics().get_children - before.get_children, 1u)
            << "listed again after the deletion";
        co_await w->guard.async_release(use_awaitable);
        EXPECT_EQ(peer.remove(kazoo_after), ZOK);
    });
}

TEST_F(RoundTrip, AWaiterWithMoreThanItsPredecessorAheadListsAgain) {
    // [holder, w1, w2]: w2 waits for w1, and w1's deletion (it gave up) must not grant w2 while the
    // holder still holds: w2 lists again.
    run_test([&]() -> awaitable<void> {
        auto path = lock_path();
        auto a = co_await connect();
        auto b = co_await connect();
        auto c = co_await connect();
        zklock::mutex ma(*a, path), mb(*b, path), mc(*c, path);
        auto g = co_await ma.async_acquire(use_awaitable);
        auto w1 = in_background([&](auto h) { mb.async_acquire_for(300ms, h); });
        co_await wait_for_children(*a, path, 2);
        auto w2 = in_background([&](auto h) { mc.async_acquire_for(10s, h); });
        co_await wait_for_children(*a, path, 3);
        co_await eventually([&] { return w1->done; }, 3000ms);
        EXPECT_EQ(w1->ec, zklock::errc::acquire_timeout);
        co_await sleep_for(200ms);
        EXPECT_FALSE(w2->done) << "granted while the holder holds";
        co_await g.async_release(use_awaitable);
        co_await eventually([&] { return w2->done; }, 5000ms);
        CO_REQUIRE(w2->granted());
        co_await w2->guard.async_release(use_awaitable);
    });
}

TEST_F(RoundTrip, ARevocationRequestOnThePredecessorIsNotADeletion) {
    run_test([&]() -> awaitable<void> {
        auto c = co_await two_contenders();
        auto g = co_await c.ma.async_acquire(use_awaitable);
        auto w = in_background([&](auto h) { c.mb.async_acquire_for(10s, h); });
        co_await wait_for_children(*c.a, c.path, 2);
        raw_zk peer;
        EXPECT_EQ(peer.set(g.node_path(), "__REVOKE__"), ZOK); // a data change on the watched node
        co_await sleep_for(300ms);
        EXPECT_FALSE(w->done) << "granted on a data change";
        co_await g.async_release(use_awaitable);
        co_await eventually([&] { return w->done; }, 5000ms);
        CO_REQUIRE(w->granted());
        co_await w->guard.async_release(use_awaitable);
    });
}

// The create and its listing ride in one flight (create_and_list). Their replies can split across
// a connection loss: the create's comes, the listing's is lost. The fault (zt::faults: lose_list_replies)
// reports exactly that to the recipe. Each case: one create only (no second node), the children
// listed again, the order, the cancellation and the leftovers as without the fault.

TEST_F(RoundTrip, AFreeLockWhoseListingReplyIsLostIsGrantedAfterOneMoreListing) {
    run_test([&]() -> awaitable<void> {
        auto path = lock_path();
        auto a = co_await connect();
        zklock::mutex m(*a, path);
        auto warm =
            co_await m.async_acquire(use_awaitable); // (the parents exist: only the flight is measured)
        co_await warm.async_release(use_awaitable);
        const auto before = a->statistics();
        zt::faults(*a).lose_list_replies = 1;
        auto g = co_await m.async_acquire(use_awaitable);
        const auto after = a->statistics();
        EXPECT_EQ(zt::faults(*a).lose_list_replies.load(), 0) << "the fault was not injected";
        EXPECT_EQ(after.creates - before.creates, 1u) << "a second create: the answered one was not kept";
        EXPECT_EQ(after.get_children - before.get_children, 2u) << "the lost listing was not made again";
        EXPECT_EQ(after.exists - before.exists, 0u)
            << "no recovery by guid is needed: the create's reply came";
        auto kids = co_await children_of(*a, path);
        CO_REQUIRE(kids.size() == 1u);
        EXPECT_EQ(path + "/" + kids[0], g.node_path());
        co_await g.async_release(use_awaitable);
    });
}

TEST_F(RoundTrip, AWaiterWhoseListingReplyIsLostStillWaitsItsTurn) {
    run_test([&]() -> awaitable<void> {
        auto c = co_await two_contenders();
        auto g = co_await c.ma.async_acquire(use_awaitable);
        const auto before = c.b->statistics();
        zt::faults(*c.b).lose_list_replies = 1;
        auto w = in_background([&](auto h) { c.mb.async_acquire_for(10s, h); });
        co_await eventually([&] { return c.b->statistics().get_data > before.get_data; },
                            5000ms); // (its watch is armed)
        EXPECT_EQ(zt::faults(*c.b).lose_list_replies.load(), 0) << "the fault was not injected";
        co_await sleep_for(200ms);
        EXPECT_FALSE(w->done) << "granted while the holder still held the lock";
        EXPECT_EQ((co_await children_of(*c.a, c.path)).size(), 2u);
        co_await g.async_release(use_awaitable);
        co_await eventually([&] { return w->done; }, 5000ms);
        CO_REQUIRE(w->granted());
        EXPECT_EQ(c.b->statistics().creates - before.creates, 1u);
        co_await w->guard.async_release(use_awaitable);
    });
}

TEST_F(RoundTrip, ATimedOutAcquireWhoseListingReplyIsLostLeavesNoNode) {
    run_test([&]() -> awaitable<void> {
        auto c = co_await two_contenders();
        auto g = co_await c.ma.async_acquire(use_awaitable);
        zt::faults(*c.b).lose_list_replies = 1;
        auto [ec, g2] = co_await c.mb.async_acquire_for(300ms, boost::asio::as_tuple(use_awaitable));
        EXPECT_EQ(ec, zklock::errc::acquire_timeout) << ec.message();
        EXPECT_EQ(zt::faults(*c.b).lose_list_replies.load(), 0) << "the fault was not injected";
        auto kids = co_await children_of(*c.a, c.path);
        for (int i = 0; i < 100 && kids.size() != 1; ++i) { // (its delete is guaranteed, maybe not yet done)
            co_await sleep_for(50ms);
            kids = co_await children_of(*c.a, c.path);
        }
        CO_REQUIRE(kids.size() == 1u);
        EXPECT_EQ(c.path + "/" + kids[0], g.node_path()) << "the timed-out waiter's node is still there";
        co_await g.async_release(use_awaitable);
    });
}
