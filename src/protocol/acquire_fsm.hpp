// The sequential acquire (the fair exclusive lock's, the read/write lock's, an election's campaign)
// as a sans-io state machine: it is told the result of what it asked for and answers with what to
// do next. It sends nothing, reads no clock, sets no timer: src/recipes/mutex.cpp's driver performs
// its actions on the session (requests, watches, the lease's check, waiting for the connection),
// and the deterministic simulator (test/sim/) performs them against its model server.
//
//   create ──ok──▶ line ──listing──▶ [semaphore check] ──▶ after_listing ──grant──▶ lease ──ok──▶ GRANT
//     │  ╲no parent        ▲   ▲                                 │wait                 │not ok
//     │   ▶ make parents ──┘   │                                 ▼                     ▼
//     │lost                    └──────────── list again ◀── watch ─▶ wait ─▶ after_wake ─grant─▶ lease
//     ▼
//   recover: list, find our guid, read the node: ours ─▶ line; none, or not ours ─▶ create again
//
// Every failure deletes our node if there is one (the driver's abandon). The table of states and
// events is in docs/internals.md.
#pragma once

#include "protocol/acquire_steps.hpp"
#include "protocol/coverage.hpp"
#include "protocol/protocol.hpp"

#include <algorithm>
#include <array>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace zklock::detail {

/// A request's outcome, as far as the acquire's decisions go.
enum class outcome {
    ok,
    no_node,    ///< ZNONODE
    connection, ///< the connection was lost, or the request timed out: it may have been applied
    other,      ///< any other error (`rc` says which)
};

/// What the driver must do next. Each action but the two final ones is answered by one
/// acquire_input (the fields it reads are listed per action).
struct acquire_action {
    enum kind {
        /// Until the session is connected, or the acquire must stop → `ok` (false: stop).
        wait_connected,
        /// Create `node` (the prefix) ephemeral and sequential, with the acquire's data, and list
        /// the lock path in the same flight → `result`, `rc`, `path`, `czxid`; the listing:
        /// `listed` (ok: its `children` and `cv`).
        create_and_list,
        /// Create the lock path and its ancestors (containers) → `result`, `rc`.
        make_parents,
        /// List the lock path → `result`, `rc`, `children`, `cv`. With `barrier`, a write first in
        /// the same flight (a check of the lock path), so that the listing shows every write this
        /// session sent before it.
        list,
        /// Read the stat of `node` (exists) → `result`, `rc`, `owner`, `czxid`, `session`.
        read_node,
        /// List "<path>/leases" (a semaphore's) → `result`, `rc`, `children`.
        list_leases,
        /// Watch the predecessor `node`: read it with a watch (or, with `watch_children`, list the
        /// path with a child watch) and, with `watch_marker`, watch its release marker's creation
        /// first → `result`, `rc`, `marked` (the marker was created already); with
        /// `watch_children` also `children` and `cv`.
        watch,
        /// Until a watch of the last `watch` fires, the connection comes back, or the acquire must
        /// stop → `pred_deleted`, `marked`. The watches end at the next action that is not `wait`.
        wait,
        /// The lease must vouch for the session before the grant → `result` (ok, or not yet).
        /// `by_marker`: granted by the predecessor's release marker.
        check_lease,
        /// Final: the lock is ours (node(), czxid(), waited()).
        grant,
        /// Final: the acquire failed with `why`; node(), if any, is to be deleted.
        fail,
    } what = fail;
    enum failure {
        none,
        stop,                     ///< the reason it must stop: cancelled, the deadline, the session's end
        request_failed,           ///< `rc`, unless the session's end explains it
        request_failed_raw,       ///< `rc` as the server said it
        no_parent,                ///< no lock path although we made it (a chroot that does not exist)
        busy,                     ///< a try found the lock taken
        create_retries_exhausted, ///< the create's replies kept being lost
        strategy_conflict,        ///< "<path>/lock" of the unique_node strategy is there
        path_used_by_semaphore,   ///< a semaphore's lease is there
        dialect_mixed,            ///< an election's path holds a candidate of another naming
        sequence_overflow,        ///< the parent's counter wrapped: the order is unknown
        node_deleted,             ///< our node is gone (unless the session's end explains it)
    } why = none;
    int rc = 0;                  ///< with request_failed*
    std::string node;            ///< create_and_list: the prefix; read_node, watch: the node
    bool watch_marker = false;   ///< watch
    bool watch_children = false; ///< watch
    bool by_marker = false;      ///< check_lease
    /// list: send a write before it (see list). A create lost with the connection may still sit
    /// in the leader's pipeline while the next connection's server answers reads from a state
    /// without it (reads are not synced): a listing that does not show it would be taken for
    /// "never applied", and the node would come later, ours, and known to no one.
    bool barrier = false;
    /// To do first, in the background (guaranteed deletes): these nodes ...
    std::vector<std::string> delete_nodes;
    /// ... and any node of the lock path whose name holds our guid (a create whose reply was lost).
    bool delete_by_guid = false;
};

