// The acquire as a state machine (src/protocol/acquire_fsm.hpp), driven by hand: each test feeds
// the results a server could give and checks the actions asked for. No server, no clock.
#include "protocol/acquire_fsm.hpp"

#include <gtest/gtest.h>

#include <cstdio>
#include <string>
#include <vector>

using namespace zklock::detail;
using A = acquire_action;

namespace {
const std::string path = "/p";
const std::string g = "gggggggg-gggg-4ggg-8ggg-gggggggggggg";
const std::string prefix = path + "/_c_" + g + "-lock-";

std::string seq(int n) {
    char s[16];
    std::snprintf(s, sizeof s, "%010d", n);
    return s;
}
std::string mine(int n) { return "_c_" + g + "-lock-" + seq(n); }
std::string other(char c, int n) { return "_c_" + std::string(36, c) + "-lock-" + seq(n); }

acquire_fsm machine(bool try_only = false) {
    acquire_shape shape;
    shape.try_only = try_only;
    return acquire_fsm({path, prefix, g, shape});
}

acquire_input result(outcome o, int rc = 0) {
    acquire_input in;
    in.result = o;
    in.rc = rc;
    return in;
}
acquire_input created(int n, std::vector<std::string> listing) {
    auto in = result(outcome::ok);
    in.path = path + "/" + mine(n);
    in.czxid = 100 + n;
    in.listed = outcome::ok;
    in.children = std::move(listing);
    in.cv = n + 1;
    return in;
}
acquire_input listed(std::vector<std::string> children, int cv = 50) {
    auto in = result(outcome::ok);
    in.children = std::move(children);
    in.cv = cv;
    return in;
}
acquire_input connected(bool ok = true) {
    acquire_input in;
    in.ok = ok;
    return in;
}
} // namespace

TEST(AcquireFsm, UncontendedIsOneFlightThenTheLeaseThenTheGrant) {
    auto m = machine();
    auto a = m.start(false);
    ASSERT_EQ(a.what, A::create_and_list);
    EXPECT_EQ(a.node, prefix);
    a = m.resume(created(1, {mine(1)}));
    ASSERT_EQ(a.what, A::check_lease);
    EXPECT_FALSE(a.by_marker);
    a = m.resume(result(outcome::ok));
    ASSERT_EQ(a.what, A::grant);
    EXPECT_EQ(m.node(), path + "/" + mine(1));
    EXPECT_EQ(m.czxid(), 101);
    EXPECT_FALSE(m.waited());
    EXPECT_EQ(m.current(), acquire_fsm::state::done);
}

TEST(AcquireFsm, TheNextWaiterWatchesOnlyItsPredecessorAndItsDeletionGrants) {
    auto m = machine();
    m.start(false);
    auto a = m.resume(created(2, {other('a', 1), mine(2)}));
    ASSERT_EQ(a.what, A::watch);
    EXPECT_EQ(a.node, path + "/" + other('a', 1));
    EXPECT_FALSE(a.watch_marker); // alone behind it: its deletion is enough
    ASSERT_EQ(m.resume(result(outcome::ok)).what, A::wait);
    auto woke = acquire_input{};
    woke.pred_deleted = true;
    ASSERT_EQ(m.resume(woke).what, A::check_lease);
    ASSERT_EQ(m.resume(result(outcome::ok)).what, A::grant);
    EXPECT_TRUE(m.waited());
}

TEST(AcquireFsm, DeeperInLineTheMarkerGrantsAndAnythingElseListsAgain) {
    auto m = machine();
    m.start(false);
    auto a = m.resume(created(3, {other('a', 1), other('b', 2), mine(3)}));
    ASSERT_EQ(a.what, A::watch);
    EXPECT_EQ(a.node, path + "/" + other('b', 2));
    EXPECT_TRUE(a.watch_marker);
    // a wake-up that is not the marker (the predecessor gave up: not alone) lists again
    ASSERT_EQ(m.resume(result(outcome::ok)).what, A::wait);
    acquire_input woke;
    woke.pred_deleted = true;
    ASSERT_EQ(m.resume(woke).what, A::list);
    a = m.resume(listed({other('a', 1), mine(3)}));
    ASSERT_EQ(a.what, A::watch);
    EXPECT_EQ(a.node, path + "/" + other('a', 1));
    // the marker was created before the read answered: no wait, granted by it
    auto r = result(outcome::no_node);
    r.marked = true;
    a = m.resume(r);
    ASSERT_EQ(a.what, A::check_lease);
    EXPECT_TRUE(a.by_marker);
}

