// The production platform (session/platform.hpp): steady_clock and Asio's steady timers,
// CLOCK_BOOTTIME and its timerfd (boot_timer), random_device, gethostname and getpid.
#include "bridge/boot_timer.hpp"
#include "bridge/zk_handle.hpp"
#include "session/platform.hpp"

#include <boost/asio/steady_timer.hpp>

#include <limits>
#include <random>

#include <unistd.h>

namespace zklock::detail {

namespace {

/// Asio's steady timer as a timer_backend.
class steady_backend final : public timer_backend {
public:
    explicit steady_backend(const asio::any_io_executor& ex) : t_(ex) {}
    void wait_until(std::int64_t at,
                    asio::any_completion_handler<void(boost::system::error_code)> h) override {
        t_.expires_at(at == std::numeric_limits<std::int64_t>::max()
                          ? std::chrono::steady_clock::time_point::max()
                          : std::chrono::steady_clock::time_point(std::chrono::nanoseconds(at)));
        t_.async_wait(std::move(h));
    }
    void cancel() override { t_.cancel(); }

private:
    asio::steady_timer t_;
};

std::uint64_t thread_random() noexcept {
    thread_local std::mt19937_64 rng{[] {
        std::random_device rd;
        std::seed_seq seq{rd(), rd(), rd(), rd()};
        return std::mt19937_64(seq);
    }()};
    return rng();
}

class real final : public platform {
public:
    std::chrono::steady_clock::time_point steady_now() const noexcept override {
        return std::chrono::steady_clock::now();
    }
    std::chrono::system_clock::time_point wall_now() const noexcept override {
        return std::chrono::system_clock::now();
    }
    lease_ns boot_now() const noexcept override { return boot_clock_now(); }
    std::unique_ptr<timer_backend> make_timer(const asio::any_io_executor& ex, timer_clock c) override {
        if (c == timer_clock::boot) return std::make_unique<boot_timer>(ex);
        return std::make_unique<steady_backend>(ex);
    }
    std::uint64_t random64() noexcept override { return thread_random(); }
    std::string host_name() const override {
        char host[256] = {};
        if (::gethostname(host, sizeof host - 1) != 0) return "unknown";
        return host;
    }
    long process_id() const noexcept override { return static_cast<long>(::getpid()); }
    std::shared_ptr<zk_link> make_link(zk_link_params p) override {
        return std::make_shared<zk_handle>(std::move(p));
    }
};

} // namespace

std::shared_ptr<platform> real_platform() {
    static const std::shared_ptr<platform> p = std::make_shared<real>();
    return p;
}

} // namespace zklock::detail
