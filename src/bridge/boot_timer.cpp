#include "bridge/boot_timer.hpp"

#include <boost/asio/associated_executor.hpp>
#include <boost/asio/dispatch.hpp>
#include <boost/asio/error.hpp>

#include <limits>
#include <stdexcept>
#include <system_error>

#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

namespace zklock::detail {

namespace {

int make_timerfd() {
    int fd = ::timerfd_create(CLOCK_BOOTTIME, TFD_NONBLOCK | TFD_CLOEXEC);
    if (fd < 0)
        throw std::system_error(errno, std::generic_category(), "zklock: timerfd_create(CLOCK_BOOTTIME)");
    return fd;
}

} // namespace

lease_ns boot_clock_now() noexcept {
    timespec ts{};
    ::clock_gettime(CLOCK_BOOTTIME, &ts);
    return static_cast<lease_ns>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

boot_timer::boot_timer(const asio::any_io_executor& ex)
    : st_(std::make_shared<state>(make_timerfd())), sd_(ex, st_->fd) {}

boot_timer::~boot_timer() {
    // A success still queued must not read the closed (maybe reused) descriptor: it reads st_.
    st_->gen.fetch_add(1, std::memory_order_acq_rel);
}

void boot_timer::arm(lease_ns at) noexcept {
    itimerspec its{};
    if (at != 0 && at != std::numeric_limits<std::int64_t>::max()) {
        const lease_ns raw = std::max<lease_ns>(1, at); // (never 0, which would disarm it)
        its.it_value.tv_sec = static_cast<time_t>(raw / 1'000'000'000);
        its.it_value.tv_nsec = static_cast<long>(raw % 1'000'000'000);
    }
    ::timerfd_settime(st_->fd, TFD_TIMER_ABSTIME, &its, nullptr); // (also clears a pending expiration)
}

void boot_timer::cancel() {
    st_->gen.fetch_add(1, std::memory_order_acq_rel);
    boost::system::error_code ignored;
    sd_.cancel(ignored);
    arm(0);
}

void boot_timer::wait_until(std::int64_t at,
                            asio::any_completion_handler<void(boost::system::error_code)> h) {
    cancel();
    arm(at);
    auto ex = asio::get_associated_executor(h, sd_.get_executor());
    sd_.async_wait(asio::posix::stream_descriptor::wait_read,
                   [st = st_, gen = st_->gen.load(std::memory_order_acquire), ex,
                    h = std::move(h)](boost::system::error_code ec) mutable {
                       if (!ec && gen != st->gen.load(std::memory_order_acquire))
                           ec = asio::error::operation_aborted;
                       // (No read of the descriptor: it may be closed by now, on another thread.
                       // Every wait follows an arm, whose timerfd_settime clears the expiration, so
                       // the next one is a new edge for the reactor.)
                       asio::dispatch(ex, [h = std::move(h), ec]() mutable { std::move(h)(ec); });
                   });
}

} // namespace zklock::detail
