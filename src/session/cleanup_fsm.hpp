// The release and the guaranteed deletes as one sans-io state machine: a job that deletes one
// lock node (a release, with or without its marker; an abandoned or late node) or finds a node
// by its guid first (a create whose reply was lost). Input: the replies to its requests. Output:
// the next request, a wait before trying again, or the end. The verdicts are cleanup_rules';
// session_cleanup.cpp drives the machine on the session, the simulator (test/sim/) drives the
// same machine on its model server, and test/unit/cleanup_fsm_test.cpp feeds it replies by hand.
//
//   state (what the job knows)         request           reply -> next
//   node, owner czxid recorded         check (exists)    ours -> delete_version; gone/not ours -> done
//   fixed node, guid in its data       check (get_data)  the data starts with the guid -> delete_version;
//                                                          gone/not ours -> done
//   node, version read by the check    delete_version    ok/gone -> done; bad version -> check again
//   node, marked (a write lock's       marked_release    ok/gone -> done; refused -> remove
//     release that was the lowest)       (transaction)     (the marker dropped); lost -> retry
//   node                               remove            ok/gone -> done
//   an unused lock path                remove            ok/gone/not empty -> done
//   parent and guid                    list (+ barrier)  found -> remove it; none/parent gone -> done
//   any: a reply that leaves the node possibly there   -> retry (plan_retry: on the reconnect, or
//        after a back-off), then the same request again; a reply of a gone handle -> done
#pragma once

