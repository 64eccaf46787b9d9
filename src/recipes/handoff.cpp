// In-process hand-off (mutex_options::local_handoff): the acquires of one session on one path
// queue locally behind a single lock node and pass the lock to each other without a request.
//
// Everything here runs on the session's strand. A queue is idle (no node), acquiring (one
// node-acquire in flight for the whole queue) or held (the node is ours; one grant is lent to a
// local holder). Each grant is its own held_lock (own guard, own loss signal), whose release
// comes back here through release_hook instead of deleting the node.
#include <zklock/mutex.hpp>
#include <zklock/path.hpp>

#include "recipes/held_lock.hpp"
#include "protocol/protocol.hpp"
#include "session/session_impl.hpp"

#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/bind_executor.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>

#include <algorithm>
#include <cstdio>
#include <map>

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
        : s_(std::move(s)), key_(std::move(key)), base_(std::move(base)) {
        base_.deadline.reset();
        base_.try_only = false;
    }

    /// A new local contender (strand).
    void enqueue(acquire_request req, pending<void(error_code, guard)> h, const std::shared_ptr<ticket>& t) {
        auto s = s_.lock();
        if (!s) return h.complete(asio::error::operation_aborted, guard{});
        error_code refused;
        if (t->cancelled)
            refused = asio::error::operation_aborted;
        else if (req.try_only && phase_ != phase::idle)
            refused = errc::lock_busy;
        else if (req.deadline && std::chrono::steady_clock::now() >= *req.deadline)
            refused = errc::acquire_timeout;
        if (refused) {
            h.complete(refused, guard{});
            return forget_if_idle();
        }
        if (!listening_) {
            listener_id_ = s->add_listener(weak_from_this());
            listening_ = true;
        }
        const auto id = next_id_++;
        t->queue = weak_from_this();
        t->id = id;
        auto& w = waiters_[id];
        w.try_only = req.try_only;
        w.revocable = req.revocable;
        w.loss = req.loss;
        w.h.emplace(std::move(h));
        if (req.deadline) {
            w.timer = std::make_unique<asio::steady_timer>(s->strand(), *req.deadline);
            w.timer->async_wait([q = weak_from_this(), id](error_code ec) {
                if (ec) return; // cancelled: the waiter left some other way
                if (auto self = q.lock()) self->leave(id, errc::acquire_timeout);
            });
        }
        if (phase_ == phase::idle) acquire_node(*s);
    }

    /// A waiter gives up (strand). The last one to leave while the node is being acquired is
    /// completed only once that acquire has ended and deleted its node: no node outlives a
    /// completed acquire.
    void leave(std::uint64_t id, error_code why) {
        auto it = waiters_.find(id);
        if (it == waiters_.end()) return;
        auto w = std::move(it->second);
        waiters_.erase(it);
        if (w.timer) w.timer->cancel();
        if (waiters_.empty() && phase_ == phase::acquiring && cancel_) {
            leaving_.emplace_back(std::move(*w.h), why);
            cancelled_by_us_ = true;
            cancel_->emit(asio::cancellation_type::terminal);
            return;
        }
        w.h->complete(why, guard{});
    }

    void local_release(held_lock& grant, std::optional<pending<void(error_code)>> done) override {
        if (lent_.lock().get() != &grant) {
            // A grant of an earlier node, lost with it (expiry, close) while the queue moved on
            // to a new node: it has nothing to pass on, and the current grant is not its business.
            if (done) done->complete({});
            return;
        }
        lent_.reset();
        if (phase_ != phase::held) {
            // The queue let go of the node already (expiry, close); a new acquire may be under way.
            if (done) done->complete({});
            return forget_if_idle();
        }
        auto s = s_.lock();
        // No hand-off under a node that is lost, or that someone asked us to give up (a
        // revocation request: the queue lets go after the current holder).
        const auto* n = node();
        const bool node_ok = n && n->st == held_lock::status::held && !n->revoke_requested;
        const bool connected = s && s->state() == session_state::connected;
        switch (decide_after_release(node_ok, connected, waiters_.size(), grants_, bound())) {
        case after_release::hand_off:
            if (done) done->complete({});
            grant_next(*s);
            return;
        case after_release::release_requeue:
            release_node(std::move(done));
            if (s) acquire_node(*s);
            return;
        case after_release::release:
            release_node(std::move(done));
            forget_if_idle();
            return;
        }
    }

    void on_session_event(session_event e) override {
        // Waiting contenders would have lost their nodes with the session: tell them the same,
        // and let go of the node (which also breaks the queue -> node -> session reference chain).
        if (e != session_event::expired && e != session_event::closed) return;
        auto s = s_.lock();
        fail_all(e == session_event::expired ? (s ? s->end_reason() : error_code(errc::session_expired))
                                             : error_code(asio::error::operation_aborted));
        if (phase_ == phase::held) release_node(std::nullopt);
        forget_if_idle();
    }

