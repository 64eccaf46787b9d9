// Leader election (zklock::election) against a real ZooKeeper: campaign order, proclaim, resign,
// async_leader and async_observe, dialects, bad input, and the faults of the double-leader
// reports of other libraries: an expiry while disconnected and the reconnect after it, two
// reconnects in quick succession, a paused leader, and (on the 3-server ensemble) a leader switch.
#include <zklock/election.hpp>
#include <zklock/mutex.hpp>
#include <zklock/znode.hpp>

#include "common.hpp"
#include "ensemble.hpp"
#include "proxy.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/detached.hpp>

#include <cstdlib>
#include <thread>

using namespace zt;
using zklock::errc;
using zklock::session_state;

namespace {

using clock_type = std::chrono::steady_clock;

/// A campaign left running: when and how it completed.
struct background_campaign {
    bool done = false;
    zklock::error_code ec;
    zklock::leadership lead;
    clock_type::time_point at{};
};

std::shared_ptr<background_campaign> campaign_in_background(zklock::election& e, std::string value,
                                                            std::chrono::milliseconds timeout = 60000ms) {
    auto b = std::make_shared<background_campaign>();
    e.async_campaign_for(std::move(value), timeout, [b](zklock::error_code ec, zklock::leadership l) {
        b->ec = ec;
        b->lead = std::move(l);
        b->at = clock_type::now();
        b->done = true;
    });
    return b;
}

/// When a leadership's loss signal fired (time_point::max() until it does; a resignation is not a
/// loss).
struct loss_record {
    bool fired = false;
    zklock::error_code ec;
    clock_type::time_point at = clock_type::time_point::max();
};
std::shared_ptr<loss_record> record_loss(zklock::leadership& l) {
    auto r = std::make_shared<loss_record>();
    l.async_wait_lost([r](zklock::error_code ec) {
        if (ec == errc::lock_released) return; // resigned: not a loss
        r->ec = ec;
        r->at = clock_type::now();
        r->fired = true;
    });
    return r;
}

std::string env_or_empty(const char* name) {
    const char* v = std::getenv(name);
    return v ? v : "";
}

} // namespace

using Election = zt::zk_test;

