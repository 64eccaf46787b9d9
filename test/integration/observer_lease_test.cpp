// The lease when the client's server is an observer that syncs through a follower's
// ObserverMaster: the session's touches reach the leader over two relays (observer -> follower
// -> leader), premise 2 of docs/lease.md (tickTime <= T/4). Each case freezes one of the two
// relays (SIGSTOP) right after a grant or while holding, and measures the loss signal's lead over
// the leader's own expiry of the session (its "Expiring session" log line).
//
// The ensemble is this test's own (3 voting servers and an observer, zk.sh --observers), started
// and stopped here: the suite's ensembles have no observer, and an observer in them would change
// what their tests measure.
#include <zklock/mutex.hpp>

#include "common.hpp"
#include "ensemble.hpp"
#include "loss_race.hpp"
#include "relayed_ensemble.hpp" // (env_or_empty)

#include <cstdio>
#include <cstdlib>

using namespace zt;
using zklock::errc;
using zklock::detail::session_lease;
using clk = std::chrono::steady_clock;

// (clang 14 defines no __SANITIZE_THREAD__: __has_feature tells)
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define ZT_OBSERVER_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer) || __has_feature(address_sanitizer)
#define ZT_OBSERVER_SANITIZED 1
#endif
#endif

namespace {

/// zk.sh start --servers 3 --observers 1 in a temp dir of its own; stopped on destruction.
struct observer_ensemble {
    static constexpr int observer = 4;
    std::string dir, scripts = env_or_empty("ZKLOCK_SCRIPTS");
    int leader = 0, master = 0; ///< the leader, and the follower the observer syncs through

    /// Starts it and points the observer at a follower; false (with a failure) if that fails.
    bool start(int tick_ms) {
        if (scripts.empty()) {
            ADD_FAILURE() << "ZKLOCK_SCRIPTS not set: run the suite with scripts/test.sh";
            return false;
        }
        const std::string cmd =
            scripts + "/zk.sh start --servers 3 --observers 1 --tick " + std::to_string(tick_ms);
        FILE* p = ::popen(cmd.c_str(), "r");
        if (!p) return false;
        char buf[512];
        while (std::fgets(buf, sizeof buf, p)) {
            std::string line(buf);
            if (line.rfind("ZK_DIR=", 0) == 0) dir = line.substr(7, line.find_last_not_of("\r\n") - 6);
        }
        if (::pclose(p) != 0 || dir.empty()) {
            ADD_FAILURE() << cmd << " failed";
            return false;
        }
        for (int i = 1; i <= 3; ++i) {
            const auto mode = server_mode(dir, i);
            if (mode == "leader") leader = i;
            if (mode == "follower" && master == 0) master = i;
        }
        if (leader == 0 || master == 0) {
            ADD_FAILURE() << "no leader and follower in " << dir;
            return false;
        }
        return sh("observe", observer, master);
    }
    ~observer_ensemble() {
        if (!dir.empty()) (void)std::system((scripts + "/zk.sh stop " + dir + " >/dev/null 2>&1").c_str());
    }
    std::string connect_to(int i) const { return "127.0.0.1:" + std::to_string(server_port(dir, i)); }
    bool sh(const std::string& what, int i, int j = 0) const {
        std::string cmd = scripts + "/zk.sh " + what + " " + dir + " " + std::to_string(i);
        if (j) cmd += " " + std::to_string(j);
        const int rc = std::system((cmd + " >/dev/null").c_str());
        EXPECT_EQ(rc, 0) << cmd;
        return rc == 0;
    }
    void print_logs() const {
        for (int i = 1; i <= 4; ++i) {
            std::fprintf(stderr, "  --- server %d\n", i);
            (void)std::system(("tail -n 30 " + dir + "/server" + std::to_string(i) + ".log >&2").c_str());
        }
    }
};

} // namespace

class ObserverLease : public zt::zk_test {};

