// In-process hand-off (mutex_options::local_handoff): the acquires of one session on one path
// queue locally behind a single lock node and pass the lock to each other without a request.
//
// Everything here runs on the session's strand. A queue is idle (no node), acquiring (one
// node-acquire in flight for the whole queue) or held (the node is ours; one grant is lent to a
// local holder): its protocol is handoff_fsm's (src/protocol/handoff_fsm.hpp), and this file
// carries out the machine's effects with the handlers, timers and guards. Each grant is its own
// held_lock (own guard, own loss signal), whose release comes back here through release_hook
// instead of deleting the node.
#include <zklock/mutex.hpp>
#include <zklock/path.hpp>

#include "recipes/held_lock.hpp"
#include "protocol/handoff_fsm.hpp"
#include "protocol/protocol.hpp"
#include "session/session_impl.hpp"

#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/bind_executor.hpp>
#include <boost/asio/post.hpp>

#include <algorithm>
#include <cstdio>
#include <map>
#include <utility>

namespace zklock::detail {
namespace {

class handoff_queue;

/// Links a caller's cancellation to its place in a queue. The cancellation handler is installed
/// in the initiating function (before anything is posted), so a cancellation emitted at once is
/// not lost; both it and the enqueue run on the strand, in that order.
struct ticket {
    std::weak_ptr<handoff_queue> queue; // set by enqueue
    std::uint64_t id = 0;
    bool cancelled = false; // cancelled before enqueue ran
};

class handoff_queue final : public release_hook,
                            public session_listener,
                            public std::enable_shared_from_this<handoff_queue> {
public:
    handoff_queue(std::weak_ptr<session_impl> s, std::string key, acquire_request base)
        : s_(std::move(s)), key_(std::move(key)), base_(std::move(base)), m_(base_.local_handoff) {
        base_.deadline.reset();
        base_.try_only = false;
    }

    /// A new local contender (strand).
    void enqueue(acquire_request req, pending<void(error_code, guard)> h, const std::shared_ptr<ticket>& t) {
        auto s = s_.lock();
        if (!s) return h.complete(asio::error::operation_aborted, guard{});
        if (!listening_) {
            listener_id_ = s->add_listener(weak_from_this());
            listening_ = true;
        }
        const auto id = next_id_++;
        t->queue = weak_from_this();
        t->id = id;
        auto& w = waiters_[id];
        w.revocable = req.revocable;
        w.loss = req.loss;
        w.h.emplace(std::move(h));
        const bool past = req.deadline && s->plat()->steady_now() >= *req.deadline;
        if (req.deadline && !past) {
            w.timer = std::make_unique<detail::timer>(s->plat(), s->strand(), *req.deadline);
            w.timer->async_wait([q = weak_from_this(), id](error_code ec) {
                if (ec) return; // cancelled: the waiter left some other way
                if (auto self = q.lock()) self->leave(id, handoff_reason::timed_out);
            });
        }
        perform(m_.enqueue(id, req.try_only, t->cancelled, past));
    }

    /// A waiter gives up (strand). The last one to leave while the node is being acquired is
    /// completed only once that acquire has ended and deleted its node: no node outlives a
    /// completed acquire.
    void leave(std::uint64_t id, handoff_reason why) {
        if (auto it = waiters_.find(id); it != waiters_.end() && it->second.timer) it->second.timer->cancel();
        perform(m_.leave(id, why));
    }

    void local_release(held_lock& grant, std::optional<pending<void(error_code)>> done) override {
        auto keep = shared_from_this(); // (a forget effect may drop the table's reference)
        const bool current = lent_.lock().get() == &grant;
        if (current) lent_.reset();
        auto s = s_.lock();
        if (current && node() && lapsed(*node())) {
            // The queue's node is suspended (its lease lapsed, the node kept): the release is
            // passed on at the verdict (await_verdict): regained, the next waiter is granted
            // under the same node; lost, the queue lets go of it as of any lost node.
            held_back_ = true;
            if (done) done->complete({});
            return;
        }
        // No hand-off under a node that is lost, or that someone asked us to give up (a
        // revocation request: the queue lets go after the current holder).
        const auto* n = node();
        const bool node_ok = n && n->st == held_lock::status::held && !n->revoke_requested;
        const bool connected = s && s->state() == session_state::connected;
        releaser_ = std::move(done);
        perform(m_.local_release(current, node_ok, connected));
        if (releaser_) releaser_->complete({}); // (not named by the effects: nothing to wait for)
        releaser_.reset();
    }

    void on_session_event(session_event e) override {
        // Waiting contenders would have lost their nodes with the session: tell them the same,
        // and let go of the node (which also breaks the queue -> node -> session reference chain).
        if (e != session_event::expired && e != session_event::closed) return;
        auto s = s_.lock();
        end_reason_ = e == session_event::expired ? (s ? s->end_reason() : error_code(errc::session_expired))
                                                  : error_code(asio::error::operation_aborted);
        perform(m_.session_ended());
    }

private:
    struct waiter {
        std::optional<pending<void(error_code, guard)>> h;
        std::unique_ptr<detail::timer> timer;
        bool revocable = false;
        std::optional<loss_policy> loss;
    };

    /// Carries out the machine's effects (protocol/handoff_fsm.hpp), in order.
    void perform(const handoff_fsm::effects& fx) {
        auto s = s_.lock();
        for (const auto& e : fx) {
            switch (e.what) {
            case handoff_effect::start_node:
                if (s) acquire_node(*s, e.try_only);
                break;
            case handoff_effect::cancel_node:
                if (cancel_) cancel_->emit(asio::cancellation_type::terminal);
                break;
            case handoff_effect::grant:
                if (s) grant(*s, e.id, e.index);
                break;
            case handoff_effect::fail:
                complete(e.id, code(e.why));
                break;
            case handoff_effect::keep_node:
                if (s) keep_node(*s, std::move(result_));
                break;
            case handoff_effect::drop_result:
                result_.release_in_background();
                break;
            case handoff_effect::drop_result_then_complete: {
                // (the leavers' handlers, taken out now: they complete once the node is gone)
                std::vector<std::pair<pending<void(error_code, guard)>, error_code>> leaving;
                for (auto& [id, why] : e.leavers)
                    if (auto h = take(id)) leaving.emplace_back(std::move(*h), code(why));
                release_then(std::move(result_), [leaving = std::move(leaving)]() mutable {
                    for (auto& [h, why] : leaving) h.complete(why, guard{});
                });
                break;
            }
            case handoff_effect::release_node:
                release_node(std::exchange(releaser_, std::nullopt));
                break;
            case handoff_effect::release_done:
                if (releaser_) releaser_->complete({});
                releaser_.reset();
                break;
            case handoff_effect::forget:
                forget_if_idle(); // (may destroy *this: always the last effect)
                return;
            }
        }
    }

    /// One node-acquire for the whole queue (try-only when every waiter is a try).
    void acquire_node(session_impl& s, bool try_only) {
        auto req = base_;
        req.metered = false; // (each local waiter is counted on its own)
        req.try_only = try_only;
        cancel_ = std::make_unique<asio::cancellation_signal>();
        start_node_acquire(s.shared_from_this(), std::move(req),
                           asio::any_completion_handler<void(error_code, guard)>(asio::bind_cancellation_slot(
                               cancel_->slot(), asio::bind_executor(s.strand(), [q = shared_from_this()](
                                                                                    error_code ec, guard g) {
                                   q->on_node(ec, std::move(g));
                               }))));
    }

    void on_node(error_code ec, guard g) {
        auto signal = std::move(cancel_); // (its slot was cleared before this handler ran)
        auto s = s_.lock();
        using r = handoff_fsm::node_result;
        const r what = ec == errc::lock_busy                  ? r::busy
                       : ec == asio::error::operation_aborted ? r::cancelled
                       : ec                                   ? r::failed
                       : !g.owns_lock() || g.is_lost()        ? r::lost
                                                              : r::granted;
        node_error_ = ec;
        result_ = std::move(g);
        perform(m_.on_node(what, s != nullptr, s && s->state() == session_state::closed));
        result_.release_in_background(); // (a result no effect took: none, or an empty guard)
    }

    void keep_node(session_impl& s, guard g) {
        node_ = std::move(g);
        auto& n = *node();
        n.revocable = true; // (the flag only records the request: see local_release)
        n.arm_watch();      // a node deleted by someone else, or revoked, stops the hand-offs
        watch_node_loss(s);
    }

    /// The node's loss reaches the grant that is lent out, even if its holder armed no watch. A
    /// suspension (a lapse of the node's lease) loses the lent grant for good (its holder is told)
    /// but keeps the node: the local waiters wait for the verdict (await_verdict).
    void watch_node_loss(session_impl& s) {
        node()->wait_lost(pending<void(error_code)>(
            asio::any_completion_handler<void(error_code)>(asio::bind_executor(
                s.strand(),
                [q = weak_from_this(), w = std::weak_ptr<held_lock>(node_.state())](error_code why) {
                    auto self = q.lock();
                    if (!self || why == errc::lock_released || self->node_.state() != w.lock()) return;
                    if (auto lent = self->lent_.lock()) lent->lose(why);
                    if (auto n = w.lock(); n && n->st == held_lock::status::suspended)
                        return self->await_verdict(w);
                    self->after_node_lost(w, why);
                })),
            s.executor()));
    }

    /// The queue's node is suspended: regained, the hand-offs go on under it (a release held back
    /// meanwhile is passed on now, and the node's loss watched again); lost for good, the queue
    /// lets go of it as of any lost node (after_node_lost).
    void await_verdict(const std::weak_ptr<held_lock>& w) {
        auto n = w.lock();
        auto s = s_.lock();
        if (!n || !s) return;
        n->wait_verdict(pending<void(error_code)>(
            asio::any_completion_handler<void(error_code)>(asio::bind_executor(
                s->strand(),
                [q = weak_from_this(), w](error_code verdict) {
                    auto self = q.lock();
                    if (!self || self->node_.state() != w.lock()) return;
                    const bool held_back = std::exchange(self->held_back_, false);
                    if (verdict) return self->after_node_lost(w, verdict);
                    auto s = self->s_.lock();
                    if (!s) return;
                    self->watch_node_loss(*s);
                    if (held_back) return self->pass_on();
                    // The lent grant was lost at the suspension and is not
                    // released yet: its holder must have stopped by the
                    // handover time, when the next waiter is served (as a
                    // queue whose node was lost would move on then).
                    auto lent = self->lent_.lock();
                    if (!lent || lent->st != held_lock::status::lost) return;
                    self->move_on_timer_.emplace(s->plat(), s->strand(), timer_clock::boot);
                    self->move_on_timer_->expires_at_boot(self->node()->handover_at);
                    self->move_on_timer_->async_wait(
                        [q = self->weak_from_this(), l = std::weak_ptr<held_lock>(lent)](error_code ec) {
                            auto self = q.lock();
                            if (!self || ec || self->lent_.lock() != l.lock() || !l.lock())
                                return; // (released meanwhile: passed on then)
                            self->lent_.reset();
                            // (suspended again meanwhile: at that verdict)
                            if (const auto* n = self->node(); n && n->st == held_lock::status::suspended) {
                                self->held_back_ = true;
                                return;
                            }
                            self->pass_on();
                        });
                })),
            s->executor()));
    }

    /// The node is suspended, or held with a lease that has lapsed by the clock while its lease
    /// timer has not run yet (a process that resumes from a pause runs the two in any order): no
    /// grant under it before its verdict, which its suspension brings.
    static bool lapsed(const held_lock& n) {
        return n.st == held_lock::status::suspended || (n.st == held_lock::status::held && n.is_lost_now());
    }

    /// The lent grant's release, held back while the node was suspended (or its holder's time
    /// to stop, passed), handed to the machine now that the node is held again.
    void pass_on() {
        auto s = s_.lock();
        const auto* n = node();
        if (n && lapsed(*n)) { // (lapsed again, its lease timer not run yet: at the next verdict)
            held_back_ = true;
            return;
        }
        const bool node_ok = n && n->st == held_lock::status::held && !n->revoke_requested;
        perform(m_.local_release(true, node_ok, s && s->state() == session_state::connected));
    }

    /// The node is lost while the session lives on. The local waiters must not wait for the
    /// release of the grant that is out, which may never come: once the old node
    /// is gone they are served by a fresh one. It is gone now if someone deleted it; a node lost by
    /// the loss policy is deleted at the lent grant's release or at the session's handover time
    /// (held_lock::lose_by_policy), whichever comes first: the queue moves on at the same time.
    /// (The session's end is on_session_event's business.)
    void after_node_lost(const std::weak_ptr<held_lock>& lost, error_code why) {
        auto s = s_.lock();
        auto n = lost.lock();
        if (!s || !n) return;
        if (why != errc::lock_node_deleted && why != errc::lease_expired && why != errc::lock_lost_suspended)
            return;
        // (at once, but posted: this runs inside the node's loss, which release_node must not
        // re-enter; a node lost by policy waits for its handover, on the lease's clock)
        move_on_timer_.emplace(s->plat(), s->strand(), timer_clock::boot);
        move_on_timer_->expires_at_boot(n->delete_deferred ? n->handover_at : s->plat()->boot_now());
        move_on_timer_->async_wait([q = weak_from_this(), lost](error_code ec) {
            if (auto self = q.lock(); self && !ec) self->move_on(lost);
        });
    }

    /// Lets go of the lost node `lost` (unless the queue has done so already) and serves the
    /// waiters with a fresh node. The lent grant's release, whenever it comes, passes nothing on.
    void move_on(const std::weak_ptr<held_lock>& lost) {
        if (m_.state() != handoff_fsm::phase::held || node_.state() != lost.lock())
            return; // released meanwhile
        lent_.reset();
        held_back_ = false; // (a release held back under this node passes nothing on)
        auto s = s_.lock();
        perform(m_.node_lost(!s || s->state() == session_state::closed));
    }

    void grant(session_impl& s, std::uint64_t id, std::uint32_t index) {
        auto it = waiters_.find(id);
        if (it == waiters_.end()) return;
        auto w = std::move(it->second);
        waiters_.erase(it);
        if (w.timer) w.timer->cancel();
        const auto& n = *node();
        auto h = std::make_shared<held_lock>(s.shared_from_this(), n.node, n.seq, n.czxid, n.session_id,
                                             index, shared_from_this());
        h->revocable = w.revocable;
        h->policy_override = w.loss;
        h->start();
        if (h->revocable) h->arm_watch();
        lent_ = h;
        w.h->complete({}, guard(std::move(h)));
    }

    /// Waiter `id`'s handler, taken out of the queue.
    std::optional<pending<void(error_code, guard)>> take(std::uint64_t id) {
        auto it = waiters_.find(id);
        if (it == waiters_.end()) return std::nullopt;
        auto w = std::move(it->second);
        waiters_.erase(it);
        if (w.timer) w.timer->cancel();
        return std::move(w.h);
    }
    void complete(std::uint64_t id, error_code why) {
        if (auto h = take(id)) h->complete(why, guard{});
    }
    error_code code(handoff_reason why) const {
        switch (why) {
        case handoff_reason::cancelled:
            return asio::error::operation_aborted;
        case handoff_reason::timed_out:
            return errc::acquire_timeout;
        case handoff_reason::busy:
            return errc::lock_busy;
        case handoff_reason::node_failed:
            return node_error_;
        case handoff_reason::session_end:
            return end_reason_;
        }
        return errc::internal_error;
    }

    /// Deletes the node (the user's release, if any, completes when it is gone).
    void release_node(std::optional<pending<void(error_code)>> done) {
        guard g = std::move(node_); // its destructor posts a second release: a no-op
        if (auto h = g.state())
            h->release(std::move(done));
        else if (done)
            done->complete({});
    }

    /// An idle, empty queue removes itself from the session's table.
    void forget_if_idle();

    std::weak_ptr<session_impl> s_;
    const std::string key_;
    acquire_request base_;
    handoff_fsm m_;                           // the queue's protocol
    std::map<std::uint64_t, waiter> waiters_; // the handlers, by the machine's ids (also while leaving)
    std::uint64_t next_id_ = 1;
    std::unique_ptr<asio::cancellation_signal> cancel_;
    guard result_;          // the node acquire's result, while its effects are performed
    error_code node_error_; // ... its error (handoff_reason::node_failed)
    error_code end_reason_; // the session's end (handoff_reason::session_end)
    std::optional<pending<void(error_code)>> releaser_; // local_release's completion, while performed
    guard node_; // with phase held: the queue's node (its own state: watch, loss)
    held_lock* node() const { return node_.state().get(); }
    std::weak_ptr<held_lock> lent_;      // the grant out now, if any
    bool held_back_ = false;             // the lent grant was released while the node was suspended
    std::optional<timer> move_on_timer_; // after a loss by policy: see after_node_lost
    bool listening_ = false;
    std::uint64_t listener_id_ = 0;
};

struct handoff_table {
    std::map<std::string, std::shared_ptr<handoff_queue>> queues;
};

constexpr std::uint64_t table_key = 0x68616e646f6666ULL; // "handoff"

std::shared_ptr<handoff_table> table_of(session_impl& s) {
    auto& slot = s.extension(table_key);
    if (!slot) slot = std::make_shared<handoff_table>();
    return std::static_pointer_cast<handoff_table>(slot);
}

void handoff_queue::forget_if_idle() {
    if (!m_.idle() || !lent_.expired()) return;
    auto s = s_.lock();
    if (!s) return;
    if (listening_) s->remove_listener(listener_id_);
    listening_ = false;
    auto t = table_of(*s);
    auto it = t->queues.find(key_);
    if (it != t->queues.end() && it->second.get() == this) t->queues.erase(it); // may destroy *this
}

/// Which requests may share a queue (and so its node): the same node and the same guard. Every
/// option that changes the node (path, dialect, strategy, data, ACL) or what a grant follows (the
/// loss policy, revocability, the bound) is in the key; mutex objects that differ in any of them
/// get queues of their own, whose nodes contend in ZooKeeper like any two processes' (else the second
/// would get a grant of the first one's node, with the first one's settings).
std::string queue_key(const acquire_request& req) {
    std::string k;
    auto field = [&k](const std::string& v) {
        k += std::to_string(v.size());
        k += ':';
        k += v;
    };
    field(req.path);
    field(std::to_string(static_cast<int>(req.dialect)) + ',' +
          std::to_string(static_cast<int>(req.strategy)) + ',' + std::to_string(req.local_handoff) + ',' +
          (req.revocable ? "r" : "-"));
    field(req.node_data);
    std::string a;
    if (req.node_acl)
        for (const auto& e : req.node_acl->entries())
            a += std::to_string(e.perms) + '/' + std::to_string(e.scheme.size()) + ':' + e.scheme + '/' +
                 std::to_string(e.id.size()) + ':' + e.id + ';';
    field(a);
    std::string l = "session";
    if (req.loss) {
        char f[32];
        std::snprintf(f, sizeof f, "%.17g", req.loss->lease_fraction());
        l = std::string(to_string(req.loss->type())) + '(' + f + ')';
    }
    field(l);
    return k;
}

} // namespace

void start_acquire(const std::shared_ptr<session_impl>& s, acquire_request req,
                   asio::any_completion_handler<void(error_code, guard)> handler) {
    if (req.local_handoff == 0) return start_node_acquire(s, std::move(req), std::move(handler));
    pending<void(error_code, guard)> p(std::move(handler), s->executor());
    if (auto ec = validate_lock_path(req.path)) return p.complete(ec, guard{});
    if (req.loss && req.loss->validate()) return p.complete(req.loss->validate(), guard{});
    if (req.rw) return p.complete(errc::local_handoff_unsupported, guard{});
    if (req.local_handoff > max_local_grants) return p.complete(errc::invalid_local_handoff, guard{});
    if (req.node_data.size() > max_node_data) return p.complete(errc::data_too_large, guard{});
    if (req.metered) meter_acquire(*s, req.path, p);
    auto t = std::make_shared<ticket>();
    p.on_cancel([t, strand = s->strand()](asio::cancellation_type) {
        asio::post(strand, [t] {
            if (auto q = t->queue.lock())
                q->leave(t->id, handoff_reason::cancelled);
            else
                t->cancelled = true;
        });
    });
    asio::post(s->strand(), [s, req = std::move(req), p = std::move(p), t]() mutable {
        auto key = queue_key(req);
        auto table = table_of(*s);
        auto& q = table->queues[key];
        if (!q) q = std::make_shared<handoff_queue>(s, key, req);
        auto keep = q; // enqueue may complete at once and forget the queue
        keep->enqueue(std::move(req), std::move(p), t);
    });
}

} // namespace zklock::detail
