// The release marker (protocol.hpp, release_marker): a waiter behind a deeper queue is granted on
// its predecessor's release, without listing the children again, only when that predecessor was
// the lowest node. Every other way the predecessor can go (it gave up, its session ended, someone
// deleted it) and every write on it must leave the waiter waiting while the holder holds.
// Each test has three contenders on one path: [A holds, B waits for A, C waits for B].
#include <zklock/mutex.hpp>
#include <zklock/shared_mutex.hpp>

#include "common.hpp"
#include "session_faults.hpp"
#include "ensemble.hpp"
#include "proxy.hpp"
#include "raw_zk.hpp"

#include <boost/asio/as_tuple.hpp>

using namespace zt;

using Marker = zt::zk_test;

namespace {
/// Polls until `s` has sent its watch on a release marker and its read of the predecessor (its
/// statistics count them when sent), then until the server holds that watch for its session (4lw
/// wchc): on a loaded machine a request counted as sent can reach the server later.
awaitable<void> wait_armed(zklock::session& s, const zklock::session_statistics& since) {
    co_await eventually(
        [&] {
            auto now = s.statistics();
            return now.exists > since.exists && now.get_data > since.get_data;
        },
        5000ms);
    CO_REQUIRE(s.statistics().exists > since.exists);
    char id[32];
    std::snprintf(id, sizeof id, "0x%llx", static_cast<unsigned long long>(s.session_id()));
    const auto port = first_port(zk_connect());
    auto marker_watched = [&] {
        const auto out = four_letter(port, "wchc");
        const auto at = out.find(id);
        if (at == std::string::npos) return false;
        const auto end = out.find("\n0x", at + 1);
        return out.substr(at, end == std::string::npos ? std::string::npos : end - at).find(".released") !=
               std::string::npos;
    };
    co_await eventually(marker_watched, 5000ms);
    CO_REQUIRE(marker_watched());
}
} // namespace

TEST_F(Marker, ADeepWaiterIsGrantedOnItsPredecessorsReleaseWithoutListing) {
    run_test([&]() -> awaitable<void> {
        auto path = lock_path();
        auto a = co_await connect(), b = co_await connect(), c = co_await connect();
        zklock::mutex ma(*a, path), mb(*b, path), mc(*c, path);
        auto ga = co_await ma.async_acquire(use_awaitable);
        auto wb = in_background([&](auto h) { mb.async_acquire_for(10s, h); });
        co_await wait_for_children(*a, path, 2);
        const auto c0 = c->statistics();
        auto wc = in_background([&](auto h) { mc.async_acquire_for(10s, h); });
        co_await wait_armed(*c, c0);
        co_await ga.async_release(use_awaitable);
        co_await eventually([&] { return wb->done; }, 5000ms);
        CO_REQUIRE(wb->granted());
        co_await sleep_for(100ms);
        EXPECT_FALSE(wc->done) << "granted while B holds";
        const auto listed = c->statistics().get_children;
        co_await wb->guard.async_release(use_awaitable);
        co_await eventually([&] { return wc->done; }, 5000ms);
        CO_REQUIRE(wc->granted());
        EXPECT_EQ(c->statistics().get_children, listed) << "listed again after the marked release";
        EXPECT_EQ(c->statistics().marked_grants - c0.marked_grants, 1u);
        EXPECT_EQ(c->statistics().get_children - c0.get_children, 1u) << "one listing: the create's";
        co_await wc->guard.async_release(use_awaitable);
    });
}

