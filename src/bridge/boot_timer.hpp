// A timer on the lease's clock (CLOCK_BOOTTIME): a timerfd behind an Asio descriptor, the real
// platform's boot timer (session/platform.hpp, timer_clock::boot). Asio's steady timers count
// CLOCK_MONOTONIC, which stops while the machine is suspended: after a resume they fire late by
// the length of the suspend, and a lease loss with them. This one fires at once on a resume past
// its deadline, as the kernel re-arms BOOTTIME timers then.
#pragma once

#include "session/platform.hpp"

#include <boost/asio/posix/stream_descriptor.hpp>

#include <atomic>
#include <memory>

namespace zklock::detail {

/// CLOCK_BOOTTIME now, in nanoseconds.
lease_ns boot_clock_now() noexcept;

/// One wait at a time (timer_backend). Not thread-safe: use it from one strand.
class boot_timer final : public timer_backend {
public:
    explicit boot_timer(const asio::any_io_executor& ex);
    ~boot_timer() override;
    boot_timer(const boot_timer&) = delete;
    boot_timer& operator=(const boot_timer&) = delete;

    void wait_until(std::int64_t at,
                    asio::any_completion_handler<void(boost::system::error_code)> h) override;
    void cancel() override;

private:
    void arm(lease_ns at) noexcept;
    /// What a wait's completion reads: shared with it, since it may run after the timer is gone.
    struct state {
        explicit state(int f) : fd(f) {}
        const int fd;
        /// Moved by wait_until, cancel and the destructor: an older wait's success is stale.
        /// (Atomic: the destructor may run on another thread than a completion still queued.)
        std::atomic<std::uint64_t> gen{0};
    };
    std::shared_ptr<state> st_;
    asio::posix::stream_descriptor sd_;
};

} // namespace zklock::detail