TEST(AcquireFsm, ALostCreateIsFoundByItsGuidAndAdoptedOnlyIfThisSessionOwnsIt) {
    auto m = machine();
    m.start(false);
    ASSERT_EQ(m.resume(result(outcome::connection, -4)).what, A::wait_connected);
    auto l = m.resume(connected());
    ASSERT_EQ(l.what, A::list);
    // behind a write of its own: the lost create may still sit in the leader's pipeline
    EXPECT_TRUE(l.barrier);
    // found, but owned by an earlier session: deleted, and we create again
    auto a = m.resume(listed({mine(1)}));
    ASSERT_EQ(a.what, A::read_node);
    EXPECT_EQ(a.node, path + "/" + mine(1));
    auto stat = result(outcome::ok);
    stat.owner = 7;
    stat.session = 8;
    a = m.resume(stat);
    ASSERT_EQ(a.what, A::create_and_list);
    EXPECT_EQ(a.delete_nodes, std::vector<std::string>{path + "/" + mine(1)});
    EXPECT_TRUE(m.node().empty());
    // lost again, and this time ours: adopted, and the listing that found it decides
    m.resume(result(outcome::connection, -4));
    m.resume(connected());
    a = m.resume(listed({other('a', 1), mine(2)}));
    ASSERT_EQ(a.what, A::read_node);
    stat.owner = stat.session = 8;
    stat.czxid = 77;
    a = m.resume(stat);
    ASSERT_EQ(a.what, A::watch);
    EXPECT_EQ(m.node(), path + "/" + mine(2));
    EXPECT_EQ(m.czxid(), 77);
}

TEST(AcquireFsm, ACreateNeverAppliedIsMadeAgainAndLostRepliesAreBounded) {
    auto m = machine();
    m.start(false);
    for (int i = 0; i < 5; ++i) {
        ASSERT_EQ(m.resume(result(outcome::connection, -4)).what, A::wait_connected);
        ASSERT_EQ(m.resume(connected()).what, A::list);
        ASSERT_EQ(m.resume(listed({other('a', 1)})).what, A::create_and_list); // not found
    }
    auto a = m.resume(result(outcome::connection, -4));
    ASSERT_EQ(a.what, A::fail);
    EXPECT_EQ(a.why, A::create_retries_exhausted);
    EXPECT_TRUE(a.delete_by_guid); // the last one may have been applied
}

TEST(AcquireFsm, NoParentMakesTheParentsThenACreateAgainBoundedByTheReapersRaces) {
    auto m = machine();
    m.start(false);
    for (int i = 0; i < 5; ++i) {
        ASSERT_EQ(m.resume(result(outcome::no_node, -101)).what, A::make_parents);
        ASSERT_EQ(m.resume(result(i % 2 ? outcome::ok : outcome::no_node)).what, A::create_and_list);
    }
    auto a = m.resume(result(outcome::no_node, -101));
    ASSERT_EQ(a.what, A::fail);
    EXPECT_EQ(a.why, A::no_parent);
    // lost replies of the parents' creates are bounded on their own
    auto n = machine();
    n.start(false);
    for (int i = 0; i < 5; ++i) {
        ASSERT_EQ(n.resume(result(outcome::no_node, -101)).what, A::make_parents);
        ASSERT_EQ(n.resume(result(outcome::connection, -4)).what, A::wait_connected);
        ASSERT_EQ(n.resume(connected()).what, A::create_and_list);
    }
    n.resume(result(outcome::no_node, -101));
    EXPECT_EQ(n.resume(result(outcome::connection, -4)).why, A::create_retries_exhausted);
}

