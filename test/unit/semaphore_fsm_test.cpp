// A semaphore's lease as a state machine (src/protocol/semaphore_fsm.hpp), driven by hand: each
// test feeds the results a server could give and checks the actions asked for. No server, no clock.
#include "protocol/semaphore_fsm.hpp"

#include <gtest/gtest.h>

#include <cstdio>
#include <string>
#include <vector>

using namespace zklock::detail;
using A = semaphore_action;
using S = semaphore_fsm::state;

namespace {
const std::string path = "/s";
const std::string leases = path + "/leases";
const std::string g = "gggggggg-gggg-4ggg-8ggg-gggggggggggg";
const std::string prefix = leases + "/_c_" + g + "-lease-";

std::string seq(int n) {
    char s[16];
    std::snprintf(s, sizeof s, "%010d", n);
    return s;
}
std::string mine(int n) { return "_c_" + g + "-lease-" + seq(n); }
std::string other(char c, int n) { return "_c_" + std::string(36, c) + "-lease-" + seq(n); }

semaphore_fsm machine(int n = 2, bool try_only = false) { return semaphore_fsm({path, prefix, n, try_only}); }

semaphore_reply reply(outcome o, int rc = 0) {
    semaphore_reply r;
    r.result = o;
    r.rc = rc;
    return r;
}
semaphore_reply n_is(const std::string& n) {
    auto r = reply(outcome::ok);
    r.data = n;
    return r;
}
semaphore_reply made(int n, std::vector<std::string> path_children = {"leases", "locks"}) {
    auto r = reply(outcome::ok);
    r.path = leases + "/" + mine(n);
    r.czxid = 100 + n;
    r.listed = outcome::ok;
    r.children = std::move(path_children);
    return r;
}
semaphore_reply listing(std::vector<std::string> children) {
    auto r = reply(outcome::ok);
    r.children = std::move(children);
    return r;
}
semaphore_input flight(semaphore_reply read, semaphore_reply create, semaphore_reply list) {
    semaphore_input in;
    in.read = std::move(read);
    in.made = std::move(create);
    in.listing = std::move(list);
    return in;
}
semaphore_input with_listing(semaphore_reply list) {
    semaphore_input in;
    in.listing = std::move(list);
    return in;
}
semaphore_input with_made(semaphore_reply m) {
    semaphore_input in;
    in.made = std::move(m);
    return in;
}
semaphore_input with_read(semaphore_reply r) {
    semaphore_input in;
    in.read = std::move(r);
    return in;
}
semaphore_input with_rc(int rc) {
    semaphore_input in;
    in.rc = rc;
    return in;
}
semaphore_input nothing() { return {}; }
} // namespace

TEST(SemaphoreFsm, OneFlightThenTheLeaseCheckGrantsWhenAtMostNLeasesExist) {
    auto m = machine(2);
    auto a = m.start();
    ASSERT_EQ(a.what, A::flight);
    EXPECT_EQ(a.node, prefix);
    a = m.resume(flight(n_is("2"), made(7), listing({other('a', 3), mine(7)})));
    ASSERT_EQ(a.what, A::check_lease) << "the flight's listing is the count: no second listing";
    EXPECT_FALSE(a.unwatch_at_server) << "its watch was counted on: no removal on the grant's path";
    a = m.resume(with_rc(semaphore_codes::ok));
    ASSERT_EQ(a.what, A::grant);
    EXPECT_EQ(m.node(), leases + "/" + mine(7));
    EXPECT_EQ(m.sequence(), 7);
    EXPECT_EQ(m.czxid(), 107);
}

TEST(SemaphoreFsm, MoreThanNWaitsOnTheFlightsWatchThenCountsAgain) {
    auto m = machine(1);
    m.start();
    auto a = m.resume(flight(n_is("1"), made(7), listing({other('a', 3), mine(7)})));
    ASSERT_EQ(a.what, A::wait) << "the flight's listing (and its watch) serve the first wait";
    a = m.resume(nothing());
    ASSERT_EQ(a.what, A::list_leases);
    EXPECT_TRUE(a.unwatch_at_server) << "woken (or not by it): the watch waited on is removed";
    a = m.resume(with_listing(listing({other('a', 3), other('b', 5), mine(7)})));
    ASSERT_EQ(a.what, A::wait);
    a = m.resume(nothing());
    ASSERT_EQ(a.what, A::list_leases);
    a = m.resume(with_listing(listing({"not-a-lease", mine(7)})));
    ASSERT_EQ(a.what, A::check_lease) << "only leases count";
    EXPECT_EQ(m.resume(with_rc(0)).what, A::grant);
}