/// The result of the last action (see acquire_action for which fields each one sets).
struct acquire_input {
    bool stop = false; ///< the acquire must stop: cancelled, past its deadline, the session ended
    outcome result = outcome::ok;
    int rc = 0; ///< the server's code, for the errors
    bool ok = false;
    std::string path;
    std::int64_t czxid = 0;
    outcome listed = outcome::other; ///< create_and_list: the listing's outcome
    std::vector<std::string> children;
    parent_cversion cv;
    std::int64_t owner = 0;   ///< read_node: the node's ephemeral owner
    std::int64_t session = 0; ///< read_node: this session's id
    bool marked = false;
    bool pred_deleted = false;
};

/// The decisions the machine takes from src/protocol/acquire_steps.hpp. The simulator
/// instantiates the machine with its own, to re-introduce past defects one at a time.
struct acquire_decisions {
    static listing_step after_listing(std::vector<std::string> children, std::string_view mine,
                                      std::string_view guid, const acquire_shape& shape, parent_cversion cv) {
        return detail::after_listing(std::move(children), mine, guid, shape, cv);
    }
    static wake_step after_wake(wake w, bool alone) { return detail::after_wake(w, alone); }
};

template <class Decisions = acquire_decisions>
class basic_acquire_fsm {
public:
    enum class state {
        creating,           ///< create_and_list sent
        making_parents,     ///< make_parents sent
        reconnecting,       ///< waiting for the connection, then create again
        recover_connecting, ///< a create's reply was lost: waiting for the connection to look for it
        recover_listing,    ///< ... listing the path for our guid
        recover_reading,    ///< ... reading the node found, whose owner must be this session
        line_listing,       ///< our node exists: list the path
        line_connecting,    ///< waiting for the connection, then list again
        leases_listing,     ///< the semaphore check: listing "<path>/leases"
        watching,           ///< watch sent
        waiting,            ///< waiting for a watch
        checking_lease,     ///< the lease's check before the grant
        done,               ///< granted or failed
    };
    /// The states' names, in the enum's order, and the machine's transitions (coverage.hpp).
    static constexpr std::array state_names{"creating",
                                            "making_parents",
                                            "reconnecting",
                                            "recover_connecting",
                                            "recover_listing",
                                            "recover_reading",
                                            "line_listing",
                                            "line_connecting",
                                            "leases_listing",
                                            "watching",
                                            "waiting",
                                            "checking_lease",
                                            "done"};
    static_assert(state_names.size() == static_cast<std::size_t>(state::done) + 1, "a name for each state");
    static inline transition_table transitions{"acquire", {state_names.begin(), state_names.end()}};

    struct config {
        std::string path;   ///< the lock path
        std::string prefix; ///< our node's name up to its sequence number (with our guid in it)
        std::string guid;   ///< how a lost create is found again ("": it cannot be)
        acquire_shape shape;
    };

    explicit basic_acquire_fsm(config c) : c_(std::move(c)) {}