TEST_F(Marker, AWaiterAheadThatGivesUpDoesNotGrantTheOneBehind) {
    run_test([&]() -> awaitable<void> {
        auto path = lock_path();
        auto a = co_await connect(), b = co_await connect(), c = co_await connect();
        zklock::mutex ma(*a, path), mb(*b, path), mc(*c, path);
        auto ga = co_await ma.async_acquire(use_awaitable);
        auto wb = in_background([&](auto h) { mb.async_acquire_for(400ms, h); });
        co_await wait_for_children(*a, path, 2);
        std::string b_node;
        for (auto& k : co_await children_of(*a, path))
            if (path + "/" + k != ga.node_path()) b_node = path + "/" + k;
        CO_REQUIRE(!b_node.empty());
        const auto c0 = c->statistics();
        auto wc = in_background([&](auto h) { mc.async_acquire_for(10s, h); });
        co_await wait_armed(*c, c0);
        // The server's watches by path (4lw wchp): C's on B's marker is there...
        const auto port = first_port(zk_connect());
        EXPECT_NE(four_letter(port, "wchp").find(b_node + ".released"), std::string::npos);
        co_await eventually([&] { return wb->done; }, 3000ms);
        EXPECT_EQ(wb->ec, zklock::errc::acquire_timeout) << wb->ec.message();
        co_await sleep_for(300ms);
        EXPECT_FALSE(wc->done) << "granted while A holds";
        // ... and, never fired, it was removed from the server when C listed again.
        EXPECT_GT(c->statistics().watch_removals, c0.watch_removals);
        co_await eventually(
            [&] { return four_letter(port, "wchp").find(b_node + ".released") == std::string::npos; },
            3000ms);
        EXPECT_EQ(four_letter(port, "wchp").find(b_node + ".released"), std::string::npos)
            << "the marker's watch stayed on the server";
        co_await ga.async_release(use_awaitable);
        co_await eventually([&] { return wc->done; }, 5000ms);
        CO_REQUIRE(wc->granted());
        EXPECT_EQ(c->statistics().marked_grants, c0.marked_grants) << "A's release is C's alone grant";
        co_await wc->guard.async_release(use_awaitable);
    });
}

TEST_F(Marker, AWaiterAheadWhoseSessionEndsDoesNotGrantTheOneBehind) {
    // The server deletes an ended session's nodes without a marker (as on an expiry).
    run_test([&]() -> awaitable<void> {
        auto path = lock_path();
        auto a = co_await connect(), b = co_await connect(), c = co_await connect();
        zklock::mutex ma(*a, path), mb(*b, path), mc(*c, path);
        auto ga = co_await ma.async_acquire(use_awaitable);
        auto wb = in_background([&](auto h) { mb.async_acquire_for(10s, h); });
        co_await wait_for_children(*a, path, 2);
        const auto c0 = c->statistics();
        auto wc = in_background([&](auto h) { mc.async_acquire_for(10s, h); });
        co_await wait_armed(*c, c0);
        co_await b->async_close(use_awaitable);
        co_await wait_for_children(*a, path, 2);
        co_await sleep_for(300ms);
        EXPECT_FALSE(wc->done) << "granted while A holds";
        co_await ga.async_release(use_awaitable);
        co_await eventually([&] { return wc->done; }, 5000ms);
        CO_REQUIRE(wc->granted());
        EXPECT_EQ(c->statistics().marked_grants, c0.marked_grants);
        co_await wc->guard.async_release(use_awaitable);
    });
}

TEST_F(Marker, AWriteOnThePredecessorIsNotARelease) {
    // A revocation request written on B's node fires C's watch on B: C lists again and waits.
    run_test([&]() -> awaitable<void> {
        auto path = lock_path();
        auto a = co_await connect(), b = co_await connect(), c = co_await connect();
        zklock::mutex ma(*a, path), mb(*b, path), mc(*c, path);
        auto ga = co_await ma.async_acquire(use_awaitable);
        auto wb = in_background([&](auto h) { mb.async_acquire_for(10s, h); });
        co_await wait_for_children(*a, path, 2);
        std::string b_node;
        for (auto& k : co_await children_of(*a, path))
            if (path + "/" + k != ga.node_path()) b_node = path + "/" + k;
        CO_REQUIRE(!b_node.empty());
        const auto c0 = c->statistics();
        auto wc = in_background([&](auto h) { mc.async_acquire_for(10s, h); });
        co_await wait_armed(*c, c0);
        raw_zk peer;
        EXPECT_EQ(peer.set(b_node, "__REVOKE__"), ZOK);
        co_await eventually([&] { return c->statistics().get_children > c0.get_children + 1; }, 5000ms);
        EXPECT_GT(c->statistics().get_children, c0.get_children + 1) << "C did not list again";
        co_await sleep_for(200ms);
        EXPECT_FALSE(wc->done) << "granted while A holds";
        co_await ga.async_release(use_awaitable);
        co_await eventually([&] { return wb->done; }, 5000ms);
        CO_REQUIRE(wb->granted());
        co_await sleep_for(100ms);
        EXPECT_FALSE(wc->done) << "granted while B holds";
        co_await wb->guard.async_release(use_awaitable);
        co_await eventually([&] { return wc->done; }, 5000ms);
        CO_REQUIRE(wc->granted());
        co_await wc->guard.async_release(use_awaitable);
    });
}

