// The model ensemble and the simulated link (sim_platform.hpp).
#include "sim_platform.hpp"

#include <algorithm>
#include <cstdio>
#include <utility>

namespace zklock::sim {

using zklock::detail::zk_op;
using zklock::detail::zk_request;
using zklock::detail::zk_result;

namespace {
constexpr std::int64_t tick = 2'000'000'000;            // tickTime, 2 s
constexpr std::int64_t sync_limit = 5 * tick;           // syncLimit = 5 ticks
constexpr std::int64_t reconnect_retry = 2'000'000'000; // a handshake unanswered: the next server

bool is_write(zk_op op) { return zklock::detail::vouch_of(op) == zklock::detail::vouch::commit; }

Stat stat_of(const replica::node& n) {
    Stat st{};
    st.czxid = n.czxid;
    st.mzxid = n.mzxid;
    st.pzxid = n.pzxid;
    st.version = n.version;
    st.cversion = n.cversion;
    st.ephemeralOwner = n.owner;
    st.numChildren = static_cast<std::int32_t>(n.children.size());
    st.dataLength = static_cast<std::int32_t>(n.data.size());
    return st;
}
} // namespace

void replica::drop_watches(std::int64_t session) {
    for (auto* m : {&data_w, &child_w})
        for (auto it = m->begin(); it != m->end();)
            it = it->second.session == session ? m->erase(it) : std::next(it);
}

// ---------------------------------------------------------------- one server's tree
// (ZooKeeper 3.8's DataTree: createNode, deleteNode, setData, getChildren, each stamping the txn's
// zxid; its WatchManager: triggerWatch removes a fired watch; PrepRequestProcessor: the sequence
// suffix is the parent's cversion, a multi is all or nothing and one txn.)

void model_server::fire(replica& rp, std::multimap<std::string, replica::watch>& m, const std::string& path,
                        int type) {
    auto [b, e] = m.equal_range(path);
    std::vector<replica::watch> fired;
    for (auto it = b; it != e; ++it) fired.push_back(it->second);
    m.erase(b, e);
    for (auto& w : fired) {
        if (in_multi_) { // (delivered once the multi is known to succeed, in the order they fired)
            multi_events_.push_back({w.session, w.id, type});
            continue;
        }
        if (auto l = rp.links.find(w.session); l != rp.links.end())
            l->second->watch_fired(w.id, type, rp.zxid);
    }
}

bool model_server::allowed(const node& n, std::int64_t s, std::int32_t perm) const {
    if (n.acl.empty()) return true;
    const auto ids = ids_.find(s);
    for (const auto& e : n.acl) {
        if ((e.perms & perm) == 0) continue;
        if (e.scheme == "world" && e.id == "anyone") return true;
        if (e.scheme == "digest" && ids != ids_.end() &&
            std::find(ids->second.begin(), ids->second.end(), e.id) != ids->second.end())
            return true;
    }
    ++counts().noauth;
    return false;
}

void model_server::set_identity(std::int64_t id, const std::vector<zklock::credentials>& auth) {
    auto& v = ids_[id];
    v.clear();
    for (const auto& c : auth)
        if (c.scheme == "digest") v.push_back(c.secret);
}

int model_server::create(replica& rp, std::int64_t s, const std::string& path, const std::string& data,
                         int flags, std::string& made, const std::vector<zklock::acl_entry>* acl) {
    const std::string parent = replica::parent_of(path);
    auto p = rp.nodes.find(parent);
    if (p == rp.nodes.end()) return ZNONODE;
    if (!allowed(p->second, s, zklock::perm::create))
        return ZNOAUTH; // (PrepRequestProcessor: before the rest)
    // the new node's ACL: an `auth` entry stands for each identity of the session (none: refused)
    std::vector<zklock::acl_entry> node_acl;
    if (acl && !(acl->size() == 1 && (*acl)[0].scheme == "world" && (*acl)[0].id == "anyone" &&
                 (*acl)[0].perms == zklock::perm::all))
        for (const auto& e : *acl) {
            if (e.scheme != "auth") {
                node_acl.push_back(e);
                continue;
            }
            const auto ids = ids_.find(s);
            if (ids == ids_.end() || ids->second.empty()) return ZINVALIDACL;
            for (const auto& id : ids->second) node_acl.push_back({e.perms, "digest", id});
        }
    if (p->second.owner != 0) return ZNOCHILDRENFOREPHEMERALS;
    std::string name = path;
    if (flags & ZOO_SEQUENCE) {
        char buf[16];
        std::snprintf(buf, sizeof buf, "%010d", p->second.cversion);
        name += buf;
    }
    if (rp.nodes.count(name)) return ZNODEEXISTS;
    replica::node n;
    n.data = data;
    n.czxid = n.mzxid = n.pzxid = rp.zxid;
    n.owner = (flags & ZOO_EPHEMERAL) ? s : 0;
    n.container = (flags & ZOO_CONTAINER) != 0;
    n.acl = std::move(node_acl);
    rp.nodes[name] = n;
    auto& par = rp.nodes[parent];
    par.children.insert(name.substr(parent == "/" ? 1 : parent.size() + 1));
    ++par.cversion;
    par.pzxid = rp.zxid;
    made = name;
    fire(rp, rp.data_w, name, ZOO_CREATED_EVENT);
    fire(rp, rp.child_w, parent, ZOO_CHILD_EVENT);
    return ZOK;
}

int model_server::remove(replica& rp, std::int64_t s, const std::string& path, int version) {
    auto it = rp.nodes.find(path);
    if (it == rp.nodes.end() || path == "/") return ZNONODE;
    if (s != 0 && !allowed(rp.nodes.at(replica::parent_of(path)), s, zklock::perm::remove)) return ZNOAUTH;
    if (version != -1 && version != it->second.version) return ZBADVERSION;
    if (!it->second.children.empty()) return ZNOTEMPTY;
    const std::string parent = replica::parent_of(path);
    rp.nodes.erase(it);
    auto& par = rp.nodes[parent];
    par.children.erase(path.substr(parent == "/" ? 1 : parent.size() + 1));
    ++par.cversion;
    par.pzxid = rp.zxid;
    fire(rp, rp.data_w, path, ZOO_DELETED_EVENT);
    fire(rp, rp.child_w, path, ZOO_DELETED_EVENT);
    fire(rp, rp.child_w, parent, ZOO_CHILD_EVENT);
    return ZOK;
}

int model_server::set(replica& rp, std::int64_t s, const std::string& path, const std::string& data,
                      int version, std::int32_t& new_version) {
    auto it = rp.nodes.find(path);
    if (it == rp.nodes.end()) return ZNONODE;
    if (!allowed(it->second, s, zklock::perm::write)) return ZNOAUTH;
    if (version != -1 && version != it->second.version) return ZBADVERSION;
    it->second.data = data;
    it->second.mzxid = rp.zxid;
    new_version = ++it->second.version;
    fire(rp, rp.data_w, path, ZOO_CHANGED_EVENT);
    return ZOK;
}

zk_result model_server::apply(replica& rp, std::int64_t s, const zk_request& r) {
    zk_result out;
    const bool leader = rp.index == leader_;
    auto list = [&](const std::string& path, int& rc, std::uint64_t watch_id) {
        auto it = rp.nodes.find(path);
        if (it == rp.nodes.end()) {
            rc = ZNONODE;
            return;
        }
        if (!allowed(it->second, s, zklock::perm::read)) {
            rc = ZNOAUTH;
            return;
        }
        rc = ZOK;
        out.children.assign(it->second.children.begin(), it->second.children.end());
        out.cversion = it->second.cversion; // (the parent's stat gives the library only this)
        if (watch_id) rp.child_w.emplace(path, replica::watch{s, watch_id});
    };
    switch (r.op) {
    case zk_op::create:
    case zk_op::create_and_list:
        out.rc =
            create(rp, s, r.path, r.data, r.flags, out.path, r.node_acl ? &r.node_acl->entries() : nullptr);
        if (out.rc == ZOK) out.stat = stat_of(rp.nodes[out.path]);
        // (the getChildren the C client sends right behind the create: answered by this server
        // once it applied the create, the session's read waiting behind its write)
        if (r.op == zk_op::create_and_list) list(r.parent, out.list_rc, 0);
        break;
    case zk_op::get_children:
        list(r.path, out.rc, r.watch_id);
        if (leader_ >= 0 && !leader && out.rc == ZOK) { // (how often a stale listing misses our own node)
            const auto& lr = reps_[static_cast<std::size_t>(leader_)];
            if (auto it = lr.nodes.find(r.path); it != lr.nodes.end())
                for (auto& c : it->second.children)
                    if (!std::binary_search(out.children.begin(), out.children.end(), c) &&
                        lr.nodes.at(r.path + "/" + c).owner == s) {
                        ++counts().own_missing;
                        break;
                    }
        }
        break;
    case zk_op::get_data:
    case zk_op::exists: {
        auto it = rp.nodes.find(r.path);
        out.rc = it == rp.nodes.end() ? ZNONODE : ZOK;
        if (it != rp.nodes.end() && r.op == zk_op::get_data && !allowed(it->second, s, zklock::perm::read)) {
            out.rc = ZNOAUTH; // (exists checks nothing)
            break;
        }
        if (it != rp.nodes.end()) {
            out.stat = stat_of(it->second);
            if (r.op == zk_op::get_data) out.data = it->second.data;
        }
        // (getData arms a watch only on a node that exists; exists arms one either way)
        if (r.watch_id && (out.rc == ZOK || r.op == zk_op::exists)) {
            rp.data_w.emplace(r.path, replica::watch{s, r.watch_id});
            if (on_watch) on_watch(rp, s, r.path);
        }
        break;
    }
    case zk_op::remove:
        out.rc = remove(rp, s, r.path, r.version);
        break;
    case zk_op::set_data: {
        std::int32_t v = 0;
        out.rc = set(rp, s, r.path, r.data, r.version, v);
        if (out.rc == ZOK) {
            out.stat = stat_of(rp.nodes[r.path]);
            if (leader && on_set) on_set(s, r.path, r.data);
        }
        break;
    }
    case zk_op::multi: {
        // All or nothing (ZooKeeper 3.8's PrepRequestProcessor checks every operation against the
        // tree as the earlier ones left it; FinalRequestProcessor then applies them in order, each
        // triggering its watches as a single write would: a node created and deleted in one multi
        // fires NodeCreated to its exists watchers, whose watch is then gone). Applied here on the
        // tree itself, restored if one fails; the watch events leave only if all succeed.
        auto saved_nodes = rp.nodes;
        auto saved_dw = rp.data_w;
        auto saved_cw = rp.child_w;
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
                auto it = rp.nodes.find(o.path);
                rc = it == rp.nodes.end()                                   ? ZNONODE
                     : !allowed(it->second, s, zklock::perm::read)          ? ZNOAUTH
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
                rc = create(rp, s, o.path, o.data, flags, out.multi[i].path, &o.node_acl.entries());
                break;
            }
            case transaction::kind::remove:
                rc = remove(rp, s, o.path, o.version);
                break;
            case transaction::kind::set_data:
                rc = set(rp, s, o.path, o.data, o.version, out.multi[i].version);
                if (rc == ZOK) sets_.emplace_back(s, std::make_pair(o.path, o.data));
                break;
            }
            out.multi[i].rc = rc;
            if (rc != ZOK) failed = static_cast<int>(i);
        }
        in_multi_ = false;
        if (failed >= 0) {
            rp.nodes = std::move(saved_nodes);
            rp.data_w = std::move(saved_dw);
            rp.child_w = std::move(saved_cw);
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
            auto sets = std::exchange(sets_, {});
            if (leader && on_set)
                for (auto& [who, pd] : sets) on_set(who, pd.first, pd.second);
            for (auto& e : std::exchange(multi_events_, {}))
                if (auto l = rp.links.find(e.session); l != rp.links.end())
                    l->second->watch_fired(e.id, e.type, rp.zxid);
        }
        break;
    }
    case zk_op::remove_watch: {
        auto& m = r.child_watch ? rp.child_w : rp.data_w;
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
        auto [b, e] = rp.data_w.equal_range(r.path);
        for (auto it = b; it != e;)
            if (it->second.session == s) {
                it = rp.data_w.erase(it);
                out.rc = ZOK;
            } else {
                ++it;
            }
        break;
    }
    }
    return out;
}

