#include "bridge/boot_timer.hpp"

#include <boost/asio/error.hpp>

#include <mutex>
#include <set>
#include <stdexcept>
#include <system_error>

#include <sys/timerfd.h>
#include <unistd.h>

namespace zklock::detail {

namespace {

// Every live boot_timer, for simulate_suspend; arming holds the lock too, so that a simulated
// suspend never races an arm computed with the old offset.
std::mutex& registry_mu() {
    static std::mutex m;
    return m;
}
std::set<boot_timer*>& registry() {
    static std::set<boot_timer*> r;
    return r;
}

int make_timerfd() {
    int fd = ::timerfd_create(CLOCK_BOOTTIME, TFD_NONBLOCK | TFD_CLOEXEC);
    if (fd < 0)
        throw std::system_error(errno, std::generic_category(), "zklock: timerfd_create(CLOCK_BOOTTIME)");
    return fd;
}

} // namespace

boot_timer::boot_timer(const asio::any_io_executor& ex)
    : st_(std::make_shared<state>(make_timerfd())), sd_(ex, st_->fd) {
    std::lock_guard lk(registry_mu());
    registry().insert(this);
}

boot_timer::~boot_timer() {
    std::lock_guard lk(registry_mu());
    registry().erase(this);
    st_->gen.fetch_add(
        1,
        std::
            memory_order_acq_rel); // a success still queued must not read the closed (maybe reused) descriptor
    // (sd_ closes the timerfd; a completion still queued reads only st_)
}

void boot_timer::arm() noexcept {
    itimerspec its{};
    if (at_ != 0) {
        // The deadline on the raw CLOCK_BOOTTIME; never 0, which would disarm it.
        const lease_ns raw =
            std::max<lease_ns>(1, at_ - lease_clock::offset().load(std::memory_order_relaxed));
        its.it_value.tv_sec = static_cast<time_t>(raw / 1'000'000'000);
        its.it_value.tv_nsec = static_cast<long>(raw % 1'000'000'000);
    }
    ::timerfd_settime(st_->fd, TFD_TIMER_ABSTIME, &its, nullptr); // (also clears a pending expiration)
}

void boot_timer::expires_at(lease_ns at) {
    st_->gen.fetch_add(1, std::memory_order_acq_rel);
    boost::system::error_code ignored;
    sd_.cancel(ignored);
    std::lock_guard lk(registry_mu());
    at_ = at;
    arm();
}

void boot_timer::cancel() {
    st_->gen.fetch_add(1, std::memory_order_acq_rel);
    boost::system::error_code ignored;
    sd_.cancel(ignored);
    std::lock_guard lk(registry_mu());
    at_ = 0;
    arm();
}

void boot_timer::async_wait(std::function<void(boost::system::error_code)> h) {
    sd_.async_wait(asio::posix::stream_descriptor::wait_read,
                   [st = st_, gen = st_->gen.load(std::memory_order_acquire),
                    h = std::move(h)](boost::system::error_code ec) mutable {
                       if (ec) return h(ec);
                       if (gen != st->gen.load(std::memory_order_acquire))
                           return h(asio::error::operation_aborted);
                       // (No read of the descriptor: it may be closed by now, on another thread.
                       // Every wait follows an expires_at, whose timerfd_settime clears the
                       // expiration, so the next one is a new edge for the reactor.)
                       h(ec);
                   });
}

void boot_timer::simulate_suspend(std::chrono::nanoseconds d) {
    std::lock_guard lk(registry_mu());
    lease_clock::offset().fetch_add(d.count(), std::memory_order_relaxed);
    for (auto* t : registry()) t->arm();
}

} // namespace zklock::detail
