// The counting semaphore: an internal lock serialises the lease takers; only its holder watches
// the leases, so a released lease wakes one client. The lease's protocol is a sans-io state
// machine (src/protocol/semaphore_fsm.hpp); this file is its driver: the internal lock, the
// requests, the watch, the waits, the deadline and cancellation.
#include <zklock/path.hpp>
#include <zklock/semaphore.hpp>

#include "recipes/held_lock.hpp"
#include "recipes/lease_grant.hpp"
#include "protocol/protocol.hpp"
#include "protocol/semaphore_fsm.hpp"
#include "session/session_impl.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/bind_executor.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/use_awaitable.hpp>

namespace zklock::detail {
namespace {

using asio::use_awaitable;
using clock = std::chrono::steady_clock;

/// start_acquire as an Asio operation, with the given cancellation slot.
template <class Token>
auto async_acquire_internal(std::shared_ptr<session_impl> s, acquire_request r, asio::cancellation_slot slot,
                            Token&& token) {
    return asio::async_initiate<Token, void(error_code, guard)>(
        [](auto h, std::shared_ptr<session_impl> s, acquire_request r, asio::cancellation_slot slot) {
            start_acquire(s, std::move(r),
                          asio::any_completion_handler<void(error_code, guard)>(
                              asio::bind_cancellation_slot(slot, std::move(h))));
        },
        token, std::move(s), std::move(r), slot);
}

class lease_op final : public session_listener, public std::enable_shared_from_this<lease_op> {
public:
    lease_op(std::shared_ptr<session_impl> s, std::string path, int n, std::string data,
             std::optional<clock::time_point> deadline, pending<void(error_code, guard)> h)
        : s_(std::move(s)), path_(std::move(path)), n_(n), data_(std::move(data)), deadline_(deadline),
          handler_(std::move(h)), wake_(s_->plat(), s_->strand()), deadline_timer_(s_->plat(), s_->strand()),
          grace_timer_(s_->plat(), s_->strand()) {}

    std::shared_ptr<const acl> node_acl_; // null: open
    bool try_only_ = false;               // async_try_acquire: errc::lock_busy instead of waiting

    static void start(std::shared_ptr<lease_op> op) {
        op->handler_.on_cancel(
            [w = op->weak_from_this(), strand = op->s_->strand()](asio::cancellation_type t) {
                asio::post(strand, [w, t] {
                    if (auto o = w.lock()) {
                        o->cancelled_ = true;
                        o->inner_.emit(t);
                        o->stop_soon();
                    }
                });
            });
        auto& strand = op->s_->strand();
        if (op->deadline_ && *op->deadline_ != clock::time_point::max()) {
            op->deadline_timer_.expires_at(*op->deadline_);
            op->deadline_timer_.async_wait([w = op->weak_from_this()](error_code ec) {
                if (auto o = w.lock(); o && !ec) o->stop_soon();
            });
        }
        // An exception must not escape into the user's io_context::run() nor drop the handler.
        asio::co_spawn(strand, run(op), [op](std::exception_ptr e) {
            if (!e) return;
            if (!op->lease_node_.empty()) op->s_->delete_in_background(op->lease_node_);
            op->internal_.release_in_background();
            op->s_->remove_listener(op->listener_id_);
            op->deadline_timer_.cancel();
            op->grace_timer_.cancel();
            if (op->handler_) op->handler_.complete(errc::internal_error, guard{});
        });
    }