void model_server::end_session(replica& rp, std::int64_t id) {
    rp.ended.insert(id);
    rp.drop_watches(id);
    std::vector<std::string> mine;
    for (auto& [p, n] : rp.nodes)
        if (n.owner == id) mine.push_back(p);
    for (auto& p : mine) remove(rp, 0, p, -1);
    // (the server closes the session's connection: its client hears of the expiry at its reconnect)
    if (auto l = rp.links.find(id); l != rp.links.end()) {
        auto* link = l->second;
        rp.links.erase(l);
        link->drop(s_->draw(1'000'000, 50'000'000));
    }
}

// ---------------------------------------------------------------- the ensemble

void model_server::start(scheduler& s, config c) {
    s_ = &s;
    c_ = c;
    reps_.assign(static_cast<std::size_t>(std::max(1, c.servers)), replica{});
    for (std::size_t i = 0; i < reps_.size(); ++i) reps_[i].index = static_cast<int>(i);
    if (reps_.size() > 1) s.at(s.now + tick / 2, [this] { relay_loop(); });
}

void model_server::seed_node(const std::string& path) {
    if (path.empty() || path == "/" || reps_[0].nodes.count(path)) return;
    seed_node(replica::parent_of(path));
    leader_zxid_ = std::max(leader_zxid_, reps_[0].zxid) + 1;
    for (auto& rp : reps_) {
        rp.zxid = leader_zxid_;
        std::string made;
        create(rp, 0, path, {}, 0, made, nullptr);
    }
}

