// A model ZooKeeper server for the deterministic simulator: znodes with sequential names from the
// parent's cversion, ephemeral owners, one-shot watches, container parents, the release
// transaction (create marker, delete node, delete marker), and per-session FIFO order of every
// message to the client (replies and watch events), and nothing stronger. Requests of one session
// are applied in the order sent; the scheduler decides when, and interleaves sessions freely.
#pragma once

#include <cstdint>
#include <cstdio>
#include <deque>
#include <iterator>
#include <map>
#include <set>
#include <string>
#include <variant>
#include <vector>

namespace zklock::sim {

// ZooKeeper's return codes and event types (values as in zookeeper.h)
inline constexpr int ok = 0, connection_loss = -4, no_node = -101, node_exists = -110, not_empty = -111,
                     session_expired = -112;
inline constexpr int created_event = 1, deleted_event = 2, changed_event = 3, child_event = 4;

enum class op { create, remove, get_children, get_data, exists, release_with_marker, remove_watches, check };

struct request {
    std::uint64_t id = 0;
    op kind = op::create;
    std::string path;
    bool ephemeral = false, sequential = false, container = false;
    bool watch = false; // get_children: a child watch; get_data: a data watch; exists: an existence watch
    std::string marker; // release_with_marker: the marker path
    std::string data;   // create: the node's data
};

struct reply {
    std::uint64_t id = 0;
    int rc = ok;
    std::string path;                  // create: the created path
    std::vector<std::string> children; // get_children
    std::int32_t cversion = 0;         // get_children: the parent's
    std::int64_t owner = 0;            // get_data, exists: the ephemeral owner
    std::int64_t czxid = 0;            // create, get_data, exists: the node's creation zxid
    std::string data;                  // get_data
};

struct event {
    int type = 0;
    std::string path;
    std::uint64_t zxid = 0; // the change that fired it
};

using message = std::variant<reply, event>;

inline std::string parent_of(const std::string& p) {
    auto at = p.rfind('/');
    return at == 0 ? "/" : p.substr(0, at);
}

class model_server {
public:
    model_server() { nodes_["/"]; }

    bool alive(std::int64_t s) const { return live_.count(s) != 0; }
    std::int64_t open_session() {
        const auto s = ++last_session_;
        live_.insert(s);
        return s;
    }
    std::deque<message>& outbox(std::int64_t s) { return outbox_[s]; }

    /// Applies `r` for session `s` as a write of a dropped connection that sat in the leader's
    /// pipeline: it takes effect (with its watch events), and its reply, lost with the
    /// connection, is not queued.
    void apply_late(std::int64_t s, const request& r) {
        apply(s, r);
        auto& box = outbox_[s];
        for (auto it = box.end(); it != box.begin();) {
            --it;
            if (auto* rep = std::get_if<reply>(&*it); rep && rep->id == r.id) {
                box.erase(it);
                break;
            }
        }
    }

    /// Applies `r` for session `s` and queues its reply (and the watch events it fires, to every
    /// session that set them, each before that session's later messages).
    void apply(std::int64_t s, const request& r) {
        reply out;
        out.id = r.id;
        if (!alive(s)) {
            out.rc = session_expired;
            outbox_[s].push_back(out);
            return;
        }
        switch (r.kind) {
        case op::create:
            out.rc = create(s, r, out.path);
            if (out.rc == ok) out.czxid = nodes_[out.path].czxid;
            break;
        case op::remove:
            out.rc = remove(r.path);
            break;
        case op::get_children: {
            auto it = nodes_.find(r.path);
            if (it == nodes_.end()) {
                out.rc = no_node;
                break;
            }
            out.children.assign(it->second.kids.begin(), it->second.kids.end());
            out.cversion = it->second.cversion;
            if (r.watch) child_watches_[r.path].insert(s);
            break;
        }
        case op::get_data: {
            auto it = nodes_.find(r.path);
            if (it == nodes_.end()) {
                out.rc = no_node; // (no watch is set on a missing node by getData)
                break;
            }
            out.owner = it->second.owner;
            out.czxid = it->second.czxid;
            out.data = it->second.data;
            if (r.watch) data_watches_[r.path].insert(s);
            break;
        }
        case op::exists: {
            auto it = nodes_.find(r.path);
            out.rc = it == nodes_.end() ? no_node : ok;
            if (it != nodes_.end()) {
                out.owner = it->second.owner;
                out.czxid = it->second.czxid;
            }
            if (r.watch) (it == nodes_.end() ? exist_watches_ : data_watches_)[r.path].insert(s);
            break;
        }
        case op::check: // a multi holding one check: a write, through the leader, changing nothing
            out.rc = nodes_.count(r.path) ? ok : no_node;
            ++zxid_;
            break;
        case op::remove_watches: // every watch of the session on the path (zoo_aremove_all_watches)
            for (auto* w : {&data_watches_, &child_watches_, &exist_watches_})
                if (auto it = w->find(r.path); it != w->end()) {
                    it->second.erase(s);
                    if (it->second.empty()) w->erase(it);
                }
            break;
        case op::release_with_marker: {
            // one multi: create the marker, delete the node, delete the marker (all or nothing)
            if (!nodes_.count(r.path)) {
                out.rc = no_node;
                break;
            }
            request m;
            m.path = r.marker;
            std::string made;
            if (int rc = create(s, m, made); rc != ok) {
                out.rc = rc;
                break;
            }
            remove(r.path);
            remove(r.marker);
            break;
        }
        }
        outbox_[s].push_back(out);
    }