TEST(AcquireFsm, AStopWhileWaitingFailsAndLeavesTheNodeToDelete) {
    auto m = machine();
    m.start(false);
    m.resume(created(2, {other('a', 1), mine(2)}));
    ASSERT_EQ(m.resume(result(outcome::ok)).what, A::wait);
    acquire_input woke;
    woke.stop = true;
    auto a = m.resume(woke);
    ASSERT_EQ(a.what, A::fail);
    EXPECT_EQ(a.why, A::stop);
    EXPECT_EQ(m.node(), path + "/" + mine(2)); // the driver deletes it
    // a stop that comes with the predecessor's deletion wins over the grant
    auto n = machine();
    n.start(false);
    n.resume(created(2, {other('a', 1), mine(2)}));
    n.resume(result(outcome::ok));
    woke.pred_deleted = true;
    EXPECT_EQ(n.resume(woke).why, A::stop);
}

TEST(AcquireFsm, ATryIsBusyAndOtherLocksOnThePathAreRefused) {
    auto t = machine(true);
    t.start(false);
    auto a = t.resume(created(2, {other('a', 1), mine(2)}));
    EXPECT_EQ(a.what, A::fail);
    EXPECT_EQ(a.why, A::busy);
    // a semaphore's lease on the path
    auto s = machine();
    s.start(false);
    ASSERT_EQ(s.resume(created(2, {"leases", mine(2)})).what, A::list_leases);
    EXPECT_EQ(s.resume(listed({"_c_" + std::string(36, 'b') + "-lease-0000000001"})).why,
              A::path_used_by_semaphore);
    // an empty "leases" is no conflict
    auto e = machine();
    e.start(false);
    e.resume(created(2, {"leases", mine(2)}));
    EXPECT_EQ(e.resume(listed({})).what, A::check_lease);
    // the unique_node strategy's node
    auto u = machine();
    u.start(false);
    EXPECT_EQ(u.resume(created(2, {"lock", mine(2)})).why, A::strategy_conflict);
}

TEST(AcquireFsm, ALeaseNotYetFreshListsAgainAndAMissingNodeFails) {
    auto m = machine();
    m.start(false);
    m.resume(created(1, {mine(1)}));
    ASSERT_EQ(m.resume(result(outcome::connection, -7)).what, A::list);
    auto a = m.resume(listed({other('a', 2)})); // our node is gone
    ASSERT_EQ(a.what, A::fail);
    EXPECT_EQ(a.why, A::node_deleted);
    EXPECT_TRUE(m.node().empty()); // nothing to delete
}

TEST(AcquireFsm, ConnectionLossesWhileInLineListAgainOnceConnected) {
    auto m = machine();
    m.start(false);
    auto c = created(2, {});
    c.listed = outcome::connection; // the create landed, its listing was lost
    ASSERT_EQ(m.resume(c).what, A::list);
    ASSERT_EQ(m.resume(result(outcome::connection, -4)).what, A::wait_connected);
    ASSERT_EQ(m.resume(connected()).what, A::list);
    m.resume(listed({other('a', 1), mine(2)}));
    ASSERT_EQ(m.resume(result(outcome::connection, -4)).what, A::wait_connected); // the watch's read
    auto a = m.resume(connected(false));
    ASSERT_EQ(a.what, A::fail);
    EXPECT_EQ(a.why, A::stop);
    EXPECT_FALSE(m.node().empty());
    // a duplicate of ours (an earlier create applied) is deleted, and does not make us wait
    auto d = machine();
    d.start(false);
    a = d.resume(created(3, {mine(1), mine(3)}));
    ASSERT_EQ(a.what, A::check_lease);
    EXPECT_EQ(a.delete_nodes, std::vector<std::string>{path + "/" + mine(1)});
}
