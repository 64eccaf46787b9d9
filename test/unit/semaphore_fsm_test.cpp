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
/// With its guid: a lost create is looked for.
semaphore_fsm finder(int n = 2, bool try_only = false) {
    return semaphore_fsm({path, prefix, n, try_only, g});
}
constexpr std::int64_t our_session = 0x51;

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
    a = m.resume(with_rc(semaphore_codes::ok));
    ASSERT_EQ(a.what, A::grant);
    EXPECT_FALSE(a.unwatch_at_server) << "its watch was counted on: no removal on the grant's path";
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

TEST(SemaphoreFsm, ALostCreateWithoutAGuidFailsAndSweepsIt) {
    auto m = machine();
    m.start();
    auto a = m.resume(flight(n_is("2"), reply(outcome::connection, -4), listing({})));
    ASSERT_EQ(a.what, A::fail);
    EXPECT_EQ(a.why, A::request_failed);
    EXPECT_EQ(a.rc, -4);
    EXPECT_TRUE(a.delete_by_guid) << "it may have been applied: no lease of ours may stay";
    EXPECT_TRUE(m.node().empty());
}

namespace {
semaphore_input found_node(outcome o, std::int64_t owner = our_session, std::int64_t czxid = 907) {
    semaphore_input in;
    in.read.result = o;
    in.read.rc = o == outcome::ok ? 0 : o == outcome::no_node ? -101 : -4;
    in.read.owner = owner;
    in.read.czxid = czxid;
    in.session = our_session;
    return in;
}
/// Drives a machine from a path check (its listing lost) to the grant: list the path, count, check.
void path_then_grant(semaphore_fsm& m, semaphore_action a, const std::string& ours) {
    ASSERT_EQ(a.what, A::wait_connected) << "the path is listed again (one path, one lock)";
    a = m.resume(nothing());
    ASSERT_EQ(a.what, A::list_path);
    a = m.resume(with_listing(listing({"leases", "locks"})));
    ASSERT_EQ(a.what, A::list_leases);
    a = m.resume(with_listing(listing({ours})));
    ASSERT_EQ(a.what, A::check_lease);
    ASSERT_EQ(m.resume(with_rc(0)).what, A::grant);
}
} // namespace

TEST(SemaphoreFsm, ALostCreateIsFoundByItsGuidAfterABarrierAndIsOurLease) {
    auto m = finder();
    m.start();
    auto a = m.resume(flight(n_is("2"), reply(outcome::connection, -4), reply(outcome::connection, -4)));
    ASSERT_EQ(a.what, A::wait_connected) << "its fate is unknown: look for it once connected";
    EXPECT_EQ(m.current(), S::recover_connecting);
    a = m.resume(nothing());
    ASSERT_EQ(a.what, A::list_for_guid);
    a = m.resume(with_listing(listing({other('a', 3), mine(9)})));
    ASSERT_EQ(a.what, A::read_node);
    EXPECT_EQ(a.node, leases + "/" + mine(9));
    a = m.resume(found_node(outcome::ok));
    // N was answered in the flight: the path's check comes next
    path_then_grant(m, a, mine(9));
    EXPECT_EQ(m.node(), leases + "/" + mine(9));
    EXPECT_EQ(m.sequence(), 9);
    EXPECT_EQ(m.czxid(), 907) << "the token is the found node's";
}

TEST(SemaphoreFsm, ALostCreateNotAppliedCreatesAgain) {
    auto m = finder();
    m.start();
    m.resume(flight(n_is("2"), reply(outcome::connection, -4), reply(outcome::connection, -4)));
    m.resume(nothing());
    auto a = m.resume(with_listing(listing({other('a', 3)})));
    ASSERT_EQ(a.what, A::create) << "no lease holds our guid: the create was not applied";
    EXPECT_EQ(a.node, prefix);
    a = m.resume(with_made(made(8)));
    ASSERT_EQ(a.what, A::list_leases);
    a = m.resume(with_listing(listing({other('a', 3), mine(8)})));
    ASSERT_EQ(a.what, A::check_lease);
    EXPECT_EQ(m.resume(with_rc(0)).what, A::grant);
    EXPECT_EQ(m.node(), leases + "/" + mine(8));
    // and "leases" gone at the listing: nothing of ours, create again
    auto m2 = finder();
    m2.start();
    m2.resume(flight(n_is("2"), reply(outcome::connection, -4), reply(outcome::connection, -4)));
    m2.resume(nothing());
    EXPECT_EQ(m2.resume(with_listing(reply(outcome::no_node, -101))).what, A::create);
}

