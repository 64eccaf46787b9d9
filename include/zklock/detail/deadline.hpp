// zklock/detail/deadline.hpp: "now + timeout" that saturates instead of overflowing.
#pragma once

#include <chrono>

namespace zklock::detail {

/// steady_clock::now() + d, saturated: d <= 0 gives now; a d too large to add (duration::max(),
/// hours::max(), ...) gives time_point::max(), i.e. no deadline. Never overflows.
template <class Rep, class Period>
std::chrono::steady_clock::time_point deadline_after(std::chrono::duration<Rep, Period> d) noexcept {
    using clock = std::chrono::steady_clock;
    const auto now = clock::now();
    if (d <= d.zero()) return now;
    // Compare in floating point: d may not fit in clock::duration at all.
    const std::chrono::duration<double> room = clock::time_point::max() - now;
    if (std::chrono::duration<double>(d) >= room / 2) return clock::time_point::max();
    return now + std::chrono::duration_cast<clock::duration>(d);
}

} // namespace zklock::detail