TEST(SemaphoreFsm, ALostCreateFailsAndSweepsItsGuid) {
    auto m = machine();
    m.start();
    auto a = m.resume(flight(n_is("2"), reply(outcome::connection, -4), listing({})));
    ASSERT_EQ(a.what, A::fail);
    EXPECT_EQ(a.why, A::request_failed);
    EXPECT_EQ(a.rc, -4);
    EXPECT_TRUE(a.delete_by_guid) << "it may have been applied: no lease of ours may stay";
    EXPECT_TRUE(m.node().empty());
}

TEST(SemaphoreFsm, AReadThatNeverCompletedFailsAndLeavesTheLeaseMadeToTheDriver) {
    auto m = machine();
    m.start();
    auto in = flight({}, made(4), listing({mine(4)}));
    in.read_answered = false;
    auto a = m.resume(std::move(in));
    ASSERT_EQ(a.what, A::fail);
    EXPECT_EQ(a.why, A::internal_error);
    EXPECT_FALSE(a.delete_by_guid) << "its create answered: the node is known";
    EXPECT_EQ(m.node(), leases + "/" + mine(4)) << "the driver deletes it";
}

TEST(SemaphoreFsm, TheFirstLeaseMakesTheLeasesNodeReadsNAgainAndCreatesOnce) {
    auto m = machine(3);
    m.start();
    auto a = m.resume(
        flight(reply(outcome::no_node, -101), reply(outcome::no_node, -101), reply(outcome::no_node, -101)));
    ASSERT_EQ(a.what, A::make_leases);
    EXPECT_TRUE(a.unwatch_at_server) << "the flight's listing is not used: its watch goes";
    auto mk = reply(outcome::other, -110);
    mk.exists = true; // someone made it meanwhile: as good
    a = m.resume(with_made(mk));
    ASSERT_EQ(a.what, A::read_n);
    a = m.resume(with_read(n_is("3")));
    ASSERT_EQ(a.what, A::create) << "the leases node was just made: no second make";
    EXPECT_EQ(a.node, prefix);
    a = m.resume(with_made(made(0)));
    ASSERT_EQ(a.what, A::list_leases) << "not prefetched: a listing with its watch";
    a = m.resume(with_listing(listing({mine(0)})));
    ASSERT_EQ(a.what, A::check_lease);
}

TEST(SemaphoreFsm, TheReapersRacesAreBoundedAtFiveCreates) {
    auto m = machine();
    m.start();
    auto a = m.resume(flight(n_is("2"), reply(outcome::no_node, -101), reply(outcome::no_node, -101)));
    int creates = 0;
    for (int i = 0; i < 20 && a.what != A::fail; ++i) {
        if (a.what == A::make_leases) {
            a = m.resume(with_made(reply(outcome::ok)));
        } else {
            ASSERT_EQ(a.what, A::create);
            ++creates;
            a = m.resume(with_made(reply(outcome::no_node, -101))); // reaped again
        }
    }
    ASSERT_EQ(a.what, A::fail);
    EXPECT_EQ(a.why, A::request_failed);
    EXPECT_EQ(a.rc, -101);
    EXPECT_EQ(creates, 5);
}

TEST(SemaphoreFsm, AnotherNFailsWithTheLeaseToDelete) {
    auto m = machine(2);
    m.start();
    auto a = m.resume(flight(n_is("5"), made(1), listing({mine(1)})));
    ASSERT_EQ(a.what, A::fail);
    EXPECT_EQ(a.why, A::size_mismatch);
    EXPECT_EQ(m.node(), leases + "/" + mine(1)) << "made under another N: the driver deletes it";
}

TEST(SemaphoreFsm, OnePathOneLock) {
    for (const std::string& lock :
         {std::string("lock"), "_c_" + std::string(36, 'x') + "-lock-0000000001",
          "_c_" + std::string(36, 'x') + "-__WRIT__0000000001", std::string("__rlock__0000000002")}) {
        auto m = machine();
        m.start();
        auto a = m.resume(flight(n_is("2"), made(1, {"leases", lock}), listing({mine(1)})));
        ASSERT_EQ(a.what, A::fail) << lock;
        EXPECT_EQ(a.why, A::path_used_by_lock) << lock;
        EXPECT_FALSE(m.node().empty());
    }
}

