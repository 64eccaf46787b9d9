// guard::async_commit: the user's writes and a check of the lock node in one ZooKeeper multi-op.
//
// The check comes first: ZooKeeper stops a multi at its first failing operation, so a lock that is
// gone is reported as such (errc::lock_lost) even when the user's operations would fail too. The
// check asks only that the node exists (version -1): a revocation request writes the node's data,
// and the lock is still held then. The node exists exactly while no one else can hold the lock:
// it goes with the session's expiry, a break, or this holder's release, and every later contender
// waits for it.
#include <zklock/guard.hpp>
#include <zklock/path.hpp>

#include "recipes/held_lock.hpp"
#include "common/pending.hpp"
#include "session/session_impl.hpp"

#include <boost/asio/post.hpp>

namespace zklock {

error_code transaction::validate() const noexcept {
    if (ops_.empty()) return errc::transaction_empty;
    std::size_t bytes = 0;
    for (const auto& o : ops_) {
        if (auto ec = validate_lock_path(o.path)) return ec;
        if (o.version < -1) return errc::invalid_version;
        bytes += o.path.size() + o.data.size() + 64;
        if (o.what == kind::create && !o.node_acl.is_open())
            for (const auto& e : o.node_acl.entries()) bytes += e.scheme.size() + e.id.size() + 16;
    }
    if (bytes > max_transaction_bytes) return errc::transaction_too_large;
    return {};
}

namespace {

using P = detail::pending<void(error_code, commit_result)>;

/// The multi's outcome, without its first operation (the lock check).
void complete(P& p, const detail::zk_result& r, std::size_t n) {
    commit_result out;
    out.ops.resize(n);
    auto zk = [](int rc) { return rc == ZOK ? error_code{} : error_code(rc, zookeeper_category()); };
    if (r.multi.size() == n + 1) {
        for (std::size_t i = 0; i < n; ++i) {
            const auto& m = r.multi[i + 1];
            out.ops[i].ec = zk(m.rc);
            out.ops[i].path = m.path;
            out.ops[i].version = m.version;
        }
    }
    if (r.rc == ZOK && r.multi.size() == n + 1) return p.complete({}, std::move(out));
    auto failed = [](int rc) { return rc != ZOK && rc != ZRUNTIMEINCONSISTENCY; };
    if (r.multi.size() == n + 1) { // the server answered: one operation failed, nothing was applied
        const int check = r.multi[0].rc;
        if (check == ZNONODE) return p.complete(errc::lock_lost, std::move(out));
        if (failed(check)) return p.complete(zk(check), std::move(out)); // (e.g. no read permission)
        for (std::size_t i = 0; i < n; ++i) {
            if (!failed(r.multi[i + 1].rc)) continue;
            out.failed = i;
            return p.complete(zk(r.multi[i + 1].rc), std::move(out));
        }
    }
    // The request failed as a whole (connection loss, timeout, the session's end): unknown outcome.
    for (auto& o : out.ops) o.ec = zk(r.rc == ZOK ? ZSYSTEMERROR : r.rc);
    p.complete(zk(r.rc == ZOK ? ZSYSTEMERROR : r.rc), std::move(out));
}

} // namespace

void guard::start_commit(std::shared_ptr<detail::held_lock> h, const asio::any_io_executor& ex, transaction t,
                         asio::any_completion_handler<void(error_code, commit_result)> handler) {
    if (!h) {
        P p(std::move(handler), ex ? ex : asio::any_io_executor(asio::system_executor()));
        return p.complete(errc::not_held, commit_result{});
    }
    auto s = h->session;
    P p(std::move(handler), s->executor());
    if (auto ec = t.validate()) return p.complete(ec, commit_result{});
    asio::post(s->strand(), [h = std::move(h), s, p = std::move(p), t = std::move(t)]() mutable {
        // Known to be lost, released, or (a hand-off grant) no longer the grant that is out: the
        // node may still exist, shared with a later grant, so nothing may be sent.
        if (h->st != detail::held_lock::status::held || h->is_lost_now())
            return p.complete(errc::lock_lost, commit_result{});
        if (s->state() == session_state::closed) return p.complete(errc::session_closed, commit_result{});
        std::vector<transaction::op> ops;
        ops.reserve(t.size() + 1);
        ops.push_back(transaction::op{transaction::kind::check, h->node, {}, -1, create_mode::persistent});
        for (auto& o : t.ops()) ops.push_back(o);
        const auto n = t.size();
        s->multi(ops, detail::zk_handler(
                          [p = std::move(p), n](detail::zk_result r) mutable { complete(p, r, n); }));
    });
}

} // namespace zklock
