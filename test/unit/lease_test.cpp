// The lease arithmetic (loss_policy::lease), with an explicit clock: no server, no sleeping.
#include <zklock/loss_policy.hpp>

#include "detail/lease.hpp"

#include <gtest/gtest.h>

#include <thread>
#include <vector>

using zklock::loss_policy;
using zklock::detail::lease_ns;
using zklock::detail::session_lease;

namespace {
constexpr lease_ns ms = 1'000'000;
constexpr lease_ns T = 2000 * ms; // negotiated session timeout
} // namespace

TEST(Lease, NothingIsVouchedForBeforeTheFirstReply) {
    session_lease l;
    EXPECT_EQ(l.last_ack_send(), 0);
    EXPECT_TRUE(l.lapsed(1, T, 1.0 / 3));
    EXPECT_EQ(session_lease::deadline(0, T, 0.5), 0);
}

TEST(Lease, LapsesOneFractionOfTheTimeoutAfterTheLatestAcknowledgedSend) {
    session_lease l;
    const lease_ns sent = 10'000 * ms;
    l.acknowledge(sent);
    const double f = 1.0 / 3;
    const lease_ns deadline = session_lease::deadline(sent, T, f);
    EXPECT_EQ(deadline, sent + 666 * ms + 666'666);
    EXPECT_FALSE(l.lapsed(sent, T, f));
    EXPECT_FALSE(l.lapsed(deadline, T, f)) << "the deadline itself is still inside the lease";
    EXPECT_TRUE(l.lapsed(deadline + 1, T, f));
    // a larger fraction lapses later
    EXPECT_FALSE(l.lapsed(deadline + 1, T, 0.5));
    EXPECT_TRUE(l.lapsed(sent + T / 2 + 1, T, 0.5));
}

TEST(Lease, ALaterReplyRenewsAndAnOlderOneNeverMovesItBack) {
    session_lease l;
    l.acknowledge(100 * ms);
    l.acknowledge(300 * ms);
    EXPECT_EQ(l.last_ack_send(), 300 * ms);
    l.acknowledge(200 * ms); // a reply to an earlier request, arriving late
    EXPECT_EQ(l.last_ack_send(), 300 * ms);
    // what counts is the send time, not the reply's arrival: a reply to a request sent long ago
    // does not make the lease look fresh
    const lease_ns now = 300 * ms + T; // the reply came T after its send
    EXPECT_TRUE(l.lapsed(now, T, 1.0 / 3));
}

TEST(Lease, ResetForgetsTheOldSession) {
    session_lease l;
    l.acknowledge(5 * ms);
    l.reset();
    EXPECT_TRUE(l.lapsed(6 * ms, T, 0.5));
}

TEST(Lease, ConcurrentAcknowledgementsKeepTheLatest) {
    session_lease l;
    std::vector<std::thread> threads;
    for (int t = 0; t < 4; ++t)
        threads.emplace_back([&l, t] {
            for (lease_ns i = 1; i <= 20'000; ++i) l.acknowledge(i * 4 + t);
        });
    for (auto& th : threads) th.join();
    EXPECT_EQ(l.last_ack_send(), 20'000 * 4 + 3);
}

TEST(Lease, HeartbeatIsATenthOfTheTimeout) {
    EXPECT_EQ(session_lease::heartbeat_interval(T), 200 * ms);
    EXPECT_EQ(session_lease::heartbeat_interval(10'000 * ms), 1000 * ms);
}

TEST(Lease, TheDerivationsBoundsAndTheDefaultsMargin) {
    // r = tickTime / T; ZooKeeper enforces r <= 1/2. h = T/10.
    // holder's follower cut off from the leader (or frozen): 1 - r/2 - h
    EXPECT_DOUBLE_EQ(session_lease::follower_cut_expiry(0.5), 0.65);
    EXPECT_DOUBLE_EQ(session_lease::follower_cut_expiry(0.25), 0.775);
    // the holder's own server is the leader, cut off from its quorum: 1 - 1.5 r
    EXPECT_DOUBLE_EQ(session_lease::isolated_leader_expiry(0.25), 0.625);
    EXPECT_DOUBLE_EQ(session_lease::isolated_leader_expiry(0.5), 0.25);
    const double f = loss_policy::default_lease_fraction;
    // the default leaves at least 0.3 T where the follower is cut off, for any tickTime
    EXPECT_GE(session_lease::follower_cut_expiry(0.5) - f, 0.3);
    // ... and where the leader is isolated, at the test ensemble's ratio (500 ms, T = 2 s)
    EXPECT_GE(session_lease::guaranteed_margin(f, 0.25), 0.3);
    EXPECT_NEAR(session_lease::guaranteed_margin(f, 0.25), 0.625 - f, 1e-12);
    // the isolated leader's bound is positive for r < (1 - f) / 1.5
    EXPECT_GT(session_lease::isolated_leader_expiry(0.46) - f, 0.0);
    EXPECT_LT(session_lease::isolated_leader_expiry(0.5) - f, 0.0) << "at r = 1/2 it is not: the README says so";
    // stall, resume for one sync, stall again: 0.65 - 2f at r = 1/2, still positive
    EXPECT_GT(session_lease::stall_resume_margin(f), 0.0);
    EXPECT_GE(session_lease::stall_resume_margin(loss_policy::max_lease_fraction), -1e-12);
    EXPECT_LT(session_lease::stall_resume_margin(0.5), 0.0) << "f = 0.5 is not covered: validate() refuses it";
    // a node lost by its lease stays until s + 0.65 T: after the loss signal in every valid case
    EXPECT_DOUBLE_EQ(session_lease::handover_fraction(), 0.65);
    EXPECT_GT(session_lease::handover_fraction(), loss_policy::max_lease_fraction);
}

TEST(Lease, OnlyRepliesThatWentThroughTheLeaderRenewIt) {
    using zklock::detail::renews_lease;
    using zklock::detail::vouch;
    EXPECT_TRUE(renews_lease(vouch::sync, 0));
    EXPECT_TRUE(renews_lease(vouch::write, 0));
    EXPECT_FALSE(renews_lease(vouch::none, 0)) << "a read: a follower cut off from the leader answers it";
    EXPECT_FALSE(renews_lease(vouch::sync, -4));    // ZCONNECTIONLOSS
    EXPECT_FALSE(renews_lease(vouch::write, -110)); // ZNODEEXISTS
    EXPECT_FALSE(renews_lease(vouch::sync, -112));  // ZSESSIONEXPIRED
    using zklock::detail::is_server_reply; // (the auth probe's test: any server answered)
    EXPECT_TRUE(is_server_reply(0));
    EXPECT_TRUE(is_server_reply(-101));
    EXPECT_FALSE(is_server_reply(-4));
    EXPECT_FALSE(is_server_reply(-112));
}

TEST(Lease, ALapseThatOnlyARenewalRevealsIsFinal) {
    session_lease l;
    l.set_timeout(T);
    l.set_watch_fraction(0.3);
    const lease_ns granted = 1000 * ms;
    l.acknowledge(900 * ms, 950 * ms);
    EXPECT_FALSE(l.lapsed_since(granted, granted, T, 0.3));
    // Nobody looked between 900 + 600 ms and now (a late timer, a busy strand); then a reply to
    // a request sent at 1900 ms arrives at 2000 ms: the lease is current again, but it lapsed.
    EXPECT_TRUE(l.acknowledge(1900 * ms, 2000 * ms)) << "the gap is recorded";
    EXPECT_FALSE(l.lapsed(2000 * ms, T, 0.3)) << "the lease itself is current again";
    EXPECT_TRUE(l.lapsed_since(granted, 2000 * ms, T, 0.3)) << "but a lock held across the gap is lost";
    EXPECT_FALSE(l.lapsed_since(2000 * ms, 2001 * ms, T, 0.3)) << "a lock granted after it is not";
    EXPECT_FALSE(l.lapsed_since(granted, 2000 * ms, T, 0.55)) << "nor one with a fraction longer than the gap";
    // short gaps (a heartbeat's) record nothing
    EXPECT_FALSE(l.acknowledge(2100 * ms, 2101 * ms));
    l.reset();
    EXPECT_EQ(l.lapse_since(0), 0) << "a new session forgets the old one's gaps";
}

TEST(Lease, RecordedGapsStayBoundedAndNeverHideALapse) {
    session_lease l;
    l.set_timeout(T);
    l.set_watch_fraction(0.15);
    lease_ns t = 1000 * ms;
    l.acknowledge(t, t);
    // 200 gaps of decreasing length: the record is capped, yet every lock held across a gap
    // still sees one at least that long
    std::vector<std::pair<lease_ns, lease_ns>> gaps; // (end, length)
    for (int i = 0; i < 200; ++i) {
        const lease_ns len = (1900 - 4 * i) * ms;
        t += len;
        EXPECT_TRUE(l.acknowledge(t, t));
        gaps.emplace_back(t, len);
    }
    for (auto& [end, len] : gaps) EXPECT_GE(l.lapse_since(end - 1), len);
}

TEST(LossPolicy, IsATypeWithAValidatedFraction) {
    EXPECT_EQ(loss_policy::lease().type(), loss_policy::kind::lease);
    EXPECT_DOUBLE_EQ(loss_policy::lease().lease_fraction(), 0.3);
    EXPECT_FALSE(loss_policy::lease().validate());
    EXPECT_FALSE(loss_policy::lease(0.325).validate());
    using zklock::errc;
    EXPECT_EQ(loss_policy::lease(0.1).validate(), errc::invalid_lease_fraction) << "not above the heartbeat";
    EXPECT_EQ(loss_policy::lease(0.33).validate(), errc::invalid_lease_fraction) << "stall-resume-stall not covered";
    EXPECT_EQ(loss_policy::lease(0.5).validate(), errc::invalid_lease_fraction);
    EXPECT_EQ(loss_policy::lease(-1).validate(), errc::invalid_lease_fraction);
    EXPECT_NE(zklock::make_error_code(errc::invalid_lease_fraction).message().find("(0.1, 0.325]"), std::string::npos);
    EXPECT_FALSE(loss_policy::on_disconnect().validate());
    EXPECT_FALSE(loss_policy::on_expiry().validate());
    EXPECT_NE(loss_policy::on_expiry(), loss_policy::on_disconnect());
    EXPECT_STREQ(zklock::to_string(loss_policy::kind::on_expiry), "on_expiry");
}