TEST(SemaphoreFsm, ANodeWithOurGuidOfAnotherSessionIsNotOursToCount) {
    auto m = finder();
    m.start();
    m.resume(flight(n_is("2"), reply(outcome::connection, -4), reply(outcome::connection, -4)));
    m.resume(nothing());
    m.resume(with_listing(listing({mine(9)})));
    auto a = m.resume(found_node(outcome::ok, our_session + 1));
    ASSERT_EQ(a.what, A::create) << "adopting another session's node could make two holders";
    // gone between the listing and the read: create again
    auto m2 = finder();
    m2.start();
    m2.resume(flight(n_is("2"), reply(outcome::connection, -4), reply(outcome::connection, -4)));
    m2.resume(nothing());
    m2.resume(with_listing(listing({mine(9)})));
    EXPECT_EQ(m2.resume(found_node(outcome::no_node)).what, A::create);
}

TEST(SemaphoreFsm, ALostListingOrReadInTheRecoveryWaitsAndLooksAgain) {
    auto m = finder();
    m.start();
    m.resume(flight(n_is("2"), reply(outcome::connection, -4), reply(outcome::connection, -4)));
    m.resume(nothing());
    auto a = m.resume(with_listing(reply(outcome::connection, -4)));
    ASSERT_EQ(a.what, A::wait_connected);
    EXPECT_EQ(m.resume(nothing()).what, A::list_for_guid);
    m.resume(with_listing(listing({mine(9)})));
    a = m.resume(found_node(outcome::connection));
    ASSERT_EQ(a.what, A::wait_connected);
    EXPECT_EQ(m.resume(nothing()).what, A::list_for_guid);
}

TEST(SemaphoreFsm, NeitherNNorTheCreateAnsweredReadsNAfterFindingTheLease) {
    auto m = finder();
    m.start();
    m.resume(flight(reply(outcome::connection, -4), reply(outcome::connection, -4),
                    reply(outcome::connection, -4)));
    m.resume(nothing());
    m.resume(with_listing(listing({mine(9)})));
    auto a = m.resume(found_node(outcome::ok));
    ASSERT_EQ(a.what, A::read_n) << "N is not known yet";
    a = m.resume(with_read(n_is("3")));
    ASSERT_EQ(a.what, A::fail);
    EXPECT_EQ(a.why, A::size_mismatch);
    EXPECT_EQ(m.node(), leases + "/" + mine(9)) << "the lease found is the driver's to delete";
    // N matches: on to the path's check and the grant
    auto m2 = finder();
    m2.start();
    m2.resume(flight(reply(outcome::connection, -4), reply(outcome::connection, -4),
                     reply(outcome::connection, -4)));
    m2.resume(nothing());
    m2.resume(with_listing(listing({mine(9)})));
    m2.resume(found_node(outcome::ok));
    a = m2.resume(with_read(n_is("2")));
    path_then_grant(m2, a, mine(9));
    // not found, N not known: N is read first (making "leases" if missing), then the create
    auto m3 = finder();
    m3.start();
    m3.resume(flight(reply(outcome::connection, -4), reply(outcome::connection, -4),
                     reply(outcome::connection, -4)));
    m3.resume(nothing());
    a = m3.resume(with_listing(reply(outcome::no_node, -101)));
    ASSERT_EQ(a.what, A::make_leases);
    auto ok = with_made(reply(outcome::ok));
    ASSERT_EQ(m3.resume(ok).what, A::read_n);
    ASSERT_EQ(m3.resume(with_read(n_is("2"))).what, A::create);
}

TEST(SemaphoreFsm, ALostCreateUnderAnotherNIsSweptNotLookedFor) {
    auto m = finder();
    m.start();
    auto a = m.resume(flight(n_is("5"), reply(outcome::connection, -4), reply(outcome::connection, -4)));
    ASSERT_EQ(a.what, A::fail);
    EXPECT_EQ(a.why, A::size_mismatch);
    EXPECT_TRUE(a.delete_by_guid);
}

