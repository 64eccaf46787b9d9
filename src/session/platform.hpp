// The platform seam: what the session and the recipes take from below them (issue 62). Time (the
// steady clock of deadlines and the lease's clock, which counts while the machine is suspended),
// timers on both, randomness and the process's identity come from one `platform` object per
// session, never from the system directly. Production's is the bridge's (bridge/real_platform.cpp:
// steady_clock, CLOCK_BOOTTIME and its timerfd, random_device, gethostname and getpid); a test
// or a simulation gives the session another (a moved clock, a virtual one). No code above the
// seam asks which one it has.
//
// The platform also makes the session's connections to ZooKeeper (zk_link.hpp), so a session's
// every request, reply and event crosses the seam too.
#pragma once

#include "session/lease.hpp"
#include "session/zk_link.hpp"

#include <boost/asio/any_completion_handler.hpp>
#include <boost/asio/any_io_executor.hpp>
#include <boost/system/error_code.hpp>

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

namespace zklock::detail {

namespace asio = boost::asio;

/// Which clock a timer counts.
enum class timer_clock {
    steady, ///< deadlines, timeouts, back-offs (std::chrono::steady_clock in production)
    boot,   ///< the lease's clock (lease_ns): keeps counting while the machine is suspended
};

/// A platform's timer: one wait at a time. wait_until ends a wait still pending with
/// operation_aborted first, as cancel() does. A wait completes on the handler's associated
/// executor (the timer's executor if it has none); never inside wait_until or cancel.
/// Not thread-safe: one strand uses it.
class timer_backend {
public:
    virtual ~timer_backend() = default;
    /// Completes `h` with success at `at` on the timer's clock (nanoseconds since its epoch;
    /// INT64_MAX: never, until cancelled), or with operation_aborted if cancelled or re-armed first.
    virtual void wait_until(std::int64_t at,
                            asio::any_completion_handler<void(boost::system::error_code)> h) = 0;
    /// Ends a pending wait with operation_aborted (nothing if none).
    virtual void cancel() = 0;
};

/// What the library takes from the machine (see the top of this file). Shared by a session and
/// everything that runs on it; its members are thread-safe.
class platform {
public:
    virtual ~platform() = default;
    /// The steady clock of deadlines and timeouts.
    virtual std::chrono::steady_clock::time_point steady_now() const noexcept = 0;
    /// The wall clock (a node's age from its ctime, which is the server's wall clock).
    virtual std::chrono::system_clock::time_point wall_now() const noexcept = 0;
    /// The lease's clock, in nanoseconds (docs/lease.md: it must count while the machine is
    /// suspended, as the servers' clocks do).
    virtual lease_ns boot_now() const noexcept = 0;
    /// A timer on clock `c`, its completions on `ex` (a strand).
    virtual std::unique_ptr<timer_backend> make_timer(const asio::any_io_executor& ex, timer_clock c) = 0;
    /// 64 random bits (guids, which must differ between processes and between runs).
    virtual std::uint64_t random64() noexcept = 0;
    /// The machine's name and the process's id: what every recipe's nodes carry by default
    /// (session_impl::node_data, protocol.hpp's holder_description).
    virtual std::string host_name() const = 0;
    virtual long process_id() const noexcept = 0;
    /// A connection to ZooKeeper (zk_link.hpp) for one session generation.
    virtual std::shared_ptr<zk_link> make_link(zk_link_params p) = 0;
};

/// The production platform (bridge/real_platform.cpp), shared by every session that is given none.
std::shared_ptr<platform> real_platform();

/// A random guid from the production platform's randomness (protocol.hpp, format_guid), for
/// callers without a session: tests naming their paths. (session_impl.cpp)
std::string make_guid();

} // namespace zklock::detail
