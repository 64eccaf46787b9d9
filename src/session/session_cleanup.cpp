// The guaranteed deletes: a lock node whose release failed, or whose create's reply was lost,
// is deleted in the background, retried until it is gone or the session has ended.
#include "bridge/c_op.hpp"
#include "session/cleanup_rules.hpp"
#include "protocol/protocol.hpp"

namespace zklock::detail {
namespace {
/// The reply of `k` goes through the test's tap, if any.
zk_handler tapped(const std::shared_ptr<request_tap>& tap, tapped_request k, zk_handler h) {
    if (!tap) return h;
    return zk_handler([tap, k, h = std::move(h)](zk_result r) mutable {
        tap->reply(k, r);
        std::move(h)(std::move(r));
    });
}
} // namespace

// ---------------------------------------------------------------- guaranteed deletes
void session_impl::delete_in_background(std::string node, std::optional<pending<void(error_code)>> done,
                                        std::int64_t owner_czxid, bool marked) {
    if (state() == session_state::closed || state() == session_state::expired || refused_) {
        if (done) done->complete({}); // the server deletes the session's ephemeral nodes
        return;
    }
    cleanup_job job;
    job.node = std::move(node);
    job.owner_czxid = owner_czxid;
    job.marked = marked && owner_czxid == 0;
    if (done) job.waiters.push_back(std::move(*done));
    cleanups_.push_back(std::move(job));
    cleanup_gauges();
    if (state() == session_state::connected) run_cleanup(std::prev(cleanups_.end()));
}

void session_impl::delete_by_guid_in_background(std::string parent, std::string guid) {
    if (state() == session_state::closed || state() == session_state::expired || refused_) return;
    cleanup_job job;
    job.parent = std::move(parent);
    job.guid = std::move(guid);
    cleanups_.push_back(std::move(job));
    cleanup_gauges();
    if (state() == session_state::connected) run_cleanup(std::prev(cleanups_.end()));
}

void session_impl::run_cleanups() {
    resend_unwatches();
    for (auto it = cleanups_.begin(); it != cleanups_.end(); ++it)
        if (!it->running) run_cleanup(it);
}

void session_impl::finish_cleanup(std::list<cleanup_job>::iterator it, error_code ec) {
    if (it->backoff) it->backoff->cancel();
    for (auto& w : it->waiters) w.complete(ec);
    cleanups_.erase(it);
    cleanup_gauges();
}

void session_impl::finish_all_cleanups() {
    ++cleanup_epoch_; // replies to the jobs' requests still in flight must not touch them
    while (!cleanups_.empty()) finish_cleanup(cleanups_.begin(), {});
}

bool session_impl::cleanup_alive(std::uint64_t gen, std::uint64_t epoch) const noexcept {
    // finish_all_cleanups() ran if the session ended, was renewed, or its credentials were
    // refused since the job started: then the job is gone
    return generation() == gen && cleanup_epoch_ == epoch && state() != session_state::closed &&
           state() != session_state::expired;
}

template <class F>
void session_impl::cleanup_request(F&& send, zk_handler h) {
    if (int rc = tap ? tap->refuse(tapped_request::cleanup) : 0; rc != 0) { // the test's tap: fails unsent
        auto* op = new c_op;
        op->h.emplace(std::move(h));
        op->res.rc = rc;
        return post_result(strand_, op);
    }
    std::forward<F>(send)(std::move(h));
}

void session_impl::retry_cleanup(std::list<cleanup_job>::iterator it, int rc) {
    it->running = false;
    ++it->failures;
    n_cleanup_retries.fetch_add(1, std::memory_order_relaxed);
    const auto plan = cleanup_rules::plan_retry(it->failures, rc, state() == session_state::connected);
    if (plan.on_reconnect) return; // run_cleanups retries it on the reconnect
    // Until the node is gone or the session ends.
    it->running = true; // (not run_cleanups' to start meanwhile)
    it->backoff = std::make_shared<asio::steady_timer>(strand_, plan.backoff);
    it->backoff->async_wait(
        [w = weak_from_this(), gen = generation(), ep = cleanup_epoch_, it](error_code ec) {
            auto s = w.lock();
            if (ec || !s || !s->cleanup_alive(gen, ep)) return;
            it->running = false;
            if (s->state() == session_state::connected) s->run_cleanup(it); // else on the reconnect
        });
}

void session_impl::run_cleanup(std::list<cleanup_job>::iterator it) {
    // The job is named by its iterator: it stays valid until finish_cleanup erases it, which
    // happens on the strand after the job's own reply, or in finish_all_cleanups when the
    // session ends or is renewed (then cleanup_alive() is false when the reply arrives).
    it->running = true;
    auto gen = generation();
    auto ep = cleanup_epoch_;
    auto w = weak_from_this();
    if (!it->node.empty() && it->owner_czxid != 0) {
        // A fixed name: check that the node is still ours (an admin may have broken it and
        // someone else created it again), then delete exactly that version of it.
        cleanup_request(
            [&](zk_handler h) { exists(it->node, std::move(h)); }, zk_handler([w, gen, ep, it](zk_result r) {
                auto s = w.lock();
                if (!s || !s->cleanup_alive(gen, ep)) return;
                switch (cleanup_rules::after_check(r.rc, r.stat.czxid, it->owner_czxid)) {
                case cleanup_rules::verdict::delete_version:
                    break;
                case cleanup_rules::verdict::retry:
                    return s->retry_cleanup(it, r.rc);
                default:
                    return s->finish_cleanup(it, {}); // gone, not ours, or gone with the session
                }
                s->cleanup_request([&](zk_handler h) { s->remove(it->node, r.stat.version, std::move(h)); },
                                   zk_handler([w, gen, ep, it](zk_result r2) {
                                       auto s = w.lock();
                                       if (!s || !s->cleanup_alive(gen, ep)) return;
                                       switch (cleanup_rules::after_versioned_delete(r2.rc)) {
                                       case cleanup_rules::verdict::look_again:
                                           return s->run_cleanup(it);
                                       case cleanup_rules::verdict::retry:
                                           return s->retry_cleanup(it, r2.rc);
                                       default:
                                           return s->finish_cleanup(it, {});
                                       }
                                   }));
            }));
        return;
    }
    if (!it->node.empty() && it->marked) {
        // The release of a write node that was the lowest: its marker tells the waiter behind it
        // that it holds the lock now, without a listing (protocol.hpp, release_marker).
        const auto marker = release_marker(it->node);
        std::vector<transaction::op> ops;
        ops.push_back({transaction::kind::create, marker, {}, -1, create_mode::ephemeral, acl::open()});
        ops.push_back({transaction::kind::remove, marker, {}, -1, create_mode::persistent, acl::open()});
        ops.push_back({transaction::kind::remove, it->node, {}, -1, create_mode::persistent, acl::open()});
        cleanup_request(
            [&](zk_handler h) {
                multi(ops, tapped(tap, tapped_request::marked_release, std::move(h)), n_delete);
            },
            zk_handler([w, gen, ep, it](zk_result r) {
                auto s = w.lock();
                if (!s || !s->cleanup_alive(gen, ep)) return;
                switch (cleanup_rules::after_marked_release(r.rc)) {
                case cleanup_rules::verdict::finished:
                    return s->finish_cleanup(it, {});
                case cleanup_rules::verdict::unmarked:
                    it->marked = false; // (sent again at once, plainly: a retry all the same)
                    s->n_cleanup_retries.fetch_add(1, std::memory_order_relaxed);
                    return s->run_cleanup(it);
                default:
                    return s->retry_cleanup(it, r.rc);
                }
            }));
        return;
    }
    if (!it->node.empty()) {
        cleanup_request([&](zk_handler h) { remove(it->node, -1, std::move(h)); },
                        zk_handler([w, gen, ep, it](zk_result r) {
                            auto s = w.lock();
                            if (!s || !s->cleanup_alive(gen, ep)) return;
                            if (cleanup_rules::after_delete(r.rc) == cleanup_rules::verdict::finished)
                                return s->finish_cleanup(it, {});
                            s->retry_cleanup(it, r.rc); // the node may still be there
                        }));
        return;
    }
    // A write first, in the same flight (a check of the parent): the listing then shows every
    // write this session sent before, a create lost with the connection that still sat in the
    // leader's pipeline included (the next server's reads are not synced: acquire_fsm's barrier).
    renew_lease(zk_handler([](zk_result) {}), it->parent);
    cleanup_request([&](zk_handler h) { get_children(it->parent, std::move(h)); },
                    zk_handler([w, gen, ep, it](zk_result r) {
                        auto s = w.lock();
                        if (!s || !s->cleanup_alive(gen, ep)) return;
                        switch (cleanup_rules::after_listing(r.rc)) {
                        case cleanup_rules::verdict::search:
                            break;
                        case cleanup_rules::verdict::retry:
                            return s->retry_cleanup(it, r.rc);
                        default:
                            return s->finish_cleanup(it, {}); // the parent is gone, or the session
                        }
                        auto found = find_by_guid(r.children, it->guid);
                        if (!found) return s->finish_cleanup(it, {}); // never created, or the parent is gone
                        it->node = it->parent + "/" + *found;
                        s->run_cleanup(it);
                    }));
}

} // namespace zklock::detail
