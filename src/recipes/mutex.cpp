// The exclusive lock recipe: an acquire is a coroutine on the session's strand.
#include <zklock/mutex.hpp>
#include <zklock/path.hpp>

#include "recipes/held_lock.hpp"
#include "recipes/lease_grant.hpp"
#include "protocol/acquire_fsm.hpp"
#include "protocol/unique_fsm.hpp"
#include "protocol/protocol.hpp"
#include "session/session_impl.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <unistd.h>

namespace zklock::detail {
namespace {

using clock = std::chrono::steady_clock;
using asio::use_awaitable;

bool is_connection_rc(int rc) { return rc == ZCONNECTIONLOSS || rc == ZOPERATIONTIMEOUT; }

error_code zk_error(int rc) { return error_code(rc, zookeeper_category()); }

class acquire_op final : public session_listener, public std::enable_shared_from_this<acquire_op> {
public:
    acquire_op(std::shared_ptr<session_impl> s, acquire_request r, pending<void(error_code, guard)> h)
        : s_(std::move(s)), req_(std::move(r)), handler_(std::move(h)), wake_(s_->plat(), s_->strand()),
          deadline_timer_(s_->plat(), s_->strand()), grace_timer_(s_->plat(), s_->strand()) {}

    /// How long after its deadline (or its cancellation) an acquire whose request the server does
    /// not answer completes anyway. Its node, if the late reply shows one, goes in the background.
    static constexpr std::chrono::milliseconds grace{40};

    static void start(std::shared_ptr<acquire_op> op) {
        op->handler_.on_cancel(
            [w = op->weak_from_this(), strand = op->s_->strand()](asio::cancellation_type) {
                asio::post(strand, [w] {
                    if (auto o = w.lock()) o->cancel();
                });
            });
        auto& strand = op->s_->strand();
        // A deadline that has already passed when the operation starts (async_acquire_for(0)) is
        // one try, as a try-acquire, whose "busy" is the deadline's acquire_timeout.
        if (op->req_.deadline && *op->req_.deadline <= op->s_->plat()->steady_now()) {
            op->req_.deadline.reset();
            op->req_.try_only = true;
            op->zero_deadline_ = true;
        }
        // An acquire on a session closed before it started says so (not a bare "canceled").
        if (op->s_->state() == session_state::closed) op->fatal_ = errc::session_closed;
        if (op->req_.deadline && *op->req_.deadline != clock::time_point::max()) {
            op->deadline_timer_.expires_at(*op->req_.deadline);
            op->deadline_timer_.async_wait([w = op->weak_from_this()](error_code ec) {
                if (auto o = w.lock(); o && !ec) o->stop_soon();
            });
        }
        // An exception (out of memory, a bug) must not escape into the user's io_context::run()
        // nor drop the user's handler: it completes it with errc::internal_error.
        asio::co_spawn(strand, run(op), [op](std::exception_ptr e) {
            if (e) op->on_exception();
        });
    }

    lock_family family() const {
        return req_.rw ? lock_family::rw : req_.latch ? lock_family::latch : lock_family::mutex;
    }
    /// The request's shape, for the decisions of acquire_steps.hpp.
    acquire_shape shape() const {
        acquire_shape a;
        a.family = family();
        a.dialect = req_.dialect;
        a.own_writer = req_.own_writer;
        a.try_only = req_.try_only;
        a.election = req_.election;
        a.own_naming = own_naming();
        a.watch_children = req_.strategy == lock_strategy::watch_children;
        return a;
    }
    /// An election's naming: a candidate of any other fails the campaign (other_naming).
    naming own_naming() const {
        return req_.latch                            ? naming::curator_latch
               : req_.dialect == lock_dialect::kazoo ? naming::kazoo
                                                     : naming::curator_lock;
    }

    void on_session_event(session_event e) override {
        switch (e) {
        case session_event::reconnected:
        case session_event::state_changed:
            recheck_ = true;
            break;
        case session_event::expired:
            fatal_ = s_->end_reason();
            session_ended_ = true;
            break;
        case session_event::closed:
            fatal_ = asio::error::operation_aborted;
            session_ended_ = true;
            break;
        case session_event::suspended:
        case session_event::lease_check:
            return; // ride it out; the watch survives
        }
        wake_.cancel();
    }

