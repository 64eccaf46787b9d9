// The regain of a suspended lock as a sans-io state machine (docs/lease.md, "Suspended, then
// regained or lost"): a lock whose lease lapsed keeps its node, and is held again once a write
// committed after the suspension checked the node and a read on the same session, answered after
// that commit, shows the node this session created (the grant's czxid and this session as its
// owner), with the lease valid again. recipes/guard.cpp (held_lock::try_regain) drives it on the
// session; test/unit/regain_fsm_test.cpp feeds it replies by hand.
//
//   state           event                              -> action
//   idle            start (suspension, reconnect)      -> send_check (a multi holding check(node))
//   checking        check: ok                          -> send_read (exists(node): its stat)
//                   check: no node                     -> lost_deleted
//                   check: anything else               -> idle, wait (the next reconnect, or an
//                                                         expiry's own event, decides)
//   reading         read: no node                      -> lost_deleted
//                   read: other czxid or owner         -> lost_not_ours (the node is not ours:
//                                                         left alone)
//                   read: ours, lease valid            -> regained
//                   read: ours, lease lapsed, a commit
//                         awaits confirmation          -> send_check (premise 8: a later commit)
//                   read: ours, lease lapsed           -> retry_later (a heartbeat period: the
//                                                         lease's evidence needs time, not a loop)
//                   read: anything else                -> idle, wait (as above)
//   any but idle    start                              -> none (one check at a time)
#pragma once

#include <zookeeper/zookeeper.h>

#include <cstdint>

namespace zklock::detail {

class regain_fsm {
public:
    enum class action {
        none,          ///< nothing to do now (a check in flight, or waiting for a reconnect)
        send_check,    ///< a committed check of the node: a multi holding check(node, -1)
        send_read,     ///< exists(node) on the same session, for its stat
        retry_later,   ///< start() again after a heartbeat period
        regained,      ///< held again, with the same node and fencing token
        lost_deleted,  ///< the node is gone: lost for good (nothing to delete)
        lost_not_ours, ///< a node of that name that this session did not create: lost for good,
                       ///< and the node is someone else's (never deleted by us)
    };

    /// The grant's node: its czxid, and the session that created it.
    regain_fsm(std::int64_t czxid, std::int64_t session_id) noexcept : czxid_(czxid), session_(session_id) {}

    /// The suspension began, or the session reconnected, or a retry_later is due: send a check
    /// unless one is under way.
    action start() noexcept {
        if (state_ != state::idle) return action::none;
        state_ = state::checking;
        return action::send_check;
    }
    /// The committed check's reply (the multi's code: ZOK, or its failed operation's).
    action on_check(int rc) noexcept {
        if (state_ != state::checking) return action::none;
        if (rc == ZOK) {
            state_ = state::reading;
            return action::send_read;
        }
        state_ = state::idle;
        return rc == ZNONODE ? finish(action::lost_deleted) : action::none;
    }
    /// The read's reply: its code, and the node's czxid and ephemeral owner when ZOK;
    /// `lease_lapsed`, `awaits_confirmation`: the session's lease, now.
    action on_read(int rc, std::int64_t czxid, std::int64_t owner, bool lease_lapsed,
                   bool awaits_confirmation) noexcept {
        if (state_ != state::reading) return action::none;
        state_ = state::idle;
        if (rc == ZNONODE) return finish(action::lost_deleted);
        if (rc != ZOK) return action::none;
        if (czxid != czxid_ || owner != session_) return finish(action::lost_not_ours);
        if (!lease_lapsed) return finish(action::regained);
        if (awaits_confirmation) return start();
        return action::retry_later;
    }
    /// True once a verdict (regained or lost) was given: every later event answers none.
    bool finished() const noexcept { return state_ == state::finished; }
    /// True while a check or its read is under way.
    bool in_flight() const noexcept { return state_ == state::checking || state_ == state::reading; }

private:
    enum class state { idle, checking, reading, finished };
    action finish(action a) noexcept {
        state_ = state::finished;
        return a;
    }
    std::int64_t czxid_, session_;
    state state_ = state::idle;
};

} // namespace zklock::detail