#include "protocol/protocol.hpp"
#include "session/cleanup_rules.hpp"

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace zklock::detail {

/// What the job does next.
struct cleanup_action {
    enum kind {
        check,          ///< exists(path): is the node still the one we created (owner czxid)?
        delete_version, ///< delete(path, version): exactly the incarnation the check read
        marked_release, ///< a transaction: create and delete path's release marker, delete path
        remove,         ///< delete(path, -1)
        list,           ///< get_children(path), the parent, after a write in the same flight
        retry,          ///< wait as `plan` says, then ask next() again
        done,           ///< the node is gone, not ours, or goes with the session
    } what = done;
    std::string path;
    std::int32_t version = -1;           ///< delete_version
    cleanup_rules::retry_plan plan = {}; ///< retry
    /// remove: the server refused the marker, and the node is deleted without it, at once (the
    /// driver counts it as a retry).
    bool unmarked = false;
};

/// The reply to the job's last request.
struct cleanup_reply {
    int rc = 0;
    std::int64_t czxid = 0;                 ///< check
    std::int32_t version = -1;              ///< check
    std::vector<std::string> children = {}; ///< list
    std::string data = {};                  ///< check of a job of_data_guid (a read of the node's data)
};

class cleanup_fsm {
public:
    /// Deletes `node`. owner_czxid != 0: a fixed name, deleted only while it is that incarnation
    /// (an admin may have broken the lock and someone created it again). `marked`: the release of
    /// a write lock's node that was the lowest, with its marker (never with a fixed name).
    static cleanup_fsm of_node(std::string node, std::int64_t owner_czxid = 0, bool marked = false) {
        cleanup_fsm m;
        m.node_ = std::move(node);
        m.owner_czxid_ = owner_czxid;
        m.marked_ = marked && owner_czxid == 0;
        return m;
    }
    /// Deletes the lock path `path`, which an acquire made (or may have made: the create's
    /// reply was lost) and never created a node in: the server never reaps a container that never
    /// had a child. If someone's node is in it by then, it is theirs: the job ends.
    static cleanup_fsm of_unused_path(std::string path) {
        cleanup_fsm m;
        m.node_ = std::move(path);
        m.path_only_ = true;
        return m;
    }
    /// Deletes the fixed-name `node` if its data starts with `guid` (the unique_node strategy's
    /// create whose reply was lost: the acquire gave up before it could read the node back). The
    /// check reads the node's data, and the delete names the version it read.
    static cleanup_fsm of_data_guid(std::string node, std::string guid) {
        cleanup_fsm m;
        m.node_ = std::move(node);
        m.data_guid_ = std::move(guid);
        return m;
    }
    /// Deletes the child of `parent` whose name carries `guid`, if there is one (a create whose
    /// reply was lost).
    static cleanup_fsm of_guid(std::string parent, std::string guid) {
        cleanup_fsm m;
        m.parent_ = std::move(parent);
        m.guid_ = std::move(guid);
        return m;
    }

    /// The request to send now: at the start, and after a retry's wait.
    cleanup_action next() {
        cleanup_action a;
        if (node_.empty()) {
            a.what = cleanup_action::list;
            a.path = parent_;
        } else if (owner_czxid_ != 0 || !data_guid_.empty()) {
            a.what = cleanup_action::check;
            a.path = node_;
        } else {
            a.what = marked_ ? cleanup_action::marked_release : cleanup_action::remove;
            a.path = node_;
        }
        sent_ = a.what;
        return a;
    }

    /// The reply to the request next() (or an earlier resume) asked for. `connected`: the
    /// session's state as the reply arrives (a connection loss while disconnected waits for the
    /// reconnect).
    cleanup_action resume(const cleanup_reply& r, bool connected) {
        namespace cr = cleanup_rules;
        switch (sent_) {
        case cleanup_action::check:
            // (of_data_guid: ours if the data it read starts with the guid)
            switch (data_guid_.empty()
                        ? cr::after_check(r.rc, r.czxid, owner_czxid_)
                        : cr::after_check(r.rc, r.data.compare(0, data_guid_.size(), data_guid_) == 0 ? 1 : 0,
                                          1)) {
            case cr::verdict::delete_version: {
                cleanup_action a{cleanup_action::delete_version, node_, r.version};
                sent_ = a.what;
                return a;
            }
            case cr::verdict::retry:
                return retry(r.rc, connected);
            default:
                return end(); // gone, not ours, or gone with the session
            }
        case cleanup_action::delete_version:
            switch (cr::after_versioned_delete(r.rc)) {
            case cr::verdict::look_again:
                return next(); // its data changed: still ours? check again
            case cr::verdict::retry:
                return retry(r.rc, connected);
            default:
                return end();
            }
        case cleanup_action::marked_release:
            switch (cr::after_marked_release(r.rc)) {
            case cr::verdict::finished:
                return end();
            case cr::verdict::unmarked: {
                marked_ = false; // refused: the node goes without its marker, at once
                auto a = next();
                a.unmarked = true;
                return a;
            }
            default:
                return retry(r.rc, connected);
            }
        case cleanup_action::remove:
            if ((path_only_ ? cr::after_path_delete(r.rc) : cr::after_delete(r.rc)) == cr::verdict::finished)
                return end();
            return retry(r.rc, connected); // the node may still be there
        case cleanup_action::list:
            switch (cr::after_listing(r.rc)) {
            case cr::verdict::search:
                break;
            case cr::verdict::retry:
                return retry(r.rc, connected);
            default:
                return end(); // the parent is gone (and the node with it), or the session
            }
            if (auto found = find_by_guid(r.children, guid_)) {
                node_ = parent_ + "/" + *found;
                return next();
            }
            return end(); // never created
        case cleanup_action::retry:
        case cleanup_action::done:
            break;
        }
        return end(); // (no request in flight: nothing to resume)
    }

    /// The node to delete ("" while it is looked up by its guid).
    const std::string& node() const noexcept { return node_; }
    const std::string& parent() const noexcept { return parent_; }
    const std::string& guid() const noexcept { return guid_; }
    /// of_data_guid's guid: its check reads the node's data ("" for the other jobs).
    const std::string& data_guid() const noexcept { return data_guid_; }
    bool marked() const noexcept { return marked_; }
    /// A lock path, not a lock node (of_unused_path).
    bool path_only() const noexcept { return path_only_; }
    /// Failed requests so far (the back-off's exponent).
    int failures() const noexcept { return failures_; }
    bool finished() const noexcept { return sent_ == cleanup_action::done; }

private:
    cleanup_fsm() = default;

    cleanup_action retry(int rc, bool connected) {
        ++failures_;
        cleanup_action a{cleanup_action::retry, {}, -1, cleanup_rules::plan_retry(failures_, rc, connected)};
        sent_ = a.what;
        return a;
    }
    cleanup_action end() {
        sent_ = cleanup_action::done;
        return {};
    }

    std::string node_, parent_, guid_, data_guid_;
    std::int64_t owner_czxid_ = 0;
    bool marked_ = false;
    bool path_only_ = false;
    int failures_ = 0;
    cleanup_action::kind sent_ = cleanup_action::done; // the request in flight, or retry/done
};

} // namespace zklock::detail