TEST_F(Marker, AMarkerMadeBeforehandDoesNotKeepTheNode) {
    // A node already at the marker's path makes the release's transaction fail: the release deletes
    // the node plainly, and C, which cannot tell, lists again and is granted.
    run_test([&]() -> awaitable<void> {
        auto path = lock_path();
        auto a = co_await connect(), b = co_await connect(), c = co_await connect();
        zklock::mutex ma(*a, path), mb(*b, path), mc(*c, path);
        auto ga = co_await ma.async_acquire(use_awaitable);
        auto wb = in_background([&](auto h) { mb.async_acquire_for(10s, h); });
        co_await wait_for_children(*a, path, 2);
        std::string b_node;
        for (auto& k : co_await children_of(*a, path))
            if (path + "/" + k != ga.node_path()) b_node = path + "/" + k;
        CO_REQUIRE(!b_node.empty());
        raw_zk peer;
        const auto marker = b_node + ".released";
        CO_REQUIRE(peer.create(marker) == ZOK);
        const auto c0 = c->statistics();
        auto wc = in_background([&](auto h) { mc.async_acquire_for(10s, h); });
        co_await wait_armed(*c, c0);
        co_await ga.async_release(use_awaitable);
        co_await eventually([&] { return wb->done; }, 5000ms);
        CO_REQUIRE(wb->granted());
        const auto b0 = b->statistics();
        co_await wb->guard.async_release(use_awaitable);
        EXPECT_EQ(b->statistics().deletes - b0.deletes, 2u) << "the transaction, then the plain delete";
        co_await eventually([&] { return wc->done; }, 5000ms);
        CO_REQUIRE(wc->granted());
        EXPECT_EQ(c->statistics().marked_grants, c0.marked_grants);
        co_await wc->guard.async_release(use_awaitable);
        EXPECT_EQ(b->impl()->background_deletes(), 0u);
        EXPECT_EQ(peer.remove(marker), ZOK);
    });
}

TEST_F(Marker, AReleaseBetweenTheMarkersWatchAndThePredecessorsReadGrants) {
    // C sends the marker's watch, then (the fault) waits before it reads B: A and B release in
    // between. The marker fires before C's read finds B gone, and C is granted on it.
    run_test([&]() -> awaitable<void> {
        auto path = lock_path();
        auto a = co_await connect(), b = co_await connect(), c = co_await connect();
        zklock::mutex ma(*a, path), mb(*b, path), mc(*c, path);
        auto ga = co_await ma.async_acquire(use_awaitable);
        auto wb = in_background([&](auto h) { mb.async_acquire_for(10s, h); });
        co_await wait_for_children(*a, path, 2);
        zt::faults(*c).hold_watched_reads_ms = 1500;
        const auto c0 = c->statistics();
        auto wc = in_background([&](auto h) { mc.async_acquire_for(10s, h); });
        co_await eventually([&] { return c->statistics().exists > c0.exists; }, 5000ms);
        CO_REQUIRE(c->statistics().exists > c0.exists);
        EXPECT_EQ(c->statistics().get_data, c0.get_data) << "C read B before the pause";
        co_await ga.async_release(use_awaitable);
        co_await eventually([&] { return wb->done; }, 5000ms);
        CO_REQUIRE(wb->granted());
        co_await wb->guard.async_release(use_awaitable);
        EXPECT_FALSE(wc->done) << "C was not in its pause";
        co_await eventually([&] { return wc->done; }, 5000ms);
        CO_REQUIRE(wc->granted());
        EXPECT_EQ(c->statistics().get_data - c0.get_data, 1u);
        EXPECT_EQ(c->statistics().get_children - c0.get_children, 1u) << "listed again";
        EXPECT_EQ(c->statistics().marked_grants - c0.marked_grants, 1u);
        zt::faults(*c).hold_watched_reads_ms = 0;
        co_await wc->guard.async_release(use_awaitable);
    });
}

