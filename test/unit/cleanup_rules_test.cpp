// The guaranteed deletes' decisions (src/session/cleanup_rules.hpp): a background delete ends only
// when the node is gone, is not ours, or went with the session; every other reply retries, on the
// reconnect or after a bounded back-off. No server needed.
#include "session/cleanup_rules.hpp"

#include <gtest/gtest.h>

using namespace zklock::detail::cleanup_rules;
using namespace std::chrono_literals;

namespace {
// Replies that say nothing about the node: it may still be there.
constexpr int unexplained[] = {ZCONNECTIONLOSS, ZOPERATIONTIMEOUT,     ZMARSHALLINGERROR, ZNOAUTH,
                               ZSYSTEMERROR,    ZRUNTIMEINCONSISTENCY, ZNOTREADONLY,      ZAPIERROR};
constexpr int dead_handle[] = {ZCLOSING, ZINVALIDSTATE, ZSESSIONEXPIRED, ZAUTHFAILED};
} // namespace

TEST(CleanupRules, NeverGivesUpOnANodeThatMayStillBeThere) {
    for (int rc : unexplained) {
        EXPECT_EQ(after_delete(rc), verdict::retry) << rc;
        EXPECT_EQ(after_versioned_delete(rc), verdict::retry) << rc;
        EXPECT_EQ(after_check(rc, 0, 7), verdict::retry) << rc;
        EXPECT_EQ(after_listing(rc), verdict::retry) << rc;
    }
}

TEST(CleanupRules, EndsWhenTheNodeIsGoneOrWentWithTheSession) {
    EXPECT_EQ(after_delete(ZOK), verdict::finished);
    EXPECT_EQ(after_delete(ZNONODE), verdict::finished);
    EXPECT_EQ(after_versioned_delete(ZOK), verdict::finished);
    EXPECT_EQ(after_versioned_delete(ZNONODE), verdict::finished);
    EXPECT_EQ(after_check(ZNONODE, 0, 7), verdict::finished);
    EXPECT_EQ(after_listing(ZNONODE), verdict::finished) << "no parent: no node";
    for (int rc : dead_handle) {
        EXPECT_TRUE(handle_gone(rc));
        EXPECT_EQ(after_delete(rc), verdict::finished) << rc;
        EXPECT_EQ(after_versioned_delete(rc), verdict::finished) << rc;
        EXPECT_EQ(after_check(rc, 0, 7), verdict::finished) << rc;
        EXPECT_EQ(after_listing(rc), verdict::finished) << rc;
    }
    for (int rc : unexplained) EXPECT_FALSE(handle_gone(rc)) << rc;
}

TEST(CleanupRules, DeletesOnlyTheNodeItCreated) {
    // Same creation zxid: ours, delete the version read. Another: someone re-created the path
    // after a break; it is not ours to delete.
    EXPECT_EQ(after_check(ZOK, 7, 7), verdict::delete_version);
    EXPECT_EQ(after_check(ZOK, 8, 7), verdict::finished);
    // The version moved between the check and the delete: check again (never delete blind).
    EXPECT_EQ(after_versioned_delete(ZBADVERSION), verdict::look_again);
    EXPECT_NE(after_delete(ZBADVERSION), verdict::finished)
        << "an unconditional delete has no version to miss";
}

TEST(CleanupRules, ALostCreateIsLookedForByItsGuid) { EXPECT_EQ(after_listing(ZOK), verdict::search); }

TEST(CleanupRules, RetriesOnTheReconnectOrAfterABoundedBackoff) {
    // Disconnected, and the connection explains the failure: the reconnect retries it.
    for (int rc : {ZCONNECTIONLOSS, ZOPERATIONTIMEOUT}) {
        EXPECT_TRUE(plan_retry(1, rc, false).on_reconnect) << rc;
        EXPECT_FALSE(plan_retry(1, rc, true).on_reconnect) << rc << ": connected, a timer must retry it";
    }
    // Not explained by the connection: a timer, even while disconnected (no reconnect may come).
    EXPECT_FALSE(plan_retry(1, ZMARSHALLINGERROR, false).on_reconnect);
    EXPECT_FALSE(plan_retry(1, ZNOAUTH, false).on_reconnect);
    // 50 ms doubling, capped at 5 s.
    const std::chrono::milliseconds want[] = {50ms,   100ms,  200ms,  400ms, 800ms,
                                              1600ms, 3200ms, 5000ms, 5000ms};
    for (int f = 1; f <= 9; ++f) EXPECT_EQ(plan_retry(f, ZNOAUTH, true).backoff, want[f - 1]) << f;
    EXPECT_EQ(plan_retry(1000, ZNOAUTH, true).backoff, 5000ms);
    EXPECT_EQ(plan_retry(0, ZNOAUTH, true).backoff, 50ms) << "a count below one is the first failure";
}

TEST(CleanupRules, AMarkedReleaseFallsBackToAPlainDeleteButNeverGivesUp) {
    // Done: applied, or the node is gone (a retry after a lost reply fails so), or the handle is.
    for (int rc : {ZOK, ZNONODE, ZSESSIONEXPIRED, ZCLOSING, ZINVALIDSTATE, ZAUTHFAILED})
        EXPECT_EQ(after_marked_release(rc), verdict::finished) << rc;
    // The reply may have been lost: the same transaction again.
    for (int rc : {ZCONNECTIONLOSS, ZOPERATIONTIMEOUT})
        EXPECT_EQ(after_marked_release(rc), verdict::retry) << rc;
    // Refused (a marker made by hand, an ACL, anything else): the node must still go, plainly.
    for (int rc : {ZNODEEXISTS, ZNOAUTH, ZBADARGUMENTS, ZUNIMPLEMENTED, ZMARSHALLINGERROR, ZNOTEMPTY})
        EXPECT_EQ(after_marked_release(rc), verdict::unmarked) << rc;
}
