// The guaranteed deletes' decisions, pure: what a reply leads to, and when to try again.
// session_cleanup.cpp sends the requests and follows these verdicts; test/unit/cleanup_rules_test.cpp
// tests them without a server.
#pragma once

#include <zookeeper/zookeeper.h>

#include <algorithm>
#include <chrono>
#include <cstdint>

namespace zklock::detail::cleanup_rules {

/// What a reply to one of a background delete's requests leads to.
enum class verdict {
    finished,       ///< the node is gone, is not ours, or goes with the session: the job ends
    retry,          ///< the node may still be there: try again (see plan_retry)
    look_again,     ///< the node changed between the check and the delete: check it again
    delete_version, ///< (after the check) the node is ours: delete exactly the version read
    search,         ///< (after the listing) look for the create's GUID among the children
    unmarked,       ///< (after a marked release) delete the node without its marker
};

/// The handle is gone (closed, expired, refused): the session's ephemeral nodes go with it, so
/// there is nothing left to delete.
constexpr bool handle_gone(int rc) noexcept {
    return rc == ZCLOSING || rc == ZINVALIDSTATE || rc == ZSESSIONEXPIRED || rc == ZAUTHFAILED;
}

/// After `exists` on a node of a known owner (its creation zxid `owner_czxid`): delete it only
/// if it is still that node (an admin may have broken the lock and someone created it again).
constexpr verdict after_check(int rc, std::int64_t czxid, std::int64_t owner_czxid) noexcept {
    if (rc == ZNONODE || (rc == ZOK && czxid != owner_czxid)) return verdict::finished;
    if (handle_gone(rc)) return verdict::finished;
    if (rc != ZOK) return verdict::retry;
    return verdict::delete_version;
}

/// After the delete of the version that the check read.
constexpr verdict after_versioned_delete(int rc) noexcept {
    if (rc == ZBADVERSION) return verdict::look_again; // its data changed: still ours? look again
    if (rc == ZOK || rc == ZNONODE || handle_gone(rc)) return verdict::finished;
    return verdict::retry;
}

/// After the delete of a lock path that an acquire made (or may have made) and never used: a
/// container that never had a child, which the server never reaps. ZNOTEMPTY: someone's node is
/// in it now; the path is theirs, and the server reaps it once it is empty again.
constexpr verdict after_path_delete(int rc) noexcept {
    if (rc == ZOK || rc == ZNONODE || rc == ZNOTEMPTY || handle_gone(rc)) return verdict::finished;
    return verdict::retry;
}

/// After an unconditional delete (a node whose owner is not recorded). Anything but "gone"
/// leaves the node possibly there: never give up while the session lives.
constexpr verdict after_delete(int rc) noexcept {
    if (rc == ZOK || rc == ZNONODE || handle_gone(rc)) return verdict::finished;
    return verdict::retry;
}

/// After a release sent as one transaction: create and delete the release marker, delete the
/// node (protocol.hpp, release_marker). ZNONODE: the node is gone (or its parent, and the node with
/// it); a transaction tried again after a lost reply fails so. A refusal for any other reason (a
/// marker made by hand, an ACL, a server without multi) must not keep the node: delete it plainly.
constexpr verdict after_marked_release(int rc) noexcept {
    if (rc == ZOK || rc == ZNONODE || handle_gone(rc)) return verdict::finished;
    if (rc == ZCONNECTIONLOSS || rc == ZOPERATIONTIMEOUT) return verdict::retry;
    return verdict::unmarked;
}

/// After listing the parent of a create whose reply was lost (the node is named by its GUID).
constexpr verdict after_listing(int rc) noexcept {
    if (handle_gone(rc)) return verdict::finished;
    if (rc == ZNONODE) return verdict::finished; // the parent is gone, and so is the node
    if (rc != ZOK) return verdict::retry;
    return verdict::search;
}

/// When a failed request is tried again.
struct retry_plan {
    bool on_reconnect;                 ///< wait for the connection (no timer)
    std::chrono::milliseconds backoff; ///< else after this long
};

/// `failures` counts this job's failed requests, this one included (at least 1). A connection
/// loss or timeout while disconnected waits for the reconnect; anything else (connected, or an
/// error the connection does not explain: ZMARSHALLINGERROR, ZNOAUTH, ...) backs off from 50 ms,
/// doubling up to 5 s.
constexpr retry_plan plan_retry(int failures, int rc, bool connected) noexcept {
    if (!connected && (rc == ZCONNECTIONLOSS || rc == ZOPERATIONTIMEOUT)) return {true, {}};
    const auto wait = std::chrono::milliseconds(50) * (1 << std::clamp(failures - 1, 0, 7));
    return {false, std::min<std::chrono::milliseconds>(wait, std::chrono::seconds(5))};
}

} // namespace zklock::detail::cleanup_rules
