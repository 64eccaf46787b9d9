// The lease that only a quorum renews (loss_policy::lease, docs/lease.md), at the worst phases
// of its derivation: a leader deposed while it still answers, a grant after a long wait, a
// suspend, a heartbeat that finds its node gone. The older faults (a follower cut off or frozen,
// an isolated leader) are in partition_test.cpp and process_test.cpp.
#include <zklock/mutex.hpp>

#include "common.hpp"
#include "loss_race.hpp"
#include "proxy.hpp"
#include "raw_zk.hpp"
#include "relayed_ensemble.hpp"

#include "moved_clock_platform.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/detached.hpp>

#include <cstdio>
#include <thread>

using namespace zt;
using zklock::errc;
using zklock::detail::session_lease;
using clk = std::chrono::steady_clock;

class QuorumLease : public zt::zk_test {
protected:
    void deposed_leader(bool tls);
};

TEST_F(QuorumLease, ADeposedLeaderThatStillAnswersCannotRenewTheLease) { deposed_leader(false); }

// The same fault, the holder and the waiter over TLS (through zklock's relay): the relay adds a
// hop on the client's side, not on the quorum's, and must not delay the loss.
TEST_F(QuorumLease, ADeposedLeaderThatStillAnswersCannotRenewTheLeaseOverTls) { deposed_leader(true); }

void QuorumLease::deposed_leader(bool tls) {
    // The outside harness's case: the holder's session uses the leader L only. L's quorum links
    // are frozen both ways and the followers are restarted at once (zk.sh depose): they elect a
    // new leader among themselves within about 2.5 s, which gives every session a full T from
    // its own start, expires the holder's and grants the lock; L meanwhile goes on leading alone
    // until its syncLimit runs out (5 s here) and answers the holder's reads and syncs. A lease
    // that a sync renews (the code before this test) reported the loss only when L stepped down,
    // at +5.3 s, after the grant (about +4.3 s): an overlap. Checked: with the heartbeat and the
    // renewal a sync again, this test failed (loss at +5.70 s, the other holder at +3.76 s: an
    // overlap of 1.94 s). The heartbeat is now a write that only a quorum commits: the loss must
    // come at least (0.5875 - f) T before the grant.
    relayed_ensemble e;
    e.tls = tls;
    ASSERT_TRUE(e.find_roles());
    const auto T = 2000ms;
    const double f = zklock::loss_policy::default_lease_fraction;
    const double bound = session_lease::guaranteed_margin(f) * 2.0;
    const double allowance = 0.15;
    const int old_leader = e.leader;
    run_test(
        [&]() -> awaitable<void> {
            // The waiter: on the followers (restarted under it: it reconnects), with the server's
            // largest T so that nothing of the fault expires it.
            auto ob = e.options(e.connect_to(e.followers[0]) + "," + e.connect_to(e.followers[1]));
            ob.session_timeout = 10000ms;
            auto b = co_await connect_session(ob);
            auto path = unique_path("deposed");
            auto oa = e.options(e.connect_to(old_leader));
            oa.session_timeout = T;
            oa.renew_after_expiry = false;
            auto a = co_await connect_session(oa);
            CO_REQUIRE(a->negotiated_timeout() == T);
            std::thread fault;
            int new_leader = 0;
            long long cut_from = 0; // (realtime ns)
            std::chrono::system_clock::time_point fault_at;
            auto r = co_await race_loss_against_grant(
                *a, *b, path, 0ms,
                [&] {
                    fault_at = std::chrono::system_clock::now();
                    fault = std::thread([&e, &new_leader, &cut_from, old_leader] {
                        new_leader = e.depose(old_leader, &cut_from);
                    });
                },
                {}, 30000ms);
            fault.join();
            // The race's times count from the call that starts zk.sh depose; the cut itself comes
            // later, after the script checked the leader's mode (a few ms idle, hundreds under load:
            // seen 1.71 s to the loss from the call with a compile running). The lease runs from the
            // cut.
            const double cut_s =
                cut_from == 0
                    ? 0.0
                    : static_cast<double>(cut_from - std::chrono::duration_cast<std::chrono::nanoseconds>(
                                                         fault_at.time_since_epoch())
                                                         .count()) /
                          1e9;
            std::printf("  %sdeposed leader %d, new leader %d: the cut at +%.3f s, loss at +%.3f s, other "
                        "holder at +%.3f "
                        "s, margin %.3f s (bound %.3f s)\n",
                        tls ? "TLS: " : "", old_leader, new_leader, cut_s, r.loss_s, r.grant_s, r.margin(),
                        bound);
            EXPECT_NE(cut_from, 0) << "zk.sh depose printed no CUT_FROM";
            EXPECT_NE(new_leader, 0) << "zk.sh depose failed";
            EXPECT_NE(new_leader, old_leader) << "the old leader was elected again: not the fault meant";
            CO_REQUIRE(r.lost);
            CO_REQUIRE(r.granted);
            EXPECT_EQ(r.why, errc::lease_expired) << r.why.message();
            EXPECT_GE(r.margin(), bound - allowance);
            EXPECT_LT(r.loss_s - cut_s, 1.5)
                << "the loss waited for something other than the lease (the cut at +" << cut_s << " s)";
            e.thaw_all();
            co_await r.holder.async_release(use_awaitable); // lost: completes at once
            co_await r.next.async_release(use_awaitable);
            a.reset();
            for (int i = 1; i <= 3; ++i) e.sh("wait", i);
            co_await expect_no_leftovers(*b, path);
        },
        120s);
    e.thaw_all();
    if (::testing::Test::HasFailure()) e.print_logs();
}

