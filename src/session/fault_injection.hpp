// Faults a test can inject into one session: the states that real faults (the container reaper,
// an allocation failure, a late timer) leave behind, reached on demand instead of by luck.
// Nothing but tests sets them; the library only reads them, one relaxed load on the paths below.
// Lost requests and lost replies are not here: the tests inject those through the session's
// request tap (request_tap.hpp; test/integration/request_faults.hpp).
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <string>

namespace zklock::detail {

struct fault_injection {
    /// The lease timer fires this many milliseconds after the deadline it is armed for, as on a
    /// busy strand or after the machine was suspended: a lapse must be found all the same.
    std::atomic<int> lease_timer_late_ms{0};
    /// The guid the next acquire names its node with (set before starting it, on the thread that
    /// runs the session's io_context).
    std::string next_guid;
    /// The next N acquires (mutex, semaphore) throw from inside their coroutine, as an
    /// allocation failure would.
    std::atomic<int> throw_in_acquire{0};
    /// The next N acquires first create a node of their own guid whose reply they ignore: what a
    /// create committed late, after its recovery had looked, leaves behind.
    std::atomic<int> orphan_creates{0};
    /// The next N semaphore acquires delete "<path>/leases" between reading N and creating their
    /// lease (a delete sent in the same flight, so the server runs it in between), as the
    /// container reaper may.
    std::atomic<int> reap_leases_before_create{0};
    /// The next N times an acquire creates the parents of its lock path, the topmost one is
    /// deleted again right after its create, as the container reaper may.
    std::atomic<int> reap_ancestor{0};
    /// The next time the C client reports the handle dead (credentials refused, session
    /// expired), the session handles that news this many milliseconds late, as a busy strand
    /// may: requests the dead handle refuses meanwhile must still end for the right reason.
    std::atomic<int> delay_end_event_ms{0};
    /// A waiter that watches its predecessor's release marker sends the marker's watch, then
    /// waits this many milliseconds before it reads (and watches) the predecessor: the
    /// predecessor can go in between, the phase where the two requests are apart.
    std::atomic<int> pause_before_predecessor_ms{0};
    /// The next N acquires that find no lock path are cancelled right after they made it,
    /// before their node's create: the lock path is then a container that never had a child.
    std::atomic<int> stop_after_parents{0};
    /// When 0 or more: every listing of the children reports this as the parent's cversion, as
    /// on a parent whose sequence counter has wrapped (2147483647) after 2^31 creates.
    std::atomic<std::int64_t> cversion_override{-1};

    /// The next N times a session with TLS starts a C-client handle, the relay's loopback
    /// address is missing (as if lost): the session must refuse, not fall back to the servers.
    std::atomic<int> lose_relay_address{0};

    /// When set: the address a host name of the connect string resolves to ("" for the real
    /// resolver), as a DNS whose answer changes (set and changed on the thread that runs the
    /// session's io_context).
    std::function<std::string(const std::string&)> resolve_override;

    /// Uses up one of `n`: true if one was left.
    static bool take(std::atomic<int>& n) noexcept {
        return n.load(std::memory_order_relaxed) > 0 && n.fetch_sub(1, std::memory_order_relaxed) > 0;
    }
};

} // namespace zklock::detail
