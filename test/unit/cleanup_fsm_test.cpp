// The release and the guaranteed deletes as a machine (src/session/cleanup_fsm.hpp), fed replies
// by hand: which request each job sends, what each reply leads to, and that a job ends only when
// its node is gone, is not ours, or went with the session. No server needed.
#include "session/cleanup_fsm.hpp"

#include <gtest/gtest.h>

using namespace zklock::detail;
using namespace std::chrono_literals;

namespace {
constexpr int dead_handle[] = {ZCLOSING, ZINVALIDSTATE, ZSESSIONEXPIRED, ZAUTHFAILED};
constexpr bool connected = true, disconnected = false;

cleanup_reply rc(int code) { return cleanup_reply{code}; }
} // namespace

TEST(CleanupFsm, APlainDeleteEndsWhenTheNodeIsGoneAndRetriesOtherwise) {
    for (int gone : {ZOK, ZNONODE}) {
        auto m = cleanup_fsm::of_node("/l/n-0000000001");
        auto a = m.next();
        EXPECT_EQ(a.what, cleanup_action::remove);
        EXPECT_EQ(a.path, "/l/n-0000000001");
        EXPECT_EQ(m.resume(rc(gone), connected).what, cleanup_action::done);
        EXPECT_TRUE(m.finished());
    }
    auto m = cleanup_fsm::of_node("/l/n-0000000001");
    m.next();
    // Lost with the connection: wait for the reconnect, then the same request.
    auto r = m.resume(rc(ZCONNECTIONLOSS), disconnected);
    EXPECT_EQ(r.what, cleanup_action::retry);
    EXPECT_TRUE(r.plan.on_reconnect);
    EXPECT_EQ(m.next().what, cleanup_action::remove);
    // Refused while connected, for a reason the connection does not explain: a back-off that
    // doubles, never an end.
    std::chrono::milliseconds last{0};
    for (int i = 0; i < 12; ++i) {
        r = m.resume(rc(ZMARSHALLINGERROR), connected);
        ASSERT_EQ(r.what, cleanup_action::retry);
        EXPECT_FALSE(r.plan.on_reconnect);
        EXPECT_GE(r.plan.backoff, last);
        EXPECT_LE(r.plan.backoff, 5s);
        last = r.plan.backoff;
        EXPECT_EQ(m.next().what, cleanup_action::remove);
    }
    EXPECT_EQ(last, 5s);
    EXPECT_EQ(m.failures(), 13);
    EXPECT_EQ(m.resume(rc(ZOK), connected).what, cleanup_action::done);
}

TEST(CleanupFsm, AnUnusedLockPathIsDeletedUnlessSomeonesNodeIsInItByThen) {
    // Gone, or someone's node in it (ZNOTEMPTY: the path is theirs, and the server reaps it once
    // it is empty again): the end.
    for (int end : {ZOK, ZNONODE, ZNOTEMPTY}) {
        auto m = cleanup_fsm::of_unused_path("/locks/a");
        EXPECT_TRUE(m.path_only());
        auto a = m.next();
        EXPECT_EQ(a.what, cleanup_action::remove);
        EXPECT_EQ(a.path, "/locks/a");
        EXPECT_EQ(m.resume(rc(end), connected).what, cleanup_action::done) << end;
    }
    // Lost with the connection (the stop came while disconnected, or the delete was lost): sent
    // again on the reconnect.
    auto m = cleanup_fsm::of_unused_path("/locks/a");
    m.next();
    auto r = m.resume(rc(ZCONNECTIONLOSS), disconnected);
    EXPECT_EQ(r.what, cleanup_action::retry);
    EXPECT_TRUE(r.plan.on_reconnect);
    EXPECT_EQ(m.next().what, cleanup_action::remove);
    EXPECT_EQ(m.resume(rc(ZOK), connected).what, cleanup_action::done);
    // A lock node's delete does not give up on ZNOTEMPTY (a node has no children of ours).
    auto n = cleanup_fsm::of_node("/locks/a/n-0000000001");
    n.next();
    EXPECT_EQ(n.resume(rc(ZNOTEMPTY), connected).what, cleanup_action::retry);
}

