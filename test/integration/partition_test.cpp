// Partitions inside the ensemble: a quorum link cut while every client link stays up (on the
// second ensemble of scripts/test.sh, $ZK_RELAY_ENSEMBLE_DIR, started with zk.sh's freezable
// relays; the other ensemble tests use one without relays). Only replies that went
// through the leader may renew the lease: a follower cut off from the leader goes on answering
// reads for syncLimit x tickTime, and the leader expires the session long before that.
#include <zklock/mutex.hpp>

#include "common.hpp"
#include "ensemble.hpp"
#include "relayed_ensemble.hpp"
#include "loss_race.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/detached.hpp>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <thread>

using namespace zt;
using zklock::errc;
using zklock::detail::session_lease;
using clk = std::chrono::steady_clock;

namespace {

/// Seconds from `t0` until `s` is no longer connected (at most `limit`; -1 if it stayed).
awaitable<double> seconds_until_dropped(zklock::session& s, clk::time_point t0,
                                        std::chrono::milliseconds limit) {
    co_await eventually([&] { return s.state() != zklock::session_state::connected; }, limit);
    if (s.state() == zklock::session_state::connected) co_return -1.0;
    co_return std::chrono::duration<double>(clk::now() - t0).count();
}

} // namespace

class Partition : public zt::zk_test {
protected:
    void follower_cut_off(bool tls);
};

TEST_F(Partition, FollowerCutOffFromTheLeaderLeaseReportsTheLossBeforeAnotherHolderIsGranted) {
    follower_cut_off(false);
}

// The frozen follower again, the sessions over TLS (zklock's relay between the C client and the
// servers): the margin must hold just the same.
TEST_F(Partition, FollowerCutOffFromTheLeaderLeaseReportsTheLossBeforeAnotherHolderIsGrantedOverTls) {
    follower_cut_off(true);
}

void Partition::follower_cut_off(bool tls) {
    // The holder's session uses one follower only; the contender's, the leader only. Then only
    // the quorum link between that follower and the leader is frozen. The follower keeps
    // answering the holder's reads until its own read from the leader times out (syncLimit x
    // tickTime = 5 s here); the leader expires the session about T = 2 s after the last touch
    // relayed to it and grants the lock. The lease, renewed only through the leader, must report
    // the loss at least (0.5875 - f) T before that grant, at every phase of the heartbeat.
    relayed_ensemble e;
    e.tls = tls;
    ASSERT_TRUE(e.find_roles());
    const auto T = 2000ms;
    const double f = zklock::loss_policy::default_lease_fraction;
    const double bound = session_lease::guaranteed_margin(f) * 2.0;
    const double allowance = 0.15;
    const int fol = e.followers.front();
    run_test(
        [&]() -> awaitable<void> {
            auto ob = e.options(e.connect_to(e.leader));
            ob.session_timeout = 4000ms;
            auto b = co_await connect_session(ob);
            std::vector<double> margins;
            for (int k = 0; k < 4; ++k) {
                auto path = unique_path("cut" + std::to_string(k));
                auto oa = e.options(e.connect_to(fol));
                oa.session_timeout = T;
                oa.renew_after_expiry = false;
                auto a = co_await connect_session(oa);
                CO_REQUIRE(a->negotiated_timeout() == T);
                // A witness on the same follower that sends nothing but the C client's pings: it sees
                // when the follower gives its clients up. (The holder's own client gives the follower
                // up earlier: its pings wait behind its unanswered sync, so it hears nothing for 2/3 T.)
                auto ow = e.options(e.connect_to(fol));
                ow.session_timeout = 10000ms;
                ow.renew_after_expiry = false;
                auto w = co_await connect_session(ow);
                const int timeouts_before = e.log_count(fol, "Exception when following the leader");
                clk::time_point t0{};
                // when the holder's own client gives its connection up (polled)
                auto a_dropped = std::make_shared<clk::time_point>();
                asio::co_spawn(
                    io,
                    [](zklock::session* s, std::shared_ptr<clk::time_point> at) -> awaitable<void> {
                        const auto until = clk::now() + 12s;
                        while (s->state() == zklock::session_state::connected && clk::now() < until)
                            co_await sleep_for(5ms);
                        *at = clk::now();
                    }(a.get(), a_dropped),
                    asio::detached);
                auto r =
                    co_await race_loss_against_grant(*a, *b, path, std::chrono::milliseconds(50 * k), [&] {
                        t0 = clk::now();
                        e.freeze(fol, e.leader);
                    });
                CO_REQUIRE(r.lost);
                CO_REQUIRE(r.granted);
                EXPECT_EQ(r.why, errc::lease_expired) << r.why.message();
                // Only the quorum link is cut: the follower still serves its clients now, after the
                // grant, and gives them up only when its read from the leader times out.
                EXPECT_EQ(w->state(), zklock::session_state::connected)
                    << "the follower's client links were cut too";
                const double holder_dropped = *a_dropped == clk::time_point{}
                                                  ? -1.0
                                                  : std::chrono::duration<double>(*a_dropped - t0).count();
                const double dropped = co_await seconds_until_dropped(*w, t0, 9000ms);
                std::printf(
                    "  %sphase %d ms: loss at +%.3f s, other holder at +%.3f s, margin %.3f s (bound %.3f "
                    "s); "
                    "the holder's client gave up at +%.3f s, the follower dropped its clients at +%.3f s\n",
                    tls ? "TLS: " : "", 50 * k, r.loss_s, r.grant_s, r.margin(), bound, holder_dropped,
                    dropped);
                EXPECT_GE(r.margin(), bound - allowance);
                co_await expect_lead_over_logged_expiry(e.dir, a->session_id(), r.fault_at, r.loss_s, bound,
                                                        expiry_allowance,
                                                        "phase " + std::to_string(50 * k) + " ms");
                EXPECT_GT(dropped, 4.0) << "dropped before syncLimit x tickTime: not just the quorum link";
                EXPECT_LT(dropped, 8.0);
                EXPECT_GT(e.log_count(fol, "Exception when following the leader"), timeouts_before)
                    << "the follower did not log its read timeout";
                margins.push_back(r.margin());
                e.thaw_all();
                co_await r.holder.async_release(use_awaitable); // lost: completes at once
                co_await r.next.async_release(use_awaitable);
                co_await eventually([&] { return *a_dropped != clk::time_point{}; },
                                    8000ms); // (the poller is done with a)
                a.reset();
                w.reset();
                e.sh("wait", fol);
                co_await expect_no_leftovers(*b, path);
            }
            std::sort(margins.begin(), margins.end());
            std::printf("  margins: min %.3f s, max %.3f s over %zu phases\n", margins.front(),
                        margins.back(), margins.size());
        },
        150s);
    e.thaw_all();
    if (::testing::Test::HasFailure()) e.print_logs();
}