    void on_exception() {
        if (!my_node_.empty() && !session_gone())
            s_->delete_in_background(my_node_);
        else if (!guid_.empty() && !session_gone())
            s_->delete_by_guid_in_background(req_.path, guid_);
        finish(errc::internal_error);
    }

private:
    void cancel() {
        cancelled_ = true;
        stop_soon();
    }
    /// The deadline passed, or a cancel came: the coroutine stops at its next step (a parked wait
    /// wakes at once). A request the server does not answer could hold it for up to 2/3 T, so
    /// after `grace` the user's handler completes anyway; the coroutine goes on in the background
    /// and deletes whatever node the late reply shows (finish and grant know: handler_ is empty).
    void stop_soon() {
        wake_.cancel();
        if (!handler_ || grace_armed_) return;
        grace_armed_ = true;
        grace_timer_.expires_after(grace);
        grace_timer_.async_wait([w = weak_from_this()](error_code ec) {
            auto o = w.lock();
            if (!o || ec || !o->handler_) return;
            o->handler_.complete(o->fatal_       ? o->fatal_
                                 : o->cancelled_ ? error_code(asio::error::operation_aborted)
                                                 : error_code(errc::acquire_timeout),
                                 guard{});
        });
    }
    bool timed_out() const { return req_.deadline && s_->plat()->steady_now() >= *req_.deadline; }
    bool should_stop() const { return cancelled_ || fatal_ || timed_out(); }
    /// A try that found the lock taken: lock_busy, or acquire_timeout for a zero deadline.
    error_code busy_code() const {
        return zero_deadline_ ? make_error_code(errc::acquire_timeout) : make_error_code(errc::lock_busy);
    }
    error_code stop_reason() const {
        if (fatal_) return fatal_;
        if (cancelled_) return asio::error::operation_aborted;
        return errc::acquire_timeout;
    }
    /// The error for a failed request: the session's end takes precedence over its symptoms.
    error_code fail_code(int rc) const {
        if (fatal_) return fatal_;
        if (rc == ZCLOSING || s_->state() == session_state::closed) return asio::error::operation_aborted;
        if (rc == ZSESSIONEXPIRED || rc == ZINVALIDSTATE) return errc::session_expired;
        return zk_error(rc);
    }
    /// A create that kept failing with ZNONODE although we made the parents: under a chroot that
    /// does not exist, every path does (zklock creates lock paths, never the chroot).
    error_code no_parent_code() const {
        if (!parse_connect_string(s_->options().connect).chroot.empty()) return errc::chroot_missing;
        return fail_code(ZNONODE);
    }
    bool session_gone() const { return session_ended_ || s_->generation() != gen_; }

    /// Suspends until something happened: a watch fired or the session reconnected (recheck_),
    /// cancellation, the deadline, or the session ended.
    asio::awaitable<void> wait_event() {
        if (recheck_ || should_stop()) co_return;
        wake_.expires_at(req_.deadline ? *req_.deadline : clock::time_point::max());
        co_await wake_.async_wait(asio::as_tuple(use_awaitable));
    }

    /// Waits for a usable connection. False if the acquire must stop (stop_reason() says why).
    asio::awaitable<bool> wait_connected() {
        for (;;) {
            if (should_stop()) co_return false;
            switch (s_->state()) {
            case session_state::connected:
                co_return true;
            case session_state::disconnected:
                fatal_ = errc::not_connected;
                co_return false;
            case session_state::closed:
                fatal_ = asio::error::operation_aborted;
                session_ended_ = true;
                co_return false;
            default: // connecting, suspended, expired (renewing)
                // A try-acquire does not wait for a reconnect that may take any time:
                // it fails now, naming the connection.
                if (req_.try_only) {
                    fatal_ = zk_error(ZCONNECTIONLOSS);
                    co_return false;
                }
                break;
            }
            recheck_ = false;
            co_await wait_event();
        }
    }

