// The session's requests: each builds a c_op and hands it to the bridge (zk_handle::submit).
#include "bridge/c_op.hpp"

namespace zklock::detail {

// ---------------------------------------------------------------- requests

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
} // namespace

// ---------------------------------------------------------------- the test's tap (session_tap.hpp)
zk_handler session_impl::behind_tap(tapped_request k, const std::string& path, zk_handler h) {
    if (!tap) return h;
    return zk_handler([t = tap, k, path, h = std::move(h)](zk_result r) mutable {
        t->reply(k, path, r);
        std::move(h)(std::move(r));
    });
}

void session_impl::refused_by_tap(int rc, zk_handler h) {
    auto* op = new c_op;
    op->h.emplace(std::move(h));
    op->res.rc = rc;
    op->res.list_rc = rc;
    post_result(strand_, op);
}

void session_impl::create(const std::string& path, const std::string& data, int flags, zk_handler h,
                          const std::shared_ptr<const acl>& a) {
    c_acl acl_vec(a);
    // (the test's tap sees a lock path's parents made; a new handler, not an assignment: Boost
    // 1.81's any_completion_handler must not be assigned to)
    zk_handler th = (flags & ZOO_CONTAINER) != 0
                        ? behind_tap(tapped_request::container_create, path, std::move(h))
                        : std::move(h);
    submit(
        th,
        [&](zhandle_t* zh, c_op* op) -> int {
            op->renews = vouch::commit;
            return zoo_acreate2(zh, path.c_str(), data.data(), static_cast<int>(data.size()), acl_vec.get(),
                                flags, on_string_stat, op);
        },
        n_create);
}

void session_impl::create_and_list(const std::string& path, const std::string& data, int flags,
                                   const std::string& parent, zk_handler h,
                                   const std::shared_ptr<const acl>& a) {
    c_acl acl_vec(a);
    if (int rc = tap ? tap->before(tapped_request::create_and_list, path) : 0; rc != 0)
        return refused_by_tap(rc, std::move(h)); // (the request "never reached the server")
    auto* op = new c_op;
    op->h.emplace(behind_tap(tapped_request::create_and_list, path, std::move(h)));
    op->remaining = 2;
    op->pipelined = true;
    op->renews = vouch::commit; // (the create's reply; the listing's renews nothing)
    n_create.fetch_add(1, std::memory_order_relaxed);
    n_children.fetch_add(1, std::memory_order_relaxed);
    bool finish_here = false;
    int rc = !handle_ ? ZINVALIDSTATE : handle_->submit(op, [&](zhandle_t* zh, c_op* op) -> int {
        int rc = zoo_acreate2(zh, path.c_str(), data.data(), static_cast<int>(data.size()), acl_vec.get(),
                              flags, on_string_stat, op);
        if (rc != ZOK) return rc;
        int rc2 = zoo_aget_children2(zh, parent.c_str(), 0, on_strings, op);
        if (rc2 != ZOK) {
            op->res.list_rc = rc2;
            // (The C client runs completions only inside zookeeper_process, never inside a
            // request call; counted down here all the same.)
            if (op->remaining.fetch_sub(1) == 1) finish_here = true;
        }
        return ZOK;
    });
    if (rc != ZOK) {
        op->res.rc = rc;
        op->res.list_rc = rc;
        post_result(strand_, op);
    } else if (finish_here && op->owner->take(op)) {
        post_result(strand_, op);
    }
}

void session_impl::multi(const std::vector<transaction::op>& ops, zk_handler h) {
    multi(ops, std::move(h), n_multi);
}

