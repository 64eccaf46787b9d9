// A semaphore's lease, one round of it, as a sans-io state machine: the holder of the internal lock
// ("<path>/locks") reads N, creates its lease and lists, then waits while more than N leases
// exist. Told the result of what it asked for, it answers with what to do next; it sends nothing,
// reads no clock, sets no timer. src/recipes/semaphore.cpp's driver takes the internal lock
// (through the mutex's acquire), performs these actions on the session, and starts a new round
// when the machine asks (the internal lock was lost while it waited).
//
//   flight: read N, create our lease (+ list the path), list the leases (watch)
//     │ no "leases" ─▶ make it ─▶ read N          │ N's read lost ─▶ (connected) read N again
//     │ our create found no "leases" ─▶ make it ─▶ create again (5 times at most)
//     │ our create's reply lost ─▶ recover: (connected) a write, then list the leases; our guid
//     │   there and the node this session's ─▶ it is our lease; not there ─▶ create again
//     │   (5 lost creates at most, then FAIL with its guid swept)
//     ▼
//   the path's listing holds no lock node ──▶ count ──≤ N──▶ lease check ──ok──▶ GRANT
//                                              ▲   │ > N                │ not yet
//                                              │   ▼                    ▼
//                                  list again ◀── wait (watch, reconnect, internal lock lost ─▶ RESTART)
//
// Every failure leaves node() (our lease, if made) for the driver to delete.
#pragma once

