// The lease's bookkeeping (loss_policy::lease, docs/lease.md), with an explicit clock: no server,
// no sleeping. Each test names the evidence rule of session_lease it checks.
#include <zklock/loss_policy.hpp>

#include "detail/lease.hpp"

#include <gtest/gtest.h>

#include <memory>
#include <vector>

using zklock::loss_policy;
using zklock::detail::lease_ns;
using zklock::detail::session_lease;

namespace {
constexpr lease_ns ms = 1'000'000;
constexpr lease_ns T = 2000 * ms; // negotiated session timeout

/// A session connected at `at` (its first handshake sent after `start`), state seen connected.
std::unique_ptr<session_lease> connected(lease_ns start, lease_ns at, lease_ns timeout = T) {
    auto l = std::make_unique<session_lease>();
    l->start(start);
    l->saw_state(at - 1, false);
    l->on_connected(timeout);
    l->saw_state(at, true);
    return l;
}
} // namespace

TEST(Lease, NothingIsVouchedForBeforeTheFirstCommit) {
    auto l_owner = connected(100 * ms, 150 * ms);
    auto& l = *l_owner;
    EXPECT_EQ(l.vouched(), 0);
    EXPECT_TRUE(l.lapsed(200 * ms, 0.3));
    EXPECT_EQ(session_lease::deadline(0, T, 0.3), 0);
    // reads (touches) alone vouch for nothing, however many
    for (lease_ns t = 200; t < 2000; t += 100) l.on_reply(t * ms, false, 0);
    EXPECT_EQ(l.vouched(), 0);
    EXPECT_EQ(l.earliest_expiry(), 0);
}

TEST(Lease, TheFirstCommitOnAConnectionVouchesForItsHandshake) {
    // (a): the handshake touched the session at the leader, which the commit shows still led.
    auto l_owner = connected(100 * ms, 150 * ms);
    auto& l = *l_owner;
    l.on_reply(300 * ms, true, 310 * ms);
    EXPECT_EQ(l.vouched(), 100 * ms) << "no later than the bound on the handshake's send";
    EXPECT_EQ(l.earliest_expiry(), 100 * ms + T);
    EXPECT_NEAR(static_cast<double>(session_lease::deadline(l.vouched(), T, 0.3)),
                static_cast<double>(100 * ms + (35 + 30) * T / 100), 1000.0);
}

TEST(Lease, ACommitVouchesForAnAnsweredSendAQuarterOfTBeforeIt) {
    // (b): the leader's pings (every tickTime/2 <= T/4) carried the touches of sends at least
    // T/4 older than a commit that passed the same follower's link.
    auto l_owner = connected(0, 10 * ms);
    auto& l = *l_owner;
    l.on_reply(20 * ms, true, 25 * ms); // (a): v = 0 -> vouches for the start (0 is "never")
    lease_ns v0 = l.vouched();
    for (lease_ns t = 100; t <= 1000; t += 100) l.on_reply(t * ms, false, 0); // reads every 100 ms
    l.on_reply(1040 * ms, true, 1050 * ms);
    // T/4 = 500 ms before 1040 ms is 540 ms: the latest answered send at or before it is 500 ms
    EXPECT_EQ(l.vouched(), 500 * ms);
    EXPECT_GE(l.vouched(), v0);
    // a commit does not vouch for itself, nor for sends closer than T/4
    l.on_reply(1100 * ms, true, 1110 * ms);
    EXPECT_EQ(l.vouched(), 600 * ms);
}

TEST(Lease, FailedWritesAndLostRepliesVouchForNothing) {
    auto l_owner = connected(0, 10 * ms);
    auto& l = *l_owner;
    for (lease_ns t = 100; t <= 1000; t += 100) l.on_reply(t * ms, false, 0);
    // a write that failed is a touch: the bridge passes commit = proves_commit(commit, rc)
    EXPECT_FALSE(zklock::detail::proves_commit(zklock::detail::vouch::commit, -110));
    EXPECT_FALSE(zklock::detail::proves_commit(zklock::detail::vouch::touch, 0));
    EXPECT_TRUE(zklock::detail::proves_commit(zklock::detail::vouch::commit, 0));
    l.on_reply(1100 * ms, false, 1110 * ms);
    EXPECT_EQ(l.vouched(), 0);
}

