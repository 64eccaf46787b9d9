// The regain of a suspended lock (session/regain_fsm.hpp), fed replies by hand: every verdict, one
// read at a time, and the two ways of saying "not yet" (a heartbeat sent before the suspension,
// a lease still lapsed).
#include "session/regain_fsm.hpp"

#include <gtest/gtest.h>

using zklock::detail::regain_fsm;
using action = regain_fsm::action;

namespace {
constexpr std::int64_t czxid = 0x1000000a7, sid = 0x100000c0ffee;

/// A machine whose read is under way.
regain_fsm reading() {
    regain_fsm m(czxid, sid);
    EXPECT_EQ(m.on_commit(true, false), action::send_read);
    return m;
}
} // namespace

TEST(RegainFsm, TheNodeThisSessionCreatedWithTheLeaseValidIsRegained) {
    auto m = reading();
    EXPECT_TRUE(m.in_flight());
    EXPECT_EQ(m.on_read(ZOK, czxid, sid, false), action::regained);
    EXPECT_TRUE(m.finished());
    EXPECT_EQ(m.on_commit(true, false), action::none) << "a verdict is final";
}

TEST(RegainFsm, OnlyAHeartbeatSentAfterTheSuspensionWithTheLeaseValidStartsARead) {
    regain_fsm m(czxid, sid);
    EXPECT_EQ(m.on_commit(false, false), action::none)
        << "sent before the suspension: its state may be older";
    EXPECT_EQ(m.on_commit(true, true), action::none) << "the lease still lapsed: nothing to regain yet";
    EXPECT_EQ(m.on_commit(false, true), action::none);
    EXPECT_FALSE(m.in_flight());
    EXPECT_EQ(m.on_commit(true, false), action::send_read);
}

TEST(RegainFsm, OneReadAtATime) {
    auto m = reading();
    EXPECT_EQ(m.on_commit(true, false), action::none)
        << "a heartbeat while the read is in flight sends no second one";
    EXPECT_EQ(m.on_read(ZOK, czxid, sid, false), action::regained);
}

TEST(RegainFsm, AReadThatFindsNoNodeIsAFinalLoss) {
    auto m = reading();
    EXPECT_EQ(m.on_read(ZNONODE, 0, 0, false), action::lost_deleted);
    EXPECT_TRUE(m.finished());
    EXPECT_EQ(m.on_commit(true, false), action::none);
}

TEST(RegainFsm, ANodeOfAnotherCreateOrAnotherSessionIsNeverRegained) {
    {
        auto m = reading(); // broken and created again under the same name (a fixed name)
        EXPECT_EQ(m.on_read(ZOK, czxid + 7, sid, false), action::lost_not_ours);
    }
    {
        auto m = reading(); // the same name, owned by another session
        EXPECT_EQ(m.on_read(ZOK, czxid, sid + 1, false), action::lost_not_ours);
    }
    {
        auto m = reading(); // not ours wins over a lapsed lease: no waiting for a node that is not ours
        EXPECT_EQ(m.on_read(ZOK, czxid + 7, sid, true), action::lost_not_ours);
    }
}

TEST(RegainFsm, ConnectionTroubleWaitsForTheNextHeartbeat) {
    for (int rc : {ZCONNECTIONLOSS, ZOPERATIONTIMEOUT, ZSESSIONEXPIRED, ZNOAUTH, ZCLOSING}) {
        SCOPED_TRACE(rc);
        auto m = reading();
        EXPECT_EQ(m.on_read(rc, 0, 0, false), action::none);
        EXPECT_FALSE(m.in_flight());
        EXPECT_FALSE(m.finished());
        EXPECT_EQ(m.on_commit(true, false), action::send_read) << "the next heartbeat reads again";
        EXPECT_EQ(m.on_read(ZOK, czxid, sid, false), action::regained);
    }
}

TEST(RegainFsm, ALeaseThatLapsedAgainBeforeTheReadsReplyWaitsForTheNextHeartbeat) {
    auto m = reading();
    EXPECT_EQ(m.on_read(ZOK, czxid, sid, true), action::none);
    EXPECT_FALSE(m.finished());
    EXPECT_EQ(m.on_commit(true, false), action::send_read);
    EXPECT_EQ(m.on_read(ZOK, czxid, sid, false), action::regained);
}

TEST(RegainFsm, RepliesOutOfTurnAreIgnored) {
    regain_fsm m(czxid, sid);
    EXPECT_EQ(m.on_read(ZOK, czxid, sid, false), action::none) << "no read was sent";
    EXPECT_FALSE(m.finished());
    auto r = reading();
    EXPECT_EQ(r.on_read(ZOK, czxid, sid, false), action::regained);
    EXPECT_EQ(r.on_read(ZNONODE, 0, 0, false), action::none) << "a second answer to one read";
}