TEST_F(QuorumLease, AGrantAfterALongWaitIsVouchedForAtEveryPhase) {
    // A waiter that held nothing for longer than T (so no heartbeat ran: only its touches) is
    // granted; its follower is cut off from the leader at once, at several phases of its
    // touches (the wait's length moves them). The lease at the grant comes from evidence sent
    // before it, so the loss must still come (0.5875 - f) T before the next holder's grant.
    // T = 1 s against tickTime 500 ms: r = 1/2, the leader's pings T/4 apart, the worst case the
    // derivation covers. (The old rule counted the sync renewal at the grant as fresh while the
    // leader's last relayed touch could be a third of T older; this test passes with a sync
    // heartbeat under the new evidence rules, so it guards those rules, not the write.)
    relayed_ensemble e;
    ASSERT_TRUE(e.find_roles());
    const auto T = 1000ms;
    const double f = zklock::loss_policy::default_lease_fraction;
    const double bound = session_lease::guaranteed_margin(f) * 1.0;
    const double allowance = 0.1;
    const int fol = e.followers.front();
    run_test(
        [&]() -> awaitable<void> {
            auto oc = options(e.connect_to(e.leader));
            oc.session_timeout = 4000ms;
            auto c = co_await connect_session(oc); // the first holder, then the next one
            std::vector<double> margins;
            for (int k = 0; k < 5; ++k) {
                auto path = unique_path("longwait" + std::to_string(k));
                auto oa = options(e.connect_to(fol));
                oa.session_timeout = T;
                oa.renew_after_expiry = false;
                auto a = co_await connect_session(oa);
                CO_REQUIRE(a->negotiated_timeout() == T);
                zklock::mutex mc(*c, path), ma(*a, path);
                auto first = co_await mc.async_acquire(use_awaitable);
                auto wa = in_background([&](auto h) { ma.async_acquire_for(20s, h); });
                co_await wait_for_children(*c, path, 2);
                co_await sleep_for(std::chrono::milliseconds(1100 + 37 * k)); // > T, phases of the touches
                co_await first.async_release(use_awaitable);
                co_await eventually([&] { return wa->done; }, 5000ms);
                CO_REQUIRE(wa->granted());
                e.freeze(fol, e.leader); // at once after the grant
                e.freeze(e.leader, fol);
                const auto t0 = clk::now();
                auto lost_at = std::make_shared<clk::time_point>();
                wa->guard.async_wait_lost([lost_at](zklock::error_code) { *lost_at = clk::now(); });
                auto next = in_background([&](auto h) { mc.async_acquire_for(20s, h); });
                co_await eventually([&] { return *lost_at != clk::time_point{} && next->done; }, 15000ms);
                CO_REQUIRE(*lost_at != clk::time_point{});
                CO_REQUIRE(next->granted());
                const double loss_s = std::chrono::duration<double>(*lost_at - t0).count();
                const double grant_s = std::chrono::duration<double>(next->at - t0).count();
                // Against the leader's own expiry, not the next grant, and before its rounding
                // up to a tick: the leader's last touch of the session + T (its log), which must
                // come the stated bound after the loss.
                std::printf("  wait %d ms: loss at +%.3f s, other holder at +%.3f s (bound %.3f s)\n",
                            1100 + 37 * k, loss_s, grant_s, bound);
                EXPECT_GE(grant_s - loss_s, bound - allowance);
                co_await expect_lead_over_logged_expiry(e.dir, a->session_id(), t0, loss_s, bound,
                                                        expiry_allowance,
                                                        "wait " + std::to_string(1100 + 37 * k));
                margins.push_back(grant_s - loss_s);
                e.thaw_all();
                co_await wa->guard.async_release(use_awaitable);
                co_await next->guard.async_release(use_awaitable);
                a.reset();
                e.sh("wait", fol);
                co_await expect_no_leftovers(*c, path);
            }
            std::sort(margins.begin(), margins.end());
            std::printf("  margins: min %.3f s, max %.3f s\n", margins.front(), margins.back());
        },
        150s);
    e.thaw_all();
    if (::testing::Test::HasFailure()) e.print_logs();
}