TEST_F(Marker, AReleaseWhoseReplyIsLostGrantsOnceAndLeavesNothing) {
    // B's release is applied, and its reply lost: B sends it again, which fails (its node is
    // gone), and ends there. C was granted once, on the first.
    run_test([&]() -> awaitable<void> {
        auto path = lock_path();
        auto a = co_await connect(), b = co_await connect(), c = co_await connect();
        zklock::mutex ma(*a, path), mb(*b, path), mc(*c, path);
        auto ga = co_await ma.async_acquire(use_awaitable);
        auto wb = in_background([&](auto h) { mb.async_acquire_for(10s, h); });
        co_await wait_for_children(*a, path, 2);
        const auto c0 = c->statistics();
        auto wc = in_background([&](auto h) { mc.async_acquire_for(10s, h); });
        co_await wait_armed(*c, c0);
        co_await ga.async_release(use_awaitable);
        co_await eventually([&] { return wb->done; }, 5000ms);
        CO_REQUIRE(wb->granted());
        zt::faults(*b).lose_release_replies = 1;
        const auto b0 = b->statistics();
        co_await wb->guard.async_release(use_awaitable);
        EXPECT_EQ(zt::faults(*b).lose_release_replies.load(), 0) << "the fault was not injected";
        co_await eventually([&] { return b->impl()->background_deletes() == 0; }, 5000ms);
        EXPECT_EQ(b->impl()->background_deletes(), 0u);
        EXPECT_EQ(b->statistics().deletes - b0.deletes, 2u) << "the release and its retry";
        co_await eventually([&] { return wc->done; }, 5000ms);
        CO_REQUIRE(wc->granted());
        EXPECT_EQ(c->statistics().marked_grants - c0.marked_grants, 1u);
        co_await wc->guard.async_release(use_awaitable);
    });
}

TEST_F(Marker, AReaderBehindTwoWritersIsGrantedOnTheSecondsRelease) {
    // [writer A, writer B, reader R]: R waits for the nearest lower writer, B, and B's deletion
    // alone would not grant it (A is lower). B's marked release does.
    run_test([&]() -> awaitable<void> {
        auto path = lock_path();
        auto a = co_await connect(), b = co_await connect(), c = co_await connect();
        zklock::shared_mutex ma(*a, path), mb(*b, path), mc(*c, path);
        auto ga = co_await ma.async_acquire(use_awaitable);
        auto wb = in_background([&](auto h) { mb.async_acquire_for(10s, h); });
        co_await wait_for_children(*a, path, 2);
        const auto c0 = c->statistics();
        auto wc = in_background([&](auto h) { mc.async_acquire_shared_for(10s, h); });
        co_await wait_armed(*c, c0);
        co_await ga.async_release(use_awaitable);
        co_await eventually([&] { return wb->done; }, 5000ms);
        CO_REQUIRE(wb->granted());
        co_await sleep_for(100ms);
        EXPECT_FALSE(wc->done) << "a reader granted while a writer holds";
        co_await wb->guard.async_release(use_awaitable);
        co_await eventually([&] { return wc->done; }, 5000ms);
        CO_REQUIRE(wc->granted());
        EXPECT_EQ(c->statistics().marked_grants - c0.marked_grants, 1u);
        EXPECT_EQ(c->statistics().get_children - c0.get_children, 1u);
        co_await wc->guard.async_release(use_awaitable);
    });
}

TEST_F(Marker, AWriterBehindAReaderDoesNotWatchForAMarker) {
    // Readers never mark their release (a reader's grant does not show that no writer is below
    // it), so a writer waiting for a reader watches no marker.
    run_test([&]() -> awaitable<void> {
        auto path = lock_path();
        auto a = co_await connect(), b = co_await connect(), c = co_await connect();
        zklock::shared_mutex ma(*a, path), mb(*b, path), mc(*c, path);
        auto ga = co_await ma.async_acquire(use_awaitable); // a writer
        auto wb = in_background([&](auto h) { mb.async_acquire_shared_for(10s, h); });
        co_await wait_for_children(*a, path, 2);
        const auto c0 = c->statistics();
        auto wc = in_background([&](auto h) { mc.async_acquire_for(10s, h); }); // a writer behind B
        co_await eventually([&] { return c->statistics().get_data > c0.get_data; }, 5000ms);
        EXPECT_EQ(c->statistics().exists, c0.exists) << "watched a reader's marker";
        co_await ga.async_release(use_awaitable);
        co_await eventually([&] { return wb->done; }, 5000ms);
        CO_REQUIRE(wb->granted());
        co_await wb->guard.async_release(use_awaitable);
        co_await eventually([&] { return wc->done; }, 5000ms);
        CO_REQUIRE(wc->granted());
        EXPECT_EQ(c->statistics().marked_grants, c0.marked_grants);
        co_await wc->guard.async_release(use_awaitable);
    });
}