TEST_F(Election, CandidatesLeadInTurnAndObserversFollowEveryChange) {
    run_test([&]() -> awaitable<void> {
        auto path = lock_path("election");
        auto a = co_await connect();
        auto b = co_await connect();
        auto o = co_await connect(); // an observer's session: it takes no part
        zklock::election ea(*a, path), eb(*b, path), eo(*o, path);

        // No candidate yet: no leader (the path does not even exist).
        auto none = co_await eo.async_leader(use_awaitable);
        EXPECT_FALSE(none.has_value());

        // An observer that saw "no leader" waits for the first candidate.
        std::optional<zklock::leader_info> seen;
        bool observed = false;
        eo.async_observe(std::nullopt, [&](zklock::error_code ec, std::optional<zklock::leader_info> l) {
            EXPECT_FALSE(ec) << ec.message();
            seen = std::move(l);
            observed = true;
        });
        co_await sleep_for(200ms);
        EXPECT_FALSE(observed) << "completed without a change";

        auto la = co_await ea.async_campaign("host-a:8080", use_awaitable);
        CO_REQUIRE(la.owns_lock());
        co_await eventually([&] { return observed; });
        CO_REQUIRE(observed && seen.has_value());
        EXPECT_EQ(seen->value, "host-a:8080");
        EXPECT_EQ(seen->node_path, la.node_path());
        EXPECT_EQ(seen->fencing_token, la.fencing_token());
        EXPECT_EQ(seen->session_id, a->session_id());

        // B waits behind A; a third candidate on B's session too.
        auto wb = campaign_in_background(eb, "host-b:8080");
        auto wc = campaign_in_background(eb, "host-c:8080");
        co_await wait_for_children(*o, path, 3);
        EXPECT_FALSE(wb->done || wc->done);
        auto list = co_await eo.async_list_contenders(use_awaitable);
        CO_REQUIRE(list.size() == 3u);
        EXPECT_TRUE(list[0].holder);
        EXPECT_EQ(list[0].data, "host-a:8080");
        EXPECT_EQ(list[1].data, "host-b:8080");
        EXPECT_FALSE(list[1].holder);

        // A try and a timed campaign while A leads: busy, timed out, and no node left of either.
        auto [busy, none2] = co_await eb.async_try_campaign("x", boost::asio::as_tuple(use_awaitable));
        EXPECT_EQ(busy, errc::lock_busy) << busy.message();
        EXPECT_FALSE(none2.owns_lock());
        auto [late, none3] = co_await eb.async_campaign_for("y", 200ms, boost::asio::as_tuple(use_awaitable));
        EXPECT_EQ(late, errc::acquire_timeout) << late.message();
        EXPECT_EQ((co_await children_of(*o, path)).size(), 3u);

        // A proclaims a new value: the observer that saw the old one wakes with the new one.
        observed = false;
        auto last = seen;
        eo.async_observe(last, [&](zklock::error_code ec, std::optional<zklock::leader_info> l) {
            EXPECT_FALSE(ec) << ec.message();
            seen = std::move(l);
            observed = true;
        });
        co_await sleep_for(100ms);
        EXPECT_FALSE(observed);
        co_await la.async_proclaim("host-a:9090", use_awaitable);
        co_await eventually([&] { return observed; });
        CO_REQUIRE(observed && seen.has_value());
        EXPECT_EQ(seen->value, "host-a:9090");
        EXPECT_EQ(seen->node_path, la.node_path());
        EXPECT_EQ((co_await eo.async_leader(use_awaitable))->value, "host-a:9090");
        EXPECT_FALSE(la.is_lost()) << "a proclaim is a change of the node's data, not a loss";

        // A resigns: B leads, with a larger fencing token; the observer follows.
        observed = false;
        last = seen;
        eo.async_observe(last, [&](zklock::error_code ec, std::optional<zklock::leader_info> l) {
            EXPECT_FALSE(ec) << ec.message();
            seen = std::move(l);
            observed = true;
        });
        const auto token_a = la.fencing_token();
        co_await la.async_resign(use_awaitable);
        co_await eventually([&] { return wb->done && observed; });
        CO_REQUIRE(wb->done && !wb->ec);
        EXPECT_GT(wb->lead.fencing_token(), token_a);
        CO_REQUIRE(seen.has_value());
        EXPECT_EQ(seen->value, "host-b:8080");
        EXPECT_EQ(seen->fencing_token, wb->lead.fencing_token());
        EXPECT_FALSE(wc->done);

        // A proclaim of a resigned leadership: not held, nothing written.
        auto gone = co_await la.async_proclaim("stale", boost::asio::as_tuple(use_awaitable));
        EXPECT_EQ(std::get<0>(gone), errc::not_held) << std::get<0>(gone).message();

        co_await wb->lead.async_resign(use_awaitable);
        co_await eventually([&] { return wc->done; });
        CO_REQUIRE(wc->done && !wc->ec);
        EXPECT_EQ((co_await eo.async_leader(use_awaitable))->value, "host-c:8080");
        co_await wc->lead.async_resign(use_awaitable);
        EXPECT_FALSE((co_await eo.async_leader(use_awaitable)).has_value());
        co_await expect_no_leftovers(*o, path);
    });
}