TEST(Lease, EvidenceNeverCrossesConnections) {
    auto l_owner = connected(0, 10 * ms);
    auto& l = *l_owner;
    l.on_reply(20 * ms, true, 25 * ms);
    for (lease_ns t = 100; t <= 1000; t += 100) l.on_reply(t * ms, false, 0);
    l.on_reply(1000 * ms, true, 1005 * ms);
    EXPECT_EQ(l.vouched(), 500 * ms);
    // the connection drops (seen at 1200 ms, last seen connected at 1150 ms); a new one comes
    l.saw_state(1150 * ms, true);
    l.saw_state(1200 * ms, false);
    l.saw_state(1300 * ms, false);
    l.on_connected(T);
    l.saw_state(1400 * ms, true);
    // the old connection's sends are not evidence on the new one: a commit at 1500 ms vouches
    // for the handshake bound only (the last moment the old connection was seen alive)
    l.on_reply(1500 * ms, true, 1510 * ms);
    EXPECT_EQ(l.vouched(), 1150 * ms);
    // and replies before any connection are nobody's
    session_lease fresh;
    fresh.start(0);
    fresh.on_reply(10 * ms, true, 20 * ms);
    EXPECT_EQ(fresh.vouched(), 0);
}

TEST(Lease, AHandshakeBoundIsUsedOncePerConnection) {
    auto l_owner = connected(0, 10 * ms);
    auto& l = *l_owner;
    l.on_reply(900 * ms, true, 910 * ms);
    EXPECT_EQ(l.vouched(), 0 + 0) << "(start at 0 counts as never)";
    auto m_owner = connected(50 * ms, 60 * ms);
    auto& m = *m_owner;
    m.on_reply(900 * ms, true, 910 * ms);
    EXPECT_EQ(m.vouched(), 50 * ms);
    m.on_reply(950 * ms, true, 960 * ms); // nothing answered T/4 before it: v stays
    EXPECT_EQ(m.vouched(), 50 * ms);
}

TEST(Lease, TheSteadyStateOfHeartbeatsKeepsALockAtTheStatedMargin) {
    // Heartbeats (commits) every T/10 that are also the only sends: each one vouches for the
    // one sent at most 0.35 T before it, so the deadline stays at least f T after the last
    // heartbeat's send, and the earliest expiry (0.65 - f) T after the deadline.
    auto l_owner = connected(0, 1 * ms);
    auto& l = *l_owner;
    const double f = loss_policy::default_lease_fraction;
    lease_ns t = 5 * ms;
    l.on_reply(t, true, t + ms);
    for (int i = 0; i < 50; ++i) {
        t += T / 10;
        l.on_reply(t, true, t + 2 * ms);
        if (i < 4) continue; // (until the first heartbeat T/4 back)
        const lease_ns d = session_lease::deadline(l.vouched(), T, f);
        EXPECT_GE(d - t, static_cast<lease_ns>(f * T)) << i;
        EXPECT_GE(d - t, static_cast<lease_ns>(T / 10) + 100 * ms) << "the next heartbeat comes in time";
        EXPECT_NEAR(static_cast<double>(l.earliest_expiry() - d), (0.65 - f) * static_cast<double>(T), 1000.0);
    }
}

TEST(Lease, TouchesAFifthOfTApartLetAGrantBeVouchedForAtOnce) {
    // A waiter that held nothing for a long time: its touches (reads), then one renewal.
    auto l_owner = connected(0, 1 * ms);
    auto& l = *l_owner;
    l.on_reply(5 * ms, true, 6 * ms);
    lease_ns t = 5 * ms;
    for (int i = 0; i < 100; ++i) l.on_reply(t += T / 5, false, 0);
    const lease_ns renewal = t + 50 * ms;
    l.on_reply(renewal, true, renewal + ms);
    const double f = loss_policy::default_lease_fraction;
    EXPECT_FALSE(l.lapsed(renewal + ms, f));
    EXPECT_GE(session_lease::deadline(l.vouched(), T, f) - renewal, static_cast<lease_ns>(0.15 * T));
}

TEST(Lease, ALongerTimeoutAfterAReconnectDoesNotStretchOldEvidence) {
    auto l_owner = connected(100 * ms, 110 * ms);
    auto& l = *l_owner;
    l.on_reply(200 * ms, true, 210 * ms);
    ASSERT_EQ(l.vouched(), 100 * ms);
    const lease_ns expiry = l.earliest_expiry();
    l.saw_state(300 * ms, false);
    l.on_connected(3 * T); // the server negotiated a longer T this time
    EXPECT_EQ(l.timeout(), 3 * T);
    EXPECT_EQ(l.earliest_expiry(), expiry) << "the old touches were counted against the old T";
    // a shorter one needs no adjustment: the new handshake touched the session with it
    auto m_owner = connected(100 * ms, 110 * ms, 3 * T);
    auto& m = *m_owner;
    m.on_reply(200 * ms, true, 210 * ms);
    m.saw_state(300 * ms, false);
    m.on_connected(T);
    EXPECT_EQ(m.vouched(), 100 * ms);
}

