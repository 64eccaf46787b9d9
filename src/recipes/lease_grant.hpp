// The check before a grant under the lease policy, shared by the mutex (and the locks built on
// it) and the semaphore.
#pragma once

#include "session/session_impl.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/use_awaitable.hpp>

namespace zklock::detail {

/// lease_for_grant's result when the renewal was refused with ZNOAUTH: the session may not read
/// the acquire's own node (its ACL leaves this session no READ), so no renewal can ever vouch for
/// it (errc::lease_check_denied). Not a ZooKeeper code.
inline constexpr int lease_check_denied_rc = -10'000;

/// Before a grant under `policy` of the acquire's `node`: ZOK if the lease leaves the first
/// heartbeat room to renew it (session_impl::lease_too_short_for_grant), renewing it first with a
/// committed check of `node` if not (a waiter that held nothing sent only reads, which renew
/// nothing: session_impl::renew_lease, a write). If the renewal's reply still leaves it short:
/// ZOPERATIONTIMEOUT after a pause of T/20 (not a busy loop of writes), and the caller asks
/// again; a renewal that revived a lapsed lease is confirmed by a second one at once. Else the
/// renewal's error (lease_check_denied_rc for ZNOAUTH). `headroom_until`
/// (the lease clock, 0 at first) is the acquire's: from the first short lease it sees, it seeks the
/// headroom for session_lease::grant_headroom_wait x T; after that, not lapsed is enough
/// (session_lease::too_short_for_grant, the decision the simulator runs too). A grant its
/// lease does not vouch for is never given.
inline asio::awaitable<int> lease_for_grant(session_impl& s, const loss_policy& policy,
                                            lease_ns& headroom_until, const std::string& node) {
    if (policy.type() != loss_policy::kind::lease) co_return ZOK;
    const double f = policy.lease_fraction();
    auto too_short = [&] { return s.lease_too_short_for_grant(f, headroom_until); };
    if (!too_short()) co_return ZOK;
    if (headroom_until == 0) {
        const auto t_ns = std::chrono::nanoseconds(s.negotiated_timeout()).count();
        headroom_until = session_lease::grant_headroom_until(s.plat()->boot_now(), t_ns);
    }
    auto r = co_await s.async_renew_lease(node, asio::use_awaitable);
    if (r.rc == ZNOAUTH) co_return lease_check_denied_rc;
    if (r.rc != ZOK) co_return r.rc;
    if (!too_short()) co_return ZOK;
    // A renewal answered past the lease's earliest known expiry needs a later commit to confirm it
    // (a revival, docs/lease.md premise 8): one more at once, no pause (it costs a round trip).
    if (s.lease_awaits_confirmation()) {
        r = co_await s.async_renew_lease(node, asio::use_awaitable);
        if (r.rc == ZNOAUTH) co_return lease_check_denied_rc;
        if (r.rc != ZOK) co_return r.rc;
        if (!too_short()) co_return ZOK;
    }
    timer pause(s.plat(), s.strand(), std::chrono::nanoseconds(s.negotiated_timeout() / 20));
    co_await pause.async_wait(asio::as_tuple(asio::use_awaitable));
    co_return ZOPERATIONTIMEOUT;
}

} // namespace zklock::detail