TEST_F(Election, ObserveWatchesTheLeadersNodeOnlyAndIsCancellable) {
    run_test([&]() -> awaitable<void> {
        auto path = lock_path("election");
        auto a = co_await connect();
        zklock::election e(*a, path);
        auto l = co_await e.async_campaign("v", use_awaitable);
        auto now = co_await e.async_leader(use_awaitable);
        CO_REQUIRE(now.has_value());
        boost::asio::cancellation_signal cancel;
        bool done = false;
        zklock::error_code got;
        e.async_observe(now,
                        boost::asio::bind_cancellation_slot(
                            cancel.slot(), [&](zklock::error_code ec, std::optional<zklock::leader_info>) {
                                got = ec;
                                done = true;
                            }));
        co_await sleep_for(100ms);
        EXPECT_FALSE(done);
        // Herd-free: the observer watches the leader's node, not the path's children. (`wchp`: the
        // watched paths, each followed by its sessions on the next lines.)
        const auto watched = four_letter(first_port(zk_connect()), "wchp");
        EXPECT_NE(watched.find(l.node_path() + "\n"), std::string::npos)
            << "the observer does not watch the leader's node:\n"
            << watched;
        EXPECT_EQ(watched.find(path + "\n"), std::string::npos) << "the observer watches the children:\n"
                                                                << watched;
        cancel.emit(boost::asio::cancellation_type::terminal);
        co_await eventually([&] { return done; });
        EXPECT_TRUE(done);
        EXPECT_EQ(got, boost::asio::error::operation_aborted) << got.message();
        // A campaign cancelled while it waits leaves no node.
        auto b = co_await connect();
        zklock::election eb(*b, path);
        boost::asio::cancellation_signal cancel_b;
        bool b_done = false;
        eb.async_campaign("w", boost::asio::bind_cancellation_slot(
                                   cancel_b.slot(), [&](zklock::error_code ec, zklock::leadership x) {
                                       got = ec;
                                       EXPECT_FALSE(x.owns_lock());
                                       b_done = true;
                                   }));
        co_await wait_for_children(*a, path, 2);
        cancel_b.emit(boost::asio::cancellation_type::terminal);
        co_await eventually([&] { return b_done; });
        EXPECT_EQ(got, boost::asio::error::operation_aborted) << got.message();
        co_await wait_for_children(*a, path, 1);
        co_await l.async_resign(use_awaitable);
        co_await expect_no_leftovers(*a, path);
    });
}

TEST_F(Election, BadInputGetsNamedErrorsAndEmptyValuesStayEmpty) {
    run_test([&]() -> awaitable<void> {
        auto path = lock_path("election");
        auto a = co_await connect();
        zklock::election bad(*a, "no-slash");
        auto [e1, l1] = co_await bad.async_campaign("v", boost::asio::as_tuple(use_awaitable));
        EXPECT_EQ(e1, errc::path_not_absolute) << e1.message();
        auto [e2, l2] = co_await bad.async_leader(boost::asio::as_tuple(use_awaitable));
        EXPECT_EQ(e2, errc::path_not_absolute) << e2.message();
        zklock::election e(*a, path);
        auto [e3, l3] = co_await e.async_campaign(std::string(zklock::max_node_data + 1, 'x'),
                                                  boost::asio::as_tuple(use_awaitable));
        EXPECT_EQ(e3, errc::data_too_large) << e3.message();
        zklock::leadership empty;
        auto [e4] = co_await empty.async_proclaim("v", boost::asio::as_tuple(use_awaitable));
        EXPECT_EQ(e4, errc::not_held) << e4.message();
        // An empty value is published as it is (not replaced by a holder description).
        auto l = co_await e.async_campaign("", use_awaitable);
        auto who = co_await e.async_leader(use_awaitable);
        CO_REQUIRE(who.has_value());
        EXPECT_EQ(who->value, "");
        auto [e5] = co_await l.async_proclaim(std::string(zklock::max_node_data + 1, 'x'),
                                              boost::asio::as_tuple(use_awaitable));
        EXPECT_EQ(e5, errc::data_too_large) << e5.message();
        co_await l.async_resign(use_awaitable);
        co_await expect_no_leftovers(*a, path);
    });
}