TEST_F(Marker, OnlyANodeThatWaitedMarksItsRelease) {
    // A node granted on its first listing is the lowest from then on: whoever lists behind it
    // is alone behind it, so its release carries no marker (an uncontended cycle pays nothing).
    // A node that waited marks it. An observer session watches each marker's path.
    run_test([&]() -> awaitable<void> {
        auto c = co_await two_contenders();
        auto o = co_await connect();
        auto& impl = *o->impl();
        int created = 0;
        int armed = 0;
        auto watch_marker = [&](const std::string& node) { // (armed: its exists was answered)
            asio::post(impl.strand(), [&impl, &created, &armed, marker = node + ".released"] {
                auto id = impl.add_watch([&created](int type) {
                    if (type == ZOO_CREATED_EVENT) ++created;
                });
                impl.exists_watch(
                    marker, id, zklock::detail::zk_handler([&armed](zklock::detail::zk_result) { ++armed; }));
            });
        };
        auto ga = co_await c.ma.async_acquire(use_awaitable); // free: granted on its first listing
        auto wb = in_background([&](auto h) { c.mb.async_acquire_for(10s, h); });
        co_await wait_for_children(*c.a, c.path, 2);
        watch_marker(ga.node_path());
        co_await eventually([&] { return armed == 1; }, 5000ms);
        co_await ga.async_release(use_awaitable);
        co_await eventually([&] { return wb->done; }, 5000ms);
        CO_REQUIRE(wb->granted());
        watch_marker(wb->guard.node_path());
        co_await eventually([&] { return armed == 2; }, 5000ms);
        CO_REQUIRE(armed == 2);
        co_await sleep_for(200ms);
        EXPECT_EQ(created, 0) << "the release of a node that never waited carried a marker";
        co_await wb->guard.async_release(use_awaitable);
        co_await eventually([&] { return created == 1; }, 5000ms);
        EXPECT_EQ(created, 1) << "the release of a node that waited carried no marker";
        co_await o->async_close(use_awaitable);
    });
}

TEST_F(Marker, AMarkerEventLostWithTheConnectionListsAgain) {
    // The worst phase for the marker's proof: B's marked release is applied, and C's connection
    // drops with both of its events (the marker's creation, B's deletion) still on the wire (the
    // proxy swallows every reply from the release on, then cuts the connection). C's session
    // lives on: at the reconnect the server fires B's data watch (B is gone) and re-arms the
    // marker's existence watch (no marker exists now). So C must not take the marker for
    // granted: it lists again and is granted by that listing, and the marker watch the
    // reconnect re-armed leaves the server.
    run_test([&]() -> awaitable<void> {
        auto path = lock_path();
        tcp_proxy proxy(first_port(zk_connect()));
        auto oc = through(proxy);
        oc.session_timeout = 10s; // the reconnect keeps the session
        auto a = co_await connect(), b = co_await connect(), c = co_await connect(oc);
        zklock::mutex ma(*a, path), mb(*b, path), mc(*c, path);
        auto ga = co_await ma.async_acquire(use_awaitable);
        auto wb = in_background([&](auto h) { mb.async_acquire_for(10s, h); });
        co_await wait_for_children(*a, path, 2);
        const auto c0 = c->statistics();
        auto wc = in_background([&](auto h) { mc.async_acquire_for(20s, h); });
        co_await wait_armed(*c, c0);
        co_await ga.async_release(use_awaitable);
        co_await eventually([&] { return wb->done; }, 5000ms);
        CO_REQUIRE(wb->granted());
        const std::string marker = wb->guard.node_path() + ".released";
        const auto port = first_port(zk_connect());
        // (wait_armed saw C's requests sent; on a loaded machine they may reach the server after
        // B's grant: nothing else sets or removes a watch on B's marker meanwhile.)
        co_await eventually([&] { return four_letter(port, "wchp").find(marker) != std::string::npos; },
                            5000ms);
        CO_REQUIRE(four_letter(port, "wchp").find(marker) != std::string::npos);
        // An observer, connected directly, sees the marker's creation: B's release is the marked one.
        auto o = co_await connect();
        auto& impl = *o->impl();
        int created = 0, armed = 0;
        asio::post(impl.strand(), [&] {
            auto id = impl.add_watch([&created](int type) {
                if (type == ZOO_CREATED_EVENT) ++created;
            });
            impl.exists_watch(marker, id,
                              zklock::detail::zk_handler([&armed](zklock::detail::zk_result) { ++armed; }));
        });
        co_await eventually([&] { return armed == 1; }, 5000ms);
        proxy.mute_replies(true);
        co_await wb->guard.async_release(use_awaitable);
        co_await eventually([&] { return created == 1; }, 5000ms);
        CO_REQUIRE(created == 1);  // (B's release carried the marker)
        co_await sleep_for(300ms); // (the server has sent C's events by now: swallowed)
        EXPECT_FALSE(wc->done) << "C heard of the release through a muted connection";
        const auto listed = c->statistics().get_children;
        proxy.mute_replies(false); // (and the connection is cut)
        co_await eventually([&] { return wc->done; }, 10000ms);
        CO_REQUIRE(wc->granted());
        EXPECT_EQ(c->statistics().marked_grants, c0.marked_grants) << "granted on a marker it never heard of";
        EXPECT_GT(c->statistics().get_children, listed) << "granted without listing again";
        co_await eventually([&] { return four_letter(port, "wchp").find(marker) == std::string::npos; },
                            5000ms);
        EXPECT_EQ(four_letter(port, "wchp").find(marker), std::string::npos)
            << "the marker's watch, re-armed by the reconnect, stayed on the server";
        co_await wc->guard.async_release(use_awaitable);
        co_await o->async_close(use_awaitable);
    });
}