    void on_session_event(session_event e) override {
        if (e == session_event::expired)
            fatal_ = s_->end_reason();
        else if (e == session_event::closed)
            fatal_ = asio::error::operation_aborted;
        else if (e != session_event::reconnected && e != session_event::state_changed)
            return;
        wake_.cancel();
    }

private:
    /// The deadline passed, or a cancel came: as in the mutex's acquire, the user's handler
    /// completes at most `grace` later even if the server sits on a request; the coroutine goes
    /// on in the background and lets go of whatever it gets (finish knows: handler_ is empty).
    static constexpr std::chrono::milliseconds grace{40};
    void stop_soon() {
        wake_.cancel();
        if (!handler_ || grace_armed_) return;
        grace_armed_ = true;
        grace_timer_.expires_after(grace);
        grace_timer_.async_wait([w = weak_from_this()](error_code ec) {
            auto o = w.lock();
            if (!o || ec || !o->handler_) return;
            o->handler_.complete(o->reason(), guard{});
        });
    }
    bool stop() const {
        return cancelled_ || fatal_ || (deadline_ && s_->plat()->steady_now() >= *deadline_);
    }
    error_code reason() const {
        if (fatal_) return fatal_;
        return cancelled_ ? error_code(asio::error::operation_aborted) : error_code(errc::acquire_timeout);
    }
    /// The error for a failed request: the session's end takes precedence over its symptoms
    /// (as in the mutex: the end can reach a request before its event reaches us).
    error_code fail_code(int rc) const {
        if (fatal_) return fatal_;
        if (rc == ZCLOSING || s_->state() == session_state::closed) return asio::error::operation_aborted;
        if (rc == ZSESSIONEXPIRED || rc == ZINVALIDSTATE) return errc::session_expired;
        return error_code(rc, zookeeper_category());
    }

    /// A watch on the leases' listing: it wakes the waiter to count again.
    std::uint64_t watch_leases() {
        return s_->add_watch([w = weak_from_this()](int) {
            if (auto o = w.lock()) {
                o->recheck_ = true;
                o->wake_.cancel();
            }
        });
    }

    /// Lets go of what we hold (our lease unless granted, the internal lock) and completes.
    asio::awaitable<void> finish(error_code ec, guard lease = {}) {
        if (!lease && !lease_node_.empty() && s_->state() == session_state::connected) {
            auto r = co_await s_->async_remove(lease_node_, use_awaitable);
            if (r.rc != ZOK && r.rc != ZNONODE) s_->delete_in_background(lease_node_);
        } else if (!lease && !lease_node_.empty()) {
            s_->delete_in_background(lease_node_);
        }
        if (!lease && made_leases_) {
            // We made "<path>/leases" (or may have) and hold no lease in it: the server never
            // reaps a container that never had a child, so it goes (after our lease's delete,
            // if any). If a lease is in it by then, the server refuses and it is theirs.
            s_->delete_unused_path_in_background(path_ + "/leases");
        }
        internal_.release_in_background(); // (not awaited: a partition must not hold up the caller)
        s_->remove_listener(listener_id_);
        deadline_timer_.cancel();
        grace_timer_.cancel();
        if (handler_)
            handler_.complete(ec, std::move(lease));
        else if (lease.owns_lock())
            lease.release_in_background(); // the user was told it timed out: let go
    }

    /// Waits on wake_ (the deadline, a cancel, a watch, a session event) until `done`.
    template <class Done>
    asio::awaitable<void> wait_until(Done done) {
        while (!done()) {
            wake_.expires_at(deadline_ ? *deadline_ : clock::time_point::max());
            co_await wake_.async_wait(asio::as_tuple(use_awaitable));
        }
    }

    /// The machine's result of a create_and_list.
    static semaphore_reply made_of(const zk_result& r) {
        semaphore_reply m;
        m.result = outcome_of(r.rc);
        m.rc = r.rc;
        m.path = r.path;
        m.czxid = r.stat.czxid;
        m.listed = outcome_of(r.list_rc);
        m.list_rc = r.list_rc;
        m.children = r.children;
        return m;
    }
    static semaphore_reply reply_of(zk_result r) {
        semaphore_reply m;
        m.result = outcome_of(r.rc);
        m.rc = r.rc;
        m.data = std::move(r.data);
        m.children = std::move(r.children);
        return m;
    }
    static outcome outcome_of(int rc) {
        if (rc == ZOK) return outcome::ok;
        if (rc == ZNONODE) return outcome::no_node;
        if (rc == ZCONNECTIONLOSS || rc == ZOPERATIONTIMEOUT) return outcome::connection;
        return outcome::other;
    }