TEST_F(Election, APathOfAnotherDialectIsRefusedAndLatchNamesExcludeLocks) {
    run_test([&]() -> awaitable<void> {
        auto path = lock_path("election");
        auto a = co_await connect();
        auto b = co_await connect();
        // A LeaderLatch-style candidate leads; a LeaderSelector-style campaign refuses the path.
        zklock::election_options latch;
        latch.dialect = zklock::election_dialect::curator_latch;
        zklock::election el(*a, path, latch), es(*b, path);
        auto l = co_await el.async_campaign("latch", use_awaitable);
        EXPECT_NE(l.node_path().find("-latch-"), std::string::npos) << l.node_path();
        auto [ec, none] = co_await es.async_campaign("selector", boost::asio::as_tuple(use_awaitable));
        EXPECT_EQ(ec, errc::election_dialect_mixed) << ec.message();
        zklock::election_options kz;
        kz.dialect = zklock::election_dialect::kazoo;
        zklock::election ek(*b, path, kz);
        auto [ec2, none2] = co_await ek.async_campaign("kazoo", boost::asio::as_tuple(use_awaitable));
        EXPECT_EQ(ec2, errc::election_dialect_mixed) << ec2.message();
        EXPECT_EQ((co_await children_of(*a, path)).size(), 1u) << "a refused campaign left its node";
        // zklock's own locks count latch nodes: a mutex on the path waits for the latch leader.
        zklock::mutex m(*b, path);
        auto [busy, g] = co_await m.async_try_acquire(boost::asio::as_tuple(use_awaitable));
        EXPECT_EQ(busy, errc::lock_busy) << busy.message();
        // Observers see a leader of any naming.
        auto who = co_await es.async_leader(use_awaitable);
        CO_REQUIRE(who.has_value());
        EXPECT_EQ(who->value, "latch");
        // A second latch candidate waits its turn.
        zklock::election el2(*b, path, latch);
        auto w = campaign_in_background(el2, "latch-2");
        co_await wait_for_children(*a, path, 2);
        EXPECT_FALSE(w->done);
        co_await l.async_resign(use_awaitable);
        co_await eventually([&] { return w->done; });
        CO_REQUIRE(w->done && !w->ec);
        EXPECT_EQ((co_await es.async_leader(use_awaitable))->value, "latch-2");
        co_await w->lead.async_resign(use_awaitable);
        co_await expect_no_leftovers(*a, path);
    });
}

// Curator's double-leader reports (CURATOR-653, -696): a leader's session expires while it is
// disconnected, and the reconnect that follows. Here the leader's loss is told on its own clock
// before the other candidate leads, and after the reconnect its writes fail.
TEST_F(Election, ExpiryWhileDisconnectedToldBeforeTheNextLeaderAndItsWritesFail) {
    run_test([&]() -> awaitable<void> {
        tcp_proxy proxy(first_port(zk_connect()));
        auto path = lock_path("election");
        auto data = lock_path("data");
        auto oa = through(proxy);
        oa.session_timeout = 2000ms; // the default lease policy
        auto a = co_await connect(oa);
        auto b = co_await connect();
        zklock::election ea(*a, path), eb(*b, path);
        auto la = co_await ea.async_campaign("a", use_awaitable);
        auto lost = record_loss(la);
        auto wb = campaign_in_background(eb, "b");
        co_await wait_for_children(*b, path, 2);
        proxy.blackhole(true); // A hears nothing; the server expires A's session after ~2 s
        co_await eventually([&] { return wb->done; }, 15000ms);
        CO_REQUIRE(wb->done && !wb->ec);
        EXPECT_TRUE(lost->fired) << "B leads and A was not told";
        EXPECT_LT(lost->at, wb->at) << "A was told after B led";
        EXPECT_TRUE(la.is_lost());
        // A's writes fail while partitioned (known lost: nothing sent) ...
        auto [p1] = co_await la.async_proclaim("a-stale", boost::asio::as_tuple(use_awaitable));
        EXPECT_EQ(p1, errc::lock_lost) << p1.message();
        // ... and after the reconnect, which finds the session expired.
        proxy.blackhole(false);
        co_await wait_state(*a, session_state::connected, 10000ms);
        auto [p2] = co_await la.async_proclaim("a-stale", boost::asio::as_tuple(use_awaitable));
        EXPECT_EQ(p2, errc::lock_lost) << p2.message();
        auto [c2, r2] = co_await la.async_commit(zklock::transaction().create(data, "a-stale"),
                                                 boost::asio::as_tuple(use_awaitable));
        EXPECT_EQ(c2, errc::lock_lost) << c2.message();
        auto who = co_await ea.async_leader(use_awaitable);
        CO_REQUIRE(who.has_value());
        EXPECT_EQ(who->value, "b");
        // A campaigns again on its new session: it waits behind B.
        auto wa = campaign_in_background(ea, "a-again");
        co_await wait_for_children(*b, path, 2);
        EXPECT_FALSE(wa->done) << "two leaders";
        co_await wb->lead.async_resign(use_awaitable);
        co_await eventually([&] { return wa->done; });
        CO_REQUIRE(wa->done && !wa->ec);
        co_await wa->lead.async_resign(use_awaitable);
        co_await la.async_resign(use_awaitable);
        auto left = co_await children_of(*b, data);
        EXPECT_TRUE(left.empty());
        co_await expect_no_leftovers(*b, path);
        auto [gone, st] = co_await zklock::async_get_data(*b, data, boost::asio::as_tuple(use_awaitable));
        EXPECT_EQ(gone, zklock::zk_errc::no_node) << "a stale leader's write landed";
    });
}

