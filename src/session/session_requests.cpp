// The session's requests: each becomes a zk_request (session/zk_link.hpp) for the session's link,
// counted in the statistics, and shown to the test's tap where it asks (session_tap.hpp).
#include "session/session_impl.hpp"

#include <boost/asio/post.hpp>

namespace zklock::detail {

void session_impl::send(zk_request r, zk_handler h, std::atomic<std::uint64_t>* counter) {
    if (counter) counter->fetch_add(1, std::memory_order_relaxed);
    if (!handle_) return refused_by_tap(ZINVALIDSTATE, std::move(h));
    handle_->submit(std::move(r), std::move(h));
}

// ---------------------------------------------------------------- the test's tap (session_tap.hpp)
zk_handler session_impl::behind_tap(tapped_request k, const std::string& path, zk_handler h) {
    if (!tap) return h;
    return zk_handler([t = tap, k, path, h = std::move(h)](zk_result r) mutable {
        t->reply(k, path, r);
        std::move(h)(std::move(r));
    });
}

void session_impl::refused_by_tap(int rc, zk_handler h) {
    asio::post(strand_, [h = std::move(h), rc]() mutable {
        zk_result r;
        r.rc = rc;
        r.list_rc = rc;
        std::move(h)(std::move(r));
    });
}

void session_impl::create(const std::string& path, const std::string& data, int flags, zk_handler h,
                          const std::shared_ptr<const acl>& a) {
    // (the test's tap sees a lock path's parents made; a new handler, not an assignment: Boost
    // 1.81's any_completion_handler must not be assigned to)
    zk_handler th = (flags & ZOO_CONTAINER) != 0
                        ? behind_tap(tapped_request::container_create, path, std::move(h))
                        : std::move(h);
    auto r = make_request(zk_op::create, path);
    r.data = data;
    r.flags = flags;
    r.node_acl = a;
    send(std::move(r), std::move(th), &n_create);
}

void session_impl::create_and_list(const std::string& path, const std::string& data, int flags,
                                   const std::string& parent, zk_handler h,
                                   const std::shared_ptr<const acl>& a) {
    if (int rc = tap ? tap->before(tapped_request::create_and_list, path) : 0; rc != 0)
        return refused_by_tap(rc, std::move(h)); // (the request "never reached the server")
    n_children.fetch_add(1, std::memory_order_relaxed);
    auto r = make_request(zk_op::create_and_list, path);
    r.data = data;
    r.flags = flags;
    r.parent = parent;
    r.node_acl = a;
    send(std::move(r), behind_tap(tapped_request::create_and_list, path, std::move(h)), &n_create);
}

void session_impl::multi(const std::vector<transaction::op>& ops, zk_handler h) {
    multi(ops, std::move(h), n_multi);
}

void session_impl::multi(const std::vector<transaction::op>& ops, zk_handler h,
                         std::atomic<std::uint64_t>& counter) {
    auto r = make_request(zk_op::multi, {});
    r.ops = ops;
    r.heartbeat = &counter == &n_heartbeat;
    send(std::move(r), std::move(h), &counter);
}

void session_impl::get_children(const std::string& path, zk_handler h, std::uint64_t watch_id) {
    note_watch_path(watch_id, path, true);
    auto r = make_request(zk_op::get_children, path);
    r.watch_id = watch_id;
    send(std::move(r), behind_tap(tapped_request::list, path, std::move(h)), &n_children);
}

void session_impl::get_data(const std::string& path, std::uint64_t watch_id, zk_handler h) {
    if (auto late = tap && watch_id != 0 ? tap->hold(tapped_request::watched_read, path)
                                         : std::chrono::milliseconds();
        late.count() > 0) {
        // The test's tap holds the request up on its way (session_tap::hold).
        auto t = std::make_shared<timer>(plat_, strand_, late);
        t->async_wait([t, w = weak_from_this(), path, watch_id, h = std::move(h)](error_code) mutable {
            if (auto s = w.lock()) s->get_data_now(path, watch_id, std::move(h));
        });
        return;
    }
    get_data_now(path, watch_id, std::move(h));
}

void session_impl::get_data_now(const std::string& path, std::uint64_t watch_id, zk_handler h) {
    note_watch_path(watch_id, path, false);
    auto r = make_request(zk_op::get_data, path);
    r.watch_id = watch_id;
    send(std::move(r), std::move(h), &n_get);
}

void session_impl::note_watch_path(std::uint64_t watch_id, const std::string& path, bool child) {
    if (watch_id == 0) return;
    auto it = watches_.find(watch_id);
    if (it == watches_.end()) return;
    it->second.path = path;
    it->second.child = child;
}

void session_impl::exists(const std::string& path, zk_handler h) {
    send(make_request(zk_op::exists, path), std::move(h), &n_exists);
}

void session_impl::exists_watch(const std::string& path, std::uint64_t watch_id, zk_handler h) {
    note_watch_path(watch_id, path, false);
    auto r = make_request(zk_op::exists, path);
    r.watch_id = watch_id;
    send(std::move(r), std::move(h), &n_exists);
}

void session_impl::remove(const std::string& path, int version, zk_handler h) {
    auto r = make_request(zk_op::remove, path);
    r.version = version;
    send(std::move(r), std::move(h), &n_delete);
}

void session_impl::set_data(const std::string& path, const std::string& data, int version, zk_handler h) {
    auto r = make_request(zk_op::set_data, path);
    r.data = data;
    r.version = version;
    send(std::move(r), std::move(h), &n_set);
}

} // namespace zklock::detail