#include "protocol/acquire_fsm.hpp" // outcome
#include "protocol/coverage.hpp"
#include "protocol/protocol.hpp"

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace zklock::detail {

/// What the semaphore's driver must do next. Each action but the final ones is answered by one
/// semaphore_input (the fields it reads are listed per action).
struct semaphore_action {
    enum kind {
        /// In one flight: read "<path>/leases" (its data is N) → `read`; create our lease
        /// (`node`, the prefix, ephemeral and sequential) and list the path → `made`; list the
        /// leases with a watch → `listing`.
        flight,
        /// Create "<path>/leases" (a container whose data is N) → `made.result`, `made.rc`
        /// (node_exists counts as made: `exists`).
        make_leases,
        /// Read "<path>/leases" → `read`.
        read_n,
        /// Create our lease again and list the path → `made`.
        create,
        /// A create's reply was lost: a write, then list "<path>/leases" in the same flight (the
        /// write is a barrier: the listing sees whatever the lost create did) → `listing`.
        list_for_guid,
        /// Read the stat of `node` (exists) → `read.result`, `read.rc`, `read.owner`,
        /// `read.czxid`, and `session` (ours).
        read_node,
        /// Until the session is connected, or the round must end (stop, the internal lock lost, the
        /// leases' watch fired) → nothing to read.
        wait_connected,
        /// List the path → `listing`.
        list_path,
        /// List the leases with a watch → `listing`.
        list_leases,
        /// Until the leases' watch fires, the connection changes, or the round must end → nothing.
        /// The watch ends at the next action that is not `wait` or `check_lease`.
        wait,
        /// The lease must vouch for the session before the grant (lease_for_grant) → `rc`.
        check_lease,
        /// Final: the lease node() is ours (sequence(), czxid()).
        grant,
        /// Final: failed with `why`; node(), if any, is to be deleted.
        fail,
        /// Final: the internal lock was lost while we waited: node() goes, the round starts over.
        restart,
    } what = fail;
    enum failure {
        none,
        stop,               ///< cancelled, past the deadline, or the session ended
        request_failed,     ///< `rc`, unless the session's end explains it
        internal_error,     ///< the read of N never completed (the handle closed under it)
        size_mismatch,      ///< "<path>/leases" says another N
        path_used_by_lock,  ///< the path holds a lock node: one path, one lock
        node_deleted,       ///< our lease is gone
        busy,               ///< a try found N leases held
        lease_check_denied, ///< the renewal before the grant may not read our lease (its ACL)
    } why = none;
    int rc = 0;       ///< with request_failed
    std::string node; ///< flight, create: the lease's prefix; read_node: the node
    /// Before the final action, in the background: delete any lease whose name holds our guid (a
    /// create whose outcome is unknown).
    bool delete_by_guid = false;
    /// Every action but `wait` and `check_lease` ends the leases' watch of the last listing
    /// (flight, list_leases); this says whether its removal is worth a request to the server: no
    /// for the grant after the count (the one-shot watch fires once later, at the lease's own
    /// delete if not before), yes for any other.
    bool unwatch_at_server = false;
};

/// The result of a request: its outcome, the server's code, and what it returned.
struct semaphore_reply {
    outcome result = outcome::other;
    int rc = 0;
    std::string data;                  ///< read: N as text
    std::string path;                  ///< made: the lease's path
    std::int64_t czxid = 0;            ///< made, read_node
    std::int64_t owner = 0;            ///< read_node: the node's ephemeral owner
    bool exists = false;               ///< make_leases: ZNODEEXISTS (someone made it)
    outcome listed = outcome::other;   ///< made: the path's listing in the same flight
    int list_rc = 0;                   ///< made: its code
    std::vector<std::string> children; ///< made (the path's), listing (the path's or the leases')
};

struct semaphore_input {
    bool stop = false;          ///< cancelled, past the deadline, or the session ended
    bool internal_lost = false; ///< the internal lock was lost (expiry, deleted by someone)
    bool read_answered = true;  ///< flight: the read of N completed at all
    semaphore_reply read, made, listing;
    int rc = 0;               ///< check_lease: ZOK, or why not (lease_check_denied_rc, ZNONODE, ...)
    std::int64_t session = 0; ///< read_node: our session's id
};

/// The ZooKeeper codes the machine tells apart (the same values as zookeeper.h, which the protocol
/// layer does not include).
namespace semaphore_codes {
inline constexpr int ok = 0;
inline constexpr int no_node = -101;
inline constexpr int connection_loss = -4;
inline constexpr int operation_timeout = -7;
inline constexpr int check_denied = -10'000; // lease_for_grant's lease_check_denied_rc
} // namespace semaphore_codes

/// What a listing of the leases says: is ours among them, and how many leases are there.
struct semaphore_count {
    bool present = false;
    std::size_t leases = 0;
};

/// The machine's decisions about a listing of the leases. The simulator instantiates the machine
/// with its own, to re-introduce a defect.
struct semaphore_decisions {
    static semaphore_count count(const std::vector<std::string>& children, std::string_view mine) {
        semaphore_count c;
        for (const auto& k : children) {
            if (!is_semaphore_lease(k)) continue;
            ++c.leases;
            c.present = c.present || k == mine;
        }
        return c;
    }
    /// At most N leases, ours among them: ours may be held.
    static bool within(std::size_t leases, int max_leases) {
        return leases <= static_cast<std::size_t>(max_leases);
    }
};

template <class Decisions = semaphore_decisions>
class basic_semaphore_fsm {
public:
    enum class state {
        flight,             ///< the flight sent
        making_to_read,     ///< "leases" was missing at the read: making it
        reading,            ///< reading N again
        making_to_make,     ///< our create found no "leases": making it
        creating,           ///< creating our lease again
        path_waiting,       ///< the path's listing was lost: waiting for the connection
        path_listing,       ///< listing the path again
        counting,           ///< listing the leases
        line_waiting,       ///< the leases' listing was lost: waiting for the connection
        read_waiting,       ///< N's read was lost: waiting for the connection to read it again
        make_waiting,       ///< our create's make of "leases" was lost: waiting to make it again
        recover_connecting, ///< our create's reply was lost: waiting for the connection
        recover_listing,    ///< ... listing the leases for our guid (after a barrier write)
        recover_reading,    ///< ... reading the node found, whose owner must be this session
        waiting,            ///< more than N: waiting for the watch
        checking_lease,     ///< the lease's check before the grant
        done,
    };
    /// The states' names, in the enum's order, and the machine's transitions (coverage.hpp).
    static constexpr std::array state_names{"flight",
                                            "making_to_read",
                                            "reading",
                                            "making_to_make",
                                            "creating",
                                            "path_waiting",
                                            "path_listing",
                                            "counting",
                                            "line_waiting",
                                            "read_waiting",
                                            "make_waiting",
                                            "recover_connecting",
                                            "recover_listing",
                                            "recover_reading",
                                            "waiting",
                                            "checking_lease",
                                            "done"};
    static_assert(state_names.size() == static_cast<std::size_t>(state::done) + 1, "a name for each state");
    static inline transition_table transitions{"semaphore", {state_names.begin(), state_names.end()}};

    struct config {
        std::string path;   ///< the semaphore's path
        std::string prefix; ///< our lease's name up to its sequence number (with our guid in it)
        int max_leases = 1; ///< N
        bool try_only = false;
        /// How a lease whose create's reply was lost is found again (it is in `prefix`); "": it
        /// cannot be, and a lost create fails the acquire.
        std::string guid;
    };

    explicit basic_semaphore_fsm(config c) : c_(std::move(c)), n_text_(std::to_string(c_.max_leases)) {}

    /// The first action of a round (the internal lock is held).
    semaphore_action start() {
        const auto from = st_;
        st_ = state::flight;
        auto a = act(semaphore_action::flight);
        a.node = c_.prefix;
        transitions.note(static_cast<int>(from), static_cast<int>(st_));
        return a;
    }

    semaphore_action resume(semaphore_input in) {
        const auto from = st_;
        auto a = step(std::move(in));
        transitions.note(static_cast<int>(from), static_cast<int>(st_));
        return a;
    }

private:
    semaphore_action step(semaphore_input in) {
        stop_ = in.stop;
        internal_lost_ = in.internal_lost;
        if (st_ == state::waiting) watch_ = watch_state::woke;
        switch (st_) {
        case state::flight: {
            made_ = std::move(in.made);
            if (!in.read_answered) {
                // Refused before it was sent, or the handle closed: the create's fate is unknown
                // unless it answered.
                if (made_.result == outcome::ok) node_ = made_.path;
                auto a = fail(semaphore_action::internal_error);
                a.delete_by_guid = lost(made_.result);
                return a;
            }
            prefetched_ = made_.result == outcome::ok && made_.listed == outcome::ok &&
                          in.read.result == outcome::ok && in.listing.result == outcome::ok &&
                          in.read.data == n_text_;
            if (prefetched_) first_ = std::move(in.listing.children);
            if (lost(made_.result)) {
                // Our lease's fate is unknown. N, if its read was answered, is checked first: a
                // lease made under another N must not be looked for, only swept.
                if (in.read.result == outcome::ok && in.read.data != n_text_) {
                    auto a = fail(semaphore_action::size_mismatch);
                    a.delete_by_guid = true;
                    return a;
                }
                n_ok_ = in.read.result == outcome::ok;
                return recover_or_fail(made_.rc);
            }
            if (made_.result == outcome::ok) node_ = made_.path;
            if (in.read.result == outcome::no_node) {
                st_ = state::making_to_read;
                return act(semaphore_action::make_leases);
            }
            return after_read(std::move(in.read));
        }
        case state::making_to_read:
            // (a lost reply: it may have made "leases"; the read after the reconnect tells)
            if (lost(in.made.result) && !c_.try_only) {
                made_leases_ = true;
                st_ = state::read_waiting;
                return act(semaphore_action::wait_connected);
            }
            if (in.made.result != outcome::ok && !in.made.exists) return failed(in.made.rc);
            made_leases_ = true;
            st_ = state::reading;
            return act(semaphore_action::read_n);
        case state::reading:
            return after_read(std::move(in.read));
        case state::making_to_make:
            if (lost(in.made.result)) {
                // (no create of ours is in doubt: make it again once connected; bounded as lost
                // creates are)
                if (c_.try_only || ++lost_creates_ > 5) return failed(in.made.rc);
                st_ = state::make_waiting;
                return act(semaphore_action::wait_connected);
            }
            if (in.made.result != outcome::ok && !in.made.exists) {
                made_.result = in.made.result;
                made_.rc = in.made.rc;
                return after_create();
            }
            st_ = state::creating;
            return act_create();
        case state::creating:
            made_ = std::move(in.made);
            if (made_.result == outcome::no_node && attempts_ < 5) return create_loop();
            return after_create();
        case state::path_waiting:
            if (stop_) return fail(semaphore_action::stop);
            st_ = state::path_listing;
            return act(semaphore_action::list_path);
        case state::path_listing:
            made_.listed = in.listing.result;
            made_.list_rc = in.listing.rc;
            made_.children = std::move(in.listing.children);
            return check_path();
        case state::counting:
            if (in.listing.result != outcome::ok) {
                if (lost(in.listing.result) && !c_.try_only) {
                    st_ = state::line_waiting;
                    return act(semaphore_action::wait_connected);
                }
                return failed(in.listing.rc);
            }
            return count(in.listing.children);
        case state::line_waiting:
        case state::waiting:
            return line_top();
        case state::make_waiting:
            if (stop_) return fail(semaphore_action::stop);
            st_ = state::making_to_make;
            return act(semaphore_action::make_leases);
        case state::read_waiting:
            if (stop_) return fail(semaphore_action::stop);
            st_ = state::reading;
            return act(semaphore_action::read_n);
        case state::recover_connecting:
            if (stop_ || internal_lost_) {
                // (the internal lock lost: the round starts over, and this lease must not stay)
                auto a = stop_ ? fail(semaphore_action::stop) : restart();
                a.delete_by_guid = true;
                return a;
            }
            st_ = state::recover_listing;
            return act(semaphore_action::list_for_guid);
        case state::recover_listing: {
            if (lost(in.listing.result)) return recover_top();
            if (in.listing.result == outcome::no_node) return recreate(); // no "leases", no lease of ours
            if (in.listing.result != outcome::ok) {
                auto a = failed(in.listing.rc);
                a.delete_by_guid = true;
                return a;
            }
            auto found = find_by_guid(in.listing.children, c_.guid);
            if (!found) return recreate(); // never applied: create again
            st_ = state::recover_reading;
            auto a = act(semaphore_action::read_node);
            a.node = c_.path + "/leases/" + *found;
            candidate_ = a.node;
            return a;
        }
        case state::recover_reading:
            if (lost(in.read.result)) return recover_top();
            if (in.read.result == outcome::no_node) return recreate(); // gone since: create again
            if (in.read.result != outcome::ok) {
                node_ = std::move(candidate_); // (the driver deletes it)
                auto a = failed(in.read.rc);
                a.delete_by_guid = true;
                return a;
            }
            // Made by a session that is no longer ours: not ours to count (it goes with its
            // session). Ours: it is our lease, from the lost create. (Not reached in practice:
            // the guid is new each round, and a session that ended stops the round first; so
            // this node is not remembered for a delete, as the mutex's recovery does.)
            if (in.read.owner != in.session) return recreate();
            node_ = std::move(candidate_);
            made_ = semaphore_reply{};
            made_.result = outcome::ok;
            made_.path = node_;
            made_.czxid = in.read.czxid;
            made_.listed = outcome::connection; // (the path is listed again: one path, one lock)
            made_.list_rc = semaphore_codes::connection_loss;
            if (n_ok_) return after_create();
            st_ = state::reading;
            return act(semaphore_action::read_n);
        case state::checking_lease:
            if (in.rc == semaphore_codes::check_denied) return fail(semaphore_action::lease_check_denied);
            if (in.rc == semaphore_codes::no_node) return fail(semaphore_action::node_deleted);
            if (in.rc != semaphore_codes::ok) {
                if (in.rc != semaphore_codes::operation_timeout && in.rc != semaphore_codes::connection_loss)
                    return failed(in.rc);
                return line_top(); // list again (after a reconnect, if the connection went)
            }
            if (stop_) return fail(semaphore_action::stop);
            st_ = state::done;
            return act(semaphore_action::grant);
        case state::done:
            break;
        }
        return fail(semaphore_action::stop);
    }

public:
    state current() const noexcept { return st_; }
    /// Our lease's path once made; empty before, and once known gone.
    const std::string& node() const noexcept { return node_; }
    std::int64_t czxid() const noexcept { return made_.czxid; }
    /// Our lease's sequence number (valid once granted).
    std::int32_t sequence() const noexcept {
        const auto mine = last_segment(node_);
        return mine.size() >= 10 ? parse_sequence(mine.substr(mine.size() - 10)).value_or(0) : 0;
    }
    const config& settings() const noexcept { return c_; }

private:
    static bool lost(outcome r) noexcept { return r == outcome::connection; }

    semaphore_action act(semaphore_action::kind k) {
        semaphore_action a;
        a.what = k;
        // (the lease's check keeps the counted listing's watch: whether it is worth a removal
        // depends on how the round ends; a grant leaves it, the lease's own delete at the
        // release fires it; any other end removes it, else it would stay at the server until
        // some lease changes: the whole-library simulation's quiet oracle, seed 33,897)
        if (k != semaphore_action::wait && k != semaphore_action::check_lease) {
            a.unwatch_at_server = watch_ == watch_state::fresh || watch_ == watch_state::woke ||
                                  (watch_ == watch_state::counted && k != semaphore_action::grant);
            watch_ = k == semaphore_action::flight || k == semaphore_action::list_leases ? watch_state::fresh
                                                                                         : watch_state::none;
        }
        return a;
    }
    semaphore_action fail(semaphore_action::failure why) {
        st_ = state::done;
        auto a = act(semaphore_action::fail);
        a.why = why;
        return a;
    }
    semaphore_action failed(int rc) {
        auto a = fail(semaphore_action::request_failed);
        a.rc = rc;
        return a;
    }
    /// A create whose reply was lost may have been applied: no lease of ours may stay.
    semaphore_action fail_unknown_create(int rc) {
        auto a = failed(rc);
        a.delete_by_guid = true;
        return a;
    }
    semaphore_action restart() {
        st_ = state::done;
        return act(semaphore_action::restart);
    }
    /// Our create's reply was lost: look for the lease by its guid once connected (bounded: a
    /// server that drops the connection at every create would otherwise be asked forever). A try
    /// does not wait for a connection; nor does a machine without a guid.
    semaphore_action recover_or_fail(int rc) {
        if (c_.guid.empty() || c_.try_only || ++lost_creates_ > 5) return fail_unknown_create(rc);
        return recover_top();
    }
    semaphore_action recover_top() {
        st_ = state::recover_connecting;
        return act(semaphore_action::wait_connected);
    }
    /// The lost create was not applied (or its lease is gone): create again, N checked first.
    semaphore_action recreate() {
        candidate_.clear();
        // (no create of ours is in doubt here: a stop or the internal lock's loss ends the round
        // before a new lease is made, which others would see and count)
        if (stop_) return fail(semaphore_action::stop);
        if (internal_lost_) return restart();
        if (n_ok_) {
            st_ = state::creating;
            return act_create();
        }
        // (N was not read: read it, making "leases" if it is missing, then create)
        made_ = semaphore_reply{};
        made_.result = outcome::no_node;
        st_ = state::making_to_read;
        return act(semaphore_action::make_leases);
    }
    semaphore_action act_create() {
        ++attempts_;
        auto a = act(semaphore_action::create);
        a.node = c_.prefix;
        return a;
    }

    /// N, read in the flight or after making "leases".
    semaphore_action after_read(semaphore_reply read) {
        if (lost(read.result) && !c_.try_only) {
            st_ = state::read_waiting;
            return act(semaphore_action::wait_connected);
        }
        if (read.result == outcome::no_node && st_ != state::flight && ++makes_for_read_ <= 5) {
            // (reaped, or a lost make that was not applied: make it again)
            st_ = state::making_to_read;
            return act(semaphore_action::make_leases);
        }
        if (read.result != outcome::ok) return failed(read.rc);
        if (read.data != n_text_) return fail(semaphore_action::size_mismatch);
        n_ok_ = true;
        if (made_.result == outcome::no_node && attempts_ < 5) return create_loop();
        return after_create();
    }
    /// "leases" (a container) was not there at our create (reaped, or not made yet): make it
    /// (unless just made for the read), and create again.
    semaphore_action create_loop() {
        if (attempts_ > 0 || !made_leases_) {
            st_ = state::making_to_make;
            return act(semaphore_action::make_leases);
        }
        st_ = state::creating;
        return act_create();
    }
    semaphore_action after_create() {
        if (lost(made_.result)) return recover_or_fail(made_.rc);
        if (made_.result != outcome::ok) return failed(made_.rc);
        node_ = made_.path;
        return check_path();
    }
    /// One path, one lock: the path's listing, made after our lease was created, must hold no lock
    /// node (a mutex's, a read/write lock's, or the unique_node strategy's "lock"). A lock node
    /// created after this listing is followed by its owner's own listing, which sees our lease and
    /// refuses: of two racing, one sees the other.
    semaphore_action check_path() {
        if (made_.listed == outcome::ok) {
            for (const auto& k : made_.children)
                if (k == "lock" || parse_contender(k).has_value())
                    return fail(semaphore_action::path_used_by_lock);
            return line_top();
        }
        if (!lost(made_.listed)) return failed(made_.list_rc);
        st_ = state::path_waiting;
        return act(semaphore_action::wait_connected);
    }
    /// The top of the waiting line: count the leases (the flight's listing the first time, if it
    /// can be used; else a new listing with a watch), unless the round ends.
    semaphore_action line_top() {
        if (stop_) return fail(semaphore_action::stop);
        if (internal_lost_) return restart();
        st_ = state::counting;
        if (std::exchange(prefetched_, false)) return count(first_);
        return act(semaphore_action::list_leases);
    }
    /// The leases' listing: at most N (ours among them) grants, after the lease's check.
    semaphore_action count(const std::vector<std::string>& children) {
        watch_ = watch_state::counted;
        const auto n = Decisions::count(children, last_segment(node_));
        if (!n.present) {
            node_.clear();
            return fail(semaphore_action::node_deleted);
        }
        if (Decisions::within(n.leases, c_.max_leases)) {
            if (stop_) return fail(semaphore_action::stop);
            st_ = state::checking_lease;
            return act(semaphore_action::check_lease);
        }
        if (c_.try_only) return fail(semaphore_action::busy); // N are held: a try does not wait
        st_ = state::waiting;
        return act(semaphore_action::wait);
    }

    config c_;
    std::string n_text_;
    state st_ = state::flight;
    std::string node_;
    semaphore_reply made_;           ///< our create's latest reply (and the path's listing with it)
    std::vector<std::string> first_; ///< the flight's listing of the leases, if it can be used
    bool prefetched_ = false;        ///< first_ is the count our lease is in (its watch still set)
    bool made_leases_ = false;       ///< "leases" was made for the read
    int attempts_ = 0;               ///< creates after the flight's
    int lost_creates_ = 0;           ///< creates whose reply was lost
    int makes_for_read_ = 0;         ///< "leases" made again because N's read found none
    bool n_ok_ = false;              ///< N was read and is ours
    std::string candidate_;          ///< recover_reading: the node found by our guid
    /// The leases' watch of the last listing: none, set but its listing not counted, counted, or
    /// waited on.
    enum class watch_state { none, fresh, counted, woke } watch_ = watch_state::none;
    bool stop_ = false;          ///< the latest input's stop
    bool internal_lost_ = false; ///< ... and internal_lost
};

using semaphore_fsm = basic_semaphore_fsm<>;

} // namespace zklock::detail
