// Transition counters of the library's state machines: always on, one relaxed increment per step
// of a machine (a few nanoseconds beside a round trip to ZooKeeper). The whole-library simulation
// reads them after its seeds and fails when a transition that its seeds reached before is reached
// no more (test/sim/whole/transitions.txt): a change of a machine, of a driver or of the world
// that leaves part of a machine unexplored is seen at once, not after a defect hid there.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

namespace zklock::detail {

/// One machine's transitions, counted: `from` and `to` index `states`, in the order of the
/// machine's own enum. Each table registers itself once (all()).
class transition_table {
public:
    transition_table(const char* machine, std::vector<const char*> states)
        : machine_(machine), states_(std::move(states)),
          counts_(new std::atomic<std::uint64_t>[states_.size() * states_.size()]()) {
        registry().push_back(this);
    }
    transition_table(const transition_table&) = delete;
    transition_table& operator=(const transition_table&) = delete;

    void note(int from, int to) noexcept {
        const auto n = states_.size();
        const auto f = static_cast<std::size_t>(from), t = static_cast<std::size_t>(to);
        if (f < n && t < n) counts_[f * n + t].fetch_add(1, std::memory_order_relaxed);
    }
    const char* machine() const noexcept { return machine_; }
    const std::vector<const char*>& states() const noexcept { return states_; }
    std::uint64_t count(std::size_t from, std::size_t to) const noexcept {
        return counts_[from * states_.size() + to].load(std::memory_order_relaxed);
    }

    /// Every machine's table, in the order they registered (in this binary: header-only, so a
    /// program that includes a machine's header has its own).
    static const std::vector<const transition_table*>& all() { return registry(); }

private:
    static std::vector<const transition_table*>& registry() {
        static std::vector<const transition_table*> r;
        return r;
    }
    const char* machine_;
    std::vector<const char*> states_;
    std::unique_ptr<std::atomic<std::uint64_t>[]> counts_;
};

} // namespace zklock::detail
