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

TEST(Lease, TheDefaultLeaveslAtLeastThreeTenthsOfTheTimeoutAsMargin) {
    // worst case allowed by ZooKeeper: tickTime = T/2 (relays every T/4), a heartbeat every T/10
    EXPECT_DOUBLE_EQ(session_lease::earliest_expiry_fraction(0.5), 0.65);
    const double margin = session_lease::guaranteed_margin(loss_policy::default_lease_fraction);
    EXPECT_GE(margin, 0.3);
    EXPECT_NEAR(margin, 0.65 - 1.0 / 3, 1e-12);
    // the test ensemble's ratio (tickTime 500 ms, T = 2 s) leaves more
    EXPECT_NEAR(session_lease::guaranteed_margin(loss_policy::default_lease_fraction, 0.25), 0.775 - 1.0 / 3, 1e-12);
    // the largest valid fraction still reports the loss before the earliest expiry
    EXPECT_GE(session_lease::guaranteed_margin(0.65), 0.0);
}

TEST(Lease, OnlyServerRepliesRenewTheLease) {
    using zklock::detail::is_server_reply;
    EXPECT_TRUE(is_server_reply(0));    // ZOK
    EXPECT_TRUE(is_server_reply(-101)); // ZNONODE: the server answered
    EXPECT_TRUE(is_server_reply(-110)); // ZNODEEXISTS
    EXPECT_FALSE(is_server_reply(-4));   // ZCONNECTIONLOSS
    EXPECT_FALSE(is_server_reply(-7));   // ZOPERATIONTIMEOUT
    EXPECT_FALSE(is_server_reply(-9));   // ZINVALIDSTATE (refused by the client)
    EXPECT_FALSE(is_server_reply(-112)); // ZSESSIONEXPIRED
    EXPECT_FALSE(is_server_reply(-116)); // ZCLOSING
    EXPECT_FALSE(is_server_reply(-118)); // ZSESSIONMOVED
}

TEST(LossPolicy, IsATypeWithAValidatedFraction) {
    EXPECT_EQ(loss_policy::lease().type(), loss_policy::kind::lease);
    EXPECT_DOUBLE_EQ(loss_policy::lease().lease_fraction(), 1.0 / 3);
    EXPECT_FALSE(loss_policy::lease().validate());
    EXPECT_FALSE(loss_policy::lease(0.65).validate());
    EXPECT_EQ(loss_policy::lease(0.1).validate(), zklock::errc::invalid_argument) << "not above the heartbeat";
    EXPECT_EQ(loss_policy::lease(0.66).validate(), zklock::errc::invalid_argument) << "past the earliest expiry";
    EXPECT_EQ(loss_policy::lease(-1).validate(), zklock::errc::invalid_argument);
    EXPECT_FALSE(loss_policy::on_disconnect().validate());
    EXPECT_FALSE(loss_policy::on_expiry().validate());
    EXPECT_NE(loss_policy::on_expiry(), loss_policy::on_disconnect());
    EXPECT_STREQ(zklock::to_string(loss_policy::kind::on_expiry), "on_expiry");
}
