// zklock/metrics.hpp: what a session's locks did, as a snapshot and as Prometheus text.
#pragma once

#include <zklock/config.hpp>

#include <zklock/session.hpp>

#include <array>
#include <chrono>
#include <cstdint>
#include <map>
#include <string>

namespace zklock {

/// A fixed-bucket histogram of durations. Bucket i counts the observations <= bounds[i]
/// (and > bounds[i-1]); the last bucket counts those above every bound. Times in microseconds.
struct duration_histogram {
    /// Upper bounds in seconds: 1 ms .. 60 s.
    static constexpr std::array<double, 10> bounds = {0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5, 10, 60};
    /// The count of each bucket (not cumulative); the last one is above every bound.
    std::array<std::uint64_t, bounds.size() + 1> buckets{};
    std::uint64_t count = 0;  ///< the number of observations
    std::uint64_t sum_us = 0; ///< their sum, in microseconds
    std::uint64_t max_us = 0; ///< the largest one, in microseconds
};

/// Why held locks were lost (see "What happens on session loss" in docs/guarantees.md), by the
/// guard's loss reason: `lease_expired` (errc::lease_expired), `disconnected`
/// (errc::lock_lost_suspended), `session_expired` (errc::session_expired), `node_deleted`
/// (errc::lock_node_deleted), `session_closed` (errc::session_closed), `other` (any other reason).
enum class loss_reason : std::uint8_t {
    lease_expired,
    disconnected,
    session_expired,
    node_deleted,
    session_closed,
    other
};
/// The number of loss_reason values (the size of lock_metrics::losses).
inline constexpr std::size_t loss_reason_count = 6;
/// The value's name: "lease_expired", "disconnected", ..., "other" (the `reason` label of
/// to_prometheus).
ZKLOCK_DECL const char* to_string(loss_reason r) noexcept;

/// One lock path's counters (or the sum over all of them).
struct lock_metrics {
    std::uint64_t acquires_started = 0; ///< acquires started
    std::uint64_t granted = 0;          ///< acquires that completed with a grant (hand-off grants included)
    std::uint64_t timed_out = 0;        ///< errc::acquire_timeout
    std::uint64_t busy = 0;             ///< errc::lock_busy (a try-acquire that found the lock held)
    std::uint64_t cancelled = 0;        ///< asio::error::operation_aborted
    std::uint64_t failed = 0;           ///< every other error
    std::int64_t waiting = 0;           ///< acquires in progress now
    std::uint64_t handoff_grants = 0;   ///< grants passed on in-process (mutex_options::local_handoff)
    duration_histogram wait;            ///< from the start of an acquire to its grant
    /// From a grant to its release or loss (per node: a reentrant hold counts once).
    duration_histogram hold;
    std::array<std::uint64_t, loss_reason_count> losses{}; ///< indexed by loss_reason
};

/// A session's metrics at one moment. Per-path records are kept for the first
/// session_options::metrics_max_paths lock paths; later paths are summed under "(other)".
struct metrics_snapshot {
    lock_metrics total;                          ///< the sum over every lock path
    std::map<std::string, lock_metrics> by_path; ///< per lock path (and "(other)")
    std::uint64_t reconnects = 0;                ///< connection re-established, same session
    std::uint64_t expiries = 0;                  ///< sessions the server expired
    /// Guaranteed deletes retried (after a connection loss, or an error: they never give up while
    /// the session lives).
    std::uint64_t background_delete_retries = 0;
    std::uint64_t background_deletes_pending = 0; ///< guaranteed deletes not done yet
    /// The age of the oldest guaranteed delete not done yet (0 when there is none).
    std::chrono::milliseconds oldest_background_delete_age{0};
    session_statistics requests; ///< the session's request counters (session::statistics())
};

/// The snapshot in the Prometheus text exposition format (version 0.0.4), metric names starting
/// with `prefix` ("zklock" gives zklock_acquires_total, zklock_wait_seconds, ...), lock paths
/// as the `path` label. Serve it on /metrics with content type "text/plain; version=0.0.4".
ZKLOCK_DECL std::string to_prometheus(const metrics_snapshot& m, const std::string& prefix = "zklock");

} // namespace zklock
