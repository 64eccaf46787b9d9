// The model server and the simulated link (sim_platform.hpp).
#include "sim_platform.hpp"

#include <algorithm>
#include <cstdio>
#include <utility>

namespace zklock::sim {

using zklock::detail::zk_op;
using zklock::detail::zk_request;
using zklock::detail::zk_result;

// ---------------------------------------------------------------- the model server
// (ZooKeeper 3.8's DataTree: createNode, deleteNode, setData, getChildren, and its WatchManager:
// triggerWatch removes a fired watch; PrepRequestProcessor: the sequence suffix is the parent's
// cversion, a multi is all or nothing.)

void model_server::fire(std::multimap<std::string, watch>& m, const std::string& path, int type) {
    auto [b, e] = m.equal_range(path);
    std::vector<watch> fired;
    for (auto it = b; it != e; ++it) fired.push_back(it->second);
    m.erase(b, e);
    for (auto& w : fired) {
        if (in_multi_) { // (delivered once the multi is known to succeed, in the order they fired)
            multi_events_.push_back({w.session, w.id, type});
            continue;
        }
        if (auto l = links_.find(w.session); l != links_.end()) l->second->watch_fired(w.id, type);
    }
}

int model_server::create(std::int64_t s, const std::string& path, const std::string& data, int flags,
                         std::string& made) {
    const std::string parent = parent_of(path);
    auto p = nodes_.find(parent);
    if (p == nodes_.end()) return ZNONODE;
    if (p->second.owner != 0) return ZNOCHILDRENFOREPHEMERALS;
    std::string name = path;
    if (flags & ZOO_SEQUENCE) {
        char buf[16];
        std::snprintf(buf, sizeof buf, "%010d", p->second.cversion);
        name += buf;
    }
    if (nodes_.count(name)) return ZNODEEXISTS;
    node n;
    n.data = data;
    n.czxid = n.mzxid = ++zxid_;
    n.owner = (flags & ZOO_EPHEMERAL) ? s : 0;
    n.container = (flags & ZOO_CONTAINER) != 0;
    nodes_[name] = n;
    auto& par = nodes_[parent];
    par.children.insert(name.substr(parent == "/" ? 1 : parent.size() + 1));
    ++par.cversion;
    made = name;
    fire(data_w_, name, ZOO_CREATED_EVENT);
    fire(child_w_, parent, ZOO_CHILD_EVENT);
    return ZOK;
}

int model_server::remove(const std::string& path, int version) {
    auto it = nodes_.find(path);
    if (it == nodes_.end() || path == "/") return ZNONODE;
    if (version != -1 && version != it->second.version) return ZBADVERSION;
    if (!it->second.children.empty()) return ZNOTEMPTY;
    const std::string parent = parent_of(path);
    nodes_.erase(it);
    auto& par = nodes_[parent];
    par.children.erase(path.substr(parent == "/" ? 1 : parent.size() + 1));
    ++par.cversion;
    ++zxid_;
    fire(data_w_, path, ZOO_DELETED_EVENT);
    fire(child_w_, path, ZOO_DELETED_EVENT);
    fire(child_w_, parent, ZOO_CHILD_EVENT);
    return ZOK;
}

int model_server::set(const std::string& path, const std::string& data, int version,
                      std::int32_t& new_version) {
    auto it = nodes_.find(path);
    if (it == nodes_.end()) return ZNONODE;
    if (version != -1 && version != it->second.version) return ZBADVERSION;
    it->second.data = data;
    it->second.mzxid = ++zxid_;
    new_version = ++it->second.version;
    fire(data_w_, path, ZOO_CHANGED_EVENT);
    return ZOK;
}

namespace {
Stat stat_of(const model_server::node& n) {
    Stat st{};
    st.czxid = n.czxid;
    st.mzxid = n.mzxid;
    st.version = n.version;
    st.cversion = n.cversion;
    st.ephemeralOwner = n.owner;
    st.numChildren = static_cast<std::int32_t>(n.children.size());
    st.dataLength = static_cast<std::int32_t>(n.data.size());
    return st;
}
} // namespace

zk_result model_server::apply(std::int64_t s, const zk_request& r) {
    zk_result out;
    auto list = [&](const std::string& path, int& rc, std::uint64_t watch_id) {
        auto it = nodes_.find(path);
        if (it == nodes_.end()) {
            rc = ZNONODE;
            return;
        }
        rc = ZOK;
        out.children.assign(it->second.children.begin(), it->second.children.end());
        out.cversion = it->second.cversion; // (the parent's stat gives the library only this)
        if (watch_id) child_w_.emplace(path, watch{s, watch_id});
    };
    switch (r.op) {
    case zk_op::create:
    case zk_op::create_and_list:
        out.rc = create(s, r.path, r.data, r.flags, out.path);
        if (out.rc == ZOK) out.stat = stat_of(nodes_[out.path]);
        if (r.op == zk_op::create_and_list) list(r.parent, out.list_rc, 0);
        break;
    case zk_op::get_children:
        list(r.path, out.rc, r.watch_id);
        break;
    case zk_op::get_data:
    case zk_op::exists: {
        auto it = nodes_.find(r.path);
        out.rc = it == nodes_.end() ? ZNONODE : ZOK;
        if (it != nodes_.end()) {
            out.stat = stat_of(it->second);
            if (r.op == zk_op::get_data) out.data = it->second.data;
        }
        // (getData arms a watch only on a node that exists; exists arms one either way)
        if (r.watch_id && (out.rc == ZOK || r.op == zk_op::exists))
            data_w_.emplace(r.path, watch{s, r.watch_id});
        break;
    }
    case zk_op::remove:
        out.rc = remove(r.path, r.version);
        break;
    case zk_op::set_data: {
        std::int32_t v = 0;
        out.rc = set(r.path, r.data, r.version, v);
        if (out.rc == ZOK) {
            out.stat = stat_of(nodes_[r.path]);
            if (on_set) on_set(s, r.path, r.data);
        }
        break;
    }
    case zk_op::multi: {
        // All or nothing (ZooKeeper 3.8's PrepRequestProcessor checks every operation against the
        // tree as the earlier ones left it; FinalRequestProcessor then applies them in order, each
        // triggering its watches as a single write would: a node created and deleted in one multi
        // fires NodeCreated to its exists watchers, whose watch is then gone). Applied here on the
        // tree itself, restored if one fails; the watch events leave only if all succeed.
        auto saved_nodes = nodes_;
        auto saved_zxid = zxid_;
        auto saved_dw = data_w_;
        auto saved_cw = child_w_;
        in_multi_ = true;
        multi_events_.clear();
        sets_.clear();
        out.multi.resize(r.ops.size());
        int failed = -1;
        for (std::size_t i = 0; i < r.ops.size() && failed < 0; ++i) {
            const auto& o = r.ops[i];
            int rc = ZOK;
            switch (o.what) {
            case transaction::kind::check: {
                auto it = nodes_.find(o.path);
                rc = it == nodes_.end()                                     ? ZNONODE
                     : (o.version != -1 && o.version != it->second.version) ? ZBADVERSION
                                                                            : ZOK;
                break;
            }
            case transaction::kind::create: {
                int flags = 0;
                if (o.mode == create_mode::ephemeral || o.mode == create_mode::ephemeral_sequential)
                    flags |= ZOO_EPHEMERAL;
                if (o.mode == create_mode::persistent_sequential ||
                    o.mode == create_mode::ephemeral_sequential)
                    flags |= ZOO_SEQUENCE;
                rc = create(s, o.path, o.data, flags, out.multi[i].path);
                break;
            }
            case transaction::kind::remove:
                rc = remove(o.path, o.version);
                break;
            case transaction::kind::set_data:
                rc = set(o.path, o.data, o.version, out.multi[i].version);
                if (rc == ZOK) sets_.emplace_back(s, std::make_pair(o.path, o.data));
                break;
            }
            out.multi[i].rc = rc;
            if (rc != ZOK) failed = static_cast<int>(i);
        }
        in_multi_ = false;
        if (failed >= 0) {
            nodes_ = std::move(saved_nodes);
            zxid_ = saved_zxid;
            data_w_ = std::move(saved_dw);
            child_w_ = std::move(saved_cw);
            multi_events_.clear();
            sets_.clear();
            out.rc = out.multi[failed].rc;
            for (std::size_t i = 0; i < out.multi.size(); ++i) {
                if (static_cast<int>(i) < failed) out.multi[i].rc = ZOK;
                if (static_cast<int>(i) > failed) out.multi[i].rc = ZRUNTIMEINCONSISTENCY;
                out.multi[i].path.clear();
            }
        } else {
            out.rc = ZOK;
            if (on_set)
                for (auto& [who, pd] : std::exchange(sets_, {})) on_set(who, pd.first, pd.second);
            for (auto& e : std::exchange(multi_events_, {}))
                if (auto l = links_.find(e.session); l != links_.end()) l->second->watch_fired(e.id, e.type);
        }
        break;
    }
    case zk_op::remove_watch: {
        auto& m = r.child_watch ? child_w_ : data_w_;
        auto [b, e] = m.equal_range(r.path);
        out.rc = ZNOWATCHER;
        for (auto it = b; it != e; ++it)
            if (it->second.session == s && it->second.id == r.watch_id) {
                m.erase(it);
                out.rc = ZOK;
                break;
            }
        break;
    }
    case zk_op::remove_all_watches: {
        out.rc = ZNOWATCHER;
        auto [b, e] = data_w_.equal_range(r.path);
        for (auto it = b; it != e;)
            if (it->second.session == s) {
                it = data_w_.erase(it);
                out.rc = ZOK;
            } else {
                ++it;
            }
        break;
    }
    }
    return out;
}

void model_server::close_session(std::int64_t id) {
    for (auto* m : {&data_w_, &child_w_})
        for (auto it = m->begin(); it != m->end();)
            it = it->second.session == id ? m->erase(it) : std::next(it);
    links_.erase(id);
    alive_.erase(id);
    std::vector<std::string> mine;
    for (auto& [p, n] : nodes_)
        if (n.owner == id) mine.push_back(p);
    for (auto& p : mine) remove(p, -1);
}

// ---------------------------------------------------------------- the link

std::int64_t sim_link::to_client_at() {
    last_to_client_ = std::max(last_to_client_, s_.now + s_.draw(50'000, 2'000'000));
    return last_to_client_;
}

std::int64_t sim_link::to_server_at() {
    last_to_server_ = std::max(last_to_server_, s_.now + s_.draw(50'000, 2'000'000));
    return last_to_server_;
}

void sim_link::start() {
    const auto sent = s_.now;
    p_.lease->saw_state(sent, false);
    s_.at(to_server_at(), [w = weak_from_this(), sent] {
        auto self = w.lock();
        if (!self || self->closed_) return;
        self->id_ = self->m_.open_session(
            self.get(), static_cast<std::int64_t>(self->timeout_ms_) * 1'000'000, self->s_.now);
        self->s_.at(self->to_client_at(), [w] {
            auto self = w.lock();
            if (!self || self->closed_) return;
            self->connected_ = true;
            self->p_.lease->on_connected(static_cast<lease_ns>(self->timeout_ms_) * 1'000'000, self->s_.now);
            self->p_.lease->saw_state(self->s_.now, true);
            self->deliver([ev = self->p_.events, gen = self->p_.generation] {
                if (auto e = ev.lock()) e->on_session_event(gen, ZOO_CONNECTED_STATE);
            });
            self->ping();
        });
        (void)sent;
    });
}

void sim_link::ping() {
    // (the C client pings a third of the timeout after its last send; here every third)
    s_.at(s_.now + static_cast<std::int64_t>(timeout_ms_) * 1'000'000 / 3,
          [w = weak_from_this(), conn = conn_] {
              auto self = w.lock();
              if (!self || self->closed_ || !self->connected_ || self->conn_ != conn) return;
              self->s_.at(self->to_server_at(), [w, conn] {
                  auto self = w.lock();
                  if (!self || self->closed_ || self->conn_ != conn) return;
                  self->m_.touch(self->id_, self->s_.now);
              });
              self->ping();
          });
}

void sim_link::drop(std::int64_t down, int rc) {
    if (closed_ || !connected_) return;
    connected_ = false;
    refusing_ = s_.rng() % 2 == 0;
    if (rc == ZOPERATIONTIMEOUT) ++counts().timeouts;
    ++conn_;
    p_.lease->saw_state(s_.now, false);
    // what had not reached the server: applied anyway (its reply lost) or never, as drawn
    for (auto& [rid, ev] : std::exchange(applies_, {}))
        if (s_.rng() % 2 == 0) s_.cancel(ev);
    // (the C client's handle_error tells the watcher ZOO_CONNECTING_STATE first, then fails
    // what was sent with ZCONNECTIONLOSS: cleanup_bufs)
    deliver([ev = p_.events, gen = p_.generation] {
        if (auto e = ev.lock()) e->on_session_event(gen, ZOO_CONNECTING_STATE);
    });
    for (auto& entry : std::exchange(inflight_, {}))
        deliver([hp = entry.second, rc]() mutable {
            zk_result res;
            res.rc = res.list_rc = rc;
            std::move (*hp)(std::move(res));
        });
    writes_ = 0;
    s_.at(s_.now + down, [w = weak_from_this(), conn = conn_] {
        auto self = w.lock();
        if (!self || self->closed_ || self->conn_ != conn) return;
        auto& s = self->s_;
        self->m_.expire_due(s.now);
        if (!self->m_.alive(self->id_)) { // told only now, at the reconnect (SESSIONEXPIRED)
            self->closed_ = true;
            self->deliver([ev = self->p_.events, gen = self->p_.generation] {
                if (auto e = ev.lock()) e->on_session_event(gen, ZOO_EXPIRED_SESSION_STATE);
            });
            counts().expired_replies += static_cast<long>(self->queued_.size());
            self->fail_queued(ZSESSIONEXPIRED); // (what waited in the client's queue)
            return;
        }
        self->m_.touch(self->id_, s.now);
        self->connected_ = true;
        self->p_.lease->on_connected(static_cast<lease_ns>(self->timeout_ms_) * 1'000'000, s.now);
        self->p_.lease->saw_state(s.now, true);
        self->deliver([ev = self->p_.events, gen = self->p_.generation] {
            if (auto e = ev.lock()) e->on_session_event(gen, ZOO_CONNECTED_STATE);
        });
        // SetWatches: what changed while disconnected fires now, after the connected event
        for (auto& [id, type] : std::exchange(self->held_events_, {}))
            self->deliver([ev = self->p_.events, id = id, type = type] {
                if (auto e = ev.lock()) e->on_watch(id, type);
            });
        // what waited in the client's queue goes now, in order
        for (auto& q : std::exchange(self->queued_, {})) self->send(std::move(q.r), std::move(q.h), q.sent);
        self->ping();
    });
}

void sim_link::fail_queued(int rc) {
    for (auto& q : std::exchange(queued_, {}))
        deliver([hp = std::make_shared<zklock::detail::zk_handler>(std::move(q.h)), rc]() mutable {
            zk_result res;
            res.rc = res.list_rc = rc;
            std::move (*hp)(std::move(res));
        });
}

void sim_link::submit(zk_request r, zklock::detail::zk_handler h) {
    const lease_ns sent = s_.now; // (handed to the client now, as zk_handle notes it)
    if (closed_)
        return deliver([h = std::move(h)]() mutable {
            zk_result res;
            res.rc = res.list_rc = ZCLOSING;
            std::move(h)(std::move(res));
        });
    if (!connected_) {
        p_.lease->saw_state(sent, false);
        p_.lease->note_send(sent, zklock::detail::vouch_of(r.op) == zklock::detail::vouch::commit);
        // While the server refuses connections, the C client's every failed attempt fails what it
        // holds (handle_error, cleanup_bufs): ZCONNECTIONLOSS soon. While an attempt hangs (a
        // partition), the request waits in the client's queue for the reconnect, which sends it,
        // or for the news of the expiry, which fails it with ZSESSIONEXPIRED.
        if (refusing_)
            return deliver([h = std::move(h)]() mutable {
                zk_result res;
                res.rc = res.list_rc = ZCONNECTIONLOSS;
                std::move(h)(std::move(res));
            });
        queued_.push_back({std::move(r), std::move(h), sent});
        ++counts().queued;
        return;
    }
    send(std::move(r), std::move(h), sent);
}

void sim_link::send(zk_request r, zklock::detail::zk_handler h, lease_ns sent) {
    const auto v = zklock::detail::vouch_of(r.op);
    const bool write = v == zklock::detail::vouch::commit && !r.heartbeat;
    if (sent == s_.now) { // (a queued request was noted when it was handed over)
        p_.lease->saw_state(sent, true);
        p_.lease->note_send(sent, v == zklock::detail::vouch::commit);
    }
    if (write) ++writes_;
    s_.note(static_cast<std::uint64_t>(r.op) * 31 + r.path.size());
    const auto rid = ++next_request_;
    inflight_.emplace(rid, std::make_shared<zklock::detail::zk_handler>(std::move(h)));
    applies_[rid] = s_.at(to_server_at(), [w = weak_from_this(), r = std::move(r), rid, sent, v, write,
                                           conn = conn_]() mutable {
        auto self = w.lock();
        if (!self || self->closed_) return; // (close() answered it)
        self->applies_.erase(rid);
        self->m_.expire_due(self->s_.now);
        if (!self->m_.alive(self->id_)) return; // (the server refuses it: the session is gone)
        self->m_.touch(self->id_, self->s_.now);
        auto res = std::make_shared<zk_result>(self->m_.apply(self->id_, r));
        if (self->conn_ != conn) return; // applied after the drop: its reply is lost
        self->s_.at(self->to_client_at(), [w, res, rid, sent, v, write, conn] {
            auto self = w.lock();
            if (!self || self->closed_ || self->conn_ != conn) return;
            auto it = self->inflight_.find(rid);
            if (it == self->inflight_.end()) return;
            auto hp = std::move(it->second);
            self->inflight_.erase(it);
            if (write) --self->writes_;
            if (zklock::detail::is_server_reply(res->rc) &&
                self->p_.lease->on_reply(sent, zklock::detail::proves_commit(v, res->rc), self->s_.now))
                self->deliver([ev = self->p_.events] {
                    if (auto e = ev.lock()) e->check_lease();
                });
            self->deliver([hp, res]() mutable { std::move (*hp)(std::move(*res)); });
        });
    });
}

void sim_link::watch_fired(std::uint64_t id, int type) {
    if (!connected_) {
        held_events_.emplace_back(id, type);
        return;
    }
    s_.at(to_client_at(), [w = weak_from_this(), id, type] {
        auto self = w.lock();
        if (!self || self->closed_) return;
        if (!self->connected_) {
            self->held_events_.emplace_back(id, type);
            return;
        }
        self->deliver([ev = self->p_.events, id, type] {
            if (auto e = ev.lock()) e->on_watch(id, type);
        });
    });
}

void sim_link::close() {
    if (closed_) return;
    closed_ = true;
    connected_ = false;
    if (id_ != 0) m_.close_session(id_);
    fail_queued(ZCLOSING);
    // Every request still in flight completes with ZCLOSING, as the C client's close does.
    for (auto& entry : std::exchange(inflight_, {}))
        deliver([hp = entry.second]() mutable {
            zk_result res;
            res.rc = res.list_rc = ZCLOSING;
            std::move (*hp)(std::move(res));
        });
    writes_ = 0;
}

} // namespace zklock::sim
