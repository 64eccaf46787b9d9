// The seeds' first algorithm (lock_strategy::unique_node) as a sans-io state machine: everyone
// creates "<path>/lock"; the winner holds it, the others watch it and race again when it goes.
// A create whose reply was lost is recognised by the guid at the start of the node's data (and
// only by it: the session alone would also match a sibling acquire's node). Told the result of
// what it asked for, it answers with the next action; src/recipes/mutex.cpp drives it on a
// session, test/unit/unique_fsm_test.cpp by hand.
//
//   action          result -> next
//   create          ok -> list (one path, one lock); no node -> make_parents (5 times at most);
//                   taken, or lost (maybe ours) -> read; other -> fail
//   make_parents    ok, no node (the reaper's race) -> create; lost -> wait_connected (5 in a
//                   row at most), then create; other -> fail
//   list            no other recipe's node -> check_lease; a conflict -> fail; lost ->
//                   wait_connected, then list
//   read (watched)  ours (our lost create was applied) -> list; someone else's -> wait
//                   (a try: fail busy); gone -> create; lost -> wait_connected, then create
//   wait            -> create (the node went, the watch fired, or the connection came back)
//   check_lease     ok -> grant (unless a stop came); lost -> wait_connected, then again
//   any, stopped    -> read_own first if a lost create may have made our node, then fail
//                      (not connected: fail, maybe_owns_node(); the driver deletes it later if ours)
#pragma once

#include "protocol/acquire_fsm.hpp"
#include "protocol/coverage.hpp"
#include "protocol/protocol.hpp"

#include <algorithm>
#include <array>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace zklock::detail {

struct unique_action {
    enum kind {
        create,         ///< create `node` ephemeral, with data "<guid> <data>" → `result`, `rc`, `czxid`
        make_parents,   ///< the lock path and its ancestors (containers) → `result`, `rc`
        list,           ///< list the lock path → `result`, `rc`, `children`
        read,           ///< read `node` with a watch → `result`, `rc`, `data`, `czxid`. The watch
                        ///< lasts through `wait`; `end_watch_at_server` says how it ends
        read_own,       ///< read `node` without a watch, if connected → `result`, `data`
        wait,           ///< until the watch fires, the connection comes back, or a stop → -
        wait_connected, ///< until connected, or a stop → `ok`
        check_lease,    ///< the lease must vouch for the session before the grant → `result`, `rc`
        grant,          ///< final: the node is ours (czxid())
        fail,           ///< final: with `why`; owns_node(): the node is ours, to delete
    } what = fail;
    acquire_action::failure why = acquire_action::none;
    int rc = 0;
};

struct unique_input {
    bool stop = false;
    outcome result = outcome::ok;
    int rc = 0;
    bool ok = false;
    std::int64_t czxid = 0;
    std::string data;
    std::vector<std::string> children;
};

class unique_fsm {
public:
    /// `node`: "<path>/lock"; `guid`: the acquire's, the start of the node's data; `try_only`:
    /// a try (a node someone else holds fails it with busy).
    unique_fsm(std::string node, std::string guid, bool try_only)
        : node_(std::move(node)), guid_(std::move(guid)), try_only_(try_only) {}

    unique_action start(bool stop) {
        const auto from = st_;
        auto a = top(stop);
        transitions.note(static_cast<int>(from), static_cast<int>(st_));
        return a;
    }