TEST_F(Marker, AMarkerWatchWhoseRemovalIsLostWithTheConnectionLeavesTheServerOnTheReconnect) {
    // Found by the simulator (test/sim/, "watch left"): C gives up behind B while its connection
    // swallows every reply, so the removal of its watch on B's marker is applied by the server but
    // its reply is lost. The C client still holds its watcher, and sets it again on the reconnect
    // (a marker is never created if B goes without one: that watch would stay until C's session
    // ends). The session sends the removal again once reconnected, and the watch leaves.
    run_test([&]() -> awaitable<void> {
        auto path = lock_path();
        tcp_proxy proxy(first_port(zk_connect()));
        auto oc = through(proxy);
        oc.session_timeout = 10s; // the reconnect keeps the session
        auto a = co_await connect(), b = co_await connect(), c = co_await connect(oc);
        zklock::mutex ma(*a, path), mb(*b, path), mc(*c, path);
        auto ga = co_await ma.async_acquire(use_awaitable);
        auto wb = in_background([&](auto h) { mb.async_acquire_for(20s, h); });
        co_await wait_for_children(*a, path, 2);
        std::string b_node;
        for (auto& k : co_await children_of(*a, path))
            if (path + "/" + k != ga.node_path()) b_node = path + "/" + k;
        CO_REQUIRE(!b_node.empty());
        const std::string marker = b_node + ".released";
        const auto c0 = c->statistics();
        auto wc = in_background([&](auto h) { mc.async_acquire_for(1500ms, h); });
        co_await wait_armed(*c, c0);
        const auto port = first_port(zk_connect());
        CO_REQUIRE(four_letter(port, "wchp").find(marker) != std::string::npos);
        proxy.mute_replies(true);
        // C's deadline passes: its wait ends, and both removals go out on the muted connection.
        co_await eventually([&] { return wc->done; }, 5000ms);
        EXPECT_EQ(wc->ec, zklock::errc::acquire_timeout) << wc->ec.message();
        co_await eventually([&] { return c->statistics().watch_removals >= c0.watch_removals + 2; }, 5000ms);
        co_await eventually([&] { return four_letter(port, "wchp").find(marker) == std::string::npos; },
                            5000ms);
        CO_REQUIRE(four_letter(port, "wchp").find(marker) == std::string::npos); // (applied)
        const auto removals = c->statistics().watch_removals;
        proxy.mute_replies(false); // (and the connection is cut: the C client sets its watches again)
        co_await eventually([&] { return c->statistics().watch_removals > removals; }, 10000ms);
        EXPECT_GT(c->statistics().watch_removals, removals) << "the lost removal was not sent again";
        co_await eventually([&] { return four_letter(port, "wchp").find(marker) == std::string::npos; },
                            5000ms);
        co_await sleep_for(500ms); // (a watch set again after the resend would show now)
        EXPECT_EQ(four_letter(port, "wchp").find(marker), std::string::npos)
            << "the marker's watch, set again by the reconnect, stayed on the server";
        // C's node went in the background; B is granted on A's release, and nothing is left.
        co_await ga.async_release(use_awaitable);
        co_await eventually([&] { return wb->done; }, 10000ms);
        CO_REQUIRE(wb->granted());
        co_await wb->guard.async_release(use_awaitable);
    });
}