    /// Before a grant under the lease policy: detail::lease_for_grant (ZOK, ZOPERATIONTIMEOUT to
    /// ask again, or the renewal's error).
    asio::awaitable<int> lease_fresh() {
        const int rc = co_await lease_for_grant(*s_, s_->policy_for(req_.loss), headroom_until_, my_node_);
        // (should_stop: ends it) The renewal checks our node: ZNONODE says someone deleted it.
        if (rc == lease_check_denied_rc) fatal_ = errc::lease_check_denied;
        if (rc == ZNONODE) fatal_ = errc::lock_node_deleted;
        co_return rc;
    }
    /// Creates the lock path and its ancestors as CONTAINER nodes.
    asio::awaitable<int> ensure_parents() {
        auto chain = ancestors(req_.path);
        chain.push_back(req_.path);
        for (const auto& p : chain) {
            // The lock path gets the lock's ACL (ZooKeeper checks creates and deletes of the lock
            // nodes against it); ancestors above it are shared namespace and stay open, or one
            // service's ACL would lock every other out of "/locks".
            // (A named variable, not a conditional inside the co_await: GCC 12 destroys such a
            // temporary twice in a coroutine, freeing the ACL under the acquire; valgrind saw it.)
            std::shared_ptr<const acl> node_acl;
            if (&p == &chain.back()) node_acl = req_.node_acl;
            auto r = co_await s_->async_create(p, std::string(), ZOO_CONTAINER, use_awaitable, node_acl);
            // (a lost reply may have made it: counted as made, so that a stop now deletes it)
            if (&p == &chain.back() && (r.rc == ZOK || is_connection_rc(r.rc))) made_path_ = true;
            if (r.rc != ZOK && r.rc != ZNODEEXISTS) co_return r.rc;
        }
        co_return ZOK;
    }

    /// Gives up: deletes our node (waiting for the delete when connected, so the caller sees
    /// no leftover; in the background otherwise) and completes with `ec`.
    asio::awaitable<void> abandon(error_code ec) {
        if (!my_node_.empty() && !session_gone()) {
            bool done = false;
            if (s_->state() == session_state::connected) {
                auto r = co_await s_->async_remove(my_node_, use_awaitable);
                done = r.rc == ZOK || r.rc == ZNONODE;
            }
            // (a fixed name, unique_node's <path>/lock, is deleted in the background only while
            // it is the incarnation we made: a first delete applied with its reply lost, then
            // someone else's create, and a retry by name would delete theirs)
            if (!done && !session_gone())
                s_->delete_in_background(my_node_, std::nullopt,
                                         req_.strategy == lock_strategy::unique_node ? czxid_ : 0);
        }
        finish(ec);
    }

    void finish(error_code ec, guard g = {}) {
        if (ec == zk_errc::no_auth || ec == zk_errc::invalid_acl) // (an error_code cannot carry the path)
            log_line("zklock: acquire of " + req_.path + " refused by the server: " + ec.message() +
                     " (the session's credentials and the ACL of the lock path and its parents)");
        s_->remove_listener(listener_id_);
        wake_.cancel();
        deadline_timer_.cancel();
        grace_timer_.cancel();
        if (made_path_ && !path_used_ && !session_gone()) {
            // We made the lock path and never created a node in it (we stopped in between, or
            // the create was refused): the server never reaps a container that never had a
            // child, so it goes, now or on the reconnect (a delete lost with the connection is
            // sent again). If someone's node is in it by then, the server refuses (ZNOTEMPTY) and
            // the path is theirs; if someone is about to create one, that create finds no parent
            // and makes it again.
            s_->delete_unused_path_in_background(req_.path);
        }
        if (handler_) handler_.complete(ec, std::move(g)); // (else: completed after the grace)
    }

    void grant() {
        if (!handler_) { // the user was told "timed out" or "cancelled" already: the node goes
            s_->delete_in_background(my_node_, std::nullopt,
                                     req_.strategy == lock_strategy::unique_node ? czxid_ : 0);
            return finish({});
        }
        auto parsed =
            parse_contender(last_segment(my_node_), family(), req_.dialect); // (none for unique_node)
        auto h =
            std::make_shared<held_lock>(s_, my_node_, parsed ? parsed->seq : 0, czxid_, s_->session_id());
        h->revocable = req_.revocable;
        h->policy_override = req_.loss;
        h->fixed_name = req_.strategy == lock_strategy::unique_node;
        // A write node granted here was the lowest contender (decide, or a predecessor's deletion
        // or marker that left it so): its release may say so to the waiter behind it. Only a node
        // that waited can have such a waiter: one that lists while this node is the lowest is
        // alone behind it, and needs no marker (so an uncontended cycle pays nothing for it).
        h->marks_release = !h->fixed_name && parsed && parsed->writer && waited_;
        h->start();
        if (h->revocable) h->arm_watch(); // watch our own node's data for revocation requests
        finish({}, guard(std::move(h)));
    }