    /// The connection of session `s` to this server closed: the server forgets its watches (the
    /// client sets them again on its next server). Its nodes stay.
    void drop_watches(std::int64_t s) {
        for (auto* w : {&data_watches_, &child_watches_, &exist_watches_})
            for (auto it = w->begin(); it != w->end();) {
                it->second.erase(s);
                it = it->second.empty() ? w->erase(it) : std::next(it);
            }
    }

    /// The session ends (expiry or close): its ephemeral nodes go, firing watches.
    void end_session(std::int64_t s) {
        if (!live_.erase(s)) return;
        std::vector<std::string> mine;
        for (auto& [p, n] : nodes_)
            if (n.owner == s) mine.push_back(p);
        for (auto& p : mine) remove(p);
        for (auto* w : {&data_watches_, &child_watches_, &exist_watches_})
            for (auto& [p, set] : *w) set.erase(s);
        outbox_.erase(s);
    }

    /// The children of `path` (empty if it does not exist).
    std::vector<std::string> children(const std::string& path) const {
        auto it = nodes_.find(path);
        if (it == nodes_.end()) return {};
        return {it->second.kids.begin(), it->second.kids.end()};
    }
    bool exists(const std::string& path) const { return nodes_.count(path) != 0; }
    std::int64_t owner(const std::string& path) const {
        auto it = nodes_.find(path);
        return it == nodes_.end() ? 0 : it->second.owner;
    }
    std::int64_t czxid(const std::string& path) const {
        auto it = nodes_.find(path);
        return it == nodes_.end() ? 0 : it->second.czxid;
    }
    /// Watches left on the server, all kinds, as "session path" lines.
    std::vector<std::string> watches() const {
        std::vector<std::string> out;
        for (auto* w : {&data_watches_, &child_watches_, &exist_watches_})
            for (auto& [p, set] : *w)
                for (auto s : set) out.push_back("s" + std::to_string(s) + " " + p);
        return out;
    }
    /// Watch events delivered so far per session (the herd check counts them).
    std::uint64_t events_sent = 0;

private:
    struct node {
        std::int64_t owner = 0; // ephemeral owner, 0: persistent or container
        bool container = false;
        std::int32_t cversion = 0; // also the next sequential suffix
        std::int64_t czxid = 0;
        std::string data;
        std::set<std::string> kids;
    };

    int create(std::int64_t s, const request& r, std::string& made) {
        const auto parent = parent_of(r.path);
        auto pit = nodes_.find(parent);
        if (pit == nodes_.end()) return no_node;
        std::string path = r.path;
        if (r.sequential) {
            char suffix[16];
            std::snprintf(suffix, sizeof suffix, "%010d", pit->second.cversion);
            path += suffix;
        }
        if (nodes_.count(path)) return node_exists;
        ++zxid_;
        auto& n = nodes_[path];
        n.owner = r.ephemeral ? s : 0;
        n.container = r.container;
        n.czxid = static_cast<std::int64_t>(zxid_);
        n.data = r.data;
        auto& p = nodes_[parent];
        p.kids.insert(path.substr(parent.size() == 1 ? 1 : parent.size() + 1));
        ++p.cversion;
        made = path;
        fire(exist_watches_, path, created_event);
        fire(child_watches_, parent, child_event);
        return ok;
    }

    int remove(const std::string& path) {
        auto it = nodes_.find(path);
        if (it == nodes_.end()) return no_node;
        if (!it->second.kids.empty()) return not_empty;
        ++zxid_;
        nodes_.erase(it);
        const auto parent = parent_of(path);
        auto& p = nodes_[parent];
        p.kids.erase(path.substr(parent.size() == 1 ? 1 : parent.size() + 1));
        ++p.cversion;
        fire(data_watches_, path, deleted_event);
        fire(child_watches_, parent, child_event);
        return ok;
    }

public:
    /// The container reaper: deletes an empty container that once had a child (as ZooKeeper's
    /// ContainerManager does, at some moment the scheduler picks). The first such container, if any.
    bool reap() {
        for (auto& [p, n] : nodes_)
            if (n.container && n.kids.empty() && n.cversion > 0) {
                const std::string path = p; // (remove erases the entry)
                remove(path);
                return true;
            }
        return false;
    }
    bool reapable() const {
        for (auto& [p, n] : nodes_)
            if (n.container && n.kids.empty() && n.cversion > 0) return true;
        return false;
    }

private:
    void fire(std::map<std::string, std::set<std::int64_t>>& watches, const std::string& path, int type) {
        auto it = watches.find(path);
        if (it == watches.end()) return;
        for (auto s : it->second) {
            outbox_[s].push_back(event{type, path, zxid_});
            ++events_sent;
        }
        watches.erase(it);
    }

    std::map<std::string, node> nodes_;
    std::map<std::string, std::set<std::int64_t>> data_watches_, child_watches_, exist_watches_;
    std::map<std::int64_t, std::deque<message>> outbox_;
    std::set<std::int64_t> live_;
    std::int64_t last_session_ = 0;
    std::uint64_t zxid_ = 0;
};

} // namespace zklock::sim