TEST(SemaphoreFsm, APathListingLostWaitsForTheConnectionAndListsAgain) {
    auto m = machine();
    m.start();
    auto c = made(1);
    c.listed = outcome::connection;
    c.list_rc = -4;
    c.children.clear();
    auto a = m.resume(flight(n_is("2"), c, reply(outcome::connection, -4)));
    ASSERT_EQ(a.what, A::wait_connected);
    a = m.resume(nothing());
    ASSERT_EQ(a.what, A::list_path);
    a = m.resume(with_listing(listing({"leases", "locks"})));
    ASSERT_EQ(a.what, A::list_leases);
    // and a stop while waiting for the connection ends it
    auto m2 = machine();
    m2.start();
    m2.resume(flight(n_is("2"), c, reply(outcome::connection, -4)));
    semaphore_input stop;
    stop.stop = true;
    a = m2.resume(stop);
    ASSERT_EQ(a.what, A::fail);
    EXPECT_EQ(a.why, A::stop);
}

TEST(SemaphoreFsm, TheInternalLockLostWhileWaitingStartsTheRoundOver) {
    auto m = machine(1);
    m.start();
    auto a = m.resume(flight(n_is("1"), made(7), listing({other('a', 3), mine(7)})));
    ASSERT_EQ(a.what, A::wait);
    semaphore_input lost;
    lost.internal_lost = true;
    a = m.resume(lost);
    ASSERT_EQ(a.what, A::restart);
    EXPECT_EQ(m.node(), leases + "/" + mine(7)) << "the driver deletes our lease before the next round";
}

TEST(SemaphoreFsm, ATryDoesNotWaitAndAListingLostEndsIt) {
    auto m = machine(1, true);
    m.start();
    auto a = m.resume(flight(n_is("1"), made(7), listing({other('a', 3), mine(7)})));
    ASSERT_EQ(a.what, A::fail);
    EXPECT_EQ(a.why, A::busy);
    auto m2 = machine(1, true);
    m2.start();
    a = m2.resume(flight(n_is("1"), made(7), reply(outcome::connection, -4)));
    ASSERT_EQ(a.what, A::list_leases);
    a = m2.resume(with_listing(reply(outcome::connection, -4)));
    ASSERT_EQ(a.what, A::fail) << "a try does not wait for a reconnect";
    EXPECT_EQ(a.rc, -4);
    // (not a try: it waits for the connection, then lists again)
    auto m3 = machine(1);
    m3.start();
    m3.resume(flight(n_is("1"), made(7), reply(outcome::connection, -4)));
    a = m3.resume(with_listing(reply(outcome::connection, -4)));
    ASSERT_EQ(a.what, A::wait_connected);
    EXPECT_EQ(m3.current(), S::line_waiting);
    EXPECT_EQ(m3.resume(nothing()).what, A::list_leases);
}

TEST(SemaphoreFsm, OurLeaseMissingFromTheCountFailsWithNothingToDelete) {
    auto m = machine();
    m.start();
    auto a = m.resume(flight(n_is("2"), made(7), listing({other('a', 3)})));
    ASSERT_EQ(a.what, A::fail);
    EXPECT_EQ(a.why, A::node_deleted);
    EXPECT_TRUE(m.node().empty());
}

TEST(SemaphoreFsm, TheLeaseCheckListsAgainWhenNotYetAndFailsWhenRefused) {
    auto m = machine();
    m.start();
    auto a = m.resume(flight(n_is("2"), made(7), listing({mine(7)})));
    ASSERT_EQ(a.what, A::check_lease);
    a = m.resume(with_rc(semaphore_codes::operation_timeout));
    ASSERT_EQ(a.what, A::list_leases) << "not yet: count again";
    a = m.resume(with_listing(listing({mine(7)})));
    ASSERT_EQ(a.what, A::check_lease);
    a = m.resume(with_rc(semaphore_codes::check_denied));
    ASSERT_EQ(a.what, A::fail);
    EXPECT_EQ(a.why, A::lease_check_denied);
    // a stop that comes with a successful check is honoured
    auto m2 = machine();
    m2.start();
    m2.resume(flight(n_is("2"), made(7), listing({mine(7)})));
    auto in = with_rc(0);
    in.stop = true;
    a = m2.resume(in);
    ASSERT_EQ(a.what, A::fail);
    EXPECT_EQ(a.why, A::stop);
    EXPECT_FALSE(m2.node().empty()) << "the driver deletes the lease that was not granted";
}