    /// The first action (the session is connected).
    acquire_action start(bool stop) {
        const auto from = st_;
        auto a = create_top(stop);
        transitions.note(static_cast<int>(from), static_cast<int>(st_));
        return a;
    }

    /// The next action, after the result of the last one.
    acquire_action resume(acquire_input in) {
        const auto from = st_;
        auto a = step(std::move(in));
        transitions.note(static_cast<int>(from), static_cast<int>(st_));
        return a;
    }

private:
    acquire_action step(acquire_input in) {
        const bool lost = in.result == outcome::connection;
        switch (st_) {
        case state::creating:
            if (in.result == outcome::ok) {
                node_ = std::move(in.path);
                czxid_ = in.czxid;
                if (in.listed == outcome::ok) {
                    children_ = std::move(in.children);
                    cv_ = in.cv;
                    listed_ = true;
                }
                return line_top(in.stop);
            }
            if (in.result == outcome::no_node && parent_attempts_ < 5) {
                st_ = state::making_parents;
                return act(acquire_action::make_parents);
            }
            if (lost) {
                // Bounded: a request the server refuses to answer (it drops the connection) would
                // otherwise be sent again forever, suspending the whole session each time.
                if (++lost_creates_ > 5) {
                    auto a = fail(acquire_action::create_retries_exhausted);
                    a.delete_by_guid = true;
                    return a;
                }
                st_ = state::recover_connecting;
                return act(acquire_action::wait_connected);
            }
            return in.result == outcome::no_node ? fail(acquire_action::no_parent) : failed(in.rc);
        case state::making_parents:
            if (lost) {
                // The parents were not made (or not known to be): not one of the container
                // reaper's races, which parent_attempts bounds. Bounded as the node's own lost
                // creates are (counting them with the reaper's ended acquires with a bare "no
                // node" while a server dropped the connection every heartbeat: issue 46).
                if (++lost_parent_creates_ > 5) return fail(acquire_action::create_retries_exhausted);
                st_ = state::reconnecting;
                return act(acquire_action::wait_connected);
            }
            ++parent_attempts_;
            // no_node: the reaper removed an ancestor (an empty container) between our creates
            if (in.result != outcome::ok && in.result != outcome::no_node) return failed(in.rc);
            return create_top(in.stop);
        case state::reconnecting:
            if (!in.ok) return fail(acquire_action::stop);
            return create_top(in.stop);
        case state::recover_connecting:
            if (!in.ok) {
                auto a = fail(acquire_action::stop);
                a.delete_by_guid = true;
                return a;
            }
            st_ = state::recover_listing;
            {
                auto a = act(acquire_action::list);
                a.barrier = true;
                return a;
            }
        case state::recover_listing: {
            if (lost) return recover_top();
            if (in.result == outcome::no_node) return create_top(in.stop); // no parent, no node of ours
            if (in.result != outcome::ok) {
                auto a = failed(in.rc, true);
                a.delete_by_guid = true;
                return a;
            }
            auto found = find_by_guid(in.children, c_.guid);
            if (!found || c_.guid.empty()) return create_top(in.stop); // never applied: create again
            candidate_ = c_.path + "/" + *found;
            children_ = std::move(in.children);
            cv_ = in.cv;
            st_ = state::recover_reading;
            auto a = act(acquire_action::read_node);
            a.node = candidate_;
            return a;
        }
        case state::recover_reading:
            if (lost) return recover_top();
            if (in.result == outcome::no_node) return create_top(in.stop);
            if (in.result != outcome::ok) {
                auto a = failed(in.rc, true);
                a.delete_nodes.push_back(std::move(candidate_));
                return a;
            }
            if (in.owner != in.session) {
                // Created by a session that is no longer ours: adopting it could make two holders.
                pending_deletes_.push_back(std::move(candidate_));
                return create_top(in.stop);
            }
            node_ = std::move(candidate_);
            czxid_ = in.czxid;
            listed_ = true; // (the listing that found it)
            return line_top(in.stop);
        case state::line_listing:
            if (lost) {
                st_ = state::line_connecting;
                return act(acquire_action::wait_connected);
            }
            // no_node: no parent, so no node of ours (after_listing says so)
            if (in.result != outcome::ok && in.result != outcome::no_node) return failed(in.rc);
            children_ = std::move(in.children);
            cv_ = in.cv;
            // Cancellation racing the grant: honour it, and leave no node.
            if (in.stop) return fail(acquire_action::stop);
            return examine();
        case state::line_connecting:
            if (!in.ok) return fail(acquire_action::stop);
            return line_top(in.stop);
        case state::leases_listing:
            if (in.result == outcome::ok) {
                for (const auto& c : in.children)
                    if (is_semaphore_lease(c)) return fail(acquire_action::path_used_by_semaphore);
                return decide_step();
            }
            if (in.result == outcome::no_node) return decide_step();
            if (lost) { // decide on a fresh listing once reconnected
                semaphore_checked_ = false;
                st_ = state::line_connecting;
                return act(acquire_action::wait_connected);
            }
            return failed(in.rc);
        case state::watching: {
            bool wait = in.result == outcome::ok && !in.marked;
            if (wait && c_.shape.watch_children) // the herd-prone variant: wait while the predecessor stands
                wait = decide(in.children, last_segment(node_), c_.shape.family, c_.shape.dialect,
                              c_.shape.own_writer, in.cv)
                           .predecessor == pred_;
            if (wait) {
                st_ = state::waiting;
                return act(acquire_action::wait);
            }
            return after_wait(in.result, in.rc, in.marked, false, in.stop);
        }
        case state::waiting:
            return after_wait(outcome::ok, 0, in.marked, in.pred_deleted, in.stop);
        case state::checking_lease:
            // Not yet (a renewal to wait for, or refused: the driver's stop says which): list again.
            if (in.result != outcome::ok) return line_top(in.stop);
            if (in.stop) return fail(acquire_action::stop);
            st_ = state::done;
            return act(acquire_action::grant);
        case state::done:
            break;
        }
        return fail(acquire_action::stop);
    }

public:
    state current() const noexcept { return st_; }
    /// Our node's path once created (or found again); empty before, and once known gone.
    const std::string& node() const noexcept { return node_; }
    std::int64_t czxid() const noexcept { return czxid_; }
    /// Some listing put another contender before our node (a granted writer may then mark its
    /// release for the waiter behind it).
    bool waited() const noexcept { return waited_; }
    const config& settings() const noexcept { return c_; }

private:
    acquire_action act(acquire_action::kind k) {
        acquire_action a;
        a.what = k;
        a.delete_nodes = std::exchange(pending_deletes_, {});
        return a;
    }
    acquire_action fail(acquire_action::failure why) {
        st_ = state::done;
        auto a = act(acquire_action::fail);
        a.why = why;
        return a;
    }
    acquire_action failed(int rc, bool raw = false) {
        auto a = fail(raw ? acquire_action::request_failed_raw : acquire_action::request_failed);
        a.rc = rc;
        return a;
    }

