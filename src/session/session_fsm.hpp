// The session's state machine, pure: what each event from the C client (a session state, an
// authentication verdict) and each connect request does, as a list of effects. session_impl.cpp
// is its driver: it feeds the events in, on the strand, and carries the effects out in order.
// test/unit/session_fsm_test.cpp tests the machine without a server.
#pragma once

#include "protocol/coverage.hpp"

#include <zklock/error.hpp>
#include <zklock/session.hpp>

#include <array>
#include <cstddef>
#include <cstdint>

namespace zklock::detail::session_fsm {

/// What the decisions read.
struct facts {
    session_state phase = session_state::disconnected;
    bool auth_confirmed = true;     ///< the current handle's credentials were accepted (or none were given)
    bool auth_probe_needed = false; ///< a verdict on them was lost with a connection: ask on the next one
    bool renew_after_expiry = true; ///< session_options::renew_after_expiry
};

/// What happens to the session.
enum class event : std::uint8_t {
    connected,       ///< the C client's ZOO_CONNECTED_STATE
    connecting,      ///< ZOO_CONNECTING_STATE or ZOO_ASSOCIATING_STATE: the connection dropped
    expired,         ///< ZOO_EXPIRED_SESSION_STATE
    auth_refused,    ///< ZOO_AUTH_FAILED_STATE, or the server's ZAUTHFAILED to the credentials
    auth_accepted,   ///< the server accepted the credentials (or answered a request after them)
    auth_no_verdict, ///< the credentials' completion came with the connection's error
    renewal_started, ///< after an expiry: the new handle was made
    renewal_failed,  ///< after an expiry: no new handle (not wanted, or the C client refused)
};

/// What the driver does, in the order given.
enum class effect : std::uint8_t {
    read_session_info, ///< the session id and the negotiated timeout, from the handle
    count_reconnect,   ///< statistics: a reconnect with the same session
    count_expiry,      ///< statistics: an expiry
    enter_connected,   ///< set_state(...): completes the state waiters
    enter_suspended,
    enter_expired,
    enter_connecting,
    enter_disconnected,
    cancel_connect_timer,
    arm_connect_timer,       ///< the connect timeout, for the attempt that starts
    connect_waiters_succeed, ///< every pending async_connect completes with success
    connect_waiters_fail,    ///< every pending async_connect completes with transition::failure
    record_end_reason,       ///< what ended the session's locks: transition::failure
    probe_auth,              ///< send a request whose reply proves the credentials accepted
    notify_reconnected,      ///< waiters re-check their nodes and re-arm their watches
    notify_suspended,        ///< loss policies judge the locks held
    notify_ended,            ///< session_event::expired: every lock and acquire ends (end reason)
    notify_state_changed,    ///< acquires waiting for a connection give up
    fire_lapse_waiters,      ///< every lease lapse waiter fires
    clear_watches,
    refuse_new_deletes, ///< no guaranteed delete is taken any more (a refused session)
    finish_cleanups,    ///< the pending guaranteed deletes end: the server deletes the nodes
    run_cleanups,       ///< the pending guaranteed deletes are sent again
    renew_lease_now,    ///< a heartbeat at once (or a touch: evidence needs answered sends)
    rearm_lease_timer,  ///< T may have been renegotiated: the deadlines moved
    drop_handle,        ///< close the C client's handle
    start_new_handle,   ///< after an expiry: then renewal_started or renewal_failed
};

/// The session's transitions from state to state (coverage.hpp; session_impl::feed notes them).
inline transition_table transitions{
    "session", {"disconnected", "connecting", "connected", "suspended", "expired", "closed"}};
static_assert(static_cast<int>(session_state::closed) == 5, "a name for each session_state");

/// The effects of one event, in order, with the new facts.
struct transition {
    std::array<effect, 24> list{};
    std::size_t size = 0;
    error_code failure; ///< for connect_waiters_fail and record_end_reason
    facts next;