    /// Performs one action of the lease's machine (src/protocol/semaphore_fsm.hpp) and returns
    /// its result. The leases' watch (wid_) lasts through `wait` and `check_lease` and ends at any
    /// other action.
    asio::awaitable<semaphore_input> perform(semaphore_fsm& m, const semaphore_action& a,
                                             lease_ns& headroom_until) {
        auto& s = *s_;
        if (a.what != semaphore_action::wait && a.what != semaphore_action::check_lease) end_watch(a);
        const std::string leases = path_ + "/leases";
        semaphore_input in;
        switch (a.what) {
        case semaphore_action::flight: {
            // N, the path's source of truth, and our lease, in one flight: the server runs a
            // session's requests in order, so the read of N is answered first, and a lease made
            // under another N is deleted (finish) before anyone can count it against theirs.
            auto read = std::make_shared<std::optional<zk_result>>();
            auto made = std::make_shared<std::optional<zk_result>>();
            s.get_data(leases, 0, zk_handler([read](zk_result r) { *read = std::move(r); }));
            // The path's children ride in the same flight (one path, one lock).
            s.create_and_list(a.node, data_, ZOO_EPHEMERAL_SEQUENTIAL, path_,
                              zk_handler([made](zk_result r) { *made = std::move(r); }), node_acl_);
            // ... and the first listing of the leases, with its watch: if all went well, it is
            // the count our lease is in.
            recheck_ = false;
            wid_ = watch_leases();
            zk_result first = co_await s.async_get_children_watch(leases, wid_, use_awaitable);
            wid_armed_ = first.rc == ZOK;
            // Answered before the listing, so their completions have run: unless a request was
            // refused before it was sent, or the handle closed, whose completions may come in
            // another order. A create with no result may have been applied (as on a connection loss).
            if (*made) {
                in.made = made_of(**made);
            } else {
                in.made.result = outcome::connection;
                in.made.rc = ZCONNECTIONLOSS;
            }
            in.read_answered = read->has_value();
            if (*read) in.read = reply_of(std::move(**read));
            in.listing = reply_of(std::move(first));
            break;
        }
        case semaphore_action::make_leases: {
            auto r =
                co_await s.async_create(leases, std::to_string(n_), ZOO_CONTAINER, use_awaitable, node_acl_);
            in.made.result = outcome_of(r.rc);
            in.made.rc = r.rc;
            in.made.exists = r.rc == ZNODEEXISTS;
            // (a lost reply may have made it: counted as made, so that a round that ends
            // without a lease deletes it)
            if (r.rc == ZOK || r.rc == ZCONNECTIONLOSS || r.rc == ZOPERATIONTIMEOUT) made_leases_ = true;
            break;
        }
        case semaphore_action::read_n:
            in.read = reply_of(co_await s.async_get_data(leases, 0, use_awaitable));
            break;
        case semaphore_action::create: {
            auto r = co_await s.async_create_and_list(a.node, data_, ZOO_EPHEMERAL_SEQUENTIAL, path_,
                                                      use_awaitable, node_acl_);
            in.made = made_of(r);
            break;
        }
        case semaphore_action::wait_connected: {
            // Waiting to count again also ends when the leases' watch fires or the internal lock is
            // lost; waiting to list the path again, only with the connection (or a stop).
            const bool counting = m.current() == semaphore_fsm::state::line_waiting;
            co_await wait_until([&] {
                return stop() || (counting && (internal_lost_ || recheck_)) ||
                       s_->state() == session_state::connected;
            });
            break;
        }
        case semaphore_action::list_path:
            in.listing = reply_of(co_await s.async_get_children(path_, use_awaitable));
            break;
        case semaphore_action::list_for_guid:
            // The barrier: a write in the same flight, ahead of the listing (as the mutex's
            // recovery): the server orders it after our lost create, so the listing sees it.
            s.renew_lease(zk_handler([](zk_result) {}), leases);
            in.listing = reply_of(co_await s.async_get_children(leases, use_awaitable));
            break;
        case semaphore_action::read_node: {
            auto e = co_await s.async_exists(a.node, use_awaitable);
            in.read.result = outcome_of(e.rc);
            in.read.rc = e.rc;
            in.read.owner = e.stat.ephemeralOwner;
            in.read.czxid = e.stat.czxid;
            in.session = s.session_id();
            break;
        }
        case semaphore_action::list_leases: {
            recheck_ = false;
            wid_ = watch_leases();
            auto r = co_await s.async_get_children_watch(leases, wid_, use_awaitable);
            wid_armed_ = r.rc == ZOK;
            in.listing = reply_of(std::move(r));
            break;
        }
        case semaphore_action::wait:
            // One wait: the leases' watch, a session event (a reconnect: count again), a cancel,
            // the deadline or the internal lock's loss ends it (each cancels wake_).
            if (!recheck_ && !stop() && !internal_lost_) {
                wake_.expires_at(deadline_ ? *deadline_ : clock::time_point::max());
                co_await wake_.async_wait(asio::as_tuple(use_awaitable));
            }
            break;
        case semaphore_action::check_lease:
            // The lease must vouch for the session at the grant, with room for the first
            // heartbeat (lease_for_grant: a renewal first if not; as the mutex's).
            in.rc = co_await lease_for_grant(s, s.options().loss, headroom_until, m.node());
            if (in.rc == lease_check_denied_rc) in.rc = semaphore_codes::check_denied;
            break;
        case semaphore_action::grant:
        case semaphore_action::fail:
        case semaphore_action::restart:
            break;
        }
        in.stop = stop();
        in.internal_lost = internal_lost_ || internal_.is_lost();
        co_return in;
    }