// CURATOR-620, -504/644: two reconnects in quick succession. The leader keeps its session; the
// other candidate must not lead meanwhile, and the leader's writes go on landing.
TEST_F(Election, TwoReconnectsInQuickSuccessionLeaveOneLeader) {
    run_test([&]() -> awaitable<void> {
        tcp_proxy proxy(first_port(zk_connect()));
        auto path = lock_path("election");
        auto oa = through(proxy);
        oa.session_timeout = 4000ms;
        auto a = co_await connect(oa);
        auto b = co_await connect();
        const auto id = a->session_id();
        zklock::election ea(*a, path), eb(*b, path);
        auto la = co_await ea.async_campaign("a", use_awaitable);
        auto lost = record_loss(la);
        auto wb = campaign_in_background(eb, "b");
        co_await wait_for_children(*b, path, 2);
        for (int round = 0; round < 3; ++round) {
            proxy.drop();
            co_await sleep_for(30ms);
            proxy.drop();              // the second while the first reconnect is under way
            co_await sleep_for(300ms); // (both drops seen: the first reconnect can take < 30 ms)
            co_await wait_state(*a, session_state::connected, 5000ms);
            EXPECT_EQ(a->session_id(), id);
            EXPECT_FALSE(wb->done) << "B leads while A's session lives";
            if (lost->fired) { // (the lease may lapse on a slow reconnect: then A must not write)
                EXPECT_LT(lost->at, clock_type::now());
                break;
            }
            auto [p] = co_await la.async_proclaim("a-" + std::to_string(round),
                                                  boost::asio::as_tuple(use_awaitable));
            if (!lost->fired) EXPECT_FALSE(p) << p.message();
        }
        EXPECT_FALSE(wb->done) << "B leads while A's node exists";
        co_await la.async_resign(use_awaitable);
        co_await eventually([&] { return wb->done; });
        CO_REQUIRE(wb->done && !wb->ec);
        if (lost->fired) EXPECT_LT(lost->at, wb->at);
        co_await wb->lead.async_resign(use_awaitable);
        co_await expect_no_leftovers(*b, path);
    });
}

