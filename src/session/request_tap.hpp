// Where a test's transport may step into the session's requests: the seam through which the
// integration tests inject lost requests and lost replies (test/integration/request_faults.hpp).
// Null in production (one pointer test per request of the kinds below); nothing in src/ decides
// which request to break: the test's tap does.
#pragma once

namespace zklock::detail {

struct zk_result;

/// The requests a tap sees.
enum class tapped_request {
    create_and_list,  ///< an acquire's (or a lease's) create with the listing in its flight
    cleanup,          ///< a request of the guaranteed deletes (a delete, a marked release, a sweep)
    marked_release,   ///< the release transaction with its marker (a cleanup request too)
    container_create, ///< a container's create (a lock path or its parents, a semaphore's leases)
};

struct request_tap {
    virtual ~request_tap() = default;
    /// Before the request is handed to the C client (on the strand): a ZooKeeper code to complete
    /// it with instead, as if it failed unsent or was lost on its way; 0 to send it.
    virtual int refuse(tapped_request) { return 0; }
    /// Its reply, before the caller sees it (on the strand): the tap may change it, as a lost
    /// reply of a request the server applied would.
    virtual void reply(tapped_request, zk_result&) {}
};

} // namespace zklock::detail
