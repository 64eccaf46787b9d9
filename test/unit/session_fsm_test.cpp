// The session state machine (src/session/session_fsm.hpp): each event's effects, in order, from
// each state. No server needed; the integration tests drive the same machine through the C client.
#include "session/session_fsm.hpp"

#include <gtest/gtest.h>

#include <vector>

using namespace zklock::detail::session_fsm;
using zklock::session_state;

namespace {
facts at(session_state p, bool auth_confirmed = true, bool probe_needed = false, bool renew = true) {
    return {p, auth_confirmed, probe_needed, renew};
}
std::vector<effect> effects(const transition& t) { return {t.begin(), t.end()}; }
// The position of `e` in `t` (or -1): for effects whose order matters.
// The position of `e` in `t`, for effects whose order matters; a missing effect fails the test
// (so an order check cannot pass by the effect's absence).
int pos(const transition& t, effect e) {
    for (std::size_t i = 0; i < t.size; ++i)
        if (t.list[i] == e) return static_cast<int>(i);
    ADD_FAILURE() << "effect " << static_cast<int>(e) << " missing";
    return -1;
}
constexpr session_state all_states[] = {session_state::disconnected, session_state::connecting,
                                        session_state::connected,    session_state::suspended,
                                        session_state::expired,      session_state::closed};
constexpr event all_events[] = {event::connected,       event::connecting,    event::expired,
                                event::auth_refused,    event::auth_accepted, event::auth_no_verdict,
                                event::renewal_started, event::renewal_failed};
} // namespace

TEST(SessionFsm, NothingComesBackFromClosed) {
    for (auto e : all_events) {
        auto t = step(at(session_state::closed), e);
        EXPECT_EQ(t.size, 0u) << static_cast<int>(e);
        EXPECT_EQ(t.next.phase, session_state::closed);
    }
}

TEST(SessionFsm, AConnectionCompletesTheConnectsOnlyOnceTheCredentialsAreAccepted) {
    auto t = step(at(session_state::connecting), event::connected);
    EXPECT_EQ(t.next.phase, session_state::connected);
    EXPECT_EQ(effects(t), (std::vector<effect>{effect::read_session_info, effect::enter_connected,
                                               effect::cancel_connect_timer, effect::connect_waiters_succeed,
                                               effect::notify_reconnected, effect::run_cleanups,
                                               effect::renew_lease_now, effect::rearm_lease_timer}));
    // Credentials without a verdict yet: connected, but the connects wait, and so does the timer.
    auto u = step(at(session_state::connecting, false), event::connected);
    EXPECT_FALSE(u.has(effect::connect_waiters_succeed));
    EXPECT_FALSE(u.has(effect::cancel_connect_timer));
    EXPECT_TRUE(attempt_in_progress(u.next)) << "the connect timeout must still be able to end it";
    auto v = step(u.next, event::auth_accepted);
    EXPECT_TRUE(v.next.auth_confirmed);
    EXPECT_EQ(effects(v),
              (std::vector<effect>{effect::cancel_connect_timer, effect::connect_waiters_succeed}));
    EXPECT_FALSE(attempt_in_progress(v.next));
}

TEST(SessionFsm, AReconnectIsCountedAndRenewsTheLeaseAfterTheStateChanges) {
    auto t = step(at(session_state::suspended), event::connected);
    EXPECT_TRUE(t.has(effect::count_reconnect));
    EXPECT_LT(pos(t, effect::read_session_info), pos(t, effect::rearm_lease_timer))
        << "the lease needs the new T";
    EXPECT_LT(pos(t, effect::enter_connected), pos(t, effect::notify_reconnected));
    EXPECT_LT(pos(t, effect::notify_reconnected), pos(t, effect::renew_lease_now));
    EXPECT_FALSE(step(at(session_state::connecting), event::connected).has(effect::count_reconnect));
}