TEST(SemaphoreFsm, LostCreatesAreBoundedAndATryDoesNotLook) {
    auto m = finder();
    m.start();
    auto a = m.resume(flight(n_is("2"), reply(outcome::connection, -4), reply(outcome::connection, -4)));
    for (int i = 0; i < 5; ++i) {
        ASSERT_EQ(a.what, A::wait_connected) << i;
        m.resume(nothing());
        a = m.resume(with_listing(listing({})));
        ASSERT_EQ(a.what, A::create) << i;
        a = m.resume(with_made(reply(outcome::connection, -4)));
    }
    ASSERT_EQ(a.what, A::fail) << "the sixth lost create";
    EXPECT_EQ(a.rc, -4);
    EXPECT_TRUE(a.delete_by_guid);
    auto t = finder(2, true);
    t.start();
    a = t.resume(flight(n_is("2"), reply(outcome::connection, -4), reply(outcome::connection, -4)));
    ASSERT_EQ(a.what, A::fail) << "a try does not wait for a reconnect";
    EXPECT_TRUE(a.delete_by_guid);
}

TEST(SemaphoreFsm, AStopOrTheInternalLockLostWhileRecoveringSweepsTheGuid) {
    auto m = finder();
    m.start();
    m.resume(flight(n_is("2"), reply(outcome::connection, -4), reply(outcome::connection, -4)));
    semaphore_input stop;
    stop.stop = true;
    auto a = m.resume(stop);
    ASSERT_EQ(a.what, A::fail);
    EXPECT_EQ(a.why, A::stop);
    EXPECT_TRUE(a.delete_by_guid);
    auto m2 = finder();
    m2.start();
    m2.resume(flight(n_is("2"), reply(outcome::connection, -4), reply(outcome::connection, -4)));
    semaphore_input lost;
    lost.internal_lost = true;
    a = m2.resume(lost);
    ASSERT_EQ(a.what, A::restart);
    EXPECT_TRUE(a.delete_by_guid) << "the next round must not find this one's lease";
}

TEST(SemaphoreFsm, NsReadLostWaitsAndReadsAgainAndALostMakeIsReadAgain) {
    auto m = finder();
    m.start();
    auto a = m.resume(flight(reply(outcome::connection, -4), made(4), reply(outcome::connection, -4)));
    ASSERT_EQ(a.what, A::wait_connected) << "N unknown: read it once connected";
    EXPECT_EQ(m.current(), S::read_waiting);
    ASSERT_EQ(m.resume(nothing()).what, A::read_n);
    a = m.resume(with_read(n_is("2")));
    ASSERT_EQ(a.what, A::list_leases) << "the flight's path listing stands: count";
    // the first lease: "leases" missing, its make's reply lost, read again, made again
    auto m2 = finder();
    m2.start();
    a = m2.resume(flight(reply(outcome::no_node, -101), reply(outcome::no_node, -101), listing({})));
    ASSERT_EQ(a.what, A::make_leases);
    a = m2.resume(with_made(reply(outcome::connection, -4)));
    ASSERT_EQ(a.what, A::wait_connected);
    ASSERT_EQ(m2.resume(nothing()).what, A::read_n);
    a = m2.resume(with_read(reply(outcome::no_node, -101)));
    ASSERT_EQ(a.what, A::make_leases) << "the lost make was not applied: make it again";
    ASSERT_EQ(m2.resume(with_made(reply(outcome::ok))).what, A::read_n);
    ASSERT_EQ(m2.resume(with_read(n_is("2"))).what, A::create);
}