// Curator TN10: "with long GC pauses there is always the possibility of two leaders". A leader
// whose process stops (here: its io_context's only thread blocks, as in a GC pause or SIGSTOP)
// past its session: the other candidate leads; when the paused one resumes, its proclaim and its
// guarded commit, sent before anything else runs, fail and write nothing.
TEST_F(Election, APausedLeaderResumesAfterItsSessionAndWritesNothing) {
    run_test([&]() -> awaitable<void> {
        auto path = lock_path("election");
        auto data = lock_path("data");
        auto b = co_await connect();
        zklock::election eb(*b, path);

        asio::io_context io_a;
        struct outcome {
            std::atomic<bool> leading{false}, paused{false}, resumed{false}, finished{false};
            zklock::error_code proclaim, commit;
            std::int64_t token = 0;
        };
        auto out = std::make_shared<outcome>();
        auto oa = options();
        oa.session_timeout = 2000ms;
        asio::co_spawn(
            io_a,
            [out, oa, path, data]() -> awaitable<void> {
                auto a = co_await connect(oa);
                zklock::election ea(*a, path);
                auto la = co_await ea.async_campaign("a", use_awaitable);
                out->token = la.fencing_token();
                // The worst phase: just after a write that renewed the lease.
                co_await la.async_proclaim("a-fresh", use_awaitable);
                out->leading = true;
                out->paused = true;
                std::this_thread::sleep_for(6000ms); // the pause: nothing of A runs
                out->resumed = true;
                auto [p] = co_await la.async_proclaim("a-stale", boost::asio::as_tuple(use_awaitable));
                out->proclaim = p;
                auto [c, r] = co_await la.async_commit(zklock::transaction().create(data, "a-stale"),
                                                       boost::asio::as_tuple(use_awaitable));
                out->commit = c;
                co_await a->async_close(use_awaitable);
                out->finished = true;
            },
            boost::asio::detached);
        std::thread ta([&io_a] { io_a.run_for(30s); });
        co_await eventually([&] { return out->paused.load(); }, 10000ms);
        CO_REQUIRE(out->paused);
        auto lb = co_await eb.async_campaign_for("b", 15000ms, use_awaitable);
        const bool a_resumed_first = out->resumed.load();
        EXPECT_FALSE(a_resumed_first) << "B led only after A resumed: the pause was not long enough to test";
        EXPECT_GT(lb.fencing_token(), out->token);
        co_await eventually([&] { return out->finished.load(); }, 15000ms);
        EXPECT_TRUE(out->finished);
        EXPECT_EQ(out->proclaim, errc::lock_lost) << out->proclaim.message();
        EXPECT_EQ(out->commit, errc::lock_lost) << out->commit.message();
        auto who = co_await eb.async_leader(use_awaitable);
        CO_REQUIRE(who.has_value());
        EXPECT_EQ(who->value, "b");
        auto [gone, st] = co_await zklock::async_get_data(*b, data, boost::asio::as_tuple(use_awaitable));
        EXPECT_EQ(gone, zklock::zk_errc::no_node) << "a stale leader's write landed";
        co_await lb.async_resign(use_awaitable);
        io_a.stop();
        ta.join();
        co_await expect_no_leftovers(*b, path);
    });
}