TEST(SessionFsm, ADroppedConnectionSuspendsOnlyAConnectedSession) {
    auto t = step(at(session_state::connected), event::connecting);
    EXPECT_EQ(t.next.phase, session_state::suspended);
    EXPECT_EQ(effects(t), (std::vector<effect>{effect::enter_suspended, effect::notify_suspended}));
    for (auto p : {session_state::disconnected, session_state::connecting, session_state::suspended,
                   session_state::expired})
        EXPECT_EQ(step(at(p), event::connecting).size, 0u) << zklock::to_string(p);
}

TEST(SessionFsm, AnExpiryEndsEveryLockThenRenewsTheSession) {
    auto t = step(at(session_state::suspended), event::expired);
    EXPECT_EQ(t.failure, zklock::errc::session_expired);
    EXPECT_EQ(effects(t),
              (std::vector<effect>{effect::count_expiry, effect::enter_expired, effect::record_end_reason,
                                   effect::notify_ended, effect::fire_lapse_waiters, effect::clear_watches,
                                   effect::finish_cleanups, effect::drop_handle, effect::start_new_handle}));
    auto r = step(t.next, event::renewal_started);
    EXPECT_EQ(r.next.phase, session_state::connecting);
    EXPECT_EQ(effects(r), (std::vector<effect>{effect::enter_connecting, effect::arm_connect_timer}));
    // The new handle could not be made: the connects fail, nothing changes by itself any more.
    auto f = step(t.next, event::renewal_failed);
    EXPECT_EQ(f.next.phase, session_state::disconnected);
    EXPECT_EQ(f.failure, zklock::errc::session_expired);
    EXPECT_EQ(effects(f), (std::vector<effect>{effect::enter_disconnected, effect::connect_waiters_fail,
                                               effect::notify_state_changed}));
}

TEST(SessionFsm, AnExpiryWithoutRenewalEndsDisconnected) {
    auto t = step(at(session_state::suspended, true, false, false), event::expired);
    EXPECT_FALSE(t.has(effect::start_new_handle));
    EXPECT_EQ(t.next.phase, session_state::disconnected);
    EXPECT_LT(pos(t, effect::drop_handle), pos(t, effect::enter_disconnected));
    EXPECT_TRUE(t.has(effect::connect_waiters_fail));
    EXPECT_EQ(t.failure, zklock::errc::session_expired);
}

TEST(SessionFsm, RefusedCredentialsEndTheSessionForGoodWithNoDeletesLeft) {
    for (auto p : {session_state::connecting, session_state::connected, session_state::suspended,
                   session_state::expired}) {
        auto t = step(at(p, false), event::auth_refused);
        EXPECT_EQ(effects(t), (std::vector<effect>{effect::cancel_connect_timer, effect::record_end_reason,
                                                   effect::notify_ended, effect::fire_lapse_waiters,
                                                   effect::clear_watches, effect::refuse_new_deletes,
                                                   effect::finish_cleanups, effect::drop_handle,
                                                   effect::enter_disconnected, effect::connect_waiters_fail,
                                                   effect::notify_state_changed}))
            << zklock::to_string(p);
        EXPECT_EQ(t.next.phase, session_state::disconnected) << zklock::to_string(p);
        EXPECT_EQ(t.failure, zklock::zk_errc::auth_failed);
        EXPECT_FALSE(t.has(effect::start_new_handle)) << "the same credentials would be refused again";
        EXPECT_TRUE(t.has(effect::refuse_new_deletes));
        EXPECT_LT(pos(t, effect::refuse_new_deletes), pos(t, effect::finish_cleanups))
            << "what ends now must not queue new deletes after the old ones are dropped";
        EXPECT_LT(pos(t, effect::record_end_reason), pos(t, effect::notify_ended));
        EXPECT_LT(pos(t, effect::notify_ended), pos(t, effect::enter_disconnected));
        EXPECT_TRUE(t.has(effect::connect_waiters_fail));
    }
    EXPECT_EQ(step(at(session_state::disconnected), event::auth_refused).size, 0u) << "refused twice";
}

