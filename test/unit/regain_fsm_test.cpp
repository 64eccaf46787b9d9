// The regain of a suspended lock (session/regain_fsm.hpp), fed replies by hand: every verdict, the
// one-check-at-a-time rule, and the lease's two ways of saying "not yet".
#include "session/regain_fsm.hpp"

#include <gtest/gtest.h>

using zklock::detail::regain_fsm;
using action = regain_fsm::action;

namespace {
constexpr std::int64_t czxid = 0x1000000a7, sid = 0x100000c0ffee;

/// A machine that sent its check, got ZOK, and sent its read.
regain_fsm reading() {
    regain_fsm m(czxid, sid);
    EXPECT_EQ(m.start(), action::send_check);
    EXPECT_EQ(m.on_check(ZOK), action::send_read);
    return m;
}
} // namespace

TEST(RegainFsm, TheNodeThisSessionCreatedWithTheLeaseValidIsRegained) {
    auto m = reading();
    EXPECT_EQ(m.on_read(ZOK, czxid, sid, false, false), action::regained);
    EXPECT_TRUE(m.finished());
    EXPECT_EQ(m.start(), action::none) << "a verdict is final";
}

TEST(RegainFsm, OneCheckAtATime) {
    regain_fsm m(czxid, sid);
    EXPECT_EQ(m.start(), action::send_check);
    EXPECT_EQ(m.start(), action::none) << "a reconnect while the check is in flight sends no second one";
    EXPECT_TRUE(m.in_flight());
    EXPECT_EQ(m.on_check(ZOK), action::send_read);
    EXPECT_EQ(m.start(), action::none) << "nor while its read is";
    EXPECT_EQ(m.on_read(ZOK, czxid, sid, false, false), action::regained);
}

TEST(RegainFsm, ACheckThatFindsNoNodeIsAFinalLoss) {
    regain_fsm m(czxid, sid);
    m.start();
    EXPECT_EQ(m.on_check(ZNONODE), action::lost_deleted);
    EXPECT_TRUE(m.finished());
    EXPECT_EQ(m.start(), action::none);
}

TEST(RegainFsm, AReadThatFindsNoNodeIsAFinalLoss) {
    auto m = reading();
    EXPECT_EQ(m.on_read(ZNONODE, 0, 0, false, false), action::lost_deleted);
}

TEST(RegainFsm, ANodeOfAnotherCreateOrAnotherSessionIsNeverRegained) {
    {
        auto m = reading(); // broken and created again under the same name (a fixed name)
        EXPECT_EQ(m.on_read(ZOK, czxid + 7, sid, false, false), action::lost_not_ours);
    }
    {
        auto m = reading(); // the same name, owned by another session
        EXPECT_EQ(m.on_read(ZOK, czxid, sid + 1, false, false), action::lost_not_ours);
    }
    {
        auto m = reading(); // not ours wins over a lapsed lease: no retry for a node that is not ours
        EXPECT_EQ(m.on_read(ZOK, czxid + 7, sid, true, true), action::lost_not_ours);
    }
}

TEST(RegainFsm, ConnectionTroubleWaitsForTheNextStart) {
    for (int rc : {ZCONNECTIONLOSS, ZOPERATIONTIMEOUT, ZSESSIONEXPIRED, ZNOAUTH, ZCLOSING}) {
        SCOPED_TRACE(rc);
        regain_fsm m(czxid, sid);
        m.start();
        EXPECT_EQ(m.on_check(rc), action::none);
        EXPECT_FALSE(m.in_flight());
        EXPECT_FALSE(m.finished());
        EXPECT_EQ(m.start(), action::send_check) << "the reconnect checks again";
        EXPECT_EQ(m.on_check(ZOK), action::send_read);
        EXPECT_EQ(m.on_read(rc, 0, 0, false, false), action::none) << "a lost read: the next start";
        EXPECT_FALSE(m.finished());
        EXPECT_EQ(m.start(), action::send_check) << "from the check again: a new commit";
    }
}

TEST(RegainFsm, ALeaseStillLapsedWaitsForALaterCommit) {
    {
        // a commit answered past the earliest expiry needs a later one (premise 8): at once
        auto m = reading();
        EXPECT_EQ(m.on_read(ZOK, czxid, sid, true, true), action::send_check);
        EXPECT_EQ(m.on_check(ZOK), action::send_read);
        EXPECT_EQ(m.on_read(ZOK, czxid, sid, false, false), action::regained);
    }
    {
        // evidence that needs time: a period later, not a loop of round trips
        auto m = reading();
        EXPECT_EQ(m.on_read(ZOK, czxid, sid, true, false), action::retry_later);
        EXPECT_FALSE(m.in_flight());
        EXPECT_EQ(m.start(), action::send_check);
    }
}

TEST(RegainFsm, RepliesOutOfTurnAreIgnored) {
    regain_fsm m(czxid, sid);
    EXPECT_EQ(m.on_check(ZOK), action::none) << "no check was sent";
    EXPECT_EQ(m.on_read(ZOK, czxid, sid, false, false), action::none) << "no read was sent";
    m.start();
    EXPECT_EQ(m.on_read(ZOK, czxid, sid, false, false), action::none) << "the check has not been answered";
    EXPECT_EQ(m.on_check(ZOK), action::send_read);
    EXPECT_EQ(m.on_check(ZOK), action::none) << "a second answer to one check";
}
