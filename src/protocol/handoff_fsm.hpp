// The in-process hand-off (mutex_options::local_handoff) as a sans-io state machine: the local
// acquires of one session on one path queue behind a single lock node and pass the lock to each
// other without a request. Input: a waiter comes or gives up; the node's acquire ends; a lent
// grant is released; the node is lost; the session ends. Output: effects, in order, that the
// driver (src/recipes/handoff.cpp) carries out: start or cancel the node's acquire, grant or fail
// a waiter, let go of the node. The machine holds no handler, timer or guard, only ids.
//
//   phase       event                                   -> effects, next phase
//   idle        a waiter comes                          -> start the node's acquire; acquiring
//   acquiring   a try comes                             -> fail it (busy)
//   acquiring   the last waiter leaves                  -> cancel the acquire; it completes once
//                                                          the acquire has ended (no node outlives it)
//   acquiring   the node, waiters left                  -> keep it; grant the first; held
//   acquiring   the node, nobody left                   -> let go of it (then complete the leavers); idle
//   acquiring   busy (a try-only acquire)               -> fail the tries; start again if others wait
//   acquiring   ended because we cancelled, new waiters -> start again
//   acquiring   an error                                -> fail every waiter with it; idle
//   held        the lent grant is released              -> decide_after_release: hand off (grant
//                                                          the next), or let go (and queue again)
//   held        the node lost (deleted, lease, policy)  -> let go; start again if others wait
//   any         the session expired or closed           -> fail every waiter; let go; idle
#pragma once

#include "protocol/coverage.hpp"
#include "protocol/protocol.hpp"

#include <algorithm>
#include <cstdint>
#include <map>
#include <utility>
#include <vector>

namespace zklock::detail {

/// Why a waiter is told no (the driver names it with an error_code).
enum class handoff_reason {
    cancelled,   ///< the waiter's own cancellation
    timed_out,   ///< its deadline passed
    busy,        ///< a try that found the lock taken
    node_failed, ///< the node's acquire failed: with that acquire's error
    session_end, ///< the session expired (its end_reason) or closed (cancelled)
};

struct handoff_effect {
    enum kind {
        start_node,  ///< start the node's acquire (`try_only`: every waiter is a try)
        cancel_node, ///< cancel the node's acquire in flight
        grant,       ///< grant waiter `id` under the node (`index`: grants under it so far)
        fail,        ///< complete waiter `id` with `why`
        keep_node,   ///< the acquire's result is the queue's node now (watch it, follow its loss)
        drop_result, ///< release the acquire's result in the background (not kept)
        drop_result_then_complete, ///< release it, and then complete `leavers` (who gave up)
        release_node, ///< delete the queue's node; a releaser's completion, if any, when it is gone
        release_done, ///< complete the releaser's completion at once (its grant passed on)
        forget,       ///< the queue may be idle: forget it if nothing else holds it
    } what;
    std::uint64_t id = 0;
    handoff_reason why = handoff_reason::cancelled;
    bool try_only = false;
    std::uint32_t index = 0;
    std::vector<std::pair<std::uint64_t, handoff_reason>> leavers = {};
};

class handoff_fsm {
public:
    enum class phase { idle, acquiring, held };
    /// How the node's acquire ended.
    enum class node_result {
        granted,   ///< a node, held
        lost,      ///< a node, lost already (between the grant and now)
        busy,      ///< a try-only acquire found the lock taken
        cancelled, ///< cancelled (by us, if cancel_node was ours)
        failed,    ///< any other error (node_failed)
    };
    using effects = std::vector<handoff_effect>;

    /// `bound`: the most grants under one node (mutex_options::local_handoff, at least 1).
    explicit handoff_fsm(std::uint32_t bound) : bound_(bound) {}

    /// A waiter comes. `cancelled`: cancelled before it got here; `past_deadline`: its deadline
    /// has passed already.
    effects enqueue(std::uint64_t id, bool try_only, bool cancelled, bool past_deadline) {
        effects out;
        if (cancelled || (try_only && phase_ != phase::idle) || past_deadline) {
            const auto why = cancelled                           ? handoff_reason::cancelled
                             : try_only && phase_ != phase::idle ? handoff_reason::busy
                                                                 : handoff_reason::timed_out;
            out.push_back({handoff_effect::fail, id, why});
            out.push_back({handoff_effect::forget});
            return out;
        }
        waiters_.emplace(id, try_only);
        if (phase_ == phase::idle) start(out);
        return out;
    }

    /// A waiter gives up (its cancellation or its deadline). The last one to leave while the node
    /// is being acquired is completed only once that acquire has ended and deleted its node.
    effects leave(std::uint64_t id, handoff_reason why) {
        effects out;
        if (waiters_.erase(id) == 0) return out;
        if (waiters_.empty() && phase_ == phase::acquiring) {
            leavers_.emplace_back(id, why);
            cancelled_by_us_ = true;
            out.push_back({handoff_effect::cancel_node});
            return out;
        }
        out.push_back({handoff_effect::fail, id, why});
        return out;
    }