    unique_action resume(const unique_input& in) {
        const auto from = st_;
        auto a = step(in);
        transitions.note(static_cast<int>(from), static_cast<int>(st_));
        return a;
    }

private:
    unique_action step(const unique_input& in) {
        switch (st_) {
        case state::creating:
            if (in.result == outcome::ok) {
                ours_ = true;
                czxid_ = in.czxid;
                return go(state::listing, unique_action::list);
            }
            if (in.result == outcome::no_node && parent_attempts_ < 5)
                return go(state::parents, unique_action::make_parents);
            if (in.result == outcome::connection)
                maybe_created_ = true;
            else if (in.result == outcome::no_node)
                return failed(acquire_action::no_parent);
            else if (in.rc != node_exists_rc)
                return failed(acquire_action::request_failed, in.rc);
            // (the path was there: the bound on making it counts reaps in a row, not those of a
            // long wait, in which a waiter holds no node of its own to keep the container: each
            // hand-over may find it reaped; the whole-library simulation's multi-lock found a
            // waiter failed with ZNONODE after its sixth, seed 63,251)
            if (in.result != outcome::connection) parent_attempts_ = 0;
            // Taken (or our reply was lost): see whose it is, and watch it.
            if (in.stop) return give_up(acquire_action::stop);
            return go(state::reading, unique_action::read);
        case state::parents:
            if (in.result == outcome::connection) { // (not made: no attempt)
                if (++lost_parent_creates_ > 5) return give_up(acquire_action::create_retries_exhausted);
                return go(state::parents_reconnecting, unique_action::wait_connected);
            }
            ++parent_attempts_;
            // no node: the reaper removed an ancestor (an empty container) between our creates
            if (in.result != outcome::ok && in.result != outcome::no_node)
                return failed(acquire_action::request_failed, in.rc);
            return top(in.stop);
        case state::parents_reconnecting:
        case state::reconnecting:
            if (!in.ok) return give_up(acquire_action::stop);
            return top(in.stop);
        case state::listing:
            if (in.result == outcome::connection)
                return go(state::list_reconnecting, unique_action::wait_connected);
            if (in.result != outcome::ok) return failed(acquire_action::request_failed, in.rc);
            // One path, one lock: sequential lock nodes (of any recipe) or a semaphore's leases
            // here would not see our node. Listed after our create, so that of two clients
            // racing, one sees the other (their own check: acquire_fsm's).
            if (std::find(in.children.begin(), in.children.end(), "leases") != in.children.end() ||
                std::any_of(in.children.begin(), in.children.end(),
                            [](const std::string& c) { return parse_contender(c).has_value(); }))
                return failed(acquire_action::strategy_conflict);
            return go(state::checking_lease, unique_action::check_lease);
        case state::list_reconnecting:
            if (!in.ok) return failed(acquire_action::stop);
            return go(state::listing, unique_action::list);
        case state::reading: {
            const bool read_ok = in.result == outcome::ok;
            watch_at_server_ = false;
            if (read_ok && is_ours(in.data)) { // our create was applied; its reply was lost
                ours_ = true;
                czxid_ = in.czxid;
                // one path, one lock, as after a create answered: a semaphore's leases made
                // before our node would not see it (the whole-library simulation's seed 3,663)
                return go(state::listing, unique_action::list);
            }
            if (read_ok || in.result == outcome::no_node) maybe_created_ = false; // not ours
            watch_at_server_ = read_ok; // (a read of a gone node sets no watch)
            if (read_ok && try_only_) return failed(acquire_action::busy);
            if (read_ok) return go(state::waiting, unique_action::wait);
            if (in.result == outcome::connection)
                return go(state::reconnecting, unique_action::wait_connected);
            return top(in.stop);
        }
        case state::waiting:
            return top(in.stop);
        case state::checking_lease:
            if (in.result == outcome::ok) {
                if (in.stop) return failed(acquire_action::stop);
                return go(state::done, unique_action::grant);
            }
            if (in.result == outcome::connection)
                return go(state::lease_reconnecting, unique_action::wait_connected);
            return failed(acquire_action::request_failed, in.rc);
        case state::lease_reconnecting:
            if (!in.ok) return failed(acquire_action::stop);
            return go(state::checking_lease, unique_action::check_lease);
        case state::reading_own:
            if (in.result == outcome::ok && is_ours(in.data)) ours_ = true;
            // (not asked, or no answer: the node may be ours; the driver hands it to the
            // guaranteed deletes, which read it once connected and delete it if it is)
            unresolved_ = in.result == outcome::connection;
            return failed(pending_why_);
        case state::done:
            break;
        }
        return failed(acquire_action::stop);
    }

public:
    /// The node is ours: held at a grant; to delete at a failure.
    bool owns_node() const noexcept { return ours_; }
    /// At a failure: a create lost with the connection may have made our node, and it could not
    /// be read back (not connected): to delete if its data carries our guid, once connected.
    bool maybe_owns_node() const noexcept { return unresolved_; }
    const std::string& node() const noexcept { return node_; }
    std::int64_t czxid() const noexcept { return czxid_; }
    /// After a `read`: the watch it set is at the server, to remove when it ends unfired.
    bool end_watch_at_server() const noexcept { return watch_at_server_; }

private:
    static constexpr int node_exists_rc = -110; // ZNODEEXISTS

    enum class state {
        creating,
        parents,
        parents_reconnecting,
        listing,
        list_reconnecting,
        reading,
        waiting,
        reconnecting,
        checking_lease,
        lease_reconnecting,
        reading_own,
        done,
    };
    /// The states' names, in the enum's order, and the machine's transitions (coverage.hpp).
    static constexpr std::array state_names{
        "creating",    "parents", "parents_reconnecting", "listing",        "list_reconnecting",
        "reading",     "waiting", "reconnecting",         "checking_lease", "lease_reconnecting",
        "reading_own", "done"};
    static_assert(state_names.size() == static_cast<std::size_t>(state::done) + 1, "a name for each state");
    static inline transition_table transitions{"unique_node", {state_names.begin(), state_names.end()}};

    bool is_ours(const std::string& data) const { return data.compare(0, guid_.size(), guid_) == 0; }

    unique_action top(bool stop) {
        if (stop) return give_up(acquire_action::stop);
        return go(state::creating, unique_action::create);
    }
    unique_action go(state s, unique_action::kind k) {
        st_ = s;
        return {k};
    }
    /// Stops: a create lost with the connection may have made our node, which must then go too.
    unique_action give_up(acquire_action::failure why) {
        if (maybe_created_ && !ours_) {
            maybe_created_ = false;
            pending_why_ = why;
            return go(state::reading_own, unique_action::read_own);
        }
        return failed(why);
    }
    unique_action failed(acquire_action::failure why, int rc = 0) {
        st_ = state::done;
        return {unique_action::fail, why, rc};
    }

    std::string node_, guid_;
    bool try_only_;
    state st_ = state::creating;
    bool ours_ = false;
    std::int64_t czxid_ = 0;
    bool maybe_created_ = false; // a create failed with connection loss: it may have been applied
    bool unresolved_ = false;    // gave up with maybe_created_ and could not read the node back
    bool watch_at_server_ = false;
    int parent_attempts_ = 0, lost_parent_creates_ = 0;
    acquire_action::failure pending_why_ = acquire_action::stop;
};

} // namespace zklock::detail