// CURATOR-653/696 on an ensemble: the ensemble's leader server dies while a candidate leads.
// Whatever the failover takes, the other candidate leads only after the first was told.
TEST_F(Election, ALeaderSwitchOfTheEnsembleLeavesOneLeader) {
    const std::string connect_s = env_or_empty("ZK_ENSEMBLE_CONNECT");
    const std::string dir = env_or_empty("ZK_ENSEMBLE_DIR");
    const std::string scripts = env_or_empty("ZKLOCK_SCRIPTS");
    if (connect_s.empty() || dir.empty() || scripts.empty())
        GTEST_SKIP() << "no ensemble (ZK_ENSEMBLE_CONNECT, ZK_ENSEMBLE_DIR, ZKLOCK_SCRIPTS: scripts/test.sh)";
    int killed = 0;
    run_test(
        [&]() -> awaitable<void> {
            auto path = unique_path("election");
            auto o = options(connect_s);
            // The default lease policy at T = 2 s: a failover longer than about 0.3 T (most are) makes
            // A's lease lapse, so A is told; its node is kept (suspended), and A regains its
            // leadership once a committed check finds it: B then leads only after A resigns (or,
            // had A's session expired, with the expiry). A shorter failover leaves A leading.
            o.session_timeout = 2000ms;
            auto a = co_await connect_session(o);
            auto b = co_await connect_session(o);
            zklock::election ea(*a, path), eb(*b, path);
            auto la = co_await ea.async_campaign("a", use_awaitable);
            auto lost = record_loss(la);
            auto wb = campaign_in_background(eb, "b", 60000ms);
            co_await wait_for_children(*b, path, 2);
            co_await eventually([&] { return ensemble_settled(dir); }, 30000ms);
            for (int i = 1; i <= 3 && !killed; ++i)
                if (server_mode(dir, i) == "leader") killed = i;
            CO_REQUIRE(killed != 0);
            EXPECT_EQ(std::system((scripts + "/zk.sh kill " + dir + " " + std::to_string(killed)).c_str()),
                      0);
            const auto killed_at = clock_type::now();
            auto since_kill = [&](clock_type::time_point t) {
                return t == clock_type::time_point::max()
                           ? std::string("never")
                           : "+" + std::to_string(std::chrono::duration<double>(t - killed_at).count()) +
                                 " s";
            };
            // A new leader within a while; A keeps leading (its session lives) or is told first.
            co_await eventually(
                [&] {
                    for (int i = 1; i <= 3; ++i)
                        if (i != killed && server_mode(dir, i) == "leader") return true;
                    return false;
                },
                30000ms);
            const auto new_leader_at = clock_type::now();
            co_await eventually(
                [&] {
                    return a->state() == session_state::connected && b->state() == session_state::connected;
                },
                30000ms);
            co_await sleep_for(4000ms); // 2 T after: B may lead only if A was told
            bool a_regained = false;
            if (wb->done) {
                EXPECT_TRUE(lost->fired) << "B leads and A was never told";
                EXPECT_LT(lost->at, wb->at) << "two leaders";
            } else {
                // A kept leading, or was told (a failover longer than its lease: suspended) and,
                // its session and node having survived, regains its leadership with its token.
                if (lost->fired) {
                    EXPECT_EQ(lost->ec, errc::lease_expired) << lost->ec.message();
                    auto [v] = co_await la.async_wait_verdict(boost::asio::as_tuple(use_awaitable));
                    EXPECT_FALSE(v) << "A's session survived and B does not lead, yet A was not regained: "
                                    << v.message();
                    a_regained = !v;
                    EXPECT_FALSE(la.is_lost());
                }
                auto [p] = co_await la.async_proclaim("a-after", boost::asio::as_tuple(use_awaitable));
                EXPECT_FALSE(p) << p.message();
            }
            const bool b_led_alone = wb->done;
            co_await la.async_resign(use_awaitable);
            co_await eventually([&] { return wb->done; }, 20000ms);
            CO_REQUIRE(wb->done && !wb->ec);
            if (lost->fired) EXPECT_LT(lost->at, wb->at);
            std::printf(
                "server %d (the leader) killed; a new leader: %s; A told of its loss: %s (%s)%s; B led: "
                "%s%s\n",
                killed, since_kill(new_leader_at).c_str(), since_kill(lost->at).c_str(),
                lost->fired ? lost->ec.message().c_str() : "-", a_regained ? ", then regained" : "",
                since_kill(wb->at).c_str(), b_led_alone ? "" : " (after A resigned)");
            co_await wb->lead.async_resign(use_awaitable);
            co_await expect_no_leftovers(*b, path);
        },
        90s);
    if (killed)
        EXPECT_EQ(
            std::system(
                (scripts + "/zk.sh restart " + dir + " " + std::to_string(killed) + " >/dev/null").c_str()),
            0);
}
