// Where a test steps into one session: the seam through which the integration tests inject the
// faults of the world around the library (lost, refused, held and reordered requests, lost
// replies, the container reaper's deletes, a late timer, a changing DNS answer, an allocation
// failure) from outside it (test/integration/session_faults.hpp). Null in production: one
// pointer test at each point below. Nothing in src/ decides which request to break, or when:
// the test's tap does. The recipes hold no fault hook at all; they reach this seam only through
// the session's requests and session_impl::new_guid().
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

namespace zklock::detail {

struct zk_result;

/// The requests a tap sees.
enum class tapped_request {
    create_and_list,  ///< an acquire's (or a lease's) create with the listing in its flight
    cleanup,          ///< a request of the guaranteed deletes (a delete, a marked release, a sweep)
    marked_release,   ///< the release transaction with its marker (a cleanup request too)
    container_create, ///< a container's create (a lock path or its parents, a semaphore's leases)
    list,             ///< a listing of children (alone; create_and_list's rides with its create)
    watched_read,     ///< a read of a node's data that sets a watch (a waiter's predecessor)
};

struct session_tap {
    virtual ~session_tap() = default;

    // -- requests (all on the strand) --

    /// Before the request is handed to the C client: a ZooKeeper code to complete it with
    /// instead, as if it failed unsent or was lost on its way; 0 to send it. The tap may send
    /// requests of its own on the session first: the server runs them ahead of this one (a
    /// session's requests run in order), as another client's or the reaper's writes may.
    virtual int before(tapped_request, const std::string& /*path*/) { return 0; }
    /// Its reply, before the caller sees it: the tap may change it, as a lost reply of a request
    /// the server applied would; or act at that moment (cancel the operation that waits for it).
    virtual void reply(tapped_request, const std::string& /*path*/, zk_result&) {}
    /// How long the request waits before it is sent, as one held up on its way (only
    /// tapped_request::watched_read asks).
    virtual std::chrono::milliseconds hold(tapped_request, const std::string& /*path*/) { return {}; }

    // -- the session's other inputs --

    /// The guid a new lock node (or lease) is about to be named with: the tap may replace it,
    /// or throw, as an allocation failure there would (session_impl::new_guid).
    virtual void naming(std::string& /*guid*/) {}
    /// The address a host name of the connect string resolves to, "" for the real resolver (a
    /// DNS whose answer changes).
    virtual std::string resolve(const std::string& /*host*/) { return {}; }
    /// The servers' addresses as about to be given to a new C-client handle: the tap may change
    /// them (with TLS, lose the relay's loopback address: the session must refuse).
    virtual void handing_over(std::string& /*connect*/) {}
    /// How late the lease timer fires after the deadline it is armed for, as on a busy strand or
    /// after a suspend: a lapse must be found all the same.
    virtual std::chrono::milliseconds lease_timer_late() { return {}; }
    /// How late the session handles the C client's news that the handle is dead (credentials
    /// refused, session expired), as a busy strand may: requests the dead handle refuses
    /// meanwhile must still end for the right reason.
    virtual std::chrono::milliseconds end_news_late() { return {}; }
};

} // namespace zklock::detail