void session_impl::multi(const std::vector<transaction::op>& ops, zk_handler h,
                         std::atomic<std::uint64_t>& counter) {
    auto b = std::make_unique<multi_buffers>();
    b->ops.resize(ops.size());
    b->results.resize(ops.size());
    b->paths.resize(ops.size());
    b->stats.resize(ops.size());
    for (auto& r : b->results) r.err = 1;     // (not a ZooKeeper code: "not filled in")
    std::vector<std::unique_ptr<c_acl>> acls; // (until the C client has serialised the request)
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
    // (the C client serialises the operations before returning: `ops` need not outlive the call)
    submit(
        h,
        [&](zhandle_t* zh, c_op* op) -> int {
            op->renews = vouch::commit;
            op->multi = std::move(b);
            return zoo_amulti(zh, static_cast<int>(op->multi->ops.size()), op->multi->ops.data(),
                              op->multi->results.data(), on_multi, op);
        },
        counter);
}

void session_impl::get_children(const std::string& path, zk_handler h, std::uint64_t watch_id) {
    note_watch_path(watch_id, path, true);
    zk_handler th = behind_tap(tapped_request::list, path, std::move(h));
    submit(
        th,
        [&](zhandle_t* zh, c_op* op) -> int {
            if (watch_id == 0) return zoo_aget_children2(zh, path.c_str(), 0, on_strings, op);
            return zoo_awget_children2(zh, path.c_str(), node_watcher,
                                       reinterpret_cast<void*>(static_cast<std::uintptr_t>(watch_id)),
                                       on_strings, op);
        },
        n_children);
}

void session_impl::get_data(const std::string& path, std::uint64_t watch_id, zk_handler h) {
    if (auto late = tap && watch_id != 0 ? tap->hold(tapped_request::watched_read, path)
                                         : std::chrono::milliseconds();
        late.count() > 0) {
        // The test's tap holds the request up on its way (session_tap::hold).
        auto t = std::make_shared<asio::steady_timer>(strand_, late);
        t->async_wait([t, w = weak_from_this(), path, watch_id, h = std::move(h)](error_code) mutable {
            if (auto s = w.lock()) s->get_data_now(path, watch_id, std::move(h));
        });
        return;
    }
    get_data_now(path, watch_id, std::move(h));
}

void session_impl::get_data_now(const std::string& path, std::uint64_t watch_id, zk_handler h) {
    note_watch_path(watch_id, path, false);
    submit(
        h,
        [&](zhandle_t* zh, c_op* op) -> int {
            return zoo_awget(zh, path.c_str(), watch_id ? node_watcher : nullptr,
                             reinterpret_cast<void*>(static_cast<std::uintptr_t>(watch_id)), on_data, op);
        },
        n_get);
}

void session_impl::note_watch_path(std::uint64_t watch_id, const std::string& path, bool child) {
    if (watch_id == 0) return;
    auto it = watches_.find(watch_id);
    if (it == watches_.end()) return;
    it->second.path = path;
    it->second.child = child;
}

void session_impl::exists(const std::string& path, zk_handler h) {
    submit(
        h, [&](zhandle_t* zh, c_op* op) -> int { return zoo_aexists(zh, path.c_str(), 0, on_stat, op); },
        n_exists);
}

void session_impl::exists_watch(const std::string& path, std::uint64_t watch_id, zk_handler h) {
    note_watch_path(watch_id, path, false);
    submit(
        h,
        [&](zhandle_t* zh, c_op* op) -> int {
            return zoo_awexists(zh, path.c_str(), node_watcher,
                                reinterpret_cast<void*>(static_cast<std::uintptr_t>(watch_id)), on_stat, op);
        },
        n_exists);
}

void session_impl::remove(const std::string& path, int version, zk_handler h) {
    submit(
        h,
        [&](zhandle_t* zh, c_op* op) -> int {
            op->renews = vouch::commit;
            return zoo_adelete(zh, path.c_str(), version, on_void, op);
        },
        n_delete);
}

void session_impl::set_data(const std::string& path, const std::string& data, int version, zk_handler h) {
    submit(
        h,
        [&](zhandle_t* zh, c_op* op) -> int {
            op->renews = vouch::commit;
            return zoo_aset(zh, path.c_str(), data.data(), static_cast<int>(data.size()), version, on_stat,
                            op);
        },
        n_set);
}

} // namespace zklock::detail