TEST(SemaphoreFsm, ALostMakeBeforeOurCreateWaitsAndMakesAgainBoundedWithTheLostCreates) {
    // our create found no "leases", and the make's reply is lost: no create of ours is in doubt
    auto m = finder();
    m.start();
    auto a = m.resume(flight(n_is("2"), reply(outcome::no_node, -101), listing({})));
    ASSERT_EQ(a.what, A::make_leases);
    a = m.resume(with_made(reply(outcome::connection, -4)));
    ASSERT_EQ(a.what, A::wait_connected);
    EXPECT_EQ(m.current(), S::make_waiting);
    ASSERT_EQ(m.resume(nothing()).what, A::make_leases) << "made again once connected";
    for (int i = 1; i < 5; ++i) {
        ASSERT_EQ(m.resume(with_made(reply(outcome::connection, -4))).what, A::wait_connected) << i;
        ASSERT_EQ(m.resume(nothing()).what, A::make_leases) << i;
    }
    a = m.resume(with_made(reply(outcome::connection, -4)));
    ASSERT_EQ(a.what, A::fail) << "the sixth lost request of the round";
    EXPECT_EQ(a.rc, -4);
    // a stop while waiting ends it
    auto m2 = finder();
    m2.start();
    m2.resume(flight(n_is("2"), reply(outcome::no_node, -101), listing({})));
    m2.resume(with_made(reply(outcome::connection, -4)));
    semaphore_input stop;
    stop.stop = true;
    a = m2.resume(stop);
    ASSERT_EQ(a.what, A::fail);
    EXPECT_EQ(a.why, A::stop);
}

TEST(SemaphoreFsm, NsReadFindingNoLeasesMakesItAgainFiveTimesAtMostAndAStopEndsTheWait) {
    auto m = finder();
    m.start();
    auto a = m.resume(flight(reply(outcome::connection, -4), made(4), reply(outcome::connection, -4)));
    ASSERT_EQ(a.what, A::wait_connected);
    ASSERT_EQ(m.resume(nothing()).what, A::read_n);
    for (int i = 0; i < 5; ++i) {
        ASSERT_EQ(m.resume(with_read(reply(outcome::no_node, -101))).what, A::make_leases) << i;
        ASSERT_EQ(m.resume(with_made(reply(outcome::ok))).what, A::read_n) << i;
    }
    a = m.resume(with_read(reply(outcome::no_node, -101)));
    ASSERT_EQ(a.what, A::fail) << "the sixth read without leases";
    EXPECT_EQ(a.rc, -101);
    EXPECT_EQ(m.node(), leases + "/" + mine(4)) << "the lease made is the driver's to delete";
    auto m2 = finder();
    m2.start();
    m2.resume(flight(reply(outcome::connection, -4), made(4), reply(outcome::connection, -4)));
    semaphore_input stop;
    stop.stop = true;
    a = m2.resume(stop);
    ASSERT_EQ(a.what, A::fail);
    EXPECT_EQ(a.why, A::stop);
}

TEST(SemaphoreFsm, NoNewLeaseAfterAStopOrTheInternalLockLostDuringTheRecovery) {
    // the lost create was not applied, and the round must end: no new lease for others to count
    auto m = finder();
    m.start();
    m.resume(flight(n_is("2"), reply(outcome::connection, -4), reply(outcome::connection, -4)));
    m.resume(nothing());
    auto in = with_listing(listing({}));
    in.stop = true;
    auto a = m.resume(in);
    ASSERT_EQ(a.what, A::fail);
    EXPECT_EQ(a.why, A::stop);
    EXPECT_FALSE(a.delete_by_guid) << "behind the barrier, the listing settled it: nothing to sweep";
    auto m2 = finder();
    m2.start();
    m2.resume(flight(n_is("2"), reply(outcome::connection, -4), reply(outcome::connection, -4)));
    m2.resume(nothing());
    in = with_listing(listing({}));
    in.internal_lost = true;
    EXPECT_EQ(m2.resume(in).what, A::restart);
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
    EXPECT_TRUE(a.unwatch_at_server) << "the counted listing's watch, kept through the check, goes";
    a = m.resume(with_listing(listing({mine(7)})));
    ASSERT_EQ(a.what, A::check_lease);
    a = m.resume(with_rc(semaphore_codes::check_denied));
    ASSERT_EQ(a.what, A::fail);
    EXPECT_EQ(a.why, A::lease_check_denied);
    EXPECT_TRUE(a.unwatch_at_server)
        << "a round that ends without the grant removes the counted listing's watch: nothing of ours "
           "would fire it";
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