private:
    enum class phase { idle, acquiring, held };
    struct waiter {
        std::optional<pending<void(error_code, guard)>> h;
        std::unique_ptr<asio::steady_timer> timer;
        bool try_only = false;
        bool revocable = false;
        std::optional<loss_policy> loss;
    };

    std::uint32_t bound() const { return base_.local_handoff; }

    /// One node-acquire for the whole queue (try-only when every waiter is a try).
    void acquire_node(session_impl& s) {
        phase_ = phase::acquiring;
        cancelled_by_us_ = false;
        auto req = base_;
        req.metered = false; // (each local waiter is counted on its own)
        req.try_only =
            std::all_of(waiters_.begin(), waiters_.end(), [](auto& kv) { return kv.second.try_only; });
        cancel_ = std::make_unique<asio::cancellation_signal>();
        start_node_acquire(s.shared_from_this(), std::move(req),
                           asio::any_completion_handler<void(error_code, guard)>(asio::bind_cancellation_slot(
                               cancel_->slot(), asio::bind_executor(s.strand(), [q = shared_from_this()](
                                                                                    error_code ec, guard g) {
                                   q->on_node(ec, std::move(g));
                               }))));
    }

    void on_node(error_code ec, guard g) {
        phase_ = phase::idle;
        auto signal = std::move(cancel_); // (its slot was cleared before this handler ran)
        const bool we_cancelled = cancelled_by_us_;
        cancelled_by_us_ = false;
        // The waiters that gave up while the node was being acquired: its acquire has ended
        // (and deleted the node if it had one), so now they may complete.
        auto leaving = std::move(leaving_);
        leaving_.clear();
        auto s = s_.lock();
        if (s && waiters_.empty() && g.owns_lock() && !g.is_lost()) {
            // Granted just as the last waiter left: delete the node first, then let them complete.
            release_then(std::move(g), [leaving = std::move(leaving)]() mutable {
                for (auto& [w, why] : leaving) w.complete(why, guard{});
            });
            return forget_if_idle();
        }
        for (auto& [h, why] : leaving) h.complete(why, guard{});
        if (!s) return;
        if (waiters_.empty()) { // everyone left while we waited
            g.release_in_background();
            return forget_if_idle();
        }
        if (ec == errc::lock_busy) {
            fail_if([](const waiter& w) { return w.try_only; }, errc::lock_busy);
            if (!waiters_.empty()) return acquire_node(*s); // those who came later wait
            return forget_if_idle();
        }
        if (ec == asio::error::operation_aborted && we_cancelled && s->state() != session_state::closed) {
            return acquire_node(*s); // we cancelled it (all had left), and new waiters came
        }
        if (ec) {
            fail_all(ec);
            return forget_if_idle();
        }
        if (g.is_lost()) { // lost between the grant and now (e.g. the loss policy fired)
            g.release_in_background();
            return acquire_node(*s);
        }
        node_ = std::move(g);
        auto& n = *node();
        n.revocable = true; // (the flag only records the request: see local_release)
        n.arm_watch();      // a node deleted by someone else, or revoked, stops the hand-offs
        // The node's loss reaches the grant that is lent out, even if its holder armed no watch.
        n.wait_lost(pending<void(error_code)>(
            asio::any_completion_handler<void(error_code)>(asio::bind_executor(
                s->strand(),
                [q = weak_from_this(), w = std::weak_ptr<held_lock>(node_.state())](error_code why) {
                    auto self = q.lock();
                    if (!self || why == errc::lock_released || self->node_.state() != w.lock()) return;
                    if (auto lent = self->lent_.lock()) lent->lose(why);
                    self->after_node_lost(w, why);
                })),
            s->executor()));
        grants_ = 0;
        phase_ = phase::held;
        grant_next(*s);
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
        move_on_timer_.emplace(s->strand());
        move_on_timer_->expires_at(n->delete_deferred ? n->handover_at : lease_clock::now());
        move_on_timer_->async_wait([q = weak_from_this(), lost](error_code ec) {
            if (auto self = q.lock(); self && !ec) self->move_on(lost);
        });
    }

    /// Lets go of the lost node `lost` (unless the queue has done so already) and serves the
    /// waiters with a fresh node. The lent grant's release, whenever it comes, passes nothing on.
    void move_on(const std::weak_ptr<held_lock>& lost) {
        if (phase_ != phase::held || node_.state() != lost.lock()) return; // released meanwhile
        lent_.reset();
        release_node(std::nullopt); // (a node lost by policy: its deferred delete goes now)
        auto s = s_.lock();
        if (s && !waiters_.empty() && s->state() != session_state::closed) return acquire_node(*s);
        forget_if_idle();
    }

    void grant_next(session_impl& s) {
        auto it = waiters_.begin();
        auto w = std::move(it->second);
        waiters_.erase(it);
        if (w.timer) w.timer->cancel();
        const auto& n = *node();
        auto h = std::make_shared<held_lock>(s.shared_from_this(), n.node, n.seq, n.czxid, n.session_id,
                                             grants_++, shared_from_this());
        h->revocable = w.revocable;
        h->policy_override = w.loss;
        h->start();
        if (h->revocable) h->arm_watch();
        lent_ = h;
        w.h->complete({}, guard(std::move(h)));
    }

    /// Deletes the node (the user's release, if any, completes when it is gone).
    void release_node(std::optional<pending<void(error_code)>> done) {
        phase_ = phase::idle;
        guard g = std::move(node_); // its destructor posts a second release: a no-op
        if (auto h = g.state())
            h->release(std::move(done));
        else if (done)
            done->complete({});
    }

    template <class Pred>
    void fail_if(Pred pred, error_code why) {
        for (auto it = waiters_.begin(); it != waiters_.end();) {
            if (!pred(it->second)) {
                ++it;
                continue;
            }
            auto w = std::move(it->second);
            it = waiters_.erase(it);
            if (w.timer) w.timer->cancel();
            w.h->complete(why, guard{});
        }
    }
    void fail_all(error_code why) {
        fail_if([](const waiter&) { return true; }, why);
    }

    /// An idle, empty queue removes itself from the session's table.
    void forget_if_idle();

    std::weak_ptr<session_impl> s_;
    const std::string key_;
    acquire_request base_;
    phase phase_ = phase::idle;
    std::map<std::uint64_t, waiter> waiters_; // FIFO by id
    std::vector<std::pair<pending<void(error_code, guard)>, error_code>> leaving_;
    std::uint64_t next_id_ = 1;
    std::unique_ptr<asio::cancellation_signal> cancel_;
    bool cancelled_by_us_ = false;
    guard node_; // with phase held: the queue's node (its own state: watch, loss)
    held_lock* node() const { return node_.state().get(); }
    std::weak_ptr<held_lock> lent_;           // the grant out now, if any
    std::optional<boot_timer> move_on_timer_; // after a loss by policy: see after_node_lost
    std::uint32_t grants_ = 0;
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
    if (phase_ != phase::idle || !waiters_.empty() || !leaving_.empty() || !lent_.expired()) return;
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
    if (req.metered) s->meter_acquire(req.path, p);
    auto t = std::make_shared<ticket>();
    p.on_cancel([t, strand = s->strand()](asio::cancellation_type) {
        asio::post(strand, [t] {
            if (auto q = t->queue.lock())
                q->leave(t->id, asio::error::operation_aborted);
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