TEST_F(ObserverLease, TwoRelaysWithinTheTickPremiseLeaveTheMarginBeforeTheLeadersExpiry) {
#if defined(ZT_OBSERVER_SANITIZED)
    // (four more JVMs and 30 s of timing; the lease's code paths are the QuorumLease tests',
    // which the sanitizer suites run: this one measures, and the release suite runs it)
    GTEST_SKIP() << "measured in the release suite";
#endif
    // r = 1/4: tickTime 500 ms, T = 2 s. Four cases: a waiter granted after a quiet wait longer
    // than T (its evidence is its touches alone), and a holder between heartbeats; each with the
    // observer frozen, and with its master (the follower) frozen. The model
    // (lease_model_test.cpp, "observer") explores the relays' phases and finds >= 0.36 T here;
    // a real ensemble cannot be steered to its worst phase, so this test checks the phases it
    // meets against the stated bound, (0.5875 - f) T. It was not run on the rule before
    // session 35: no phase a real ensemble reaches tells them apart here (the model's case does).
    observer_ensemble e;
    ASSERT_TRUE(e.start(500));
    const auto T = 2000ms;
    const double f = zklock::loss_policy::default_lease_fraction;
    const double bound = session_lease::guaranteed_margin(f) * 2.0;
    const double allowance = 0.15;
    std::printf("  leader %d, observer %d syncs through follower %d\n", e.leader, e.observer, e.master);
    run_test(
        [&]() -> awaitable<void> {
            auto oc = options(e.connect_to(e.leader));
            oc.session_timeout = 4000ms;
            auto c = co_await connect_session(oc); // the other holder
            int k = 0;
            for (const bool waiter : {true, false})
                for (const int frozen : {e.observer, e.master}) {
                    ++k;
                    const char* who = frozen == e.observer ? "observer" : "its master";
                    auto path = unique_path("observer" + std::to_string(k));
                    auto oa = options(e.connect_to(e.observer));
                    oa.session_timeout = T;
                    oa.renew_after_expiry = false;
                    auto a = co_await connect_session(oa);
                    CO_REQUIRE(a->negotiated_timeout() == T);
                    double loss_s = 0, grant_s = 0;
                    clk::time_point t0;
                    bool lost = false, granted = false;
                    zklock::error_code why;
                    zklock::guard held, next;
                    if (waiter) {
                        zklock::mutex mc(*c, path), ma(*a, path);
                        auto first = co_await mc.async_acquire(use_awaitable);
                        auto wa = in_background([&](auto h) { ma.async_acquire_for(20s, h); });
                        co_await wait_for_children(*c, path, 2);
                        co_await sleep_for(std::chrono::milliseconds(2200 + 90 * k)); // > T, touches only
                        co_await first.async_release(use_awaitable);
                        co_await eventually([&] { return wa->done; }, 5000ms);
                        CO_REQUIRE(wa->granted());
                        e.sh("pause", frozen); // at once after the grant
                        t0 = clk::now();
                        auto st = std::make_shared<std::pair<clk::time_point, zklock::error_code>>();
                        wa->guard.async_wait_lost([st](zklock::error_code ec) { *st = {clk::now(), ec}; });
                        auto nb = in_background([&](auto h) { mc.async_acquire_for(20s, h); });
                        co_await eventually([&] { return st->first != clk::time_point{} && nb->done; },
                                            15000ms);
                        lost = st->first != clk::time_point{};
                        granted = nb->granted();
                        why = st->second;
                        loss_s = std::chrono::duration<double>(st->first - t0).count();
                        grant_s = std::chrono::duration<double>(nb->at - t0).count();
                        held = std::move(wa->guard);
                        next = std::move(nb->guard);
                    } else {
                        auto r = co_await race_loss_against_grant(
                            *a, *c, path, std::chrono::milliseconds(70 * k), [&] { e.sh("pause", frozen); },
                            {}, 15000ms);
                        t0 = r.fault_at;
                        lost = r.lost, granted = r.granted, why = r.why;
                        loss_s = r.loss_s, grant_s = r.grant_s;
                        held = std::move(r.holder);
                        next = std::move(r.next);
                    }
                    CO_REQUIRE(lost);
                    CO_REQUIRE(granted);
                    EXPECT_EQ(why, errc::lease_expired) << why.message();
                    std::printf("  %s, %s frozen: loss at +%.3f s, other holder at +%.3f s (bound %.3f s)\n",
                                waiter ? "a waiter granted after a quiet wait" : "a holder", who, loss_s,
                                grant_s, bound);
                    EXPECT_GE(grant_s - loss_s, bound - allowance);
                    co_await expect_lead_over_logged_expiry(e.dir, a->session_id(), t0, loss_s, bound,
                                                            expiry_allowance, std::string(who) + " frozen",
                                                            4);
                    e.sh("resume", frozen);
                    co_await held.async_release(use_awaitable); // lost: completes at once
                    co_await next.async_release(use_awaitable);
                    a.reset();
                    e.sh("wait", frozen);
                    e.sh("wait", e.observer); // (it syncs again with its master)
                    co_await expect_no_leftovers(*c, path);
                }
        },
        180s);
    if (::testing::Test::HasFailure()) e.print_logs();
}
