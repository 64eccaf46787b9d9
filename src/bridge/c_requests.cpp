// The session's requests (session/zk_link.hpp, zk_request) as the C client's calls: each becomes
// a c_op (bridge/c_op.hpp) handed to the C client under its lock (zk_handle::submit_call).
#include "bridge/c_op.hpp"

namespace zklock::detail {

namespace {

/// A zklock::acl as the C client's ACL_vector; the strings stay in the acl object, which
/// outlives the call (the C client serialises the request before returning).
class c_acl {
public:
    explicit c_acl(const std::shared_ptr<const acl>& a) {
        if (a) init(*a);
    }
    explicit c_acl(const acl& a) { init(a); }
    c_acl(const c_acl&) = delete;
    c_acl& operator=(const c_acl&) = delete;
    ACL_vector* get() noexcept { return vec_; }

private:
    void init(const acl& a) {
        if (a.is_open()) return;
        for (auto& e : a.entries())
            entries_.push_back(
                ACL{e.perms, Id{const_cast<char*>(e.scheme.c_str()), const_cast<char*>(e.id.c_str())}});
        own_.count = static_cast<std::int32_t>(entries_.size());
        own_.data = entries_.data();
        vec_ = &own_;
    }

    std::vector<ACL> entries_;
    ACL_vector own_{};
    ACL_vector* vec_ = &ZOO_OPEN_ACL_UNSAFE;
};

/// A multi's operations in the C client's form, and the buffers its results are written into.
std::unique_ptr<multi_buffers> multi_ops(const std::vector<transaction::op>& ops,
                                         std::vector<std::unique_ptr<c_acl>>& acls) {
    auto b = std::make_unique<multi_buffers>();
    b->ops.resize(ops.size());
    b->results.resize(ops.size());
    b->paths.resize(ops.size());
    b->stats.resize(ops.size());
    for (auto& r : b->results) r.err = 1; // (not a ZooKeeper code: "not filled in")
    for (std::size_t i = 0; i < ops.size(); ++i) {
        const auto& o = ops[i];
        auto* z = &b->ops[i];
        switch (o.what) {
        case transaction::kind::create: {
            int flags = 0;
            if (o.mode == create_mode::ephemeral || o.mode == create_mode::ephemeral_sequential)
                flags |= ZOO_EPHEMERAL;
            if (o.mode == create_mode::persistent_sequential || o.mode == create_mode::ephemeral_sequential)
                flags |= ZOO_SEQUENCE;
            b->paths[i].resize(o.path.size() + 16);
            acls.push_back(std::make_unique<c_acl>(o.node_acl));
            zoo_create_op_init(z, o.path.c_str(), o.data.data(), static_cast<int>(o.data.size()),
                               acls.back()->get(), flags, b->paths[i].data(),
                               static_cast<int>(b->paths[i].size()));
            break;
        }
        case transaction::kind::set_data:
            zoo_set_op_init(z, o.path.c_str(), o.data.data(), static_cast<int>(o.data.size()), o.version,
                            &b->stats[i]);
            break;
        case transaction::kind::remove:
            zoo_delete_op_init(z, o.path.c_str(), o.version);
            break;
        case transaction::kind::check:
            zoo_check_op_init(z, o.path.c_str(), o.version);
            break;
        }
    }
    return b;
}

void* watch_context(std::uint64_t id) { return reinterpret_cast<void*>(static_cast<std::uintptr_t>(id)); }

/// The C client declares removeWatches' completion as `void_completion_t*` but stores and calls
/// it as the function pointer itself (do_create_completion_entry casts it back).
void_completion_t* remove_watches_completion() {
    return reinterpret_cast<void_completion_t*>(reinterpret_cast<void*>(&on_void));
}

} // namespace

void zk_handle::submit(zk_request r, zk_handler h) {
    auto* op = new c_op;
    op->h.emplace(std::move(h));
    op->renews = vouch_of(r.op);
    op->heartbeat = r.heartbeat;
    c_acl acl_vec(r.node_acl);
    std::vector<std::unique_ptr<c_acl>> acls; // (a multi's, until the C client has serialised it)
    const char* path = r.path.c_str();
    bool finish_here = false; // create_and_list: the listing was refused after the create went
    int rc = ZOK;
    switch (r.op) {
    case zk_op::create:
        rc = submit(op, [&](zhandle_t* zh, c_op* op) -> int {
            return zoo_acreate2(zh, path, r.data.data(), static_cast<int>(r.data.size()), acl_vec.get(),
                                r.flags, on_string_stat, op);
        });
        break;
    case zk_op::create_and_list:
        op->remaining = 2;
        op->pipelined = true;
        rc = submit(op, [&](zhandle_t* zh, c_op* op) -> int {
            int rc = zoo_acreate2(zh, path, r.data.data(), static_cast<int>(r.data.size()), acl_vec.get(),
                                  r.flags, on_string_stat, op);
            if (rc != ZOK) return rc;
            int rc2 = zoo_aget_children2(zh, r.parent.c_str(), 0, on_strings, op);
            if (rc2 != ZOK) {
                op->res.list_rc = rc2;
                // (The C client runs completions only inside zookeeper_process, never inside a
                // request call; counted down here all the same.)
                if (op->remaining.fetch_sub(1) == 1) finish_here = true;
            }
            return ZOK;
        });
        if (rc != ZOK) op->res.list_rc = rc;
        break;
    case zk_op::get_children:
        rc = submit(op, [&](zhandle_t* zh, c_op* op) -> int {
            if (r.watch_id == 0) return zoo_aget_children2(zh, path, 0, on_strings, op);
            return zoo_awget_children2(zh, path, node_watcher, watch_context(r.watch_id), on_strings, op);
        });
        break;
    case zk_op::get_data:
        rc = submit(op, [&](zhandle_t* zh, c_op* op) -> int {
            return zoo_awget(zh, path, r.watch_id ? node_watcher : nullptr, watch_context(r.watch_id),
                             on_data, op);
        });
        break;
    case zk_op::exists:
        rc = submit(op, [&](zhandle_t* zh, c_op* op) -> int {
            if (r.watch_id == 0) return zoo_aexists(zh, path, 0, on_stat, op);
            return zoo_awexists(zh, path, node_watcher, watch_context(r.watch_id), on_stat, op);
        });
        break;
    case zk_op::remove:
        rc = submit(op, [&](zhandle_t* zh, c_op* op) -> int {
            return zoo_adelete(zh, path, r.version, on_void, op);
        });
        break;
    case zk_op::set_data:
        rc = submit(op, [&](zhandle_t* zh, c_op* op) -> int {
            return zoo_aset(zh, path, r.data.data(), static_cast<int>(r.data.size()), r.version, on_stat, op);
        });
        break;
    case zk_op::multi:
        op->multi = multi_ops(r.ops, acls);
        rc = submit(op, [&](zhandle_t* zh, c_op* op) -> int {
            return zoo_amulti(zh, static_cast<int>(op->multi->ops.size()), op->multi->ops.data(),
                              op->multi->results.data(), on_multi, op);
        });
        break;
    case zk_op::remove_watch:
        // ZOO_CHECK_WATCHES for this one watcher: the C client drops it when the reply arrives.
        rc = submit(op, [&](zhandle_t* zh, c_op* op) -> int {
            return zoo_aremove_watches(zh, path, r.child_watch ? ZWATCHTYPE_CHILD : ZWATCHTYPE_DATA,
                                       node_watcher, watch_context(r.watch_id), 0,
                                       remove_watches_completion(), op);
        });
        break;
    case zk_op::remove_all_watches:
        rc = submit(op, [&](zhandle_t* zh, c_op* op) -> int {
            return zoo_aremove_all_watches(zh, path, ZWATCHTYPE_DATA, 0, remove_watches_completion(), op);
        });
        break;
    }
    if (rc != ZOK) {
        // A call refused synchronously never runs its completion: complete it here, posted.
        op->res.rc = rc;
        post_result(strand, op);
    } else if (finish_here && take(op)) {
        post_result(strand, op);
    }
}

} // namespace zklock::detail