std::int64_t model_server::cut_of(int at) const {
    // (a cut follower, or a cut leader: cut off from every follower)
    auto c = reps_[static_cast<std::size_t>(at)].cut_until;
    if (leader_ >= 0) c = std::max(c, reps_[static_cast<std::size_t>(leader_)].cut_until);
    return c;
}

std::int64_t model_server::to_leader_at(int at) {
    auto& rp = reps_[static_cast<std::size_t>(at)];
    auto t = s_->now + s_->draw(50'000, c_.forward_hi);
    if (const auto cut = cut_of(at); cut > s_->now) t = std::max(t, cut + s_->draw(50'000, c_.forward_hi));
    rp.to_leader_last = t = std::max(t, rp.to_leader_last);
    return t;
}

std::int64_t model_server::from_leader_at(int at, std::int64_t hi) {
    auto& rp = reps_[static_cast<std::size_t>(at)];
    auto t = s_->now + s_->draw(50'000, hi);
    if (const auto cut = cut_of(at); cut > s_->now) t = std::max(t, cut + s_->draw(50'000, hi));
    rp.from_leader_last = t = std::max(t, rp.from_leader_last);
    return t;
}

void model_server::over_link(int at, bool to_leader, std::function<void()> fn) {
    if (leader_ < 0) return;        // (no leader: an election)
    if (at == leader_) return fn(); // (the leader itself)
    const auto epoch = reps_[static_cast<std::size_t>(at)].epoch;
    const auto when = to_leader ? to_leader_at(at) : from_leader_at(at, c_.lag_hi);
    s_->at(when, [this, at, epoch, era = era_, fn = std::move(fn)] {
        // (the link broke, or its leader is gone: lost)
        if (reps_[static_cast<std::size_t>(at)].epoch != epoch || era_ != era) return;
        fn();
    });
}

void model_server::relay_loop() {
    // The leader pings each follower; each answers with the sessions it heard from since its
    // last answer, and the leader takes that answer as their news (LearnerSessionTracker).
    for (int i = 0; i < servers(); ++i)
        if (i != leader_)
            over_link(i, false, [this, i] {
                auto& rp = reps_[static_cast<std::size_t>(i)];
                if (rp.gave_up) return;
                auto ids = std::exchange(rp.touched, {});
                over_link(i, true, [this, ids = std::move(ids)] {
                    for (auto id : ids) touch(id);
                });
            });
    s_->at(s_->now + tick / 2 + s_->draw(0, c_.ping_jitter_hi), [this] { relay_loop(); });
}

std::int64_t model_server::open_session(std::int64_t timeout_ns, int via) {
    const auto id = ++next_session_;
    alive_[id] = {s_->now, timeout_ns};
    sessions_[id] = timeout_ns;
    owner_[id] = via;
    return id;
}

bool model_server::revalidate(std::int64_t id, int via) {
    expire_due(s_->now);
    if (!alive(id)) return false;
    touch(id);
    owner_[id] = via;
    return true;
}

bool model_server::expire_due(std::int64_t now) {
    if (leader_ < 0) return false;
    std::vector<std::int64_t> due;
    for (auto& [id, t] : alive_)
        if (now - t.first > t.second) due.push_back(id);
    for (auto id : due) {
        txn t;
        t.session = id;
        t.close = true;
        // (the earliest moment the leader may expire it: its last news plus T, before any
        // rounding to a tick; the oracles measure the lease's margin against this when the
        // closeSession commits)
        t.expiry = true;
        t.earliest = alive_[id].first + alive_[id].second;
        t.timeout = alive_[id].second;
        alive_.erase(id);
        owner_.erase(id);
        log_txn(std::move(t));
    }
    return !due.empty();
}

void model_server::close_session(std::int64_t id) {
    if (!alive_.erase(id)) return;
    owner_.erase(id);
    txn t;
    t.session = id;
    t.close = true;
    log_txn(std::move(t));
}

void model_server::log_txn(txn t) {
    if (leader_ < 0) return; // (no leader: lost)
    auto& lr = reps_[static_cast<std::size_t>(leader_)];
    if (lr.cut_until > s_->now) {
        // A leader cut off from every follower commits nothing: the proposal waits for their
        // acks, and is lost if it steps down first.
        s_->at(lr.cut_until, [this, era = era_, t = std::move(t)]() mutable {
            if (era_ == era) log_txn(std::move(t));
        });
        return;
    }
    leader_zxid_ = std::max(leader_zxid_, lr.zxid) + 1;
    t.zxid = leader_zxid_;
    if (t.close) {
        sessions_.erase(t.session);
        if (t.expiry) {
            ++expired_;
            if (on_expire) on_expire(t.session, t.earliest, t.timeout);
        }
    }
    log_.push_back(std::move(t));
    const auto upto = log_.size();
    apply_log(leader_, upto);
    // the commit reaches each follower in order, after its lag (or after its cut heals)
    for (int i = 0; i < servers(); ++i)
        if (i != leader_) over_link(i, false, [this, i, upto] { apply_log(i, upto); });
}

void model_server::apply_log(int at, std::size_t upto) {
    auto& rp = reps_[static_cast<std::size_t>(at)];
    for (; rp.applied < upto; ++rp.applied) {
        const txn& t = log_[rp.applied];
        rp.zxid = t.zxid;
        zk_result res;
        if (t.close) {
            end_session(rp, t.session);
            continue;
        }
        if (t.error == 0) {
            res = apply(rp, t.session, t.r);
        } else {
            res.rc = res.list_rc = t.error;
        }
        if (t.origin != at) continue;
        auto q = rp.queues.find(t.session);
        if (q == rp.queues.end()) continue;
        for (auto& p : q->second)
            if (p.key == t.key) {
                p.answered = true;
                p.res = std::move(res);
                break;
            }
        pump(at, t.session);
    }
}

void model_server::pump(int at, std::int64_t id) {
    auto& rp = reps_[static_cast<std::size_t>(at)];
    auto it = rp.queues.find(id);
    if (it == rp.queues.end()) return;
    auto& q = it->second;
    while (!q.empty()) {
        auto& p = q.front();
        if (p.write && !p.answered) return; // (its commit has not reached this server yet)
        auto reply = std::move(p.reply);
        zk_result res;
        if (p.write) {
            res = std::move(p.res);
        } else if (rp.ended.count(id) || !rp.links.count(id) || rp.conn_of[id] != p.conn) {
            // (the session is closed here, or the connection it came on: no answer, and no watch
            // is set for a dead connection, WatchManager.isDeadWatcher)
            q.pop_front();
            continue;
        } else {
            if (leader_ >= 0 && at != leader_ && rp.zxid < reps_[static_cast<std::size_t>(leader_)].zxid)
                ++counts().stale_reads;
            res = apply(rp, id, p.r);
        }
        q.pop_front();
        reply(std::move(res), rp.zxid);
    }
    rp.queues.erase(it);
}

void model_server::lead(int origin, std::int64_t id, std::uint64_t key, zk_request r) {
    expire_due(s_->now);
    txn t;
    t.session = id;
    t.origin = origin;
    t.key = key;
    if (!alive(id)) {
        t.error = ZSESSIONEXPIRED;
    } else if (auto o = owner_.find(id); o != owner_.end() && o->second != origin) {
        t.error = ZSESSIONMOVED; // (the session reconnected elsewhere: a late request of the old server)
        ++counts().moved;
    } else {
        t.r = std::move(r);
    }
    log_txn(std::move(t));
}

void model_server::receive(int at, std::int64_t id, std::uint64_t conn, std::uint64_t key, zk_request r,
                           std::function<void(zk_result, std::int64_t)> reply) {
    auto& rp = reps_[static_cast<std::size_t>(at)];
    if (rp.gave_up) return; // (it closed its clients' connections)
    ping(at, id);
    replica::pending p;
    p.key = key;
    p.conn = conn;
    p.write = is_write(r.op);
    p.reply = std::move(reply);
    const bool write = p.write;
    if (!write) p.r = std::move(r);
    rp.queues[id].push_back(std::move(p));
    if (write) // forwarded to the leader at once (FollowerRequestProcessor), answered when committed here
        over_link(at, true,
                  [this, at, id, key, r = std::move(r)]() mutable { lead(at, id, key, std::move(r)); });
    pump(at, id);
}

void model_server::ping(int at, std::int64_t id) {
    if (at == leader_)
        touch(id);
    else
        reps_[static_cast<std::size_t>(at)].touched.insert(id);
}

void model_server::disconnect(int at, std::int64_t id) {
    if (at < 0) return;
    auto& rp = reps_[static_cast<std::size_t>(at)];
    rp.links.erase(id);
    rp.drop_watches(id);
}

void model_server::forget(const sim_link* l) {
    for (auto& rp : reps_)
        for (auto it = rp.links.begin(); it != rp.links.end();)
            if (it->second == l) {
                rp.drop_watches(it->first);
                it = rp.links.erase(it);
            } else {
                ++it;
            }
}

void model_server::connect(int at, std::int64_t id, sim_link* l, const std::vector<client_watch>& ws,
                           std::int64_t rel_zxid) {
    auto& rp = reps_[static_cast<std::size_t>(at)];
    if (rp.ended.count(id) || rp.gave_up) return;
    rp.links[id] = l;
    rp.conn_of[id] = l->conn();
    // SetWatches (DataTree.setWatches): a change after the client's last zxid fires at once
    for (auto& w : ws) {
        auto it = rp.nodes.find(w.path);
        int fired = 0;
        switch (w.kind) {
        case client_watch::data:
            if (it == rp.nodes.end())
                fired = ZOO_DELETED_EVENT;
            else if (it->second.mzxid > rel_zxid)
                fired = ZOO_CHANGED_EVENT;
            else
                rp.data_w.emplace(w.path, replica::watch{id, w.id});
            break;
        case client_watch::exist:
            if (it != rp.nodes.end())
                fired = ZOO_CREATED_EVENT;
            else
                rp.data_w.emplace(w.path, replica::watch{id, w.id});
            break;
        case client_watch::child:
            if (it == rp.nodes.end())
                fired = ZOO_DELETED_EVENT;
            else if (it->second.pzxid > rel_zxid)
                fired = ZOO_CHILD_EVENT;
            else
                rp.child_w.emplace(w.path, replica::watch{id, w.id});
            break;
        }
        if (fired) {
            ++counts().setwatch_fired;
            l->watch_fired(w.id, fired, 0);
        }
    }
}

std::vector<int> model_server::eligible(std::int64_t zxid) const {
    std::vector<int> out;
    for (auto& rp : reps_)
        if (!rp.gave_up && rp.zxid >= zxid) out.push_back(rp.index);
    if (out.empty()) // (none serves: an election; the attempt is refused, the next one tries again)
        for (auto& rp : reps_) out.push_back(rp.index);
    return out;
}

bool model_server::cut(int at, std::int64_t d) {
    if (at < 0 || at >= servers() || at == leader_ || leader_ < 0) return false;
    for (auto& rp : reps_)
        if (rp.cut_until > s_->now || rp.gave_up) return false; // (one at a time: the others keep a quorum)
    auto& rp = reps_[static_cast<std::size_t>(at)];
    rp.cut_until = s_->now + d;
    ++counts().cuts;
    if (d >= sync_limit)
        s_->at(s_->now + sync_limit, [this, at] {
            ++counts().gave_up;
            give_up(at);
        });
    s_->at(rp.cut_until, [this, at] {
        auto& rp = reps_[static_cast<std::size_t>(at)];
        // (the learner link delivers what it held, in order; in an election, the new leader syncs it)
        if (!rp.gave_up || leader_ < 0) return;
        // it finds the leader again and syncs (a DIFF: the log it missed), then serves clients
        rp.gave_up = false;
        apply_log(at, log_.size());
    });
    return true;
}

void model_server::give_up(int at) {
    auto& rp = reps_[static_cast<std::size_t>(at)];
    ++rp.epoch; // (what the learner link held is lost)
    rp.gave_up = true;
    rp.queues.clear();
    rp.touched.clear();
    auto links = std::exchange(rp.links, {});
    for (auto& [id, l] : links) l->drop(s_->draw(1'000'000, 100'000'000));
    for (auto& [id, l] : links) rp.drop_watches(id);
}

bool model_server::fail_leader(std::int64_t notice, std::int64_t down) {
    if (servers() < 3 || leader_ < 0) return false;
    for (auto& rp : reps_)
        if (rp.cut_until > s_->now || rp.gave_up) return false; // (one fault of the ensemble at a time)
    const int old = leader_;
    reps_[static_cast<std::size_t>(old)].cut_until = s_->now + std::max(down, notice + 1);
    s_->at(s_->now + notice, [this, old, era = era_] {
        if (era_ != era || reps_[static_cast<std::size_t>(old)].cut_until <= s_->now)
            return; // (healed in time: it leads on, and what it held commits now)
        // Everyone notices: the followers stop following, the leader steps down; each closes its
        // clients' connections. What was on its way to or from the old leader is lost.
        ++counts().failovers;
        ++era_;
        leader_ = -1;
        for (int i = 0; i < servers(); ++i) give_up(i);
        s_->at(s_->now + s_->draw(200'000'000, 2'000'000'000), [this, old] { elect(old); });
    });
    return true;
}

void model_server::elect(int old) {
    // One of the followers wins (both have every committed txn in their logs: a commit needs a
    // quorum's acks, and the old leader was cut off from both). Every server it reaches syncs to
    // the whole log (a DIFF) and serves clients again.
    int n = static_cast<int>(s_->rng() % 2);
    if (n >= old) ++n;
    leader_ = n;
    for (int i = 0; i < servers(); ++i) {
        auto& rp = reps_[static_cast<std::size_t>(i)];
        if (i == old && rp.cut_until > s_->now) continue;
        rp.cut_until = 0;
        apply_log(i, log_.size());
        rp.gave_up = false;
    }
    // Its session tracker starts with every session of the tree, each with a whole T from now
    // (ZooKeeperServer.loadData, SessionTrackerImpl.addSession); a session's owner is the server
    // it revalidates with next.
    alive_.clear();
    owner_.clear();
    for (auto& [id, t] : sessions_) alive_[id] = {s_->now, t};
    const auto heal = reps_[static_cast<std::size_t>(old)].cut_until;
    if (heal > s_->now)
        s_->at(heal, [this, old, era = era_] {
            if (era_ != era) return;
            auto& rp = reps_[static_cast<std::size_t>(old)];
            apply_log(old, log_.size()); // (it rejoins as a follower, a DIFF from the new leader)
            rp.gave_up = false;
        });
}

bool model_server::operator_delete(const std::string& path) {
    if (leader_ < 0) return false;
    auto it = view().nodes.find(path);
    if (it == view().nodes.end() || !it->second.children.empty()) return false;
    txn t;
    t.r = zklock::detail::make_request(zk_op::remove, path);
    log_txn(std::move(t));
    return true;
}

int model_server::reap_containers() {
    std::vector<std::string> due;
    if (leader_ < 0) return 0;
    for (auto& [p, n] : view().nodes)
        if (n.container && n.children.empty() && n.cversion > 0) due.push_back(p);
    for (auto& p : due) operator_delete(p);
    reaped_ += static_cast<int>(due.size());
    return static_cast<int>(due.size());
}

std::vector<std::string> model_server::under(const std::string& path) const {
    std::vector<std::string> out;
    for (auto& [p, n] : view().nodes)
        if (p.size() > path.size() && p.compare(0, path.size(), path) == 0 && p[path.size()] == '/')
            out.push_back(p);
    return out;
}

// ---------------------------------------------------------------- the link

std::int64_t sim_link::to_client_at() {
    last_to_client_ =
        std::max(last_to_client_, std::max(s_.now, stall_down_until_) + s_.draw(50'000, 2'000'000));
    return last_to_client_;
}

std::int64_t sim_link::to_server_at() {
    last_to_server_ =
        std::max(last_to_server_, std::max(s_.now, stall_up_until_) + s_.draw(50'000, 2'000'000));
    return last_to_server_;
}

void sim_link::start() {
    p_.lease->saw_state(s_.now, false);
    handshake(true);
}

void sim_link::handshake(bool first) {
    // the C client tries the servers in turn; one behind what it has seen refuses it
    auto ok = m_.eligible(last_zxid_);
    const int at = ok[s_.rng() % ok.size()];
    const auto conn = conn_;
    // (unanswered within the connect timeout, e.g. its server gave up the leader: the next one)
    at_client(s_.now + reconnect_retry, [w = weak_from_this(), conn] {
        auto self = w.lock();
        if (!self || self->closed_ || self->connected_ || self->conn_ != conn || self->server_ >= 0) return;
        self->m_.forget(self.get()); // (the attempt's connection is given up)
        ++self->conn_;
        self->handshake(self->id_ == 0);
    });
    auto attempt = conn_;
    s_.at(to_server_at(), [w = weak_from_this(), at, first, attempt] {
        auto self = w.lock();
        if (!self || self->closed_ || self->conn_ != attempt) return;
        auto& m = self->m_;
        if (m.server(at).gave_up) return; // (refused: the retry picks another)
        // the server asks the leader: a new session, or the revalidation of this one
        m.over_link(at, true, [w, at, first, attempt] {
            auto self = w.lock();
            if (!self || self->closed_ || self->conn_ != attempt) return;
            auto& m = self->m_;
            bool alive = true;
            if (first) {
                self->id_ = m.open_session(static_cast<std::int64_t>(self->timeout_ms_) * 1'000'000, at);
                m.set_identity(self->id_, self->auth_); // (addAuth: before any request of it)
            } else {
                alive = m.revalidate(self->id_, at);
            }
            m.over_link(at, false, [w, at, alive, attempt] {
                auto self = w.lock();
                if (!self || self->closed_ || self->conn_ != attempt) return;
                auto& rp = self->m_.server(at);
                if (rp.gave_up) return;
                if (alive && !rp.ended.count(self->id_)) { // (the connection, at the server)
                    rp.links[self->id_] = self.get();
                    rp.conn_of[self->id_] = attempt;
                }
                self->at_client(self->to_client_at(), [w, at, alive, attempt] {
                    auto self = w.lock();
                    if (!self || self->closed_ || self->conn_ != attempt) return;
                    if (!alive) { // told only now, at the reconnect (SESSIONEXPIRED)
                        self->closed_ = true;
                        self->deliver([ev = self->p_.events, gen = self->p_.generation] {
                            if (auto e = ev.lock()) e->on_session_event(gen, ZOO_EXPIRED_SESSION_STATE);
                        });
                        counts().expired_replies += static_cast<long>(self->queued_.size());
                        self->fail_queued(ZSESSIONEXPIRED); // (what waited in the client's queue)
                        return;
                    }
                    self->connected_to(at);
                });
            });
        });
    });
}

void sim_link::connected_to(int at) {
    server_ = at;
    connected_ = true;
    p_.lease->on_connected(static_cast<lease_ns>(timeout_ms_) * 1'000'000, s_.now);
    p_.lease->saw_state(s_.now, true);
    deliver([ev = p_.events, gen = p_.generation] {
        if (auto e = ev.lock()) e->on_session_event(gen, ZOO_CONNECTED_STATE);
    });
    // the credentials go first on every connection, and the server answers them first: digest
    // credentials are always accepted (a wrong password shows later, as NOAUTH)
    if (!auth_.empty())
        deliver([ev = p_.events, gen = p_.generation] {
            if (auto e = ev.lock()) e->on_auth_result(gen, ZOK);
        });
    // SetWatches first, with the last zxid seen: what changed meanwhile fires at the server
    std::vector<model_server::client_watch> ws;
    for (auto& [id, w] : watches_) ws.push_back(w);
    s_.at(to_server_at(), [w = weak_from_this(), conn = conn_, at, ws = std::move(ws), rel = last_zxid_] {
        auto self = w.lock();
        if (!self || self->closed_ || self->conn_ != conn) return;
        self->m_.connect(at, self->id_, self.get(), ws, rel);
    });
    // what waited in the client's queue goes now, in order
    for (auto& q : std::exchange(queued_, {})) send(std::move(q.r), std::move(q.h), q.sent);
    ping();
}

void sim_link::ping() {
    // (the C client pings a third of the timeout after its last send; here every third)
    at_client(s_.now + static_cast<std::int64_t>(timeout_ms_) * 1'000'000 / 3,
              [w = weak_from_this(), conn = conn_] {
                  auto self = w.lock();
                  if (!self || self->closed_ || !self->connected_ || self->conn_ != conn) return;
                  self->s_.at(self->to_server_at(), [w, conn] {
                      auto self = w.lock();
                      if (!self || self->closed_ || self->conn_ != conn) return;
                      self->m_.ping(self->server_, self->id_);
                  });
                  self->ping();
              });
}

void sim_link::drop(std::int64_t down, int rc) {
    if (closed_) return;
    if (s_.paused(proc_)) { // (its C client notices at the resume; the server, then too)
        s_.run_in(proc_, [w = weak_from_this(), down, rc] {
            if (auto self = w.lock()) self->drop(down, rc);
        });
        return;
    }
    if (!connected_) {                      // (a handshake on its way fails: the next attempt after `down`)
        if (id_ == 0 && conn_ == 0) return; // (not started)
        m_.forget(this);                    // (a server that answered the attempt sees its connection close)
        const auto conn = ++conn_;
        at_client(s_.now + down, [w = weak_from_this(), conn] {
            auto self = w.lock();
            if (!self || self->closed_ || self->conn_ != conn || self->connected_) return;
            self->handshake(self->id_ == 0);
        });
        return;
    }
    connected_ = false;
    refusing_ = s_.rng() % 2 == 0;
    if (rc == ZOPERATIONTIMEOUT) ++counts().timeouts;
    ++conn_;
    m_.disconnect(server_, id_);
    server_ = -1;
    p_.lease->saw_state(s_.now, false);
    // what had not reached the server: it arrives anyway (its reply lost) or never, as drawn
    for (auto& [rid, ev] : std::exchange(arrivals_, {}))
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
    at_client(s_.now + down, [w = weak_from_this(), conn = conn_] {
        auto self = w.lock();
        if (!self || self->closed_ || self->conn_ != conn) return;
        self->handshake(false);
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
    if (write && on_write) on_write(*this);
    s_.note(static_cast<std::uint64_t>(r.op) * 31 + r.path.size());
    const auto rid = ++next_request_;
    inflight_.emplace(rid, std::make_shared<zklock::detail::zk_handler>(std::move(h)));
    const int at = server_;
    arrivals_[rid] = s_.at(to_server_at(), [w = weak_from_this(), r = std::move(r), rid, sent, v, write, at,
                                            conn = conn_]() mutable {
        auto self = w.lock();
        if (!self || self->closed_) return; // (close() answered it)
        self->arrivals_.erase(rid);
        const bool late = self->conn_ != conn;
        // (its connection dropped on the way: the server read it before it saw the close; a
        // write goes on, its reply lost; a read's answer and its watch go with the connection)
        if (late && !is_write(r.op)) return;
        if (late) ++counts().late_writes;
        const auto op = r.op;
        const auto watch_id = r.watch_id;
        const auto path = r.path;
        // the server answers it when it can (a write: once committed there); the answer goes
        // back on this connection, if it still stands
        self->m_.receive(
            at, self->id_, conn, rid, std::move(r),
            [w, rid, sent, v, write, conn, op, watch_id, path](zk_result res0, std::int64_t zxid) {
                auto self = w.lock();
                if (!self || self->closed_ || self->conn_ != conn) return;
                if (v == zklock::detail::vouch::commit && res0.rc == ZOK && self->on_write_answered)
                    self->on_write_answered(*self);                        // (a heartbeat too)
                if (!self || self->closed_ || self->conn_ != conn) return; // (the hook may drop it)
                auto res = std::make_shared<zk_result>(std::move(res0));
                self->at_client(self->to_client_at(), [w, res, rid, sent, v, write, conn, op, watch_id, path,
                                                       zxid] {
                    auto self = w.lock();
                    if (!self || self->closed_ || self->conn_ != conn) return;
                    auto it = self->inflight_.find(rid);
                    if (it == self->inflight_.end()) return;
                    auto hp = std::move(it->second);
                    self->inflight_.erase(it);
                    if (write) --self->writes_;
                    self->last_zxid_ = std::max(self->last_zxid_, zxid);
                    // the C client's watch table (activateWatcher on the reply)
                    if (watch_id != 0) {
                        using cw = model_server::client_watch;
                        if (op == zk_op::get_data && res->rc == ZOK)
                            self->watches_[watch_id] = cw{watch_id, path, cw::data};
                        else if (op == zk_op::exists && (res->rc == ZOK || res->rc == ZNONODE))
                            self->watches_[watch_id] =
                                cw{watch_id, path, res->rc == ZOK ? cw::data : cw::exist};
                        else if (op == zk_op::get_children && res->rc == ZOK)
                            self->watches_[watch_id] = cw{watch_id, path, cw::child};
                        else if (op == zk_op::remove_watch)
                            self->watches_.erase(watch_id);
                    }
                    if (op == zk_op::remove_all_watches)
                        for (auto i = self->watches_.begin(); i != self->watches_.end();)
                            i = i->second.path == path && i->second.kind != model_server::client_watch::child
                                    ? self->watches_.erase(i)
                                    : std::next(i);
                    if (zklock::detail::is_server_reply(res->rc) &&
                        self->p_.lease->on_reply(sent, zklock::detail::proves_commit(v, res->rc),
                                                 self->s_.now))
                        self->deliver([ev = self->p_.events] {
                            if (auto e = ev.lock()) e->check_lease();
                        });
                    self->deliver([hp, res]() mutable { std::move (*hp)(std::move(*res)); });
                });
            });
    });
}

void sim_link::watch_fired(std::uint64_t id, int type, std::int64_t zxid) {
    at_client(to_client_at(), [w = weak_from_this(), id, type, zxid, conn = conn_] {
        auto self = w.lock();
        if (!self || self->closed_ || self->conn_ != conn) return; // (lost: SetWatches fires it again)
        self->watches_.erase(id);
        // (ZooKeeper 3.8 sends a notification with zxid -1 in its header, ServerCnxn.process, so
        // the client's last zxid moves with replies only: a reply comes after every event its
        // transaction fired on that connection, so SetWatches with it fires again any event lost
        // with the connection. A zxid taken from the first of two events of one transaction would
        // hide the second: the model found that in its first version, seed 122,913.)
        (void)zxid;
        self->deliver([ev = self->p_.events, id, type] {
            if (auto e = ev.lock()) e->on_watch(id, type);
        });
    });
}

void sim_link::close() {
    m_.forget(this); // (no server keeps a connection of it: one that answered an attempt the
                     // client had not read yet, a pause or a delay, would point at a link gone)
    if (closed_) return;
    closed_ = true;
    connected_ = false;
    m_.disconnect(server_, id_);
    server_ = -1;
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