TEST(CleanupFsm, AFixedNameIsDeletedOnlyInTheIncarnationThatIsOurs) {
    auto m = cleanup_fsm::of_node("/l/lock", 42);
    auto a = m.next();
    EXPECT_EQ(a.what, cleanup_action::check);
    EXPECT_EQ(a.path, "/l/lock");
    // Ours (czxid 42), at version 3: exactly that version is deleted.
    a = m.resume(cleanup_reply{ZOK, 42, 3}, connected);
    EXPECT_EQ(a.what, cleanup_action::delete_version);
    EXPECT_EQ(a.version, 3);
    // Its data changed in between: look again.
    EXPECT_EQ(m.resume(rc(ZBADVERSION), connected).what, cleanup_action::check);
    // Now someone else's (an admin broke ours, another client made it again): left alone.
    EXPECT_EQ(m.resume(cleanup_reply{ZOK, 43, 0}, connected).what, cleanup_action::done);

    auto g = cleanup_fsm::of_node("/l/lock", 42);
    g.next();
    EXPECT_EQ(g.resume(rc(ZNONODE), connected).what, cleanup_action::done);
    auto l = cleanup_fsm::of_node("/l/lock", 42);
    l.next();
    EXPECT_EQ(l.resume(rc(ZCONNECTIONLOSS), disconnected).what, cleanup_action::retry);
    EXPECT_EQ(l.next().what, cleanup_action::check) << "a retry checks the owner again";
    EXPECT_EQ(l.resume(cleanup_reply{ZOK, 42, 0}, connected).what, cleanup_action::delete_version);
    EXPECT_EQ(l.resume(rc(ZOK), connected).what, cleanup_action::done);
    // A fixed name is never released with a marker.
    EXPECT_EQ(cleanup_fsm::of_node("/l/lock", 42, true).next().what, cleanup_action::check);
}

TEST(CleanupFsm, AMarkedReleaseIsRetriedMarkedAndARefusedMarkerDoesNotKeepTheNode) {
    auto m = cleanup_fsm::of_node("/l/_c_g-lock-0000000001", 0, true);
    auto a = m.next();
    EXPECT_EQ(a.what, cleanup_action::marked_release);
    EXPECT_EQ(a.path, "/l/_c_g-lock-0000000001");
    // Its reply lost: the transaction again, marked (the waiter behind may be watching for it).
    EXPECT_EQ(m.resume(rc(ZCONNECTIONLOSS), disconnected).what, cleanup_action::retry);
    EXPECT_EQ(m.next().what, cleanup_action::marked_release);
    // The node is gone (the first one was applied): done.
    EXPECT_EQ(m.resume(rc(ZNONODE), connected).what, cleanup_action::done);

    // A marker made by hand (or an ACL, or a server without multi) refuses the transaction: the
    // node is deleted plainly, at once.
    auto r = cleanup_fsm::of_node("/l/_c_g-lock-0000000001", 0, true);
    r.next();
    a = r.resume(rc(ZNODEEXISTS), connected);
    EXPECT_EQ(a.what, cleanup_action::remove);
    EXPECT_TRUE(a.unmarked);
    EXPECT_FALSE(r.marked());
    EXPECT_EQ(r.resume(rc(ZCONNECTIONLOSS), disconnected).what, cleanup_action::retry);
    EXPECT_EQ(r.next().what, cleanup_action::remove) << "once refused, never marked again";
    EXPECT_EQ(r.resume(rc(ZOK), connected).what, cleanup_action::done);
}

TEST(CleanupFsm, ANodeKnownByItsGuidIsFoundInAListingThenDeleted) {
    const std::string guid = "0f8fad5b-d9cb-469f-a165-70867728950e";
    auto m = cleanup_fsm::of_guid("/l", guid);
    EXPECT_EQ(m.node(), "");
    auto a = m.next();
    EXPECT_EQ(a.what, cleanup_action::list);
    EXPECT_EQ(a.path, "/l");
    EXPECT_EQ(m.resume(rc(ZCONNECTIONLOSS), disconnected).what, cleanup_action::retry);
    EXPECT_EQ(m.next().what, cleanup_action::list);
    cleanup_reply listing{ZOK};
    listing.children = {"_c_1f8fad5b-d9cb-469f-a165-70867728950e-lock-0000000001",
                        "_c_" + guid + "-lock-0000000002"};
    a = m.resume(listing, connected);
    EXPECT_EQ(a.what, cleanup_action::remove);
    EXPECT_EQ(a.path, "/l/_c_" + guid + "-lock-0000000002");
    EXPECT_EQ(m.resume(rc(ZOK), connected).what, cleanup_action::done);

    // Not there (never created): done. The parent gone (and the node with it): done.
    auto n = cleanup_fsm::of_guid("/l", guid);
    n.next();
    listing.children = {"_c_1f8fad5b-d9cb-469f-a165-70867728950e-lock-0000000001"};
    EXPECT_EQ(n.resume(listing, connected).what, cleanup_action::done);
    auto p = cleanup_fsm::of_guid("/l", guid);
    p.next();
    EXPECT_EQ(p.resume(rc(ZNONODE), connected).what, cleanup_action::done);
}