    /// Ends the leases' watch of the machine's last listing, removing it from the server if the
    /// machine says so (semaphore_action::unwatch_at_server).
    void end_watch(const semaphore_action& a) {
        if (wid_ == 0) return;
        s_->drop_watch(std::exchange(wid_, 0), wid_armed_ && a.unwatch_at_server);
        wid_armed_ = false;
    }

    error_code failure_code(const semaphore_action& a) const {
        switch (a.why) {
        case semaphore_action::stop:
            return reason();
        case semaphore_action::request_failed:
            return fail_code(a.rc);
        case semaphore_action::internal_error:
            return errc::internal_error;
        case semaphore_action::size_mismatch:
            return errc::semaphore_size_mismatch;
        case semaphore_action::path_used_by_lock:
            return errc::path_used_by_lock;
        case semaphore_action::node_deleted:
            return errc::lock_node_deleted;
        case semaphore_action::busy:
            return errc::lock_busy;
        case semaphore_action::lease_check_denied:
            return errc::lease_check_denied;
        case semaphore_action::none:
            break;
        }
        return errc::internal_error;
    }

    static asio::awaitable<void> run(std::shared_ptr<lease_op> self) {
        auto& op = *self;
        auto& s = *op.s_;
        op.listener_id_ = s.add_listener(self);
        if (op.n_ < 1) co_return co_await op.finish(errc::invalid_max_leases);

        for (;;) { // a round; a round starts over when the internal lock is lost while we wait
            if (op.stop()) co_return co_await op.finish(op.reason());
            // 1. the internal lock (Curator's "<path>/locks")
            acquire_request r;
            r.path = op.path_ + "/locks";
            r.node_data = op.data_;
            r.deadline = op.deadline_;
            r.try_only = op.try_only_; // (busy while another acquire waits for a lease)
            r.node_acl = op.node_acl_;
            auto [ec, lock] = co_await async_acquire_internal(op.s_, std::move(r), op.inner_.slot(),
                                                              asio::as_tuple(use_awaitable));
            if (ec) co_return co_await op.finish(ec);
            op.internal_ = std::move(lock);
            // Only the internal lock's holder may wait on the leases: if it is lost (expiry, deleted
            // by someone else), another waiter gets it and adds its lease, and both would wait on a
            // count that never drops to N. So its loss wakes us to start over.
            op.internal_lost_ = false;
            op.internal_.async_wait_lost(
                asio::bind_executor(s.strand(), [w = op.weak_from_this()](error_code why) {
                    auto o = w.lock();
                    if (!o || why == errc::lock_released || why == asio::error::operation_aborted) return;
                    o->internal_lost_ = true;
                    o->wake_.cancel();
                }));

            // 2. and 3.: the lease's machine (N, our lease, the count, the wait, the grant)
            const std::string leases = op.path_ + "/leases";
            const auto guid = s.new_guid();
            semaphore_fsm m({op.path_, leases + "/_c_" + guid + "-lease-", op.n_, op.try_only_, guid});
            lease_ns headroom_until = 0; // until when the grant seeks a lease with headroom (lease_for_grant)
            auto a = m.start();
            while (a.what != semaphore_action::grant && a.what != semaphore_action::fail &&
                   a.what != semaphore_action::restart) {
                auto in = co_await op.perform(m, a, headroom_until);
                a = m.resume(std::move(in));
            }
            op.end_watch(a);
            if (a.delete_by_guid) s.delete_by_guid_in_background(leases, guid); // (a create's fate unknown)
            op.lease_node_ = m.node(); // (finish deletes it unless granted)
            if (a.what == semaphore_action::fail) co_return co_await op.finish(op.failure_code(a));
            if (a.what == semaphore_action::grant) {
                auto h = std::make_shared<held_lock>(op.s_, op.lease_node_, m.sequence(), m.czxid(),
                                                     s.session_id());
                h->start();
                co_return co_await op.finish({}, guard(std::move(h)));
            }
            // Start over: our lease goes (if we know it: else the sweep above finds it), the
            // internal lock too (it is lost already).
            if (!op.lease_node_.empty() && s.state() == session_state::connected) {
                auto rm = co_await s.async_remove(op.lease_node_, use_awaitable);
                if (rm.rc != ZOK && rm.rc != ZNONODE) s.delete_in_background(op.lease_node_);
            } else if (!op.lease_node_.empty()) {
                s.delete_in_background(op.lease_node_);
            }
            op.lease_node_.clear();
            op.internal_.release_in_background();
        }
    }