    void add(effect e) noexcept { list[size++] = e; }
    const effect* begin() const noexcept { return list.data(); }
    const effect* end() const noexcept { return list.data() + size; }
    bool has(effect e) const noexcept {
        for (auto x : *this)
            if (x == e) return true;
        return false;
    }
};

/// After an expiry with no new session (not wanted, or the C client refused to start one):
/// nothing will change by itself any more.
inline void end_without_renewal(transition& t) noexcept {
    t.add(effect::enter_disconnected);
    t.next.phase = session_state::disconnected;
    t.failure = errc::session_expired;
    t.add(effect::connect_waiters_fail);
    t.add(effect::notify_state_changed);
}

/// The machine's step: the effects of `e` when the session stands at `f`.
inline transition step(const facts& f, event e) {
    transition t;
    t.next = f;
    if (f.phase == session_state::closed) return t; // nothing comes back from closed
    switch (e) {
    case event::connected:
        t.add(effect::read_session_info);
        if (f.phase == session_state::suspended) t.add(effect::count_reconnect);
        t.add(effect::enter_connected);
        t.next.phase = session_state::connected;
        if (f.auth_confirmed) { // else the verdict on the credentials completes them
            t.add(effect::cancel_connect_timer);
            t.add(effect::connect_waiters_succeed);
        }
        if (f.auth_probe_needed) t.add(effect::probe_auth);
        t.add(effect::notify_reconnected);
        t.add(effect::run_cleanups);
        t.add(effect::renew_lease_now);
        t.add(effect::rearm_lease_timer);
        return t;
    case event::connecting:
        if (f.phase != session_state::connected) return t;
        t.add(effect::enter_suspended);
        t.next.phase = session_state::suspended;
        t.add(effect::notify_suspended); // on_disconnect locks are lost; lease locks wait for their lease
        return t;
    case event::expired:
        t.add(effect::count_expiry);
        t.add(effect::enter_expired);
        t.next.phase = session_state::expired;
        t.failure = errc::session_expired;
        t.add(effect::record_end_reason);
        t.add(effect::notify_ended);
        t.add(effect::fire_lapse_waiters);
        t.add(effect::clear_watches);
        t.add(effect::finish_cleanups); // the server deleted our ephemeral nodes
        t.add(effect::drop_handle);
        if (f.renew_after_expiry) {
            t.add(effect::start_new_handle); // the driver answers with renewal_started or _failed
            return t;
        }
        end_without_renewal(t);
        return t;
    case event::renewal_started:
        t.add(effect::enter_connecting);
        t.next.phase = session_state::connecting;
        t.add(effect::arm_connect_timer);
        return t;
    case event::renewal_failed:
        end_without_renewal(t);
        return t;
    case event::auth_refused:
        // The C client gives the handle up for good, and the same credentials would be refused
        // again: the session ends here, with no renewal. Its nodes go when the server expires
        // it; no delete can succeed on it, so none is kept or taken.
        if (f.phase == session_state::disconnected) return t;
        t.add(effect::cancel_connect_timer);
        t.failure = zk_errc::auth_failed;
        t.add(effect::record_end_reason);
        t.add(effect::notify_ended);
        t.add(effect::fire_lapse_waiters);
        t.add(effect::clear_watches);
        t.add(effect::refuse_new_deletes);
        t.add(effect::finish_cleanups);
        t.add(effect::drop_handle);
        t.add(effect::enter_disconnected);
        t.next.phase = session_state::disconnected;
        t.add(effect::connect_waiters_fail);
        t.add(effect::notify_state_changed);
        return t;
    case event::auth_no_verdict:
        // The C client presents the credentials again on its next connection, but this verdict
        // is spent: ask there (or now, if connected).
        t.next.auth_probe_needed = true;
        if (f.phase == session_state::connected) t.add(effect::probe_auth);
        return t;
    case event::auth_accepted:
        t.next.auth_probe_needed = false;
        t.next.auth_confirmed = true;
        if (f.phase == session_state::connected) {
            t.add(effect::cancel_connect_timer);
            t.add(effect::connect_waiters_succeed);
        }
        return t;
    }
    return t;
}

/// What an async_connect does when it reaches the strand.
enum class connect_decision : std::uint8_t {
    succeed,     ///< connected, with the credentials accepted
    fail_closed, ///< errc::session_closed
    wait,        ///< an attempt is under way (or the session is reconnecting): complete with it
    start,       ///< disconnected: validate the options and start an attempt
};

inline connect_decision on_connect(const facts& f) noexcept {
    switch (f.phase) {
    case session_state::connected:
        return f.auth_confirmed ? connect_decision::succeed : connect_decision::wait;
    case session_state::closed:
        return connect_decision::fail_closed;
    case session_state::connecting:
    case session_state::suspended:
    case session_state::expired:
        return connect_decision::wait;
    case session_state::disconnected:
        break;
    }
    return connect_decision::start;
}

/// An attempt is under way: connecting, or connected without a verdict on the credentials yet.
/// The connect timeout abandons it; so does cancelling its last async_connect.
constexpr bool attempt_in_progress(const facts& f) noexcept {
    return f.phase == session_state::connecting ||
           (!f.auth_confirmed &&
            (f.phase == session_state::connected || f.phase == session_state::suspended));
}

} // namespace zklock::detail::session_fsm