    /// The seeds' first algorithm (lock_strategy::unique_node): its protocol is unique_fsm's
    /// (src/protocol/unique_fsm.hpp); this loop performs it.
    static asio::awaitable<void> run_unique(std::shared_ptr<acquire_op> self) {
        auto& op = *self;
        auto& s = *op.s_;
        // The node's data starts with a guid of this acquire: a create whose reply was lost is
        // recognised by it.
        const std::string guid = s.new_guid();
        const std::string data = guid + " " + (op.req_.node_data.empty() ? s.node_data() : op.req_.node_data);
        unique_fsm fsm(op.req_.path + "/lock", guid, op.req_.try_only);
        std::uint64_t wid = 0; // the watch of the last `read`, through `wait`
        for (auto a = fsm.start(op.should_stop());;) {
            if (wid != 0 && a.what != unique_action::wait)
                s.drop_watch(std::exchange(wid, 0), fsm.end_watch_at_server());
            if (fsm.owns_node()) {
                op.my_node_ = fsm.node();
                op.czxid_ = fsm.czxid();
            }
            if (a.what == unique_action::grant) {
                op.czxid_ = fsm.czxid();
                co_return op.grant();
            }
            if (a.what == unique_action::fail) {
                // A create lost with the connection may have made our node, and the connection is
                // still down: the guaranteed deletes read it once connected and delete it if its
                // data carries our guid (else it would hold the lock until the session ends).
                if (fsm.maybe_owns_node() && !op.session_gone())
                    s.delete_if_data_guid_in_background(fsm.node(), guid);
                acquire_action f;
                f.why = a.why;
                f.rc = a.rc;
                co_return co_await op.abandon(op.failure_code(f));
            }
            unique_input in;
            switch (a.what) {
            case unique_action::create: {
                auto r =
                    co_await s.async_create(fsm.node(), data, ZOO_EPHEMERAL, use_awaitable, op.req_.node_acl);
                if (r.rc == ZOK || r.rc == ZNODEEXISTS || is_connection_rc(r.rc)) op.path_used_ = true;
                in.result = outcome_of(r.rc);
                in.rc = r.rc;
                in.czxid = r.stat.czxid;
                break;
            }
            case unique_action::make_parents:
                in.rc = co_await op.ensure_parents();
                in.result = outcome_of(in.rc);
                break;
            case unique_action::list: {
                auto l = co_await s.async_get_children(op.req_.path, use_awaitable);
                in.result = outcome_of(l.rc);
                in.rc = l.rc;
                in.children = std::move(l.children);
                break;
            }
            case unique_action::read: {
                op.recheck_ = false;
                wid = s.add_watch([w = op.weak_from_this()](int) {
                    if (auto o = w.lock()) {
                        o->recheck_ = true;
                        o->wake_.cancel();
                    }
                });
                auto g = co_await s.async_get_data(fsm.node(), wid, use_awaitable);
                in.result = outcome_of(g.rc);
                in.rc = g.rc;
                in.data = std::move(g.data);
                in.czxid = g.stat.czxid;
                break;
            }
            case unique_action::read_own:
                in.result = outcome::connection; // (not connected: not asked)
                if (s.state() == session_state::connected) {
                    auto g = co_await s.async_get_data(fsm.node(), 0, use_awaitable);
                    in.result = outcome_of(g.rc);
                    in.data = std::move(g.data);
                }
                break;
            case unique_action::wait:
                co_await op.wait_event();
                break;
            case unique_action::wait_connected:
                in.ok = co_await op.wait_connected();
                break;
            case unique_action::check_lease:
                in.rc = co_await op.lease_fresh();
                in.result = outcome_of(in.rc);
                break;
            case unique_action::grant:
            case unique_action::fail:
                break;
            }
            in.stop = op.should_stop();
            a = fsm.resume(in);
        }
    }

    /// The error of a failed acquire_fsm (src/protocol/acquire_fsm.hpp).
    error_code failure_code(const acquire_action& a) const {
        switch (a.why) {
        case acquire_action::request_failed:
            return fail_code(a.rc);
        case acquire_action::request_failed_raw:
            return zk_error(a.rc);
        case acquire_action::no_parent:
            return no_parent_code();
        case acquire_action::busy:
            return busy_code();
        case acquire_action::create_retries_exhausted:
            return errc::create_retries_exhausted;
        case acquire_action::strategy_conflict:
            return errc::strategy_conflict;
        case acquire_action::path_used_by_semaphore:
            return errc::path_used_by_semaphore;
        case acquire_action::dialect_mixed:
            return errc::election_dialect_mixed;
        case acquire_action::sequence_overflow:
            return errc::sequence_overflow;
        case acquire_action::node_deleted:
            return fatal_ ? fatal_ : make_error_code(errc::lock_node_deleted);
        case acquire_action::stop:
        case acquire_action::none:
            break;
        }
        return stop_reason();
    }

