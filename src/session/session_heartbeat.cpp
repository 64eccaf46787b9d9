// The session's side of the lease (session/lease.hpp): the locks registered under it, the lease
// timer, the heartbeat and the touches, the renewal before a grant.
#include "session/session_impl.hpp"

namespace zklock::detail {

// ---------------------------------------------------------------- the lease
bool session_impl::lease_lapsed(double fraction) const noexcept {
    return lease_->lapsed(plat_->boot_now(), fraction);
}

bool session_impl::lease_too_short_for_grant(double fraction, lease_ns headroom_until) const noexcept {
    return lease_->too_short_for_grant(plat_->boot_now(), fraction, headroom_until);
}

bool session_impl::lease_lapsed_since(lease_ns since, double fraction) const noexcept {
    return lease_->lapsed_since(since, plat_->boot_now(), fraction);
}

lease_ns session_impl::lease_handover_at() const noexcept { return lease_->earliest_expiry(); }

std::uint64_t session_impl::lease_register(double fraction, std::string node, std::function<void()> on_gone) {
    const bool first = held_.empty();
    ++lease_fractions_[fraction];
    lease_->set_watch_fraction(lease_fractions_.begin()->first);
    const auto id = next_id_++;
    held_.emplace(id, held_node{fraction, std::move(node), std::move(on_gone), nullptr, false});
    // The first lock: heartbeats from now on, the first one when a steady one would be due (at
    // once if that has passed): its reply then comes while the lease still runs whenever the
    // steady state's would (session_lease::first_heartbeat_at).
    if (first && state() == session_state::connected && lease_->timeout() > 0) {
        const lease_ns now = plat_->boot_now();
        const lease_ns at = lease_->first_heartbeat_at(now, lease_->last_commit_send());
        if (at <= now)
            arm_heartbeat(true, true);
        else
            schedule_heartbeat(at);
    }
    arm_lease_timer();
    return id;
}

void session_impl::lease_unregister(std::uint64_t id) {
    auto h = held_.find(id);
    if (h == held_.end()) return;
    if (h->second.suspended) {
        suspended_.erase(id);
    } else {
        auto it = lease_fractions_.find(h->second.fraction);
        if (it != lease_fractions_.end() && --it->second == 0) lease_fractions_.erase(it);
    }
    held_.erase(h);
    lease_->set_watch_fraction(lease_fractions_.empty() ? 0 : lease_fractions_.begin()->first);
}

void session_impl::lease_suspend(std::uint64_t id, std::function<void(lease_ns)> on_commit) {
    auto h = held_.find(id);
    if (h == held_.end() || h->second.suspended) return;
    auto it = lease_fractions_.find(h->second.fraction);
    if (it != lease_fractions_.end() && --it->second == 0) lease_fractions_.erase(it);
    lease_->set_watch_fraction(lease_fractions_.empty() ? 0 : lease_fractions_.begin()->first);
    h->second.suspended = true;
    h->second.on_commit = std::move(on_commit);
    suspended_.insert(id);
}

void session_impl::lease_resume(std::uint64_t id) {
    auto h = held_.find(id);
    if (h == held_.end() || !h->second.suspended) return;
    h->second.suspended = false;
    h->second.on_commit = nullptr;
    suspended_.erase(id);
    ++lease_fractions_[h->second.fraction];
    lease_->set_watch_fraction(lease_fractions_.begin()->first);
    arm_lease_timer();
}

void session_impl::renew_lease(zk_handler h, const std::string& node) {
    // A multi holding one check: a write, so the leader proposes it and a quorum logs it before
    // the reply (a sync would be answered by a leader cut off from its quorum). A check needs
    // READ on its node: an acquire checks its own, which it created.
    multi(transaction{}.check(node.empty() ? std::string("/") : node, -1).ops(), std::move(h), n_renewal);
}

std::uint64_t session_impl::on_lease_lapse(double fraction, std::function<void()> fn) {
    if (state() == session_state::closed || state() == session_state::expired) {
        fn();
        return 0;
    }
    auto id = next_id_++;
    lapse_waiters_.emplace(id, std::make_pair(fraction, std::move(fn)));
    arm_lease_timer();
    return id;
}

void session_impl::cancel_lease_lapse(std::uint64_t id) { lapse_waiters_.erase(id); }

void session_impl::fire_lapse_waiters(bool all) {
    for (auto it = lapse_waiters_.begin(); it != lapse_waiters_.end();) {
        if (all || lease_lapsed(it->second.first)) {
            auto fn = std::move(it->second.second);
            it = lapse_waiters_.erase(it);
            fn();
        } else {
            ++it;
        }
    }
}

void session_impl::arm_lease_timer() {
    // The earliest deadline in use: the smallest fraction's (lapse waiters included).
    std::optional<double> f;
    if (!lease_fractions_.empty()) f = lease_fractions_.begin()->first;
    for (auto& [id, w] : lapse_waiters_) f = f ? std::min(*f, w.first) : w.first;
    if (!f) {
        lease_timer_.cancel();
        return;
    }
    // One nanosecond past the deadline is "lapsed"; never spin on a deadline already gone. The
    // timer counts CLOCK_BOOTTIME, like the deadline: a suspend does not hold it back.
    const lease_ns now = plat_->boot_now();
    lease_ns at =
        std::max(session_lease::deadline(lease_->vouched(), lease_->timeout(), *f) + 1, now + 1'000'000);
    if (tap) at += std::chrono::duration_cast<std::chrono::nanoseconds>(tap->lease_timer_late()).count();
    if (lease_timer_.expiry_ns() > now && std::abs(lease_timer_.expiry_ns() - at) < 100'000) return;
    lease_timer_.expires_at_boot(at);
    lease_timer_.async_wait([w = weak_from_this()](error_code ec) {
        if (ec) return;
        if (auto s = w.lock()) s->on_lease_timer();
    });
}

void session_impl::check_lease() { on_lease_timer(); }

bool session_impl::idle_and_cold() const noexcept {
    // session_options::keep_lease_warm = false, nothing held, no acquire in progress (each
    // registers as a listener), no write in flight (a grant may come at its reply)
    return !opts_.keep_lease_warm && held_.empty() && listeners_.empty() &&
           !(handle_ && handle_->write_in_flight());
}

void session_impl::on_lease_timer() {
    if (state() == session_state::closed) return;
    // Lease locks whose lease lapsed report their loss. Only a lapse of the smallest fraction in
    // use can end one: now, or revealed since the last look by a renewal that came after the
    // deadline (a gap). The timer is armed for that deadline, and the heartbeats move it on: a
    // turn that finds neither tells no listener, so holding costs no work per held lock.
    const lease_ns now = plat_->boot_now();
    if (!lease_fractions_.empty() &&
        (lease_->lapsed(now, lease_fractions_.begin()->first) || lease_->lapse_since(lease_checked_at_) != 0))
        notify(session_event::lease_check);
    lease_checked_at_ = now;
    fire_lapse_waiters(false);
    arm_lease_timer();
}

void session_impl::arm_heartbeat(bool now, bool restart) {
    const lease_ns t = lease_->timeout();
    if (t <= 0 || state() == session_state::closed) return;
    if (now && state() == session_state::connected) send_heartbeat();
    if (heartbeat_armed_ && !now && !restart) return;
    // Holding: every period. Holding nothing: a touch a period after the last send, whatever it
    // was, so that the session's sends stay at most a period apart (session_lease::next_touch_at);
    // and while a write is in flight (an acquire's create, a renewal: a grant may come at its
    // reply), a heartbeat a period after the last write (session_lease::next_heartbeat_at).
    const lease_ns now_t = plat_->boot_now();
    if (!held_.empty()) return schedule_heartbeat(now_t + session_lease::heartbeat_interval(t));
    if (idle_and_cold()) return; // (add_listener arms it again)
    lease_ns at = session_lease::next_touch_at(lease_->last_send(), now_t, t);
    if (handle_ && handle_->write_in_flight())
        at = std::min(at, session_lease::next_heartbeat_at(lease_->last_commit_send(), now_t, t));
    schedule_heartbeat(at);
}

void session_impl::schedule_heartbeat(lease_ns at) {
    heartbeat_due_ = at;
    // A timer armed no later than `at` stays armed: when it fires before heartbeat_due_, it is
    // armed again for it (below). A session that takes and releases a lock in a loop moves the
    // heartbeat later at each grant (first_heartbeat_at), and arming the timer again would cost
    // a timerfd_settime, an epoll_ctl and a cancelled wait per lock cycle; this costs about a
    // wake-up per heartbeat period (a period after the last commit sent). The heartbeat goes at
    // heartbeat_due_ either way.
    if (heartbeat_armed_ && heartbeat_timer_.expiry_ns() <= at) return;
    arm_heartbeat_timer(at);
}

void session_impl::arm_heartbeat_timer(lease_ns at) {
    heartbeat_armed_ = true;
    heartbeat_timer_arms_.fetch_add(1, std::memory_order_relaxed);
    heartbeat_timer_.expires_at_boot(at);
    heartbeat_timer_.async_wait([w = weak_from_this()](error_code ec) {
        if (ec) return;
        auto s = w.lock();
        if (!s) return;
        // (moved later since it was armed: wait on)
        if (s->plat_->boot_now() < s->heartbeat_due_) return s->arm_heartbeat_timer(s->heartbeat_due_);
        s->heartbeat_armed_ = false;
        // (not connected: the next connection's event re-arms it)
        if (s->state() == session_state::connected) s->arm_heartbeat(true);
    });
}

void session_impl::send_heartbeat() {
    if (!handle_ || heartbeats_in_flight_ >= 8) return;
    auto w = weak_from_this();
    if (held_.empty() && handle_->write_in_flight() &&
        plat_->boot_now() - lease_->last_commit_send() >=
            session_lease::heartbeat_interval(lease_->timeout())) {
        // Nothing held, but a write has been in flight for a period (a slow reply to an acquire's
        // create or renewal, at which a grant may come): a heartbeat, as if a lock were held, so
        // that the lease does not wait a round trip after that grant for its next commit
        // (docs/lease.md, "Liveness"). A multi holding one check of "/", as renew_lease sends.
        ++heartbeats_in_flight_;
        multi(transaction{}.check("/", -1).ops(), zk_handler([w](zk_result) {
                  if (auto s = w.lock()) --s->heartbeats_in_flight_;
              }),
              n_heartbeat);
        return;
    }
    if (held_.empty()) {
        // Nothing held: a touch, only when nothing else was sent for a period, so that the
        // session's sends stay at most a period apart (session_lease::next_touch_at): a later
        // grant's commit then finds evidence (b) as a heartbeat does. A read: the server the
        // session is connected to answers it, and the C client sends no pings of its own while
        // these go (the C client's pings, every T/3, are too sparse and cannot be seen).
        if (idle_and_cold()) return;
        if (!session_lease::touch_due(lease_->last_send(), plat_->boot_now(), lease_->timeout())) return;
        ++heartbeats_in_flight_;
        zk_handler h([w](zk_result) {
            if (auto s = w.lock()) --s->heartbeats_in_flight_;
        });
        send(make_request(zk_op::exists, "/"), std::move(h), &n_touch);
        return;
    }
    // A lock is held: a multi that checks a slice of at most heartbeat_checks held nodes, taken
    // in turn from a cursor over held_, so that neither its size nor its cost grows with what the
    // session holds (a multi that checked every held node passed the server's jute.maxbuffer,
    // 1 MiB, at about 12,000 held locks, and the server dropped the connection every period).
    // It is a write: the leader proposes it and a quorum logs it before the reply, so only a
    // leader that still leads with a quorum answers it (a deposed or isolated one cannot); and a
    // check that fails names a node that is gone: each held node is checked at least once every
    // ceil(N / heartbeat_checks) periods (docs/lease.md, "A deleted node").
    transaction checks;
    std::vector<std::string> nodes;
    nodes.reserve(std::min(held_.size(), heartbeat_checks));
    auto it = held_.upper_bound(heartbeat_cursor_);
    for (std::size_t seen = 0; seen < held_.size() && nodes.size() < heartbeat_checks; ++seen, ++it) {
        if (it == held_.end()) it = held_.begin();
        heartbeat_cursor_ = it->first;
        // (two holders of one node, an in-process hand-off's: one check)
        if (std::find(nodes.begin(), nodes.end(), it->second.node) == nodes.end())
            nodes.push_back(it->second.node);
    }
    for (auto& n : nodes) checks.check(n, -1);
    ++heartbeats_in_flight_;
    heartbeat_checks_sent_.fetch_add(nodes.size(), std::memory_order_relaxed);
    const lease_ns sent = plat_->boot_now();
    multi(checks.ops(), zk_handler([w, nodes = std::move(nodes), sent](zk_result r) {
              auto s = w.lock();
              if (!s) return;
              --s->heartbeats_in_flight_;
              // Suspended locks hear of every heartbeat the server answered (a commit of this
              // session, sent at `sent`): each may then read its node (held_lock::on_commit).
              // (a pass over the suspended ones only, and only while there are some; collected
              // first: a callback may regain, resume and so change suspended_)
              if (is_server_reply(r.rc) && !s->suspended_.empty()) {
                  std::vector<std::function<void(lease_ns)>> fns;
                  fns.reserve(s->suspended_.size());
                  for (auto id : s->suspended_)
                      if (auto h = s->held_.find(id); h != s->held_.end() && h->second.on_commit)
                          fns.push_back(h->second.on_commit);
                  for (auto& fn : fns) fn(sent);
              }
              if (r.rc != ZNONODE) return;
              std::vector<const std::string*> gone;
              for (std::size_t i = 0; i < r.multi.size() && i < nodes.size(); ++i)
                  if (r.multi[i].rc == ZNONODE) gone.push_back(&nodes[i]);
              if (gone.empty()) return;
              // (the holders' on_gone unregister them: collect first; a pass over held_, only
              // when a node was found deleted)
              std::vector<std::function<void()>> fns;
              for (auto& [id, n] : s->held_)
                  for (const auto* g : gone)
                      if (n.node == *g) fns.push_back(n.on_gone);
              for (auto& fn : fns) fn();
              if (!s->held_.empty()) s->send_heartbeat(); // the others' lease, at once
          }),
          n_heartbeat);
}

} // namespace zklock::detail