TEST_F(QuorumLease, AStallOfTheWaitersLinkAroundItsGrantStillLeavesTheMarginBeforeTheLeadersExpiry) {
    // The waiter's link to its follower stalls for T/2 around the moment it is granted (what it
    // sends meanwhile reaches the follower in one burst after the stall, and the replies come
    // back in one burst too); at once after the grant its follower is cut off from the leader.
    // Under the earlier rule two sends T/4 apart on the client's clock counted as T/4 apart at the
    // follower, which a stall undoes: a commit could vouch for a touch that no ping answer
    // carried. Rule (b) now counts G from the reply. Measured against the leader's own expiry
    // ("Expiring session" in its log). r = 1/2: T = 1 s, tickTime 500 ms. (A real ensemble
    // cannot be steered to the worst phase of the leader's pings; the model,
    // lease_model_test.cpp, explores those: this test checks the margin at the phases it meets.)
    relayed_ensemble e;
    ASSERT_TRUE(e.find_roles());
    const auto T = 1000ms;
    const double f = zklock::loss_policy::default_lease_fraction;
    const double bound = session_lease::guaranteed_margin(f) * 1.0;
    const int fol = e.followers.front();
    run_test(
        [&]() -> awaitable<void> {
            auto oc = options(e.connect_to(e.leader));
            oc.session_timeout = 4000ms;
            auto c = co_await connect_session(oc);
            for (int k = 0; k < 4; ++k) {
                // the stall begins this long before the first holder's release
                const auto before = std::chrono::milliseconds(400 - 150 * k); // 400, 250, 100, -50 ms
                auto path = unique_path("stall" + std::to_string(k));
                tcp_proxy proxy(first_port(e.connect_to(fol)));
                auto oa = through(proxy);
                oa.session_timeout = T;
                oa.renew_after_expiry = false;
                auto a = co_await connect_session(oa);
                CO_REQUIRE(a->negotiated_timeout() == T);
                zklock::mutex mc(*c, path), ma(*a, path);
                auto first = co_await mc.async_acquire(use_awaitable);
                auto wa = in_background([&](auto h) { ma.async_acquire_for(20s, h); });
                co_await wait_for_children(*c, path, 2);
                co_await sleep_for(1200ms); // a quiet wait: touches only
                if (before.count() > 0) {
                    proxy.stall(T / 2);
                    co_await sleep_for(before);
                    co_await first.async_release(use_awaitable);
                } else {
                    co_await first.async_release(use_awaitable);
                    co_await sleep_for(-before);
                    proxy.stall(T / 2);
                }
                co_await eventually([&] { return wa->done; }, 5000ms);
                CO_REQUIRE(wa->granted());
                e.freeze(fol, e.leader); // at once after the grant
                e.freeze(e.leader, fol);
                const auto t0 = clk::now();
                auto lost_at = std::make_shared<clk::time_point>();
                wa->guard.async_wait_lost([lost_at](zklock::error_code) { *lost_at = clk::now(); });
                co_await eventually([&] { return *lost_at != clk::time_point{}; }, 5000ms);
                CO_REQUIRE(*lost_at != clk::time_point{});
                const double loss_s = std::chrono::duration<double>(*lost_at - t0).count();
                co_await expect_lead_over_logged_expiry(
                    e.dir, a->session_id(), t0, loss_s, bound, expiry_allowance,
                    "stall from " + std::to_string(before.count()) + " ms before the release");
                e.thaw_all();
                co_await wa->guard.async_release(use_awaitable);
                a.reset();
                e.sh("wait", fol);
                co_await expect_no_leftovers(*c, path);
            }
        },
        150s);
    e.thaw_all();
    if (::testing::Test::HasFailure()) e.print_logs();
}

