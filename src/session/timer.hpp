// A timer of the platform (session/platform.hpp), with the part of asio::steady_timer's interface
// the library uses: expires_at, expires_after, async_wait with any completion token, cancel. The
// session and the recipes use it for every wait, so that a platform with a moved or a virtual
// clock runs them all.
#pragma once

#include "session/platform.hpp"

#include <boost/asio/async_result.hpp>

#include <chrono>
#include <cstdint>
#include <limits>
#include <memory>

namespace zklock::detail {

/// One wait at a time (like every use of timers in the library): expires_at, expires_after and
/// cancel end a pending wait with operation_aborted. Use it from one strand.
class timer {
public:
    using time_point = std::chrono::steady_clock::time_point;

    timer(std::shared_ptr<platform> p, const asio::any_io_executor& ex, timer_clock c = timer_clock::steady)
        : plat_(std::move(p)), clock_(c), backend_(plat_->make_timer(ex, c)) {}
    /// A steady timer that expires at `at` (or after `d`), as asio::steady_timer's constructors.
    timer(std::shared_ptr<platform> p, const asio::any_io_executor& ex, time_point at)
        : timer(std::move(p), ex) {
        expires_at(at);
    }
    template <class Rep, class Period>
    timer(std::shared_ptr<platform> p, const asio::any_io_executor& ex, std::chrono::duration<Rep, Period> d)
        : timer(std::move(p), ex) {
        expires_after(d);
    }
    timer(const timer&) = delete;
    timer& operator=(const timer&) = delete;

    /// A steady timer's deadline (time_point::max(): never).
    void expires_at(time_point at) {
        backend_->cancel();
        at_ = at == time_point::max()
                  ? never
                  : std::chrono::duration_cast<std::chrono::nanoseconds>(at.time_since_epoch()).count();
    }
    /// A boot timer's deadline (lease_ns).
    void expires_at_boot(lease_ns at) {
        backend_->cancel();
        at_ = at;
    }
    /// `d` from now on the timer's clock, saturated: d <= 0 expires at once, a `d` too large to
    /// add (milliseconds::max()...) never expires.
    template <class Rep, class Period>
    void expires_after(std::chrono::duration<Rep, Period> d) {
        backend_->cancel();
        const std::int64_t now =
            clock_ == timer_clock::boot
                ? plat_->boot_now()
                : std::chrono::duration_cast<std::chrono::nanoseconds>(plat_->steady_now().time_since_epoch())
                      .count();
        if (d <= d.zero()) {
            at_ = now;
        } else if (std::chrono::duration<double, std::nano>(d).count() >=
                   static_cast<double>(never - now) / 2) {
            at_ = never;
        } else {
            at_ = now + std::chrono::duration_cast<std::chrono::nanoseconds>(d).count();
        }
    }
    /// The deadline of the wait set last, on the timer's clock, in nanoseconds; INT64_MAX (never)
    /// once cancelled. A caller that skips re-arming a timer whose expiry_ns() is already the
    /// deadline it wants (the lease timer does) relies on a cancelled timer reporting none.
    std::int64_t expiry_ns() const noexcept { return at_; }

    /// Completes with success at the deadline, operation_aborted if cancelled or re-armed first.
    template <class Token>
    auto async_wait(Token&& token) {
        return asio::async_initiate<Token, void(boost::system::error_code)>(
            [this](auto h) {
                backend_->wait_until(
                    at_, asio::any_completion_handler<void(boost::system::error_code)>(std::move(h)));
            },
            token);
    }
    /// Ends a pending wait with operation_aborted; the timer has no deadline after it.
    void cancel() {
        backend_->cancel();
        at_ = never;
    }

private:
    static constexpr std::int64_t never = std::numeric_limits<std::int64_t>::max();
    std::shared_ptr<platform> plat_;
    timer_clock clock_;
    std::unique_ptr<timer_backend> backend_;
    std::int64_t at_ = never;
};

} // namespace zklock::detail
