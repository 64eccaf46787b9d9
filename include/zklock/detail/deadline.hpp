// zklock/detail/deadline.hpp: "now + timeout" that saturates instead of overflowing.
#pragma once

#include <zklock/config.hpp>

#include <chrono>
#include <optional>

namespace zklock::detail {

class session_impl;
/// Now on the steady clock of `s`'s platform (src/session/platform.hpp): the clock a timed form's
/// deadline counts on (the machine's steady_clock unless the session was given another platform;
/// null: the machine's; the operation then fails for want of a session).
ZKLOCK_DECL std::chrono::steady_clock::time_point steady_now_of(const session_impl* s) noexcept;

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

/// When an operation gives up: never, at a time, or a timeout after the operation *starts*. An
/// initiating function with a deferred token (asio::deferred, a use_awaitable awaited later)
/// starts the operation only when it is launched, so a timeout is counted from there
/// (resolve(steady_now_of(session)), called by the initiation), not from the call that made it.
class ZKLOCK_DECL deadline_spec {
public:
    using clock = std::chrono::steady_clock;
    deadline_spec() noexcept = default; ///< no deadline
    static deadline_spec at(clock::time_point t) noexcept {
        deadline_spec s;
        s.kind_ = kind::absolute;
        s.at_ = t;
        return s;
    }
    /// Saturated like deadline_after: d <= 0 times out at once, a d too large means no deadline.
    template <class Rep, class Period>
    static deadline_spec after(std::chrono::duration<Rep, Period> d) noexcept {
        deadline_spec s;
        if (d <= d.zero()) {
            s.kind_ = kind::relative;
            return s;
        }
        if (std::chrono::duration<double>(d) >= std::chrono::duration<double>(clock::duration::max()) / 4)
            return s;
        s.kind_ = kind::relative;
        s.in_ = std::chrono::duration_cast<clock::duration>(d);
        return s;
    }
    /// The deadline, for an operation that starts at `now` (its session's clock: steady_now_of).
    std::optional<clock::time_point> resolve(clock::time_point now) const noexcept {
        switch (kind_) {
        case kind::none:
            return std::nullopt;
        case kind::absolute:
            return at_;
        case kind::relative:
            // (in_ is below duration::max() / 4: after() saturates larger ones to no deadline)
            return in_ >= clock::time_point::max() - now ? clock::time_point::max() : now + in_;
        }
        return std::nullopt;
    }

private:
    enum class kind { none, absolute, relative };
    kind kind_ = kind::none;
    clock::time_point at_{};
    clock::duration in_{};
};

} // namespace zklock::detail