TEST_F(Partition, IsolatedLeaderLeaseReportsTheLossBeforeAnotherHolderIsGranted) {
    // The holder's session uses the leader only; the leader's quorum links are all frozen, its
    // client links stay up. It answers syncs alone until it steps down (about syncLimit ticks);
    // meanwhile the followers give it up and elect a new leader, which gives every session a full
    // T from its own start. Margin: (1 - 1.5 r - f) T with r = tickTime / T = 1/4 here.
    relayed_ensemble e;
    ASSERT_TRUE(e.find_roles());
    const auto T = 2000ms;
    const double f = zklock::loss_policy::default_lease_fraction;
    const double bound = session_lease::guaranteed_margin(f) * 2.0;
    const double allowance = 0.15;
    const int lead = e.leader;
    run_test(
        [&]() -> awaitable<void> {
            // The waiter's session must outlive the isolated leader's last term. That leader keeps
            // expiring sessions until it steps down (syncLimit ticks, 5 s here), and logs each expiry
            // as a proposal; when it wins the next election, that proposal is committed. Seen in CI:
            // with a 6 s session that had last reached the leader with its idle ping (every T/3 =
            // 2 s) before the fault, the leader expired it about 4 s into the fault, won again, and
            // the waiter's acquire failed with session_expired. So the waiter's session has the
            // server's maximum, 10 s, and touches the leader every 200 ms (a follower forwards the
            // touches every tick): it cannot expire before the fault's 9th second.
            auto ob = options(e.connect_to(e.followers[0]) + "," + e.connect_to(e.followers[1]));
            ob.session_timeout = 10000ms;
            auto b = co_await connect_session(ob);
            CO_REQUIRE(b->negotiated_timeout() == 10000ms);
            // (to match against the servers' "Expiring session" lines printed on a failure)
            std::printf("  waiter's session 0x%llx\n", static_cast<unsigned long long>(b->session_id()));
            auto path = unique_path("isolated");
            auto oa = options(e.connect_to(lead));
            oa.session_timeout = T;
            oa.renew_after_expiry = false;
            auto a = co_await connect_session(oa);
            CO_REQUIRE(a->negotiated_timeout() == T);
            // The links stay frozen for 12 s, then come back. Whether the followers elect a new leader
            // meanwhile is ZooKeeper's business, and not up to the relays: a server answers an
            // election connection from a lower id by connecting back to the address that server
            // advertises, so election messages can bypass the relays, and the isolated leader, the
            // highest id, may win again and stall the ensemble until the links come back (seen: 2
            // of 3 runs under load). Seen too: a follower that had just rejoined took a stale
            // "leading" notification from its queue and followed the old leader into the frozen link.
            // What is checked is the order and the margin of the loss and the next grant.
            struct busy_state {
                bool on = true, done = false;
            };
            auto busy = std::make_shared<busy_state>();
            asio::co_spawn(
                io,
                [](zklock::session* s, std::shared_ptr<busy_state> st) -> awaitable<void> {
                    while (st->on) {
                        (void)co_await zklock::async_get_children(*s, "/",
                                                                  boost::asio::as_tuple(use_awaitable));
                        co_await sleep_for(200ms);
                    }
                    st->done = true;
                }(b.get(), busy),
                asio::detached);
            std::thread thaw;
            auto r = co_await race_loss_against_grant(
                *a, *b, path, 0ms,
                [&] {
                    for (int fo : e.followers) {
                        e.freeze(fo, lead);
                        e.freeze(lead, fo);
                    }
                    thaw = std::thread([&e] {
                        std::this_thread::sleep_for(12s);
                        e.thaw_all();
                    });
                },
                {}, 40000ms);
            thaw.join();
            busy->on = false;
            co_await eventually([&] { return busy->done; }, 5000ms);
            CO_REQUIRE(busy->done);
            CO_REQUIRE(r.lost);
            EXPECT_EQ(r.why, errc::lease_expired) << r.why.message();
            if (r.granted) {
                std::printf(
                    "  isolated leader: loss at +%.3f s, other holder at +%.3f s, margin %.3f s (bound "
                    "%.3f s)\n",
                    r.loss_s, r.grant_s, r.margin(), bound);
                EXPECT_GE(r.margin(), bound - allowance);
            } else {
                // No new leader while the links were frozen (above: the isolated leader can win
                // again once they thaw): nobody expired the holder's session, so nobody could be
                // granted, and the holder's suspended lock is regained (docs/lease.md,
                // "Suspended, then regained or lost").
                auto [v] = co_await r.holder.async_wait_verdict(boost::asio::as_tuple(use_awaitable));
                std::printf("  isolated leader: loss at +%.3f s, no other holder within the race; the "
                            "holder's verdict: %s\n",
                            r.loss_s, v ? v.message().c_str() : "regained");
                EXPECT_FALSE(v) << "no other holder was granted, yet the holder was not regained: "
                                << v.message();
                EXPECT_EQ(a->state(), zklock::session_state::connected);
            }
            // (The old, sync-renewed lease reported this loss only when the leader stepped down, after
            // syncLimit ticks: +5.3 .. +6.0 s. The heartbeat is now a write, which no isolated leader
            // can commit.)
            EXPECT_LT(r.loss_s, 1.5) << "the loss waited for the isolated leader to step down";
            e.thaw_all();
            co_await r.holder.async_release(use_awaitable);
            if (r.next) co_await r.next.async_release(use_awaitable);
            a.reset();
            e.sh("wait", lead);
            co_await expect_no_leftovers(*b, path);
        },
        120s);
    e.thaw_all();
    if (::testing::Test::HasFailure()) e.print_logs();
}