    /// The node's acquire ended. `session_alive`: the session object still exists; `closed`: it
    /// was closed.
    effects on_node(node_result r, bool session_alive, bool closed) {
        effects out;
        enter(phase::idle);
        const bool we_cancelled = std::exchange(cancelled_by_us_, false);
        auto leavers = std::move(leavers_);
        leavers_.clear();
        if (session_alive && waiters_.empty() && r == node_result::granted) {
            // Granted just as the last waiter left: delete the node first, then let them complete.
            out.push_back({handoff_effect::drop_result_then_complete, 0, {}, false, 0, std::move(leavers)});
            out.push_back({handoff_effect::forget});
            return out;
        }
        for (auto& [id, why] : leavers) out.push_back({handoff_effect::fail, id, why});
        if (!session_alive) return out;
        if (waiters_.empty()) { // everyone left while we waited
            out.push_back({handoff_effect::drop_result});
            out.push_back({handoff_effect::forget});
            return out;
        }
        switch (r) {
        case node_result::busy:
            fail_if([](bool try_only) { return try_only; }, handoff_reason::busy, out);
            if (!waiters_.empty()) {
                start(out); // those who came later wait
                return out;
            }
            out.push_back({handoff_effect::forget});
            return out;
        case node_result::cancelled:
            if (we_cancelled && !closed) {
                start(out); // we cancelled it (all had left), and new waiters came
                return out;
            }
            [[fallthrough]];
        case node_result::failed:
            fail_if([](bool) { return true; },
                    r == node_result::cancelled ? handoff_reason::cancelled : handoff_reason::node_failed,
                    out);
            out.push_back({handoff_effect::forget});
            return out;
        case node_result::lost: // lost between the grant and now (e.g. the loss policy fired)
            out.push_back({handoff_effect::drop_result});
            start(out);
            return out;
        case node_result::granted:
            break;
        }
        out.push_back({handoff_effect::keep_node});
        grants_ = 0;
        enter(phase::held);
        grant_next(out);
        return out;
    }

    /// The lent grant is released (`current`: it is the grant out now, not one of an earlier node).
    /// `node_held`: the node is held and nobody asked us to give it up; `connected`: the session
    /// is connected.
    effects local_release(bool current, bool node_held, bool connected) {
        effects out;
        if (!current) {
            out.push_back({handoff_effect::release_done}); // an earlier node's: nothing to pass on
            return out;
        }
        lent_ = false;
        if (phase_ != phase::held) { // the queue let go of the node already (expiry, close)
            out.push_back({handoff_effect::release_done});
            out.push_back({handoff_effect::forget});
            return out;
        }
        switch (decide_after_release(node_held, connected, waiters_.size(), grants_, bound_)) {
        case after_release::hand_off:
            out.push_back({handoff_effect::release_done});
            grant_next(out);
            break;
        case after_release::release_requeue:
            release(out);
            start(out);
            break;
        case after_release::release:
            release(out);
            out.push_back({handoff_effect::forget});
            break;
        }
        return out;
    }

    /// The node is lost while the session lives on (deleted by someone, its lease lapsed, or lost
    /// by the loss policy and now past its handover time). `closed`: the session was closed.
    effects node_lost(bool closed) {
        effects out;
        if (phase_ != phase::held) return out; // released meanwhile
        lent_ = false;                         // its release, whenever it comes, passes nothing on
        release(out);
        if (!waiters_.empty() && !closed)
            start(out);
        else
            out.push_back({handoff_effect::forget});
        return out;
    }

    /// The session expired or was closed: every waiter is told, and the node goes.
    effects session_ended() {
        effects out;
        fail_if([](bool) { return true; }, handoff_reason::session_end, out);
        if (phase_ == phase::held) release(out);
        out.push_back({handoff_effect::forget});
        return out;
    }

    phase state() const noexcept { return phase_; }
    /// Nothing waits, leaves or is being acquired: the queue may go (if no grant is out).
    bool idle() const noexcept { return phase_ == phase::idle && waiters_.empty() && leavers_.empty(); }
    bool lent() const noexcept { return lent_; }
    std::size_t waiters() const noexcept { return waiters_.size(); }

private:
    void start(effects& out) {
        enter(phase::acquiring);
        cancelled_by_us_ = false;
        const bool all_tries =
            std::all_of(waiters_.begin(), waiters_.end(), [](const auto& kv) { return kv.second; });
        out.push_back({handoff_effect::start_node, 0, {}, all_tries});
    }
    void grant_next(effects& out) {
        auto it = waiters_.begin();
        out.push_back({handoff_effect::grant, it->first, {}, false, grants_++});
        waiters_.erase(it);
        lent_ = true;
    }
    void release(effects& out) {
        enter(phase::idle);
        out.push_back({handoff_effect::release_node});
    }
    template <class Pred>
    void fail_if(Pred pred, handoff_reason why, effects& out) {
        for (auto it = waiters_.begin(); it != waiters_.end();) {
            if (!pred(it->second)) {
                ++it;
                continue;
            }
            out.push_back({handoff_effect::fail, it->first, why});
            it = waiters_.erase(it);
        }
    }

    void enter(phase p) noexcept {
        transitions.note(static_cast<int>(phase_), static_cast<int>(p));
        phase_ = p;
    }
    /// The queue's phases, counted (coverage.hpp).
    static inline transition_table transitions{"handoff", {"idle", "acquiring", "held"}};
    static_assert(static_cast<int>(phase::held) == 2, "a name for each phase");

    std::uint32_t bound_;
    phase phase_ = phase::idle;
    std::map<std::uint64_t, bool> waiters_; // FIFO by id: whether it is a try
    std::vector<std::pair<std::uint64_t, handoff_reason>> leavers_;
    bool cancelled_by_us_ = false;
    std::uint32_t grants_ = 0;
    bool lent_ = false;
};

} // namespace zklock::detail