TEST_F(QuorumLease, PingsHeldBackWithinTheJitterBudgetStillLeaveTheMarginBeforeTheLeadersExpiry) {
    // Premise 1 of docs/lease.md: a follower sends the leader a ping answer at least every
    // G = 5T/16. Here the leader's pings (and proposals) to the holder's follower are held back
    // for a while (zk.sh hold: only that direction of the follower's link; what the follower
    // forwards still reaches the leader), then the follower is cut off both ways. At tickTime
    // = T/4 (500 ms, T = 2 s) the pings come every 250 ms: a hold of 300 ms leaves the answers
    // at most 550 ms apart, inside G = 625 ms. Measured against the leader's own expiry.
    relayed_ensemble e;
    ASSERT_TRUE(e.find_roles());
    const auto T = 2000ms;
    const double f = zklock::loss_policy::default_lease_fraction;
    const double bound = session_lease::guaranteed_margin(f) * 2.0;
    const double allowance = 0.15;
    const int fol = e.followers.front();
    run_test(
        [&]() -> awaitable<void> {
            auto ob = options(e.connect_to(e.leader));
            ob.session_timeout = 4000ms;
            auto b = co_await connect_session(ob);
            for (int phase_ms : {0, 100}) {
                auto path = unique_path("held" + std::to_string(phase_ms));
                auto oa = options(e.connect_to(fol));
                oa.session_timeout = T;
                oa.renew_after_expiry = false;
                auto a = co_await connect_session(oa);
                CO_REQUIRE(a->negotiated_timeout() == T);
                std::thread sequence; // (off the io_context: the sessions' strands run meanwhile)
                auto r =
                    co_await race_loss_against_grant(*a, *b, path, std::chrono::milliseconds(phase_ms), [&] {
                        sequence = std::thread([&e, fol] {
                            e.hold(fol, e.leader);
                            std::this_thread::sleep_for(300ms);
                            e.freeze(fol, e.leader);
                        });
                    });
                sequence.join();
                CO_REQUIRE(r.lost);
                CO_REQUIRE(r.granted);
                EXPECT_EQ(r.why, errc::lease_expired) << r.why.message();
                std::printf("  phase %d ms: loss at +%.3f s, other holder at +%.3f s (bound %.3f s)\n",
                            phase_ms, r.loss_s, r.grant_s, bound);
                EXPECT_GE(r.margin(), bound - allowance);
                co_await expect_lead_over_logged_expiry(e.dir, a->session_id(), r.fault_at, r.loss_s, bound,
                                                        expiry_allowance,
                                                        "phase " + std::to_string(phase_ms) + " ms");
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

TEST_F(QuorumLease, AHeartbeatDelayedByABusyStrandStillLeavesTheMargin) {
    // The holder's io_context is blocked for a quarter of T right after a heartbeat (its next
    // heartbeat, due T/10 later, goes out only after the block); as the block ends, its
    // follower is cut off from the leader. The lease's deadline rests on evidence sent before
    // the block, so the loss must still come (0.5875 - f) T before the next holder's grant.
    // (The old rule credited the late heartbeat's send; its margin here was still 0.7 T less
    // the block, above its stated bound: this test guards the new rule, it did not fail before.)
    relayed_ensemble e;
    ASSERT_TRUE(e.find_roles());
    const auto T = 2000ms;
    const double f = zklock::loss_policy::default_lease_fraction;
    const double bound = session_lease::guaranteed_margin(f) * 2.0;
    const double allowance = 0.15;
    const int fol = e.followers.front();
    run_test(
        [&]() -> awaitable<void> {
            auto ob = options(e.connect_to(e.leader));
            ob.session_timeout = 4000ms;
            auto b = co_await connect_session(ob);
            for (int k = 0; k < 2; ++k) {
                auto path = unique_path("busy" + std::to_string(k));
                auto oa = options(e.connect_to(fol));
                oa.session_timeout = T;
                oa.renew_after_expiry = false;
                auto a = co_await connect_session(oa);
                CO_REQUIRE(a->negotiated_timeout() == T);
                auto r =
                    co_await race_loss_against_grant(*a, *b, path, std::chrono::milliseconds(50 * k), [&] {
                        std::this_thread::sleep_for(500ms); // the strand (the whole io_context) is busy
                        e.freeze(fol, e.leader);
                        e.freeze(e.leader, fol);
                    });
                CO_REQUIRE(r.lost);
                CO_REQUIRE(r.granted);
                std::printf(
                    "  phase %d ms, blocked 500 ms: loss at +%.3f s, other holder at +%.3f s, margin %.3f s "
                    "(bound %.3f s)\n",
                    50 * k, r.loss_s, r.grant_s, r.margin(), bound);
                EXPECT_EQ(r.why, errc::lease_expired) << r.why.message();
                EXPECT_GE(r.margin(), bound - allowance);
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

TEST_F(QuorumLease, ATimeoutRenegotiatedOnAReconnectKeepsTheMargin) {
    // The holder's session asks for T = 4 s and gets it from its first server; the next one caps
    // sessions at 2 s (maxSessionTimeout). The session's link to the first server is cut (a test
    // proxy drops it and answers nothing more): it moves to the second, and T halves. At once,
    // that server is cut off from the leader. The old evidence was counted against 4 s, the new
    // handshake touched the session with 2 s: the loss must come (0.5875 - f) x 2 s before the
    // next holder's grant. (T can only shrink on a reconnect: the C client asks every new server
    // for the timeout it last negotiated, zh->recv_timeout, which the first handshake's answer
    // overwrote; seen here: a session capped at 2 s did not get 4 s back from a server that
    // allows it. The growing case is checked on the bookkeeping only, by the unit test
    // Lease.ALongerTimeoutAfterAReconnectDoesNotStretchOldEvidence. This test was not run against
    // the code before it.)
    relayed_ensemble e;
    ASSERT_TRUE(e.find_roles());
    const int full = e.followers[0], capped = e.followers[1];
    e.set_max_session_timeout(capped, 2000);
    const double f = zklock::loss_policy::default_lease_fraction;
    const double bound = session_lease::guaranteed_margin(f) * 2.0;
    const double allowance = 0.15;
    run_test(
        [&]() -> awaitable<void> {
            auto ob = options(e.connect_to(e.leader));
            ob.session_timeout = 10000ms;
            auto b = co_await connect_session(ob);
            auto path = unique_path("renegotiated");
            tcp_proxy proxy(server_port(e.dir, full));
            // (the C client picks a server of its list at random: connect until it took the full one)
            std::unique_ptr<zklock::session> a;
            for (int i = 0; i < 20; ++i) {
                auto oa = options("127.0.0.1:" + std::to_string(proxy.port()) + "," + e.connect_to(capped));
                oa.session_timeout = 4000ms;
                oa.renew_after_expiry = false;
                a = co_await connect_session(oa);
                if (a->negotiated_timeout() == 4000ms) break;
                a.reset();
            }
            CO_REQUIRE(a && a->negotiated_timeout() == 4000ms);
            zklock::mutex ma(*a, path), mb(*b, path);
            auto g = co_await ma.async_acquire(use_awaitable);
            auto lost_at = std::make_shared<clk::time_point>();
            auto why = std::make_shared<zklock::error_code>();
            g.async_wait_lost([lost_at, why](zklock::error_code ec) {
                *why = ec;
                *lost_at = clk::now();
            });
            auto next = in_background([&](auto h) { mb.async_acquire_for(30s, h); });
            co_await wait_for_children(*b, path, 2);
            auto n = a->statistics().heartbeats;
            co_await eventually([&] { return a->statistics().heartbeats >= n + 5; }, 5000ms);
            proxy.blackhole(true);
            proxy.drop(); // the session moves to the other follower, which caps it at 2 s
            co_await eventually([&] { return a->negotiated_timeout() == 2000ms; }, 5000ms);
            CO_REQUIRE(a->negotiated_timeout() == 2000ms);
            e.freeze(capped, e.leader); // at once after the reconnect
            e.freeze(e.leader, capped);
            const auto t0 = clk::now();
            co_await eventually([&] { return *lost_at != clk::time_point{} && next->done; }, 20000ms);
            CO_REQUIRE(*lost_at != clk::time_point{});
            CO_REQUIRE(next->granted());
            const double loss_s = std::chrono::duration<double>(*lost_at - t0).count();
            const double grant_s = std::chrono::duration<double>(next->at - t0).count();
            std::printf(
                "  T 4 s -> 2 s: loss at %+.3f s, other holder at %+.3f s, margin %.3f s (bound %.3f s)\n",
                loss_s, grant_s, grant_s - loss_s, bound);
            EXPECT_EQ(*why, errc::lease_expired) << why->message();
            EXPECT_GE(grant_s - loss_s, bound - allowance);
            e.thaw_all();
            co_await g.async_release(use_awaitable);
            co_await next->guard.async_release(use_awaitable);
            a.reset();
            e.sh("wait", capped);
            co_await expect_no_leftovers(*b, path);
        },
        150s);
    e.thaw_all();
    e.set_max_session_timeout(capped, 0);
    if (::testing::Test::HasFailure()) e.print_logs();
}

TEST_F(QuorumLease, AReconnectToACappedServerWhoseAnswerIsLostIsReportedBeforeTheLeadersExpiry) {
    // Premise 6 of docs/lease.md, at its worst phase: the holder negotiated T = 10 s on a follower
    // (tickTime 500 ms: the servers' default maximum); another follower caps sessions at 1 s
    // (maxSessionTimeout). The holder's link to its follower is cut (the test proxy drops the
    // connection and discards everything after), it reconnects to the capped follower, whose
    // proxy passes the handshake and discards every answer: that follower revalidates the session
    // at the leader with T = 1 s, and the leader's expiry moves to the revalidation + 1 s, which
    // the client never learns. Run twice:
    //  - without session_options::lease_timeout_cap (outside premise 6): the lease counts with
    //    10 s and reports the loss about a second after the leader expired the session and the
    //    waiter was granted. That the overlap happens shows the fault is injected (the third review's
    //    reproduction: granted 0.52 to 0.95 s before the holder was told);
    //  - with lease_timeout_cap = 1 s (the smallest maxSessionTimeout): the loss comes the stated
    //    margin for 1 s, (0.5875 - f) x 1 s, before the leader's own expiry, measured before its
    //    rounding to a tick (its last touch of the session + the T of that touch, from its log).
    relayed_ensemble e;
    ASSERT_TRUE(e.find_roles());
    const int full = e.followers[0], capped = e.followers[1];
    e.set_max_session_timeout(capped, 1000);
    const double f = zklock::loss_policy::default_lease_fraction;
    const double bound = session_lease::guaranteed_margin(f) * 1.0; // (T = the cap, 1 s)
    const double allowance = 0.1;
    run_test(
        [&]() -> awaitable<void> {
            auto ob = options(e.connect_to(e.leader));
            ob.session_timeout = 10000ms;
            auto b = co_await connect_session(ob);
            for (const bool with_cap : {false, true}) {
                const char* label = with_cap ? "lease_timeout_cap = 1 s" : "no cap (outside premise 6)";
                auto path = unique_path(with_cap ? "capped-reconnect" : "capped-reconnect-nocap");
                tcp_proxy to_full(server_port(e.dir, full));
                tcp_proxy to_capped(server_port(e.dir, capped));
                // (the C client picks a server of its list at random: connect until it took the full one)
                std::unique_ptr<zklock::session> a;
                for (int i = 0; i < 20; ++i) {
                    auto oa = options("127.0.0.1:" + std::to_string(to_full.port()) +
                                      ",127.0.0.1:" + std::to_string(to_capped.port()));
                    oa.session_timeout = 10000ms;
                    oa.renew_after_expiry = false;
                    if (with_cap) oa.lease_timeout_cap = 1000ms;
                    a = co_await connect_session(oa);
                    if (a->negotiated_timeout() == 10000ms) break;
                    a.reset();
                }
                CO_REQUIRE(a && a->negotiated_timeout() == 10000ms);
                zklock::mutex ma(*a, path), mb(*b, path);
                auto g = co_await ma.async_acquire(use_awaitable);
                auto lost_at = std::make_shared<clk::time_point>();
                auto why = std::make_shared<zklock::error_code>();
                g.async_wait_lost([lost_at, why](zklock::error_code ec) {
                    *why = ec;
                    *lost_at = clk::now();
                });
                auto next = in_background([&](auto h) { mb.async_acquire_for(40s, h); });
                co_await wait_for_children(*b, path, 2);
                // the lease's steady state (its evidence G + a period old: 4.1 s at T = 10 s, 0.8 s
                // under the cap), so that the run without the cap counts from a fresh v
                auto n = a->statistics().heartbeats;
                co_await eventually([&] { return a->statistics().heartbeats >= n + (with_cap ? 10 : 6); },
                                    12000ms);
                // cut right after a heartbeat's reply moved the lease (its latest evidence, as fresh
                // as the steady state makes it: the run without the cap then reports the loss
                // about 3 s after the cut, well after the leader's expiry)
                const auto v0 = a->impl()->lease_view().vouched;
                co_await eventually([&] { return a->impl()->lease_view().vouched != v0; }, 3000ms);
                // The cut, and the capped follower's answers discarded: the handshake reaches it,
                // 600 ms late, so that its revalidation reaches the leader after the first
                // follower's last relay of the session (within a ping interval of the cut: seen
                // without the delay, that relay's 10 s came last and the leader kept it).
                to_capped.delay(600ms);
                to_capped.mute_replies(true);
                to_full.blackhole(true);
                const auto capped_before = to_capped.accepted();
                const auto t0 = clk::now();
                const auto t0_lease = a->impl()->plat()->boot_now();
                std::printf("  %s: at the cut, %s\n", label, describe_lease(*a, t0_lease).c_str());
                to_full.drop();
                co_await eventually([&] { return *lost_at != clk::time_point{} && next->done; }, 30000ms);
                CO_REQUIRE(*lost_at != clk::time_point{});
                CO_REQUIRE(next->granted());
                const double loss_s = std::chrono::duration<double>(*lost_at - t0).count();
                const double grant_s = std::chrono::duration<double>(next->at - t0).count();
                std::printf(
                    "  %s: loss at %+.3f s, other holder at %+.3f s, margin %.3f s (bound %.3f s), %d "
                    "connections to the capped follower since the cut; %s\n",
                    label, loss_s, grant_s, grant_s - loss_s, bound, to_capped.accepted() - capped_before,
                    describe_lease(*a, t0_lease).c_str());
                EXPECT_EQ(*why, errc::lease_expired) << why->message();
                EXPECT_GE(to_capped.accepted() - capped_before, 1)
                    << "the handshake never reached the capped follower";
                co_await eventually([&] { return logged_expiry(e.dir, a->session_id(), t0).has_value(); },
                                    8000ms);
                const auto x = read_leader_expiry(e.dir, a->session_id(), t0, 3, tick_of(e.dir));
                CO_REQUIRE(x.has_value());
                std::printf("  %s: the leader's expiry at +%.3f s before rounding (%s), +%.3f s logged; the "
                            "loss's lead %.3f s\n",
                            label, x->before_rounding, x->exact ? "its last touch + T" : "less a tick",
                            x->logged, x->before_rounding - loss_s);
                EXPECT_TRUE(x->exact) << "the leader logged no touch of the session";
                EXPECT_LT(x->before_rounding, 2.5)
                    << "the leader expired the session by the capped T, 1 s after the revalidation";
                if (with_cap) {
                    EXPECT_GE(grant_s - loss_s, bound - allowance);
                    EXPECT_GE(x->before_rounding - loss_s, bound - expiry_allowance)
                        << "against the leader's expiry before rounding";
                } else {
                    EXPECT_LT(grant_s, loss_s) << "without the cap the waiter is granted first: if not, the "
                                                  "fault was not injected";
                }
                to_capped.mute_replies(false);
                to_full.blackhole(false);
                co_await g.async_release(use_awaitable);
                co_await next->guard.async_release(use_awaitable);
                a.reset();
                co_await expect_no_leftovers(*b, path);
            }
        },
        150s);
    e.thaw_all();
    e.set_max_session_timeout(capped, 0);
    if (::testing::Test::HasFailure()) e.print_logs();
}

TEST_F(QuorumLease, ASuspendReportsTheLossAtOnceOnResume) {
    // A suspend stops CLOCK_MONOTONIC (Asio's steady timers) but not CLOCK_BOOTTIME (the lease's
    // clock, and the servers'). Simulated through the session's platform (moved_clock_platform.hpp),
    // right after a heartbeat: the lease clock jumps T, the lease's timers (on CLOCK_BOOTTIME,
    // re-armed as the kernel does on a resume) fire at once. Checked: with timers that do not see the jump (steady
    // timers, as before this test; emulated by not re-arming them), the loss came only with the
    // next heartbeat's reply, 180 ms later in 3 of 3 runs, and this test failed.
    const auto T = 2000ms;
    run_test([&]() -> awaitable<void> {
        auto o = options();
        o.session_timeout = T;
        auto plat = std::make_shared<zklock_test::moved_clock_platform>();
        auto a = std::make_unique<zklock::session>(co_await asio::this_coro::executor, o, plat);
        co_await a->async_connect(use_awaitable);
        auto path = lock_path("suspend");
        zklock::mutex m(*a, path);
        auto g = co_await m.async_acquire(use_awaitable);
        auto lost_at = std::make_shared<clk::time_point>();
        auto why = std::make_shared<zklock::error_code>();
        g.async_wait_lost([lost_at, why](zklock::error_code ec) {
            *why = ec;
            *lost_at = clk::now();
        });
        auto n = a->statistics().heartbeats;
        co_await eventually([&] { return a->statistics().heartbeats > n; }, 3000ms);
        co_await sleep_for(20ms); // (its reply is in: the next heartbeat is ~180 ms away)
        const auto t0 = clk::now();
        plat->suspend(T);
        EXPECT_TRUE(g.is_lost()) << "is_lost reads the lease's clock itself";
        co_await eventually([&] { return *lost_at != clk::time_point{}; }, 3000ms);
        CO_REQUIRE(*lost_at != clk::time_point{});
        const double after = std::chrono::duration<double>(*lost_at - t0).count();
        std::printf("  the loss signal came %.1f ms after the simulated resume\n", after * 1000);
        EXPECT_EQ(*why, errc::lease_expired) << why->message();
        EXPECT_LT(after, 0.05) << "the lease's timer did not see the suspend";
        co_await g.async_release(use_awaitable);
        // the session lives on and is vouched for again
        auto g2 = co_await m.async_acquire(use_awaitable);
        co_await sleep_for(500ms);
        EXPECT_FALSE(g2.is_lost()) << g2.loss_reason().message();
        co_await g2.async_release(use_awaitable);
    });
}

TEST_F(QuorumLease, AHeartbeatFindsADeletedNodeWithoutAWatch) {
    // The heartbeat checks every held node: a node deleted by someone else is reported within
    // one heartbeat (T/10) even when the holder never asked for the node watch, and the session's
    // other lock goes on (its lease renewed by the heartbeat sent again at once without it).
    const auto T = 4000ms; // heartbeat every 400 ms
    run_test([&]() -> awaitable<void> {
        auto o = options();
        o.session_timeout = T;
        auto a = co_await connect(o);
        auto b = co_await connect(o);
        auto path = lock_path("deleted");
        auto other = lock_path("kept");
        zklock::mutex m(*a, path), m2(*a, other);
        auto g = co_await m.async_acquire(use_awaitable);
        auto g2 = co_await m2.async_acquire(use_awaitable);
        auto n = a->statistics().heartbeats;
        co_await eventually([&] { return a->statistics().heartbeats >= n + 3; }, 5000ms);
        auto children = co_await zklock::async_get_children(*b, path, use_awaitable);
        CO_REQUIRE(children.size() == 1);
        n = a->statistics().heartbeats;
        co_await zklock::async_delete_node(*b, path + "/" + children[0], -1, use_awaitable);
        const auto t0 = clk::now();
        co_await eventually([&] { return g.is_lost(); }, 3000ms);
        const double after = std::chrono::duration<double>(clk::now() - t0).count();
        std::printf("  the deleted node was found lost %.0f ms after the delete\n", after * 1000);
        EXPECT_TRUE(g.is_lost());
        EXPECT_EQ(g.loss_reason(), errc::lock_node_deleted) << g.loss_reason().message();
        // found by the first heartbeat sent after the delete (the watch was never armed)
        EXPECT_LE(a->statistics().heartbeats, n + 3) << "not found by the first heartbeat after the delete";
        n = a->statistics().heartbeats;
        co_await eventually([&] { return a->statistics().heartbeats >= n + 5; }, 5000ms);
        EXPECT_FALSE(g2.is_lost()) << g2.loss_reason().message();
        co_await g.async_release(use_awaitable);
        co_await g2.async_release(use_awaitable);
    });
}