TEST(Lease, ALapseThatOnlyARenewalRevealsIsFinal) {
    auto l_owner = connected(900 * ms, 910 * ms);
    auto& l = *l_owner;
    l.set_watch_fraction(0.3);
    l.on_reply(950 * ms, true, 960 * ms); // v = 900 ms: deadline 900 + 0.65 T = 2200 ms
    const lease_ns granted = 1000 * ms;
    EXPECT_FALSE(l.lapsed_since(granted, granted, 0.3));
    for (lease_ns t = 1000; t <= 3000; t += 100) l.on_reply(t * ms, false, 0);
    // Nobody looked past 2200 ms (a late timer, a busy strand); a commit at 3000 ms arrives at
    // 3010 ms: the lease is current again, but it lapsed.
    EXPECT_TRUE(l.on_reply(3000 * ms, true, 3010 * ms)) << "the gap is recorded";
    EXPECT_FALSE(l.lapsed(3010 * ms, 0.3)) << "the lease itself is current again";
    EXPECT_TRUE(l.lapsed_since(granted, 3010 * ms, 0.3)) << "but a lock held across the gap is lost";
    EXPECT_FALSE(l.lapsed_since(3010 * ms, 3011 * ms, 0.3)) << "a lock granted after it is not";
    l.start(4000 * ms);
    EXPECT_EQ(l.lapse_since(0), 0) << "a new session forgets the old one's gaps";
}

TEST(Lease, RecordedGapsStayBoundedAndNeverHideALapse) {
    auto l_owner = connected(5 * ms, 6 * ms);
    auto& l = *l_owner;
    l.set_watch_fraction(0.15);
    lease_ns t = 10 * ms;
    l.on_reply(t, true, t); // (a)
    // 200 gaps of decreasing length: the record is capped, yet every lock held across a gap
    // still sees one at least that long
    std::vector<std::pair<lease_ns, lease_ns>> gaps; // (end, length past the reference point)
    for (int i = 0; i < 200; ++i) {
        const lease_ns before = l.vouched();
        const lease_ns j = t + 100 * ms;
        l.on_reply(j, false, 0);
        t = j + T / 4 + (1900 - 4 * i) * ms; // a commit long after, vouching for j
        const lease_ns end = t + ms;
        const bool gap = l.on_reply(t, true, end);
        const lease_ns len = end - session_lease::deadline(before, T, 0.0);
        if (len > static_cast<lease_ns>(0.15 * T)) {
            EXPECT_TRUE(gap) << i;
            gaps.emplace_back(end, len);
        }
    }
    ASSERT_GT(gaps.size(), 100u);
    for (auto& [end, len] : gaps) EXPECT_GE(l.lapse_since(end - 1), len);
}

TEST(Lease, TheDerivationsMarginIsTheSameInEveryCase) {
    EXPECT_DOUBLE_EQ(session_lease::reference_offset, 0.35);
    EXPECT_DOUBLE_EQ(session_lease::expiry_after_reference, 0.65);
    EXPECT_NEAR(session_lease::guaranteed_margin(loss_policy::default_lease_fraction), 0.35, 1e-12);
    EXPECT_GE(session_lease::guaranteed_margin(loss_policy::default_lease_fraction), 0.3) << "the issue's floor";
    EXPECT_NEAR(session_lease::guaranteed_margin(loss_policy::max_lease_fraction), 0.15, 1e-12);
    EXPECT_EQ(session_lease::heartbeat_interval(T), 200 * ms);
    EXPECT_GT(session_lease::touch_spacing, loss_policy::heartbeat_fraction);
}

TEST(LossPolicy, IsATypeWithAValidatedFraction) {
    EXPECT_EQ(loss_policy::lease().type(), loss_policy::kind::lease);
    EXPECT_DOUBLE_EQ(loss_policy::lease().lease_fraction(), 0.3);
    EXPECT_FALSE(loss_policy::lease().validate());
    EXPECT_FALSE(loss_policy::lease(0.5).validate());
    using zklock::errc;
    EXPECT_EQ(loss_policy::lease(0.1).validate(), errc::invalid_lease_fraction) << "not above the heartbeat";
    EXPECT_EQ(loss_policy::lease(0.51).validate(), errc::invalid_lease_fraction);
    EXPECT_EQ(loss_policy::lease(-1).validate(), errc::invalid_lease_fraction);
    EXPECT_NE(zklock::make_error_code(errc::invalid_lease_fraction).message().find("(0.1, 0.5]"), std::string::npos);
    EXPECT_FALSE(loss_policy::on_disconnect().validate());
    EXPECT_FALSE(loss_policy::on_expiry().validate());
    EXPECT_NE(loss_policy::on_expiry(), loss_policy::on_disconnect());
    EXPECT_STREQ(zklock::to_string(loss_policy::kind::on_expiry), "on_expiry");
}
