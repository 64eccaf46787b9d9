// The regain of a suspended lock as a sans-io state machine (docs/lease.md, "Suspended, then
// regained or lost"): a lock whose lease lapsed keeps its node, and is held again once a read on
// the session, sent after a write of the session that was itself sent after the suspension and
// answered, shows the node this session created (the grant's czxid and this session as its
// owner), with the lease valid again. The write is the session's heartbeat (one per period
// whatever the number of suspended locks; it also checks the suspended nodes in turn, and one
// found gone ends its suspension). recipes/guard.cpp (held_lock::on_commit) drives the machine;
// test/unit/regain_fsm_test.cpp feeds it replies by hand.
//
//   state      event                                        -> action
//   idle       a heartbeat answered, sent after the
//              suspension, the lease valid                  -> send_read (exists(node): its stat)
//              a heartbeat sent before, or the lease lapsed -> none (the next heartbeat)
//   reading    read: no node                                -> lost_deleted
//              read: other czxid or owner                   -> lost_not_ours (left alone)
//              read: ours, the lease valid                  -> regained
//              read: ours, the lease lapsed                 -> idle (the next heartbeat)
//              read: anything else (connection trouble)     -> idle (the next heartbeat: the
//                                                              reconnect sends one at once)
// (A heartbeat that finds the node gone ends the suspension as it ends a hold: session_impl's
// on_gone, held_lock::lose.)
#pragma once

#include <zookeeper/zookeeper.h>

#include "protocol/coverage.hpp"

#include <cstdint>

namespace zklock::detail {

class regain_fsm {
public:
    enum class action {
        none,          ///< nothing to do now: wait for the next heartbeat
        send_read,     ///< exists(node) on the session, for its stat
        regained,      ///< held again, with the same node and fencing token
        lost_deleted,  ///< the node is gone: lost for good (nothing to delete)
        lost_not_ours, ///< a node of that name that this session did not create: lost for good,
                       ///< and the node is someone else's (never deleted by us)
    };

    /// The two rules a regain rests on. Both are on in the library; the simulator's hunts turn
    /// one off to show that its seeds find the defect (zklock_sim_lease --bug regain-stale-commit,
    /// regain-any-node).
    struct rules {
        /// Read only after a heartbeat that was sent after the suspension: an earlier one's reply
        /// may come from a server that has not seen a break since.
        bool after_suspension = true;
        /// Regain only the node of the grant: its czxid and this session as its owner.
        bool check_identity = true;
    };

    /// The grant's node: its czxid, and the session that created it.
    regain_fsm(std::int64_t czxid, std::int64_t session_id) noexcept : czxid_(czxid), session_(session_id) {}
    regain_fsm(std::int64_t czxid, std::int64_t session_id, rules r) noexcept
        : czxid_(czxid), session_(session_id), rules_(r) {}

    /// A heartbeat of the session was answered. `sent_after_suspension`: it was sent after the
    /// lease was found lapsed (so a read answered after it sees a state no older than that
    /// write's); `lease_lapsed`: the session's lease, now.
    action on_commit(bool sent_after_suspension, bool lease_lapsed) noexcept {
        if (state_ != state::idle || (rules_.after_suspension && !sent_after_suspension) || lease_lapsed)
            return action::none;
        enter(state::reading);
        return action::send_read;
    }
    /// The read's reply: its code, and the node's czxid and ephemeral owner when ZOK;
    /// `lease_lapsed`: the session's lease, now.
    action on_read(int rc, std::int64_t czxid, std::int64_t owner, bool lease_lapsed) noexcept {
        if (state_ != state::reading) return action::none;
        enter(state::idle);
        if (rc == ZNONODE) return finish(action::lost_deleted);
        if (rc != ZOK) return action::none;
        if (rules_.check_identity && (czxid != czxid_ || owner != session_))
            return finish(action::lost_not_ours);
        if (lease_lapsed) return action::none;
        return finish(action::regained);
    }
    /// True once a verdict (regained or lost) was given: every later event answers none.
    bool finished() const noexcept { return state_ == state::finished; }
    /// True while a read is under way.
    bool in_flight() const noexcept { return state_ == state::reading; }

private:
    enum class state { idle, reading, finished };
    void enter(state s) noexcept {
        transitions.note(static_cast<int>(state_), static_cast<int>(s));
        state_ = s;
    }
    /// Its transitions, counted (coverage.hpp).
    static inline transition_table transitions{"regain", {"idle", "reading", "finished"}};
    action finish(action a) noexcept {
        enter(state::finished);
        return a;
    }
    std::int64_t czxid_, session_;
    rules rules_{};
    state state_ = state::idle;
};

} // namespace zklock::detail