TEST(CleanupFsm, EveryRequestEndsWhenTheHandleIsGone) {
    // The session's ephemeral nodes go with it: nothing left to delete.
    for (int dead : dead_handle) {
        std::vector<cleanup_fsm> jobs{cleanup_fsm::of_node("/l/n"), cleanup_fsm::of_node("/l/n", 7),
                                      cleanup_fsm::of_node("/l/n", 0, true), cleanup_fsm::of_guid("/l", "g"),
                                      cleanup_fsm::of_unused_path("/l")};
        for (auto& j : jobs) {
            j.next();
            EXPECT_EQ(j.resume(rc(dead), connected).what, cleanup_action::done) << dead;
        }
        auto v = cleanup_fsm::of_node("/l/n", 7);
        v.next();
        v.resume(cleanup_reply{ZOK, 7, 1}, connected);
        EXPECT_EQ(v.resume(rc(dead), connected).what, cleanup_action::done) << dead;
    }
}

TEST(CleanupFsm, AReplyWithNothingInFlightEndsNothingTwice) {
    auto m = cleanup_fsm::of_node("/l/n");
    m.next();
    EXPECT_EQ(m.resume(rc(ZOK), connected).what, cleanup_action::done);
    EXPECT_EQ(m.resume(rc(ZCONNECTIONLOSS), connected).what, cleanup_action::done);
    EXPECT_EQ(m.failures(), 0);
}

TEST(CleanupFsm, AFixedNodeWhoseDataCarriesOurGuidIsDeletedAtTheVersionItWasRead) {
    // The unique_node strategy's create lost with the connection, given up while disconnected:
    // "<path>/lock" may be ours. The job reads it once connected and deletes it only if its data
    // starts with our guid, naming the version it read.
    const std::string guid = "0123456789abcdef0123456789abcdef";
    auto read = [](int code, std::string data, std::int32_t version) {
        cleanup_reply r{code};
        r.data = std::move(data);
        r.version = version;
        return r;
    };
    {
        auto m = cleanup_fsm::of_data_guid("/l/lock", guid);
        EXPECT_EQ(m.data_guid(), guid);
        auto a = m.next();
        EXPECT_EQ(a.what, cleanup_action::check);
        EXPECT_EQ(a.path, "/l/lock");
        auto d = m.resume(read(ZOK, guid + " host:1", 3), connected);
        EXPECT_EQ(d.what, cleanup_action::delete_version);
        EXPECT_EQ(d.version, 3);
        // its data changed meanwhile: read again; still ours, so deleted at the new version
        EXPECT_EQ(m.resume(rc(ZBADVERSION), connected).what, cleanup_action::check);
        EXPECT_EQ(m.resume(read(ZOK, guid + " host:1", 4), connected).version, 4);
        EXPECT_EQ(m.resume(rc(ZOK), connected).what, cleanup_action::done);
    }
    // someone else's (their guid), or gone: the end, nothing deleted
    for (auto r : {read(ZOK, "fedcba9876543210fedcba9876543210 host:2", 0), read(ZNONODE, "", -1)}) {
        auto m = cleanup_fsm::of_data_guid("/l/lock", guid);
        m.next();
        EXPECT_EQ(m.resume(r, connected).what, cleanup_action::done);
    }
    // the read lost with the connection: the same read after the reconnect
    auto m = cleanup_fsm::of_data_guid("/l/lock", guid);
    m.next();
    auto r = m.resume(rc(ZCONNECTIONLOSS), disconnected);
    EXPECT_EQ(r.what, cleanup_action::retry);
    EXPECT_TRUE(r.plan.on_reconnect);
    EXPECT_EQ(m.next().what, cleanup_action::check);
    // a plain job of a node never reads data
    EXPECT_TRUE(cleanup_fsm::of_node("/l/n-0000000001").data_guid().empty());
}
