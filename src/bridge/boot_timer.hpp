// A timer on the lease's clock (CLOCK_BOOTTIME): a timerfd behind an Asio descriptor. Asio's
// steady timers count CLOCK_MONOTONIC, which stops while the machine is suspended: after a
// resume they fire late by the length of the suspend, and a lease loss with them. This one fires
// at once on a resume past its deadline, as the kernel re-arms BOOTTIME timers then.
#pragma once

#include "session/lease.hpp"

#include <boost/asio/any_completion_handler.hpp>
#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/system/error_code.hpp>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>

namespace zklock::detail {

namespace asio = boost::asio;

/// One wait at a time, like the session's use of steady_timer: expires_at() and cancel() end a
/// pending wait with operation_aborted. Not thread-safe: use it from one strand.
class boot_timer {
public:
    explicit boot_timer(const asio::any_io_executor& ex);
    ~boot_timer();
    boot_timer(const boot_timer&) = delete;
    boot_timer& operator=(const boot_timer&) = delete;

    /// Fires at `at` on lease_clock (CLOCK_BOOTTIME plus the test offset).
    void expires_at(lease_ns at);
    void expires_after(std::chrono::nanoseconds d) { expires_at(lease_clock::now() + d.count()); }
    /// The deadline set last (0: none).
    lease_ns expiry() const noexcept { return at_; }
    /// `h(ec)` on the timer's executor: success at the deadline, operation_aborted if cancelled
    /// or moved first. Call expires_at (or expires_after) before each wait.
    void async_wait(std::function<void(boost::system::error_code)> h);
    void cancel();

    /// Tests only: moves lease_clock forward by `d` at once, as a suspend of that length does to
    /// CLOCK_BOOTTIME (CLOCK_MONOTONIC, steady timers and the servers see nothing), and re-arms
    /// every boot_timer of the process for its deadline on the moved clock, as the kernel does
    /// on a resume.
    static void simulate_suspend(std::chrono::nanoseconds d);

private:
    void arm() noexcept; // (under the registry's lock)
    /// What a wait's completion reads: shared with it, since it may run after the timer is gone.
    struct state {
        explicit state(int f) : fd(f) {}
        const int fd;
        /// Moved by expires_at, cancel and the destructor: an older wait's success is stale.
        /// (Atomic: the destructor may run on another thread than a completion still queued.)
        std::atomic<std::uint64_t> gen{0};
    };
    std::shared_ptr<state> st_;
    asio::posix::stream_descriptor sd_;
    lease_ns at_ = 0;
};

} // namespace zklock::detail
