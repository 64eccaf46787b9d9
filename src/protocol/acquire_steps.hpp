// The exclusive and read/write acquire's decisions, pure: what to do after a listing of the lock
// path, and after a wake-up while waiting. The acquire's state machine (acquire_fsm.hpp) takes
// them, whether src/recipes/mutex.cpp drives it on a session or the deterministic simulator
// (test/sim/) on its model server.
#pragma once

#include "protocol/protocol.hpp"

#include <string>
#include <string_view>
#include <vector>

namespace zklock::detail {

/// What an acquire is, as far as its decisions go.
struct acquire_shape {
    lock_family family = lock_family::mutex;
    lock_dialect dialect = lock_dialect::curator;
    std::string own_writer; ///< a read acquire's own write node, which does not block it (downgrade)
    bool try_only = false;  ///< fail as busy rather than wait
    bool election = false;  ///< one naming on the path: a candidate of another fails the acquire
    naming own_naming = naming::curator_lock;
    bool watch_children = false; ///< lock_strategy::watch_children: the herd-prone variant (benchmarks)
};

/// After a listing of the lock path made once our node exists.
struct listing_step {
    enum kind {
        grant, ///< ours is the lowest (or, reading, no writer is below): granted, once the lease vouches
        wait,  ///< watch `predecessor` (and its marker with `watch_marker`), then see after_wake
        busy,  ///< a try: someone is ahead
        fail,  ///< give up with `why`, deleting our node (unless `why` is node_missing)
    } what = fail;
    enum failure {
        none,
        node_missing,      ///< our node is not in the listing: someone deleted it (or the session ended)
        sequence_overflow, ///< the parent's counter wrapped: the order is unknown (sequence_ambiguous)
        dialect_mixed,     ///< an election's path holds a candidate of another naming
    } why = none;
    /// Other children with our guid: a lost create applied, then created again. They sort before
    /// our node, so we would wait on ourselves: delete them in the background (decided without them).
    std::vector<std::string> duplicates;
    std::string predecessor; ///< with wait: the child to watch
    /// With wait: the predecessor's deletion alone grants us the lock, without listing again
    /// (granted_once_gone). Never for watch_children.
    bool alone = false;
    /// With wait and not alone: also watch the predecessor's release marker, whose creation grants
    /// us the lock (release_marker, may_mark_release). Never for watch_children.
    bool watch_marker = false;
};
listing_step after_listing(std::vector<std::string> children, std::string_view mine, std::string_view guid,
                           const acquire_shape& shape, parent_cversion cv);

/// What woke a waiter (or what its read of the predecessor found).
enum class wake {
    predecessor_deleted, ///< the predecessor's watch fired with a deletion
    predecessor_missing, ///< the read that set the watch found no predecessor
    marker_created,      ///< the predecessor's release marker was created
    other,               ///< anything else: a data change, a reconnect, a children event, a stale watch
};
enum class wake_step { grant, list };
/// After a wake-up of a waiter that was told `alone` (listing_step::alone).
constexpr wake_step after_wake(wake w, bool alone) noexcept {
    if (w == wake::marker_created) return wake_step::grant;
    if (alone && (w == wake::predecessor_deleted || w == wake::predecessor_missing)) return wake_step::grant;
    return wake_step::list;
}

} // namespace zklock::detail