TEST_F(Partition, StallResumeStallOnTheHoldersFollower) {
    // Stall, resume, stall: the holder's follower is cut off from the leader, reconnected just
    // long enough for the holder's heartbeats to renew the lease, and cut off again. The lease
    // must still report the loss before the grant, by the stated margin, (0.5875 - f) T: the
    // renewals during the resume vouch only for sends answered G before them.
    relayed_ensemble e;
    ASSERT_TRUE(e.find_roles());
    const auto T = 2000ms;
    const double f = zklock::loss_policy::default_lease_fraction;
    const double bound = session_lease::guaranteed_margin(f) * 2.0;
    const int fol = e.followers.front();
    run_test(
        [&]() -> awaitable<void> {
            auto ob = options(e.connect_to(e.leader));
            ob.session_timeout = 4000ms;
            auto b = co_await connect_session(ob);
            for (int resume_ms : {60, 250}) {
                auto path = unique_path("stall" + std::to_string(resume_ms));
                auto oa = options(e.connect_to(fol));
                oa.session_timeout = T;
                oa.renew_after_expiry = false;
                auto a = co_await connect_session(oa);
                CO_REQUIRE(a->negotiated_timeout() == T);
                std::thread sequence; // (off the io_context: the sessions' strands run meanwhile)
                auto r = co_await race_loss_against_grant(*a, *b, path, 0ms, [&] {
                    sequence = std::thread([&e, fol, resume_ms] {
                        e.freeze(fol, e.leader);
                        std::this_thread::sleep_for(
                            400ms); // short of the lease (0.6 s after the last heartbeat)
                        e.thaw_all();
                        std::this_thread::sleep_for(std::chrono::milliseconds(resume_ms));
                        e.freeze(fol, e.leader);
                    });
                });
                sequence.join();
                CO_REQUIRE(r.lost);
                CO_REQUIRE(r.granted);
                EXPECT_EQ(r.why, errc::lease_expired) << r.why.message();
                std::printf("  resumed %d ms: loss at +%.3f s, other holder at +%.3f s, margin %.3f s (bound "
                            "%.3f s)\n",
                            resume_ms, r.loss_s, r.grant_s, r.margin(), bound);
                EXPECT_GT(r.margin(), 0.0) << "overlap";
                EXPECT_GE(r.margin(), bound);
                co_await expect_lead_over_logged_expiry(e.dir, a->session_id(), r.fault_at, r.loss_s, bound,
                                                        expiry_allowance,
                                                        "resumed " + std::to_string(resume_ms) + " ms");
                e.thaw_all();
                co_await r.holder.async_release(use_awaitable);
                co_await r.next.async_release(use_awaitable);
                a.reset();
                e.sh("wait", fol);
                co_await expect_no_leftovers(*b, path);
            }
        },
        150s);
    e.thaw_all();
    if (::testing::Test::HasFailure()) e.print_logs();
}