    /// The top of the create loop.
    acquire_action create_top(bool stop) {
        if (stop) return fail(acquire_action::stop);
        st_ = state::creating;
        auto a = act(acquire_action::create_and_list);
        a.node = c_.prefix;
        return a;
    }
    /// A create's reply was lost: once connected, look for our node by its guid.
    acquire_action recover_top() {
        st_ = state::recover_connecting;
        return act(acquire_action::wait_connected);
    }

    /// The top of the waiting line: our node exists.
    acquire_action line_top(bool stop) {
        if (stop) return fail(acquire_action::stop);
        if (!listed_) {
            st_ = state::line_listing;
            return act(acquire_action::list);
        }
        return examine();
    }

    /// A listing made after our create. One path, one lock: a semaphore's path has a "leases"
    /// child (Curator's layout) whose leases this lock would not exclude; the unique_node
    /// strategy's "<path>/lock" neither. Checked once, on a listing made after our create: a
    /// lease (or a unique node) created after it is followed by its own listing of the path, which
    /// sees our node and refuses. An empty "leases" (a container not reaped yet) is no conflict.
    acquire_action examine() {
        listed_ = false;
        if (!semaphore_checked_) {
            semaphore_checked_ = true;
            if (std::find(children_.begin(), children_.end(), "lock") != children_.end())
                return fail(acquire_action::strategy_conflict);
            if (std::find(children_.begin(), children_.end(), "leases") != children_.end()) {
                st_ = state::leases_listing;
                return act(acquire_action::list_leases);
            }
        }
        return decide_step();
    }

