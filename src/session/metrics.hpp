// The metrics behind session::metrics(): relaxed atomics per lock path, found through a map that
// only grows (a shared lock to look a path up, an exclusive one to add it).
#pragma once

#include <zklock/error.hpp>
#include <zklock/metrics.hpp>

#include <atomic>
#include <chrono>
#include <memory>
#include <shared_mutex>
#include <string>
#include <unordered_map>

namespace zklock::detail {

struct atomic_histogram {
    std::array<std::atomic<std::uint64_t>, duration_histogram::bounds.size() + 1> buckets{};
    std::atomic<std::uint64_t> count{0}, sum_us{0}, max_us{0};

    void observe(std::chrono::steady_clock::duration d) noexcept {
        auto us = static_cast<std::uint64_t>(
            std::max<std::int64_t>(0, std::chrono::duration_cast<std::chrono::microseconds>(d).count()));
        std::size_t i = 0;
        while (i < duration_histogram::bounds.size() &&
               static_cast<double>(us) > duration_histogram::bounds[i] * 1e6)
            ++i;
        buckets[i].fetch_add(1, std::memory_order_relaxed);
        count.fetch_add(1, std::memory_order_relaxed);
        sum_us.fetch_add(us, std::memory_order_relaxed);
        auto m = max_us.load(std::memory_order_relaxed);
        while (us > m && !max_us.compare_exchange_weak(m, us, std::memory_order_relaxed)) {
        }
    }
    void add_to(duration_histogram& h) const noexcept {
        for (std::size_t i = 0; i < buckets.size(); ++i)
            h.buckets[i] += buckets[i].load(std::memory_order_relaxed);
        h.count += count.load(std::memory_order_relaxed);
        h.sum_us += sum_us.load(std::memory_order_relaxed);
        h.max_us = std::max(h.max_us, max_us.load(std::memory_order_relaxed));
    }
};

struct path_metrics {
    std::atomic<std::uint64_t> started{0}, granted{0}, timed_out{0}, busy{0}, cancelled{0}, failed{0},
        handoff{0};
    std::atomic<std::int64_t> waiting{0};
    atomic_histogram wait, hold;
    std::array<std::atomic<std::uint64_t>, loss_reason_count> losses{};

    void record_loss(const error_code& why) noexcept {
        loss_reason r = loss_reason::other;
        if (why == errc::lease_expired)
            r = loss_reason::lease_expired;
        else if (why == errc::lock_lost_suspended)
            r = loss_reason::disconnected;
        else if (why == errc::session_expired)
            r = loss_reason::session_expired;
        else if (why == errc::lock_node_deleted)
            r = loss_reason::node_deleted;
        else if (why == errc::session_closed)
            r = loss_reason::session_closed;
        losses[static_cast<std::size_t>(r)].fetch_add(1, std::memory_order_relaxed);
    }
    void add_to(lock_metrics& m) const noexcept {
        m.acquires_started += started.load(std::memory_order_relaxed);
        m.granted += granted.load(std::memory_order_relaxed);
        m.timed_out += timed_out.load(std::memory_order_relaxed);
        m.busy += busy.load(std::memory_order_relaxed);
        m.cancelled += cancelled.load(std::memory_order_relaxed);
        m.failed += failed.load(std::memory_order_relaxed);
        m.waiting += waiting.load(std::memory_order_relaxed);
        m.handoff_grants += handoff.load(std::memory_order_relaxed);
        wait.add_to(m.wait);
        hold.add_to(m.hold);
        for (std::size_t i = 0; i < losses.size(); ++i)
            m.losses[i] += losses[i].load(std::memory_order_relaxed);
    }
};

class metrics_registry {
public:
    explicit metrics_registry(std::size_t max_paths) : max_paths_(max_paths) {}

    /// The record of `path` (created on first use; "(other)" beyond the cap). Any thread.
    std::shared_ptr<path_metrics> path(const std::string& path) {
        {
            std::shared_lock lk(mu_);
            if (auto it = paths_.find(path); it != paths_.end()) return it->second;
        }
        std::unique_lock lk(mu_);
        if (auto it = paths_.find(path); it != paths_.end()) return it->second;
        auto& slot = paths_.size() < max_paths_ ? paths_[path] : paths_["(other)"];
        if (!slot) slot = std::make_shared<path_metrics>();
        return slot;
    }
    void snapshot(metrics_snapshot& out) const {
        std::shared_lock lk(mu_);
        for (auto& [p, m] : paths_) {
            m->add_to(out.by_path[p]);
            m->add_to(out.total);
        }
    }

private:
    const std::size_t max_paths_;
    mutable std::shared_mutex mu_;
    std::unordered_map<std::string, std::shared_ptr<path_metrics>> paths_;
};

} // namespace zklock::detail
