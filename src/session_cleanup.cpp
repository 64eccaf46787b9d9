// The guaranteed deletes: a lock node whose release failed, or whose create's reply was lost,
// is deleted in the background, retried until it is gone or the session has ended.
#include "detail/c_op.hpp"
#include "detail/protocol.hpp"

namespace zklock::detail {

// ---------------------------------------------------------------- guaranteed deletes
void session_impl::delete_in_background(std::string node, std::optional<pending<void(error_code)>> done,
                                        std::int64_t owner_czxid) {
    if (state() == session_state::closed || state() == session_state::expired || refused_) {
        if (done) done->complete({}); // the server deletes the session's ephemeral nodes
        return;
    }
    cleanup_job job;
    job.node = std::move(node);
    job.owner_czxid = owner_czxid;
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
    return generation() == gen && cleanup_epoch_ == epoch && state() != session_state::closed && state() != session_state::expired;
}

template <class F>
void session_impl::cleanup_request(F&& send, zk_handler h) {
    if (fault_injection::take(faults.cleanup_errors)) { // injected: the request fails unsent
        auto* op = new c_op;
        op->h.emplace(std::move(h));
        op->res.rc = faults.cleanup_error_rc.load(std::memory_order_relaxed);
        return post_result(strand_, op);
    }
    std::forward<F>(send)(std::move(h));
}

void session_impl::retry_cleanup(std::list<cleanup_job>::iterator it, int rc) {
    it->running = false;
    ++it->failures;
    n_cleanup_retries.fetch_add(1, std::memory_order_relaxed);
    if (state() != session_state::connected && (rc == ZCONNECTIONLOSS || rc == ZOPERATIONTIMEOUT))
        return; // run_cleanups retries it on the reconnect
    // Connected, or an error the connection does not explain (ZMARSHALLINGERROR, ZNOAUTH, ...):
    // again after 50 ms, doubling up to 5 s, until the node is gone or the session ends.
    const auto wait = std::chrono::milliseconds(50) * (1 << std::min(it->failures - 1, 7));
    it->running = true; // (not run_cleanups' to start meanwhile)
    it->backoff = std::make_shared<asio::steady_timer>(strand_, std::min<std::chrono::milliseconds>(wait, std::chrono::seconds(5)));
    it->backoff->async_wait([w = weak_from_this(), gen = generation(), ep = cleanup_epoch_, it](error_code ec) {
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
        cleanup_request([&](zk_handler h) { exists(it->node, std::move(h)); }, zk_handler([w, gen, ep, it](zk_result r) {
            auto s = w.lock();
            if (!s || !s->cleanup_alive(gen, ep)) return;
            if (r.rc == ZNONODE || (r.rc == ZOK && r.stat.czxid != it->owner_czxid)) return s->finish_cleanup(it, {}); // gone, or not ours
            if (r.rc == ZCLOSING || r.rc == ZINVALIDSTATE || r.rc == ZSESSIONEXPIRED || r.rc == ZAUTHFAILED) return s->finish_cleanup(it, {});
            if (r.rc != ZOK) return s->retry_cleanup(it, r.rc);
            s->cleanup_request([&](zk_handler h) { s->remove(it->node, r.stat.version, std::move(h)); },
                               zk_handler([w, gen, ep, it](zk_result r2) {
                auto s = w.lock();
                if (!s || !s->cleanup_alive(gen, ep)) return;
                if (r2.rc == ZBADVERSION) return s->run_cleanup(it); // its data changed: look again
                if (r2.rc == ZOK || r2.rc == ZNONODE) return s->finish_cleanup(it, {});
                if (r2.rc == ZCLOSING || r2.rc == ZINVALIDSTATE || r2.rc == ZSESSIONEXPIRED || r2.rc == ZAUTHFAILED)
                    return s->finish_cleanup(it, {}); // the handle is gone: so is the session's node
                s->retry_cleanup(it, r2.rc);
            }));
        }));
        return;
    }
    if (!it->node.empty()) {
        cleanup_request([&](zk_handler h) { remove(it->node, -1, std::move(h)); }, zk_handler([w, gen, ep, it](zk_result r) {
            auto s = w.lock();
            if (!s || !s->cleanup_alive(gen, ep)) return;
            if (r.rc == ZOK || r.rc == ZNONODE || r.rc == ZCLOSING || r.rc == ZINVALIDSTATE ||
                r.rc == ZSESSIONEXPIRED || r.rc == ZAUTHFAILED) // (a dead handle: the node goes with its session)
                return s->finish_cleanup(it, {});
            // Anything else, the node may still be there: never give up while the session lives
            // (connection loss waits for the reconnect; other errors retry with a back-off).
            s->retry_cleanup(it, r.rc);
        }));
        return;
    }
    cleanup_request([&](zk_handler h) { get_children(it->parent, std::move(h)); }, zk_handler([w, gen, ep, it](zk_result r) {
        auto s = w.lock();
        if (!s || !s->cleanup_alive(gen, ep)) return;
        if (r.rc == ZCLOSING || r.rc == ZINVALIDSTATE || r.rc == ZSESSIONEXPIRED || r.rc == ZAUTHFAILED) return s->finish_cleanup(it, {});
        if (r.rc != ZOK && r.rc != ZNONODE) return s->retry_cleanup(it, r.rc);
        std::optional<std::string> found;
        if (r.rc == ZOK) found = find_by_guid(r.children, it->guid);
        if (!found) return s->finish_cleanup(it, {}); // never created, or the parent is gone
        it->node = it->parent + "/" + *found;
        s->run_cleanup(it);
    }));
}

} // namespace zklock::detail