    /// What the listing says (acquire_steps.hpp): grant, wait, busy or fail.
    acquire_action decide_step() {
        auto step = Decisions::after_listing(std::exchange(children_, {}), last_segment(node_), c_.guid,
                                             c_.shape, cv_);
        for (auto& dup : step.duplicates) pending_deletes_.push_back(c_.path + "/" + dup);
        switch (step.what) {
        case listing_step::fail:
            if (step.why == listing_step::dialect_mixed) return fail(acquire_action::dialect_mixed);
            if (step.why == listing_step::sequence_overflow) return fail(acquire_action::sequence_overflow);
            node_.clear(); // node_missing: someone deleted it (or the session ended)
            return fail(acquire_action::node_deleted);
        case listing_step::grant:
            return lease_top(false);
        case listing_step::busy:
            return fail(acquire_action::busy);
        case listing_step::wait:
            break;
        }
        waited_ = true;
        pred_ = std::move(step.predecessor);
        alone_ = step.alone;
        st_ = state::watching;
        auto a = act(acquire_action::watch);
        a.node = c_.path + "/" + pred_;
        a.watch_marker = step.watch_marker;
        a.watch_children = c_.shape.watch_children;
        return a;
    }

    /// After the predecessor's read (and the wait, if it stood).
    acquire_action after_wait(outcome r, int rc, bool marked, bool pred_deleted, bool stop) {
        // The predecessor went in its marker's transaction (created only if it was the lowest).
        if (marked && !stop && Decisions::after_wake(wake::marker_created, alone_) == wake_step::grant)
            return lease_top(true);
        if (r == outcome::connection) {
            st_ = state::line_connecting;
            return act(acquire_action::wait_connected);
        }
        if (r != outcome::ok && r != outcome::no_node) return failed(rc);
        const wake w = r == outcome::no_node ? wake::predecessor_missing
                       : pred_deleted        ? wake::predecessor_deleted
                                             : wake::other;
        // Granted without a new listing. (Our own node is not looked at again: if someone deleted
        // it while we waited, that is a break, as one just after the grant would be; the holder
        // learns it through its loss signal if it watches its node.)
        if (!stop && Decisions::after_wake(w, alone_) == wake_step::grant) return lease_top(false);
        return line_top(stop);
    }

    /// The lease must vouch for the session at the grant: if it has lapsed (a long wait with
    /// nothing held, or a slow reply), a sync renews it, or we list again.
    acquire_action lease_top(bool by_marker) {
        st_ = state::checking_lease;
        auto a = act(acquire_action::check_lease);
        a.by_marker = by_marker;
        return a;
    }

    config c_;
    state st_ = state::creating;
    std::string node_;
    std::int64_t czxid_ = 0;
    std::string candidate_; ///< recover_reading: the node found by our guid
    std::string pred_;
    std::vector<std::string> children_;
    parent_cversion cv_;
    std::vector<std::string> pending_deletes_;
    int lost_creates_ = 0, lost_parent_creates_ = 0, parent_attempts_ = 0;
    bool listed_ = false;            ///< children_ is a listing made after our create, not yet examined
    bool semaphore_checked_ = false; ///< examine's check passed
    bool waited_ = false;
    bool alone_ = false;
};

using acquire_fsm = basic_acquire_fsm<>;

} // namespace zklock::detail