    static outcome outcome_of(int rc) {
        if (rc == ZOK) return outcome::ok;
        if (rc == ZNONODE) return outcome::no_node;
        if (is_connection_rc(rc)) return outcome::connection;
        return outcome::other;
    }

    /// The watches of the last `watch` action end (a fired watch is only forgotten).
    void end_watches() {
        if (marker_watch_) s_->drop_watch(std::exchange(marker_watch_, 0), true, true); // may never fire
        // A marked predecessor went in the marker's transaction: its deletion event is on its way.
        if (pred_watch_) s_->drop_watch(std::exchange(pred_watch_, 0), pred_read_ok_ && !marked_);
    }

    /// Sets the watches of acquire_action::watch and reads the predecessor.
    asio::awaitable<acquire_input> watch_predecessor(const acquire_action& a) {
        auto& s = *s_;
        recheck_ = false;
        pred_deleted_ = false;
        marked_ = false;
        pred_watch_ = s.add_watch([w = weak_from_this()](int type) {
            if (auto o = w.lock()) {
                o->recheck_ = true;
                o->pred_deleted_ = type == ZOO_DELETED_EVENT;
                o->wake_.cancel();
            }
        });
        // Behind a deeper queue, the predecessor's release marker too: created (in the transaction
        // that deletes the predecessor) only if the predecessor was the lowest. Sent before the
        // read of the predecessor: if that read finds the node, the marker's watch was in place
        // before any release of it.
        if (a.watch_marker) {
            marker_watch_ = s.add_watch([w = weak_from_this()](int type) {
                if (auto o = w.lock(); o && type == ZOO_CREATED_EVENT) {
                    o->recheck_ = true;
                    o->marked_ = true;
                    o->wake_.cancel();
                }
            });
            s.exists_watch(release_marker(a.node), marker_watch_, zk_handler([](zk_result) {}));
        }
        acquire_input in;
        zk_result g;
        if (a.watch_children) { // the herd-prone variant: any change of the children wakes every waiter
            g = co_await s.async_get_children_watch(req_.path, pred_watch_, use_awaitable);
            in.children = std::move(g.children);
            in.cv = g.cversion;
        } else {
            // getData, not exists: exists on a vanished node would leave a creation watch behind.
            g = co_await s.async_get_data(a.node, pred_watch_, use_awaitable);
        }
        pred_read_ok_ = g.rc == ZOK;
        in.result = outcome_of(g.rc);
        in.rc = g.rc;
        in.marked = marked_;
        co_return in;
    }

    /// Performs one action of the acquire's state machine and returns its result.
    asio::awaitable<acquire_input> perform(const acquire_action& a, const std::string& data) {
        auto& s = *s_;
        acquire_input in;
        switch (a.what) {
        case acquire_action::wait_connected:
            in.ok = co_await wait_connected();
            break;
        case acquire_action::create_and_list: {
            auto r = co_await s.async_create_and_list(a.node, data, ZOO_EPHEMERAL_SEQUENTIAL, req_.path,
                                                      use_awaitable, req_.node_acl);
            if (r.rc == ZOK || is_connection_rc(r.rc)) path_used_ = true; // (a lost reply may have made it)
            in.result = outcome_of(r.rc);
            in.rc = r.rc;
            in.path = std::move(r.path);
            in.czxid = r.stat.czxid;
            in.listed = outcome_of(r.list_rc);
            if (r.list_rc == ZOK) {
                in.children = std::move(r.children);
                in.cv = r.cversion;
            }
            break;
        }
        case acquire_action::make_parents:
            in.rc = co_await ensure_parents();
            in.result = outcome_of(in.rc);
            break;
        case acquire_action::list:
        case acquire_action::list_leases: {
            // (A named variable, not a conditional inside the co_await: GCC 12 destroys such a
            // temporary twice in a coroutine.)
            std::string path = req_.path;
            if (a.what == acquire_action::list_leases) path += "/leases";
            // The barrier: a write in the same flight, ahead of the listing (acquire_action::barrier).
            if (a.barrier) s.renew_lease(zk_handler([](zk_result) {}), path);
            auto l = co_await s.async_get_children(path, use_awaitable);
            in.result = outcome_of(l.rc);
            in.rc = l.rc;
            in.children = std::move(l.children);
            in.cv = l.cversion;
            break;
        }
        case acquire_action::read_node: {
            auto e = co_await s.async_exists(a.node, use_awaitable);
            in.result = outcome_of(e.rc);
            in.rc = e.rc;
            in.owner = e.stat.ephemeralOwner;
            in.czxid = e.stat.czxid;
            in.session = s.session_id();
            break;
        }
        case acquire_action::watch:
            in = co_await watch_predecessor(a);
            break;
        case acquire_action::wait:
            co_await wait_event();
            in.pred_deleted = pred_deleted_;
            in.marked = marked_;
            break;
        case acquire_action::check_lease:
            if (a.by_marker) s.n_marked_grants.fetch_add(1, std::memory_order_relaxed);
            in.result = outcome_of(co_await lease_fresh());
            break;
        case acquire_action::grant:
        case acquire_action::fail:
            break;
        }
        in.stop = should_stop();
        co_return in;
    }

