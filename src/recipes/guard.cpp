#include <zklock/guard.hpp>

#include "recipes/held_lock.hpp"
#include "protocol/protocol.hpp"

#include <boost/asio/post.hpp>

#include <algorithm>

namespace zklock {
namespace detail {

namespace {
void complete_all(held_lock::waiter_map& m, error_code ec) {
    auto all = std::move(m);
    m.clear();
    for (auto& [id, w] : all) w.complete(ec);
}
} // namespace

std::uint64_t held_lock::new_cancellable_waiter(wait_kind which, pending<void(error_code)>& h) {
    auto id = next_waiter.fetch_add(1, std::memory_order_relaxed);
    h.on_cancel([w = weak_from_this(), which, id](asio::cancellation_type) {
        auto self = w.lock();
        if (!self) return;
        asio::post(self->session->strand(), [self, which, id] { self->cancel_waiter(which, id); });
    });
    return id;
}

void held_lock::cancel_waiter(wait_kind which, std::uint64_t id) {
    const bool live = st == status::held || st == status::suspended;
    if (!waiters_ && !live) return; // (nothing parked, and nothing to remember)
    auto& waiters = waiting(which);
    auto it = waiters.find(id);
    if (it == waiters.end()) {
        if (live) wait_state().cancelled_early.insert(id); // not parked yet
        return;
    }
    auto p = std::move(it->second);
    waiters.erase(it);
    p.complete(asio::error::operation_aborted);
}

void held_lock::park(wait_kind which, pending<void(error_code)> h, std::uint64_t id) {
    if (id != 0 && waiters_ && waiters_->cancelled_early.erase(id))
        return h.complete(asio::error::operation_aborted);
    if (id == 0) id = next_waiter.fetch_add(1, std::memory_order_relaxed);
    waiting(which).emplace(id, std::move(h));
    if (which != wait_kind::verdict) arm_watch();
}

void held_lock::end_waits(error_code why, bool fire, bool keep_verdicts, std::optional<error_code> verdict) {
    if (!waiters_) return;
    auto w = std::move(waiters_); // (a handler that parks again makes a new set: it completes at once)
    if (keep_verdicts) {
        // A suspension: the verdict waiters wait on (a new set, as above, holds them, and the
        // cancellations that came before their waiters were parked).
        auto& kept = wait_state();
        kept.verdict = std::move(w->verdict);
        kept.cancelled_early = std::move(w->cancelled_early);
        w->verdict.clear();
    }
    w->cancelled_early.clear();
    complete_all(w->loss, why);
    complete_all(w->revoke, why);
    complete_all(w->verdict, verdict.value_or(why));
    if (fire)
        for (auto& b : w->bindings)
            if (auto sp = b.lock()) loss_binding::fire(sp);
}

void held_lock::wait_verdict(pending<void(error_code)> h, std::uint64_t id) {
    // Held, and not known lost (a lapse the lease timer has not reported yet, or a loss whose
    // cause is being found, is no verdict: it waits for the suspension's end or the loss).
    if (st == status::held && !is_lost_now()) return h.complete({});
    if (st == status::lost) return h.complete(reason());
    if (st == status::released) return h.complete(errc::lock_released);
    park(wait_kind::verdict, std::move(h), id);
}

void held_lock::start() {
    listener_id = session->add_listener(weak_from_this());
    policy = session->policy_for(policy_override);
    if (policy.type() == loss_policy::kind::lease) {
        lease_registered = true;
        // (first: gaps from now on are recorded)
        lease_id = session->lease_register(policy.lease_fraction(), node, [w = weak_from_this()] {
            // a heartbeat's check failed (answered on the session: it lives; the node was deleted)
            if (auto self = w.lock()) self->lose(errc::lock_node_deleted);
        });
        lease_since.store(session->plat()->boot_now(), std::memory_order_release);
        // Granted on a reply so slow that the lease has already lapsed: not vouched for.
        if (session->lease_lapsed(policy.lease_fraction()))
            lose_after_finding_the_cause(errc::lease_expired, true);
    } else if (policy.type() == loss_policy::kind::on_disconnect &&
               session->state() != session_state::connected) {
        lose_by_policy(errc::lock_lost_suspended);
    }
}

void held_lock::unregister() {
    session->remove_listener(listener_id);
    if (lease_registered) {
        lease_registered = false;
        session->lease_unregister(lease_id);
    }
}

bool held_lock::is_lost_now() const noexcept {
    if (lost.load(std::memory_order_acquire)) return true;
    if (finding_cause.load(std::memory_order_acquire)) return true;
    if (policy.type() != loss_policy::kind::lease) return false; // (fixed by start(), before the grant)
    // (the lapse seen sticks for this hold, keyed by its start: a regain starts a new one, and a
    // reader that decided on the old one and stores late cannot mark the new one lapsed)
    const lease_ns since = lease_since.load(std::memory_order_acquire);
    if (lease_seen_lapsed.load(std::memory_order_acquire) == since) return true;
    if (!session->lease_lapsed_since(since, policy.lease_fraction())) return false;
    lease_seen_lapsed.store(since, std::memory_order_release);
    return true;
}

error_code held_lock::loss_reason_now() const {
    if (lost.load(std::memory_order_acquire)) return reason();
    if (finding_cause.load(std::memory_order_acquire)) return tentative_reason;
    if (is_lost_now()) return errc::lease_expired;
    return {};
}

lease_ns held_lock::handover_time() const {
    // Until the earliest moment the session could have expired (v + T), and under the lease never
    // sooner than the holder's stated window, (0.5875 - f) T, after the signal: a lapse found late
    // (a T that shrank on a reconnect, which moves the deadline into the past; a late timer) must
    // not hand the lock on as it is told. (Seen: QuorumLease.ATimeoutRenegotiated... granted the
    // next holder 39 ms after the signal, the node deleted at once.)
    lease_ns at = session->lease_handover_at();
    if (policy.type() == loss_policy::kind::lease)
        at =
            std::max(at, session->plat()->boot_now() +
                             static_cast<lease_ns>(session_lease::guaranteed_margin(policy.lease_fraction()) *
                                                   static_cast<double>(session->lease_view().timeout)));
    return at;
}

void held_lock::lose_by_policy(error_code why) {
    if (st != status::held) return;
    // A lapsed lease whose policy may regain: suspended, the node kept (a hand-off grant's node
    // is its queue's, which decides for it).
    if (why == errc::lease_expired && policy.regain_window().count() > 0 && !hook) return suspend(why);
    lose(why);
    // The holder has only just been told. If the session survives, the node must not linger,
    // but it must not go before the holder can have stopped either: it stays until the release
    // or until the server could have expired the session anyway, whichever comes first.
    // (A hand-off grant's node is its queue's, which does the same for it.)
    if (hook) return;
    delete_deferred = true;
    handover_at = handover_time();
    schedule_lost_node_delete();
}

void held_lock::schedule_lost_node_delete() {
    const lease_ns now = session->plat()->boot_now();
    const auto at = handover_at;
    if (at <= now) return delete_lost_node();
    // (weak: a held_lock that goes away was released, and its release deleted the node)
    auto then = [w = weak_from_this()](error_code) {
        if (auto self = w.lock()) self->delete_lost_node();
    };
    try {
        handover_timer = std::make_unique<timer>(session->plat(), session->strand(), timer_clock::boot);
    } catch (const std::exception&) {
        // A CLOCK_BOOTTIME timer is a descriptor; at the process's descriptor limit it cannot be
        // made (seen: 5,000 sessions in one process, the exception out of io_context::run).
        handover_timer.reset();
        handover_fallback = std::make_unique<timer>(
            session->plat(), session->strand(), std::chrono::nanoseconds(at - session->plat()->boot_now()));
        return handover_fallback->async_wait(then);
    }
    handover_timer->expires_at_boot(at);
    handover_timer->async_wait(then);
}

void held_lock::suspend(error_code why) {
    // The holder is told exactly as by lose(): is_lost() (`lost`, set last), the loss waiters,
    // the bound operations. The verdict waiters wait on.
    finding_cause.store(false, std::memory_order_release);
    if (cause_timer) cause_timer->cancel();
    st = status::suspended;
    set_reason(why);
    susp = std::make_unique<suspension>(czxid, session_id);
    susp->since = session->plat()->boot_now();
    // If the verdict is a final loss, the node goes no sooner than lose_by_policy would have
    // deleted it now: the holder's window from this signal.
    susp->delete_at = handover_time();
    handover_at = susp->delete_at;
    delete_deferred = true; // a release while suspended deletes the node at once
    was_suspended = true;
    suspended_now.store(true, std::memory_order_release);
    lost.store(true, std::memory_order_release);
    session->n_suspended.fetch_add(1, std::memory_order_relaxed);
    // Out of the lease's fractions (its timer no longer looks at this lock), still with the
    // heartbeats: they check the node in turn (gone: on_gone, a final loss), and each one the
    // server answers tells on_commit. Still a listener: an expiry or a close ends the suspension.
    if (lease_registered)
        session->lease_suspend(lease_id, [w = weak_from_this()](lease_ns sent) {
            if (auto self = w.lock()) self->on_commit(sent);
        });
    end_waits(why, true, true);
    try {
        susp->window = std::make_unique<timer>(session->plat(), session->strand(), timer_clock::boot);
        susp->window->expires_after(policy.regain_window());
        susp->window->async_wait([w = weak_from_this()](error_code ec) {
            if (ec) return;
            if (auto self = w.lock(); self && self->st == status::suspended)
                self->end_suspension(errc::lease_expired, true);
        });
    } catch (const std::exception&) {
        // No descriptor left for the window: no regain (the loss is final, as before).
        return end_suspension(why, true);
    }
}

void held_lock::on_commit(lease_ns sent) {
    if (st != status::suspended || !susp) return;
    perform_regain(susp->fsm.on_commit(sent > susp->since, session->lease_lapsed(policy.lease_fraction())));
}

void held_lock::perform_regain(regain_fsm::action a) {
    using action = regain_fsm::action;
    switch (a) {
    case action::none:
        return;
    case action::send_read:
        // After the heartbeat's reply, on the same session: the server that answers has applied
        // that write (a session's requests are answered in order, and a server the session moves
        // to is at least as new as the session's last zxid).
        return session->exists(node, zk_handler([w = weak_from_this()](zk_result r) {
                                   auto self = w.lock();
                                   if (!self || self->st != status::suspended || !self->susp) return;
                                   self->perform_regain(self->susp->fsm.on_read(
                                       r.rc, r.stat.czxid, r.stat.ephemeralOwner,
                                       self->session->lease_lapsed(self->policy.lease_fraction())));
                               }));
    case action::regained:
        return regain();
    case action::lost_deleted:
    case action::lost_not_ours: // (someone else's node of that name: never deleted by us)
        return end_suspension(errc::lock_node_deleted, false);
    }
}

void held_lock::drop_suspension() {
    if (!susp) return;
    if (susp->window) susp->window->cancel();
    susp.reset();
}

void held_lock::regain() {
    // Back under the lease, from now: gaps before now (the suspension's own) are not this hold's.
    lease_since.store(session->plat()->boot_now(), std::memory_order_release);
    if (lease_registered) session->lease_resume(lease_id);
    drop_suspension();
    delete_deferred = false;
    st = status::held;
    session->n_regained.fetch_add(1, std::memory_order_relaxed);
    suspended_now.store(false, std::memory_order_release);
    lost.store(false, std::memory_order_release);
    if (waiters_) complete_all(waiters_->verdict, {});
    if (wants_watch && watch_id == 0) arm_watch();
}

void held_lock::end_suspension(error_code why, bool delete_node) {
    if (st != status::suspended) return;
    const lease_ns delete_at = susp->delete_at;
    drop_suspension();
    session->n_suspensions_lost.fetch_add(1, std::memory_order_relaxed);
    lose(why); // (the verdict waiters, with `why`)
    if (!delete_node) {
        delete_deferred = false; // gone, or not ours
        return;
    }
    handover_at = delete_at;
    schedule_lost_node_delete();
}

void held_lock::delete_lost_node() {
    if (!delete_deferred) return;
    delete_deferred = false;
    if (handover_timer) handover_timer->cancel();
    if (handover_fallback) handover_fallback->cancel();
    // (after a suspension, only our own incarnation: the heartbeat's check passes on a node of
    // the same name that someone made after a break)
    session->delete_in_background(node, std::nullopt, fixed_name || was_suspended ? czxid : 0);
}

void held_lock::lose_after_finding_the_cause(error_code why, bool by_policy) {
    if (st != status::held) return;
    if (finding_cause.load(std::memory_order_relaxed)) return; // (one search at a time)
    // Before the earliest expiry the session is alive (the lease's premises): `why` is the cause.
    if (policy.type() != loss_policy::kind::lease ||
        session->lease_handover_at() > session->plat()->boot_now())
        return by_policy ? lose_by_policy(why) : lose(why);
    tentative_reason = why;
    finding_cause.store(true, std::memory_order_release);
    auto decide = [w = weak_from_this(), why, by_policy](bool alive) {
        auto self = w.lock();
        if (!self || !self->finding_cause.load(std::memory_order_relaxed) || self->st != status::held) return;
        self->finding_cause.store(false, std::memory_order_release);
        if (self->cause_timer) self->cause_timer->cancel();
        // (an expiry reaches us as session_event::expired, which loses with its own reason)
        if (!alive && self->session->state() == session_state::expired)
            return self->lose(self->session->end_reason());
        by_policy ? self->lose_by_policy(why) : self->lose(why);
    };
    // An answered write on this session proves it alive at the quorum (a read could be answered
    // by a follower cut off from the leader); a reconnect to an expired session ends every request
    // with ZSESSIONEXPIRED (and the expired event).
    session->renew_lease(zk_handler([decide](zk_result r) {
        if (is_server_reply(r.rc))
            decide(true);
        else if (r.rc == ZSESSIONEXPIRED || r.rc == ZINVALIDSTATE)
            decide(false);
        // else: connection trouble; the session event or the bound decides
    }));
    try {
        cause_timer = std::make_unique<timer>(session->plat(), session->strand(), timer_clock::boot);
    } catch (const std::exception&) { // (no descriptor left for its bound: decide now)
        cause_timer.reset();
        return decide(false);
    }
    cause_timer->expires_after(session->negotiated_timeout() / 10);
    cause_timer->async_wait([decide](error_code ec) {
        if (!ec) decide(false);
    });
}

void held_lock::lose(error_code why) {
    if (st == status::suspended) {
        // The suspension ends without a regain (an expiry, a close, a heartbeat's or a watch's
        // news of the node's delete): lost for good. The node, if it must go, goes as the
        // caller says (end_suspension); an expired or closed session's went with it.
        if (susp) {
            drop_suspension();
            session->n_suspensions_lost.fetch_add(1, std::memory_order_relaxed);
            delete_deferred = false;
        }
        st = status::lost;
        set_reason(why);
        suspended_now.store(false, std::memory_order_release);
        end_hold(&why);
        unregister();
        return end_waits(why, true);
    }
    if (st != status::held) return;
    finding_cause.store(false, std::memory_order_release);
    if (cause_timer) cause_timer->cancel();
    st = status::lost;
    set_reason(why);
    end_hold(&why);
    lost.store(true, std::memory_order_release);
    unregister();
    end_waits(why, true);
}

void held_lock::on_session_event(session_event e) {
    switch (e) {
    case session_event::suspended:
        if (policy.type() == loss_policy::kind::on_disconnect) lose_by_policy(errc::lock_lost_suspended);
        break;
    case session_event::lease_check:
        if (policy.type() == loss_policy::kind::lease &&
            (lease_seen_lapsed.load(std::memory_order_acquire) ==
                 lease_since.load(std::memory_order_acquire) ||
             session->lease_lapsed_since(lease_since.load(std::memory_order_acquire),
                                         policy.lease_fraction())))
            lose_after_finding_the_cause(errc::lease_expired, true);
        break;
    case session_event::expired:
        lose(session->end_reason());
        break;
    case session_event::closed:
        lose(errc::session_closed);
        break;
    case session_event::reconnected:
        // a watch whose request failed during the disconnect: arm it again
        if (st == status::held && watch_id == 0 && wants_watch) arm_watch();
        break;
    case session_event::state_changed:
        break;
    }
}

void held_lock::release(std::optional<pending<void(error_code)>> done) {
    if (st == status::released) {
        if (done) done->complete({});
        return;
    }
    if (--holds > 0) { // a reentrant hold: the node stays until the last one goes
        if (done) done->complete({});
        return;
    }
    bool was_held = st == status::held;
    if (st == status::suspended) {
        // Released while suspended: the node goes at once (delete_deferred, below), as a lost
        // lock's.
        drop_suspension();
        suspended_now.store(false, std::memory_order_release);
    }
    st = status::released;
    end_hold();
    unregister();
    session->drop_watch(watch_id);
    end_waits(errc::lock_released, false);
    if (hook) return hook->local_release(*this, std::move(done)); // the node is the queue's
    if (!was_held) {
        // Lost: by policy (its delete was deferred: it goes now), with the session, or deleted
        // by someone else. Nothing to wait for.
        delete_lost_node();
        if (done) done->complete({});
        return;
    }
    const std::int64_t owner = fixed_name ? czxid : 0;
    if (!done) return session->delete_in_background(node, std::nullopt, owner, marks_release);
    // The release completes when the node is deleted, or once the lock's policy would no longer
    // vouch for it (the lease's deadline; one session timeout with on_expiry), whichever comes
    // first: a reconnect may never come (the connection can drop during the delete, too). The
    // delete goes on in the background.
    struct waiting {
        std::optional<pending<void(error_code)>> p;
        std::uint64_t lapse_id = 0;
    };
    auto w = std::make_shared<waiting>();
    w->p.emplace(std::move(*done));
    auto finish = [w, s = std::weak_ptr<session_impl>(session)](error_code ec) {
        if (!w->p) return;
        auto p = std::move(*w->p);
        w->p.reset();
        if (auto sp = s.lock(); sp && w->lapse_id) sp->cancel_lease_lapse(w->lapse_id);
        p.complete(ec);
    };
    auto& s = *session;
    // (other policies: one session timeout after the vouched time, the earliest expiry)
    double bound = policy.type() == loss_policy::kind::lease ? policy.lease_fraction()
                                                             : session_lease::expiry_after_reference;
    w->lapse_id = s.on_lease_lapse(bound, [finish] { finish({}); });
    s.delete_in_background(node,
                           pending<void(error_code)>(asio::any_completion_handler<void(error_code)>(
                                                         asio::bind_executor(s.strand(), finish)),
                                                     s.executor()),
                           owner, marks_release);
}

void held_lock::wait_lost(pending<void(error_code)> h, std::uint64_t id) {
    if (st == status::lost || st == status::suspended) return h.complete(reason());
    if (st == status::released) return h.complete(errc::lock_released);
    park(wait_kind::loss, std::move(h), id);
}

void held_lock::on_data(const std::string& data) {
    if (!revocable || st != status::held || (data != "__REVOKE__" && data != "unlock")) return;
    revoke_requested = true;
    if (waiters_) complete_all(waiters_->revoke, errc::revocation_requested);
}

void held_lock::wait_revoked(pending<void(error_code)> h, std::uint64_t id) {
    if (!revocable) return h.complete(errc::not_revocable);
    if (st == status::lost || st == status::suspended) return h.complete(reason());
    if (st == status::released) return h.complete(errc::lock_released);
    if (revoke_requested) return h.complete(errc::revocation_requested);
    park(wait_kind::revoke, std::move(h), id);
}

void held_lock::arm_watch() {
    wants_watch = true;
    if (st != status::held || watch_id != 0) return;
    auto w = weak_from_this();
    watch_id = session->add_watch([w](int type) {
        auto self = w.lock();
        if (!self) return;
        self->watch_id = 0;
        if (type == ZOO_DELETED_EVENT && self->st == status::suspended)
            self->end_suspension(errc::lock_node_deleted, false); // (gone: nothing to regain)
        else if (type == ZOO_DELETED_EVENT)
            self->lose_after_finding_the_cause(errc::lock_node_deleted, false); // (maybe the expiry's)
        else
            self->arm_watch(); // data changed: keep watching
    });
    session->get_data(node, watch_id, zk_handler([w](zk_result r) {
                          auto self = w.lock();
                          if (!self) return;
                          if (r.rc == ZOK) {
                              self->on_data(r.data);
                          } else if (r.rc == ZNONODE) {
                              self->session->drop_watch(self->watch_id);
                              self->watch_id = 0;
                              self->lose(errc::lock_node_deleted); // (answered on the session: it lives)
                          } else {
                              // Connection trouble: the session events decide; re-arm after reconnecting.
                              self->session->drop_watch(self->watch_id);
                              self->watch_id = 0;
                          }
                      }));
}

} // namespace detail

guard::guard() noexcept = default;
guard::guard(std::shared_ptr<detail::held_lock> h) noexcept : h_(std::move(h)) {
    if (h_) ex_ = h_->session->executor();
}
guard::guard(guard&& o) noexcept : h_(std::move(o.h_)), ex_(o.ex_) {}

guard& guard::operator=(guard&& o) noexcept {
    if (this != &o) {
        release_in_background();
        h_ = std::move(o.h_);
        if (o.ex_) ex_ = o.ex_;
    }
    return *this;
}

guard::~guard() { release_in_background(); }

void guard::release_in_background() noexcept {
    auto h = std::move(h_);
    if (!h) return;
    try {
        auto& strand = h->session->strand();
        asio::post(strand, [h = std::move(h)] { h->release(std::nullopt); });
    } catch (...) {
        // Out of memory: the node goes with the session.
    }
}

bool guard::is_lost() const noexcept { return h_ && h_->is_lost_now(); }

bool guard::is_suspended() const noexcept { return h_ && h_->suspended_now.load(std::memory_order_acquire); }

error_code guard::loss_reason() const { return h_ ? h_->loss_reason_now() : error_code{}; }

const std::string& guard::node_path() const noexcept {
    static const std::string empty;
    return h_ ? h_->node : empty;
}
std::int32_t guard::sequence() const noexcept { return h_ ? h_->seq : 0; }
std::int64_t guard::fencing_token() const noexcept {
    return h_ ? detail::fencing_token(h_->czxid, h_->local_index) : 0;
}
std::int64_t guard::node_czxid() const noexcept { return h_ ? h_->czxid : 0; }
std::uint32_t guard::local_grant() const noexcept { return h_ ? h_->local_index : 0; }
std::int64_t guard::session_id() const noexcept { return h_ ? h_->session_id : 0; }

namespace detail {
asio::cancellation_slot loss_binding_slot(loss_binding* b) noexcept {
    return b ? b->signal.slot() : asio::cancellation_slot();
}

void loss_binding::fire(const std::shared_ptr<loss_binding>& b) {
    asio::post(b->ex, [b] { b->signal.emit(asio::cancellation_type::terminal); });
}
} // namespace detail

std::shared_ptr<detail::loss_binding> guard::start_loss_binding(const std::shared_ptr<detail::held_lock>& h,
                                                                asio::any_io_executor ex) {
    if (!h) return nullptr;
    auto b = std::make_shared<detail::loss_binding>(std::move(ex));
    // Registered on the strand, where the loss is decided: a loss before or after is not missed.
    asio::post(h->session->strand(), [h, w = std::weak_ptr<detail::loss_binding>(b)] {
        auto b = w.lock();
        if (!b) return; // the operation is over already
        if (h->st == detail::held_lock::status::lost || h->st == detail::held_lock::status::suspended)
            return detail::loss_binding::fire(b);
        if (h->st != detail::held_lock::status::held) return; // released: nothing will be lost
        auto& bindings = h->wait_state().bindings;
        std::erase_if(bindings, [](const auto& x) { return x.expired(); });
        bindings.push_back(w);
        h->arm_watch();
    });
    return b;
}

namespace {
/// Runs `fn(held_lock&, pending)` on the session's strand; an empty guard completes with `empty`.
template <class Fn>
void on_strand(std::shared_ptr<detail::held_lock> h, const asio::any_io_executor& ex,
               asio::any_completion_handler<void(error_code)> handler, error_code empty, Fn fn) {
    if (!h) {
        // An empty guard: complete on the session it belonged to (system_executor only for a
        // default-constructed guard, which never had one).
        detail::pending<void(error_code)> p(std::move(handler),
                                            ex ? ex : asio::any_io_executor(asio::system_executor()));
        return p.complete(empty);
    }
    auto s = h->session;
    detail::pending<void(error_code)> p(std::move(handler), s->executor());
    asio::post(s->strand(), [h = std::move(h), p = std::move(p), fn]() mutable { fn(*h, std::move(p)); });
}
} // namespace

void guard::start_release(std::shared_ptr<detail::held_lock> h, const asio::any_io_executor& ex,
                          handler_type handler) {
    // Idempotent: an empty (released, moved-from) guard has nothing to release.
    on_strand(std::move(h), ex, std::move(handler), {},
              [](detail::held_lock& l, detail::pending<void(error_code)> p) { l.release(std::move(p)); });
}

namespace {
/// A loss or revocation wait: its cancellation is installed here, in the initiating function.
template <class Wait>
void start_wait(std::shared_ptr<detail::held_lock> h, const asio::any_io_executor& ex,
                asio::any_completion_handler<void(error_code)> handler, detail::held_lock::wait_kind which,
                Wait wait) {
    if (!h) return on_strand(nullptr, ex, std::move(handler), errc::not_held, [](auto&, auto) {});
    auto s = h->session;
    detail::pending<void(error_code)> p(std::move(handler), s->executor());
    auto id = h->new_cancellable_waiter(which, p);
    asio::post(s->strand(),
               [h = std::move(h), p = std::move(p), id, wait]() mutable { wait(*h, std::move(p), id); });
}
} // namespace

void guard::start_wait_revoked(std::shared_ptr<detail::held_lock> h, const asio::any_io_executor& ex,
                               handler_type handler) {
    start_wait(std::move(h), ex, std::move(handler), detail::held_lock::wait_kind::revoke,
               [](detail::held_lock& l, detail::pending<void(error_code)> p, std::uint64_t id) {
                   l.wait_revoked(std::move(p), id);
               });
}

void guard::start_wait_verdict(std::shared_ptr<detail::held_lock> h, const asio::any_io_executor& ex,
                               handler_type handler) {
    start_wait(std::move(h), ex, std::move(handler), detail::held_lock::wait_kind::verdict,
               [](detail::held_lock& l, detail::pending<void(error_code)> p, std::uint64_t id) {
                   l.wait_verdict(std::move(p), id);
               });
}

void guard::start_wait_lost(std::shared_ptr<detail::held_lock> h, const asio::any_io_executor& ex,
                            handler_type handler) {
    start_wait(std::move(h), ex, std::move(handler), detail::held_lock::wait_kind::loss,
               [](detail::held_lock& l, detail::pending<void(error_code)> p, std::uint64_t id) {
                   l.wait_lost(std::move(p), id);
               });
}

} // namespace zklock