TEST(SessionFsm, ALostVerdictIsAskedForOnTheNextConnection) {
    auto t = step(at(session_state::suspended, false), event::auth_no_verdict);
    EXPECT_TRUE(t.next.auth_probe_needed);
    EXPECT_EQ(t.size, 0u) << "no connection to ask on";
    auto c = step(t.next, event::connected);
    EXPECT_TRUE(c.has(effect::probe_auth));
    EXPECT_FALSE(c.has(effect::connect_waiters_succeed));
    auto now = step(at(session_state::connected, false), event::auth_no_verdict);
    EXPECT_EQ(effects(now), (std::vector<effect>{effect::probe_auth}));
    auto ok = step(c.next, event::auth_accepted);
    EXPECT_FALSE(ok.next.auth_probe_needed);
}

TEST(SessionFsm, ConnectDecisions) {
    EXPECT_EQ(on_connect(at(session_state::disconnected)), connect_decision::start);
    EXPECT_EQ(on_connect(at(session_state::connected)), connect_decision::succeed);
    EXPECT_EQ(on_connect(at(session_state::connected, false)), connect_decision::wait);
    EXPECT_EQ(on_connect(at(session_state::closed)), connect_decision::fail_closed);
    for (auto p : {session_state::connecting, session_state::suspended, session_state::expired})
        EXPECT_EQ(on_connect(at(p)), connect_decision::wait) << zklock::to_string(p);
}

TEST(SessionFsm, EveryTransitionKeepsItsPhaseConsistentWithItsEffects) {
    // The phase the machine reports next is the one its last enter_* effect sets.
    for (auto p : all_states)
        for (bool auth : {true, false})
            for (bool renew : {true, false})
                for (auto e : all_events) {
                    auto t = step(at(p, auth, false, renew), e);
                    auto want = p;
                    for (auto fx : t) {
                        if (fx == effect::enter_connected) want = session_state::connected;
                        if (fx == effect::enter_suspended) want = session_state::suspended;
                        if (fx == effect::enter_expired) want = session_state::expired;
                        if (fx == effect::enter_connecting) want = session_state::connecting;
                        if (fx == effect::enter_disconnected) want = session_state::disconnected;
                    }
                    EXPECT_EQ(t.next.phase, want) << zklock::to_string(p) << " event " << static_cast<int>(e);
                    if (t.has(effect::connect_waiters_fail) || t.has(effect::record_end_reason))
                        EXPECT_TRUE(t.failure) << "a failure effect without its error";
                }
}

TEST(SessionFsm, AcceptedCredentialsCompleteTheConnectsOnlyOnceConnected) {
    for (auto p : {session_state::connecting, session_state::suspended, session_state::expired,
                   session_state::disconnected}) {
        auto t = step(at(p, false, true), event::auth_accepted);
        EXPECT_EQ(t.size, 0u) << zklock::to_string(p) << ": no connection to complete them with";
        EXPECT_TRUE(t.next.auth_confirmed);
        EXPECT_FALSE(t.next.auth_probe_needed);
        EXPECT_EQ(t.next.phase, p);
    }
}

TEST(SessionFsm, AnAttemptIsInProgressUntilConnectedWithTheCredentialsAccepted) {
    struct row {
        session_state phase;
        bool auth_confirmed;
        bool in_progress;
    };
    const row rows[] = {
        {session_state::disconnected, true, false}, {session_state::disconnected, false, false},
        {session_state::connecting, true, true},    {session_state::connecting, false, true},
        {session_state::connected, true, false},    {session_state::connected, false, true},
        {session_state::suspended, true, false},    {session_state::suspended, false, true},
        {session_state::expired, true, false},      {session_state::expired, false, false},
        {session_state::closed, true, false},       {session_state::closed, false, false},
    };
    for (auto r : rows)
        EXPECT_EQ(attempt_in_progress(at(r.phase, r.auth_confirmed)), r.in_progress)
            << zklock::to_string(r.phase) << (r.auth_confirmed ? ", accepted" : ", no verdict");
}