    static asio::awaitable<void> run(std::shared_ptr<acquire_op> self) {
        auto& op = *self;
        auto& s = *op.s_;
        op.listener_id_ = s.add_listener(self);
        if (!co_await op.wait_connected()) co_return op.finish(op.stop_reason());
        op.gen_ = s.generation();
        if (op.req_.strategy == lock_strategy::unique_node) co_return co_await run_unique(self);
        op.guid_ = guid_in_name(s.new_guid(), op.req_.dialect);
        const auto& data = op.req_.node_data.empty() && !op.req_.election ? s.node_data() : op.req_.node_data;
        // The protocol is acquire_fsm's (src/protocol/acquire_fsm.hpp); this loop performs it.
        acquire_fsm fsm(
            {op.req_.path,
             protected_node_prefix(op.req_.path, op.guid_, op.req_.dialect, op.family(), op.req_.reader),
             op.guid_, op.shape()});
        for (auto a = fsm.start(op.should_stop());;) {
            if (a.what != acquire_action::wait) op.end_watches();
            if (!op.session_gone()) {
                for (const auto& n : a.delete_nodes) s.delete_in_background(n);
                if (a.delete_by_guid) s.delete_by_guid_in_background(op.req_.path, op.guid_);
            }
            op.my_node_ = fsm.node();
            if (a.what == acquire_action::grant) {
                op.czxid_ = fsm.czxid();
                op.waited_ = fsm.waited();
                co_return op.grant();
            }
            if (a.what == acquire_action::fail) co_return co_await op.abandon(op.failure_code(a));
            a = fsm.resume(co_await op.perform(a, data));
        }
    }

    std::shared_ptr<session_impl> s_;
    acquire_request req_;
    pending<void(error_code, guard)> handler_;
    timer wake_;
    timer deadline_timer_;       // fires stop_soon() at the deadline
    bool zero_deadline_ = false; // a deadline already past at the start: one try
    timer grace_timer_;          // completes the handler `grace` after stop_soon()
    bool grace_armed_ = false;
    std::uint64_t listener_id_ = 0;
    std::uint64_t gen_ = 0;
    std::string guid_;
    std::string my_node_;
    std::int64_t czxid_ = 0;
    bool cancelled_ = false;
    bool recheck_ = false;
    bool pred_deleted_ = false;    // the watch that woke us was the predecessor's deletion
    bool marked_ = false;          // the predecessor's release marker was created
    bool waited_ = false;          // some listing put another contender before our node (grant)
    bool made_path_ = false;       // ensure_parents created the lock path itself, or may have
    bool path_used_ = false;       // a create of ours in it succeeded, or may have
    std::uint64_t pred_watch_ = 0; // the watches of the last acquire_action::watch (end_watches)
    std::uint64_t marker_watch_ = 0;
    bool pred_read_ok_ = false;   // ... whose read of the predecessor set its watch
    lease_ns headroom_until_ = 0; // lease_fresh: until when it seeks a lease with headroom (lease_for_grant)
    error_code fatal_;
    bool session_ended_ =
        false; // expired (for whatever end_reason) or closed: its nodes are not ours to delete
};

} // namespace

void start_node_acquire(const std::shared_ptr<session_impl>& s, acquire_request req,
                        asio::any_completion_handler<void(error_code, guard)> handler) {
    pending<void(error_code, guard)> p(std::move(handler), s->executor());
    if (auto ec = validate_lock_path(req.path)) return p.complete(ec, guard{});
    if (req.loss && req.loss->validate()) return p.complete(req.loss->validate(), guard{});
    if (req.node_data.size() > max_node_data) return p.complete(errc::data_too_large, guard{});
    if (req.metered) meter_acquire(*s, req.path, p);
    acquire_op::start(std::make_shared<acquire_op>(s, std::move(req), std::move(p)));
}

} // namespace zklock::detail
