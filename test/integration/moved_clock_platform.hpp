// A platform for tests (src/session/platform.hpp) whose lease clock can jump forward, as a
// machine's suspend moves CLOCK_BOOTTIME while CLOCK_MONOTONIC stands still: the machine's
// clocks, timers and randomness, with an offset on the boot clock that suspend() moves. Its boot
// timers wait on the real CLOCK_BOOTTIME timerfd for their deadline less the offset, and are
// re-armed for the moved clock at once by suspend(), as the kernel re-arms BOOTTIME timers on a
// resume. What the shipped library once did with a process-wide offset, now a test's own.
#pragma once

#include "session/platform.hpp"

#include <boost/asio/associated_executor.hpp>
#include <boost/asio/dispatch.hpp>
#include <boost/asio/error.hpp>
#include <boost/asio/post.hpp>

#include <atomic>
#include <limits>
#include <memory>
#include <mutex>
#include <optional>
#include <set>

namespace zklock_test {

class moved_clock_platform final : public zklock::detail::platform,
                                   public std::enable_shared_from_this<moved_clock_platform> {
public:
    using lease_ns = zklock::detail::lease_ns;

    /// The boot clock jumps `d` forward; every boot timer of this platform is re-armed for it.
    void suspend(std::chrono::nanoseconds d) {
        std::lock_guard lk(mu_);
        offset_.fetch_add(d.count(), std::memory_order_relaxed);
        for (auto* t : timers_) t->rearm();
    }

    std::chrono::steady_clock::time_point steady_now() const noexcept override { return real_->steady_now(); }
    std::chrono::system_clock::time_point wall_now() const noexcept override { return real_->wall_now(); }
    lease_ns boot_now() const noexcept override {
        return real_->boot_now() + offset_.load(std::memory_order_relaxed);
    }
    std::unique_ptr<zklock::detail::timer_backend> make_timer(const boost::asio::any_io_executor& ex,
                                                              zklock::detail::timer_clock c) override {
        if (c == zklock::detail::timer_clock::steady) return real_->make_timer(ex, c);
        return std::make_unique<moved_timer>(shared_from_this(), ex);
    }
    std::uint64_t random64() noexcept override { return real_->random64(); }
    std::string host_name() const override { return real_->host_name(); }
    long process_id() const noexcept override { return real_->process_id(); }
    /// The machine's link, stamping the lease with this platform's clock (the session's, in `p`).
    std::shared_ptr<zklock::detail::zk_link> make_link(zklock::detail::zk_link_params p) override {
        return real_->make_link(std::move(p));
    }

private:
    using handler = boost::asio::any_completion_handler<void(boost::system::error_code)>;
    static constexpr std::int64_t never = std::numeric_limits<std::int64_t>::max();

    /// A boot timer of the moved clock: the real one underneath, at the deadline less the offset.
    class moved_timer final : public zklock::detail::timer_backend {
    public:
        moved_timer(std::shared_ptr<moved_clock_platform> p, const boost::asio::any_io_executor& ex)
            : p_(std::move(p)), ex_(ex),
              inner_(p_->real_->make_timer(ex, zklock::detail::timer_clock::boot)) {
            std::lock_guard lk(p_->mu_);
            p_->timers_.insert(this);
        }
        ~moved_timer() override {
            std::lock_guard lk(p_->mu_);
            p_->timers_.erase(this);
            ++*gen_; // (a completion of inner_ still queued must not touch this)
        }
        void wait_until(std::int64_t at, handler h) override {
            cancel();
            std::lock_guard lk(p_->mu_);
            at_ = at;
            h_.emplace(std::move(h));
            arm();
        }
        void cancel() override {
            std::lock_guard lk(p_->mu_);
            ++*gen_;
            inner_->cancel();
            if (!h_) return;
            handler h(std::move(*h_));
            h_.reset();
            boost::asio::post(ex_, [h = std::move(h), ex = ex_]() mutable {
                auto hex = boost::asio::get_associated_executor(h, ex);
                boost::asio::dispatch(hex, [h = std::move(h)]() mutable {
                    std::move(h)(boost::asio::error::operation_aborted);
                });
            });
        }
        /// (under the platform's lock) The deadline on the clock moved since the last arm.
        void rearm() {
            if (!h_) return;
            ++*gen_;
            inner_->cancel();
            arm();
        }

    private:
        void arm() { // (under the platform's lock)
            const std::int64_t off = p_->offset_.load(std::memory_order_relaxed);
            const std::int64_t raw = at_ == never ? never : std::max<std::int64_t>(1, at_ - off);
            inner_->wait_until(raw, [this, p = p_, g = gen_, mine = *gen_](boost::system::error_code ec) {
                if (ec) return;
                std::unique_lock lk(p->mu_);
                if (*g != mine || !h_) return; // cancelled, re-armed, or the timer is gone
                handler h(std::move(*h_));
                h_.reset();
                lk.unlock();
                auto ex = boost::asio::get_associated_executor(h, ex_);
                boost::asio::dispatch(
                    ex, [h = std::move(h)]() mutable { std::move(h)(boost::system::error_code()); });
            });
        }

        std::shared_ptr<moved_clock_platform> p_;
        boost::asio::any_io_executor ex_;
        std::unique_ptr<zklock::detail::timer_backend> inner_;
        std::shared_ptr<std::uint64_t> gen_ = std::make_shared<std::uint64_t>(0);
        std::int64_t at_ = never;
        // (optional: Boost 1.81's any_completion_handler must not be assigned to; it recurses)
        std::optional<handler> h_;
    };

    std::shared_ptr<zklock::detail::platform> real_ = zklock::detail::real_platform();
    std::atomic<std::int64_t> offset_{0};
    std::recursive_mutex mu_; // (suspend re-arms under it; a timer's cancel inside a wait_until too)
    std::set<moved_timer*> timers_;
};

} // namespace zklock_test
