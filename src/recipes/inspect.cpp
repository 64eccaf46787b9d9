// Inspection and admin operations: coroutines on the session's strand.
#include <zklock/inspect.hpp>
#include <zklock/path.hpp>

#include "common/pending.hpp"
#include "protocol/protocol.hpp"
#include "session/session_impl.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>

#include <algorithm>
#include <charconv>
#include <type_traits>
#include <boost/asio/use_awaitable.hpp>

namespace zklock::detail {
namespace {

using asio::use_awaitable;

error_code rc_error(int rc) { return rc == ZOK ? error_code{} : error_code(rc, zookeeper_category()); }

lock_family family_of(const inspect_options& o) {
    return o.read_write ? lock_family::rw : lock_family::mutex;
}

/// The lock nodes among `children`: the contenders in queue order, then the foreign ones.
std::vector<contender_info> lock_nodes(const std::vector<std::string>& children, inspect_options o,
                                       parent_cversion cv) {
    std::vector<contender_info> nodes;
    for (const auto& c : sorted_contenders(children, o.dialect, family_of(o), cv)) {
        contender_info i;
        i.name = std::string(c.name);
        i.sequence = c.seq;
        i.writer = c.writer;
        nodes.push_back(std::move(i));
    }
    for (const auto& name : children) {
        if (classify_child(name, family_of(o), o.dialect, cv) != child_kind::foreign) continue;
        contender_info i;
        i.name = name;
        if (auto p = parse_contender(name, family_of(o), o.dialect)) i.sequence = p->seq;
        i.foreign = true;
        nodes.push_back(std::move(i));
    }
    return nodes;
}

/// Fills in what each node's getData returned; drops the nodes gone meanwhile. ZOK or the first
/// error. `max_leases`: the semaphore's N, for its leases.
/// `now`: the platform's wall clock (a node's age from its ctime).
int fill_in(std::vector<contender_info>& nodes, std::vector<zk_result>& results, const std::string& path,
            std::size_t max_leases, std::chrono::system_clock::time_point now) {
    std::vector<contender_info> out;
    bool writer_seen = false, holder_seen = false;
    std::size_t leases_seen = 0;
    for (std::size_t i = 0; i < nodes.size(); ++i) {
        auto& r = results[i];
        if (r.rc == ZNONODE) continue; // went away meanwhile
        if (r.rc != ZOK) return r.rc;
        contender_info c = std::move(nodes[i]);
        c.node_path = path + (c.lease ? "/leases/" : "/") + c.name;
        if (c.lease) {
            c.holder = leases_seen++ < max_leases;
        } else if (!c.foreign) {
            c.holder = !holder_seen || (!c.writer && !writer_seen);
            holder_seen = true;
            writer_seen = writer_seen || c.writer;
        }
        c.data = std::move(r.data);
        c.age = std::chrono::duration_cast<std::chrono::milliseconds>(
            now - decltype(now)(std::chrono::milliseconds(r.stat.ctime)));
        c.session_id = r.stat.ephemeralOwner;
        c.czxid = r.stat.czxid;
        out.push_back(std::move(c));
    }
    nodes = std::move(out);
    return ZOK;
}

/// Lists and reads every lock node (the getData requests go out in one flight).
asio::awaitable<std::pair<int, std::vector<contender_info>>> list(session_impl& s, std::string path,
                                                                  inspect_options o) {
    auto l = co_await s.async_get_children(path, use_awaitable);
    if (l.rc == ZNONODE) co_return std::make_pair(ZOK, std::vector<contender_info>{});
    if (l.rc != ZOK) co_return std::make_pair(l.rc, std::vector<contender_info>{});
    auto nodes = lock_nodes(l.children, o, l.cversion);
    // The unique_node strategy's one node: its holder.
    if (std::find(l.children.begin(), l.children.end(), "lock") != l.children.end()) {
        contender_info i;
        i.name = "lock";
        nodes.insert(nodes.begin(), std::move(i));
    }
    // A semaphore's leases, in their order (Curator's layout: "<path>/leases", N as its data).
    std::size_t max_leases = 0;
    if (std::find(l.children.begin(), l.children.end(), "leases") != l.children.end()) {
        auto n = co_await s.async_get_data(path + "/leases", 0, use_awaitable);
        auto ll = co_await s.async_get_children(path + "/leases", use_awaitable);
        if (n.rc != ZOK && n.rc != ZNONODE) co_return std::make_pair(n.rc, std::vector<contender_info>{});
        if (ll.rc != ZOK && ll.rc != ZNONODE) co_return std::make_pair(ll.rc, std::vector<contender_info>{});
        if (n.rc == ZOK) (void)std::from_chars(n.data.data(), n.data.data() + n.data.size(), max_leases);
        std::vector<contender_info> leases;
        for (const auto& name : ll.children) {
            if (!is_semaphore_lease(name)) continue;
            contender_info i;
            i.name = name;
            i.sequence = *parse_sequence(std::string_view(name).substr(name.size() - 10));
            i.writer = false;
            i.lease = true;
            leases.push_back(std::move(i));
        }
        std::sort(leases.begin(), leases.end(), [](const contender_info& a, const contender_info& b) {
            return a.name.substr(a.name.size() - 10) < b.name.substr(b.name.size() - 10);
        });
        nodes.insert(nodes.begin(), std::make_move_iterator(leases.begin()),
                     std::make_move_iterator(leases.end()));
    }
    // pipelined reads: ZooKeeper answers one session's requests in order
    auto remaining = std::make_shared<std::size_t>(nodes.size());
    auto results = std::make_shared<std::vector<zk_result>>(nodes.size());
    timer done(s.plat(), s.strand(), std::chrono::steady_clock::time_point::max());
    for (std::size_t i = 0; i < nodes.size(); ++i)
        s.get_data(path + (nodes[i].lease ? "/leases/" : "/") + nodes[i].name, 0,
                   zk_handler([results, remaining, i, &done](zk_result r) {
                       (*results)[i] = std::move(r);
                       if (--*remaining == 0) done.cancel();
                   }));
    if (!nodes.empty()) co_await done.async_wait(asio::as_tuple(use_awaitable));
    int rc = fill_in(nodes, *results, path, max_leases, s.plat()->wall_now());
    if (rc != ZOK) nodes.clear();
    co_return std::make_pair(rc, std::move(nodes));
}

/// Runs the coroutine `body(s, out, params...)` on the strand. `body` must capture nothing: a
/// coroutine lambda reads its captures through the closure object, which is gone once this
/// function returns; parameters are copied into the coroutine frame instead.
template <class... Args, class Body, class... Params>
void run_on_strand(const std::shared_ptr<session_impl>& s, pending<void(error_code, Args...)> p, Body body,
                   Params... params) {
    static_assert(std::is_empty_v<Body>, "a coroutine lambda must not capture: pass parameters");
    auto& strand = s->strand();
    auto shared = std::make_shared<std::optional<pending<void(error_code, Args...)>>>(std::move(p));
    asio::co_spawn(strand, body(s, shared, std::move(params)...), [shared](std::exception_ptr e) {
        // (an exception inside zklock, such as std::bad_alloc: no request failed)
        if (e && *shared) (**shared).complete(make_error_code(errc::internal_error), Args{}...);
    });
}

error_code check(const std::shared_ptr<session_impl>& s, const std::string& path) {
    if (auto ec = validate_lock_path(path)) return ec;
    if (s->state() == session_state::disconnected) return errc::not_connected;
    if (s->state() == session_state::closed) return asio::error::operation_aborted;
    return {};
}

} // namespace

void start_list_contenders(const std::shared_ptr<session_impl>& s, std::string path, inspect_options o,
                           asio::any_completion_handler<void(error_code, std::vector<contender_info>)> h) {
    using P = pending<void(error_code, std::vector<contender_info>)>;
    P p(std::move(h), s->executor());
    if (auto ec = check(s, path)) return p.complete(ec, {});
    run_on_strand<std::vector<contender_info>>(
        s, std::move(p),
        [](std::shared_ptr<session_impl> s, std::shared_ptr<std::optional<P>> out, std::string path,
           inspect_options o) -> asio::awaitable<void> {
            auto [rc, list_] = co_await list(*s, path, o);
            (**out).complete(rc_error(rc), std::move(list_));
            out->reset();
        },
        std::move(path), std::move(o));
}

void start_break_lock(const std::shared_ptr<session_impl>& s, std::string node_path,
                      asio::any_completion_handler<void(error_code)> h) {
    pending<void(error_code)> p(std::move(h), s->executor());
    if (auto ec = check(s, node_path)) return p.complete(ec);
    auto name = last_segment(node_path);
    if (classify_child(name, lock_family::mutex, lock_dialect::curator, std::nullopt) == child_kind::other &&
        !is_semaphore_lease(name))
        return p.complete(errc::not_a_lock_node); // refuse to delete anything else
    asio::post(s->strand(), [s, node_path = std::move(node_path), p = std::move(p)]() mutable {
        s->remove(node_path, -1,
                  zk_handler([p = std::move(p)](zk_result r) mutable { p.complete(rc_error(r.rc)); }));
    });
}

void start_revoke(const std::shared_ptr<session_impl>& s, std::string path, inspect_options o,
                  asio::any_completion_handler<void(error_code, std::string)> h) {
    using P = pending<void(error_code, std::string)>;
    P p(std::move(h), s->executor());
    if (auto ec = check(s, path)) return p.complete(ec, {});
    run_on_strand<std::string>(
        s, std::move(p),
        [](std::shared_ptr<session_impl> s, std::shared_ptr<std::optional<P>> out, std::string path,
           inspect_options o) -> asio::awaitable<void> {
            auto [rc, list_] = co_await list(*s, path, o);
            if (rc != ZOK || list_.empty() || list_.front().foreign) { // (foreign children come last)
                (**out).complete(rc != ZOK ? rc_error(rc) : make_error_code(zk_errc::no_node), std::string());
                out->reset();
                co_return;
            }
            auto node = list_.front().node_path;
            auto r = co_await asio::async_initiate<const asio::use_awaitable_t<>&, void(zk_result)>(
                [&](auto handler) { s->set_data(node, "__REVOKE__", -1, zk_handler(std::move(handler))); },
                use_awaitable);
            (**out).complete(rc_error(r.rc), node);
            out->reset();
        },
        std::move(path), std::move(o));
}

} // namespace zklock::detail