    std::shared_ptr<session_impl> s_;
    std::string path_;
    int n_;
    std::string data_;
    std::optional<clock::time_point> deadline_;
    pending<void(error_code, guard)> handler_;
    timer wake_;
    timer deadline_timer_; // fires stop_soon() at the deadline
    timer grace_timer_;    // completes the handler `grace` after stop_soon()
    bool grace_armed_ = false;
    asio::cancellation_signal inner_;
    guard internal_;
    std::string lease_node_;
    std::uint64_t listener_id_ = 0;
    bool cancelled_ = false;
    bool recheck_ = false;
    bool internal_lost_ = false; // strand: the internal lock was lost while we waited
    bool made_leases_ = false;   // a round created "<path>/leases", or may have (its reply lost)
    std::uint64_t wid_ = 0;      // the leases' watch of the machine's last listing (0: none)
    bool wid_armed_ = false;     // ... which the server holds
    error_code fatal_;
};

} // namespace

void start_lease(const std::shared_ptr<session_impl>& s, std::string path, int max_leases, std::string data,
                 std::optional<std::chrono::steady_clock::time_point> deadline,
                 asio::any_completion_handler<void(error_code, guard)> handler, acl node_acl, bool try_only) {
    pending<void(error_code, guard)> p(std::move(handler), s->executor());
    if (auto ec = validate_lock_path(path)) return p.complete(ec, guard{});
    if (max_leases < 1) return p.complete(errc::invalid_max_leases, guard{});
    if (data.size() > max_node_data) return p.complete(errc::data_too_large, guard{});
    if (data.empty()) data = s->node_data(); // (the mutex's: zklock list shows who holds a lease)
    meter_acquire(*s, path, p);
    auto op =
        std::make_shared<lease_op>(s, std::move(path), max_leases, std::move(data), deadline, std::move(p));
    if (!node_acl.is_open()) op->node_acl_ = std::make_shared<const acl>(std::move(node_acl));
    op->try_only_ = try_only;
    lease_op::start(std::move(op));
}

} // namespace zklock::detail
