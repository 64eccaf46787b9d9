// The guaranteed deletes: a lock node whose release failed, or whose create's reply was lost,
// is deleted in the background, retried until it is gone or the session has ended.
#include "session/session_impl.hpp"
#include "session/cleanup_rules.hpp"
#include "protocol/protocol.hpp"

namespace zklock::detail {
// ---------------------------------------------------------------- guaranteed deletes
// The job's protocol is cleanup_fsm's (cleanup_fsm.hpp); this file sends its requests and feeds
// it their replies. A job is named by its iterator: it stays valid until finish_cleanup erases
// it, which happens on the strand after the job's own reply, or in finish_all_cleanups when the
// session ends or is renewed (then cleanup_alive() is false when the reply arrives).

void session_impl::delete_in_background(std::string node, std::optional<pending<void(error_code)>> done,
                                        std::int64_t owner_czxid, bool marked) {
    if (state() == session_state::closed || state() == session_state::expired || refused_) {
        if (done) done->complete({}); // the server deletes the session's ephemeral nodes
        return;
    }
    cleanup_job job(cleanup_fsm::of_node(std::move(node), owner_czxid, marked), plat_->steady_now());
    if (done) job.waiters.push_back(std::move(*done));
    cleanups_.push_back(std::move(job));
    cleanup_gauges();
    if (state() == session_state::connected) run_cleanup(std::prev(cleanups_.end()));
}

void session_impl::delete_by_guid_in_background(std::string parent, std::string guid) {
    if (state() == session_state::closed || state() == session_state::expired || refused_) return;
    cleanups_.emplace_back(cleanup_fsm::of_guid(std::move(parent), std::move(guid)), plat_->steady_now());
    cleanup_gauges();
    if (state() == session_state::connected) run_cleanup(std::prev(cleanups_.end()));
}

void session_impl::delete_if_data_guid_in_background(std::string node, std::string guid) {
    if (state() == session_state::closed || state() == session_state::expired || refused_) return;
    cleanups_.emplace_back(cleanup_fsm::of_data_guid(std::move(node), std::move(guid)), plat_->steady_now());
    cleanup_gauges();
    if (state() == session_state::connected) run_cleanup(std::prev(cleanups_.end()));
}

void session_impl::delete_unused_path_in_background(std::string path) {
    if (state() == session_state::closed || state() == session_state::expired || refused_) return;
    cleanups_.emplace_back(cleanup_fsm::of_unused_path(std::move(path)), plat_->steady_now());
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

void session_impl::retry_cleanup(std::list<cleanup_job>::iterator it, cleanup_rules::retry_plan plan) {
    it->running = false;
    n_cleanup_retries.fetch_add(1, std::memory_order_relaxed);
    if (plan.on_reconnect) return; // run_cleanups retries it on the reconnect
    it->running = true;            // (not run_cleanups' to start meanwhile)
    it->backoff = std::make_shared<timer>(plat_, strand_, plan.backoff);
    it->backoff->async_wait(
        [w = weak_from_this(), gen = generation(), ep = cleanup_epoch_, it](error_code ec) {
            auto s = w.lock();
            if (ec || !s || !s->cleanup_alive(gen, ep)) return;
            it->running = false;
            if (s->state() == session_state::connected) s->run_cleanup(it); // else on the reconnect
        });
}

void session_impl::run_cleanup(std::list<cleanup_job>::iterator it) {
    it->running = true;
    perform_cleanup(it, it->fsm.next());
}

void session_impl::perform_cleanup(std::list<cleanup_job>::iterator it, cleanup_action a) {
    if (a.what == cleanup_action::done) return finish_cleanup(it, {});
    if (a.what == cleanup_action::retry) return retry_cleanup(it, a.plan);
    if (a.unmarked) n_cleanup_retries.fetch_add(1, std::memory_order_relaxed);
    // Its reply goes back to the machine, unless the job ended meanwhile.
    zk_handler on_reply([w = weak_from_this(), gen = generation(), ep = cleanup_epoch_, it](zk_result r) {
        auto s = w.lock();
        if (!s || !s->cleanup_alive(gen, ep)) return;
        cleanup_reply in{r.rc, r.stat.czxid, r.stat.version, std::move(r.children), std::move(r.data)};
        s->perform_cleanup(it, it->fsm.resume(in, s->state() == session_state::connected));
    });
    // The test's tap may refuse it: it then fails unsent (session_tap::before).
    if (int rc = tap ? tap->before(tapped_request::cleanup, a.path) : 0; rc != 0)
        return refused_by_tap(rc, std::move(on_reply));
    switch (a.what) {
    case cleanup_action::check:
        if (!it->fsm.data_guid().empty()) return get_data(a.path, 0, std::move(on_reply));
        return exists(a.path, std::move(on_reply));
    case cleanup_action::delete_version:
        return remove(a.path, a.version, std::move(on_reply));
    case cleanup_action::remove:
        return remove(a.path, -1, std::move(on_reply));
    case cleanup_action::marked_release: {
        // The release of a write node that was the lowest: its marker tells the waiter behind it
        // that it holds the lock now, without a listing (protocol.hpp, release_marker).
        const auto marker = release_marker(a.path);
        std::vector<transaction::op> ops;
        ops.push_back({transaction::kind::create, marker, {}, -1, create_mode::ephemeral, acl::open()});
        ops.push_back({transaction::kind::remove, marker, {}, -1, create_mode::persistent, acl::open()});
        ops.push_back({transaction::kind::remove, a.path, {}, -1, create_mode::persistent, acl::open()});
        return multi(ops, behind_tap(tapped_request::marked_release, a.path, std::move(on_reply)), n_delete);
    }
    case cleanup_action::list:
        // A write first, in the same flight (a check of the parent): the listing then shows every
        // write this session sent before, a create lost with the connection that still sat in
        // the leader's pipeline included (the next server's reads are not synced: acquire_fsm's
        // barrier).
        renew_lease(zk_handler([](zk_result) {}), a.path);
        return get_children(a.path, std::move(on_reply));
    case cleanup_action::retry:
    case cleanup_action::done:
        break;
    }
}

} // namespace zklock::detail
