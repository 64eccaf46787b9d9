// Leader election: a campaign is the fair lock's acquire (mutex.cpp) with the candidate's value as
// its node's data; proclaim is a write of its own node; async_leader and async_observe read the
// lowest node, the latter with one watch on it.
#include <zklock/election.hpp>
#include <zklock/mutex.hpp>
#include <zklock/path.hpp>

#include "recipes/held_lock.hpp"
#include "common/pending.hpp"
#include "protocol/protocol.hpp"
#include "session/session_impl.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/use_awaitable.hpp>

namespace zklock::detail {
namespace {

using asio::use_awaitable;
using clock = std::chrono::steady_clock;
using leader_handler = asio::any_completion_handler<void(error_code, std::optional<leader_info>)>;

bool is_connection_rc(int rc) { return rc == ZCONNECTIONLOSS || rc == ZOPERATIONTIMEOUT; }

/// async_leader and async_observe: a coroutine on the strand that reads the lowest candidate,
/// and (observe) watches it until it differs from what the caller last saw.
class leader_op final : public session_listener, public std::enable_shared_from_this<leader_op> {
public:
    leader_op(std::shared_ptr<session_impl> s, std::string path, bool observe,
              std::optional<leader_info> last, pending<void(error_code, std::optional<leader_info>)> h)
        : s_(std::move(s)), path_(std::move(path)), observe_(observe), last_(std::move(last)),
          handler_(std::move(h)), wake_(s_->plat(), s_->strand()) {}

    static void start(std::shared_ptr<leader_op> op) {
        op->handler_.on_cancel(
            [w = op->weak_from_this(), strand = op->s_->strand()](asio::cancellation_type) {
                asio::post(strand, [w] {
                    if (auto o = w.lock()) {
                        o->cancelled_ = true;
                        o->wake_.cancel();
                    }
                });
            });
        asio::co_spawn(op->s_->strand(), run(op), [op](std::exception_ptr e) {
            if (e) op->finish(errc::internal_error, std::nullopt);
        });
    }

    void on_session_event(session_event e) override {
        switch (e) {
        case session_event::suspended:
        case session_event::lease_check:
            return;
        case session_event::closed:
            fatal_ = asio::error::operation_aborted;
            break;
        default: // reconnected (a new session after an expiry too: its watches are gone), state_changed
            break;
        }
        recheck_ = true;
        wake_.cancel();
    }

private:
    bool should_stop() const { return cancelled_ || fatal_; }
    error_code stop_reason() const { return fatal_ ? fatal_ : error_code(asio::error::operation_aborted); }

    void finish(error_code ec, std::optional<leader_info> l) {
        if (listener_id_) s_->remove_listener(std::exchange(listener_id_, 0));
        wake_.cancel();
        if (handler_) handler_.complete(ec, std::move(l));
    }

    error_code fail_code(int rc) const {
        if (fatal_) return fatal_;
        if (rc == ZCLOSING || s_->state() == session_state::closed) return asio::error::operation_aborted;
        if (rc == ZSESSIONEXPIRED || rc == ZINVALIDSTATE) return errc::session_expired;
        return error_code(rc, zookeeper_category());
    }

    asio::awaitable<void> wait_event() {
        if (recheck_ || should_stop()) co_return;
        wake_.expires_at(clock::time_point::max());
        co_await wake_.async_wait(asio::as_tuple(use_awaitable));
    }

    /// Waits for a usable connection; false to stop (fatal_ or cancelled_ says why).
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
                co_return false;
            default: // connecting, suspended, making a new session after an expiry
                break;
            }
            recheck_ = false;
            co_await wait_event();
        }
    }

    std::uint64_t new_watch() {
        return s_->add_watch([w = weak_from_this()](int) {
            if (auto o = w.lock()) {
                o->recheck_ = true;
                o->wake_.cancel();
            }
        });
    }

    static asio::awaitable<void> run(std::shared_ptr<leader_op> self) {
        auto& op = *self;
        auto& s = *op.s_;
        op.listener_id_ = s.add_listener(self);
        for (;;) {
            if (!co_await op.wait_connected()) co_return op.finish(op.stop_reason(), std::nullopt);
            op.recheck_ = false;
            auto l = co_await s.async_get_children(op.path_, use_awaitable);
            if (is_connection_rc(l.rc)) continue;
            if (l.rc != ZOK && l.rc != ZNONODE) co_return op.finish(op.fail_code(l.rc), std::nullopt);
            std::optional<std::string> first;
            if (l.rc == ZOK) {
                auto sorted =
                    sorted_contenders(l.children, lock_dialect::curator, lock_family::mutex, l.cversion);
                if (!sorted.empty()) first = op.path_ + "/" + std::string(sorted.front().name);
            }
            if (!first) {
                // No candidate: none is the leader. Observing, wait for the first one: the one case
                // that watches the children (or, with no path at all, its creation).
                if (!op.observe_ || op.last_) co_return op.finish({}, std::nullopt);
                const auto wid = op.new_watch();
                zk_result w;
                if (l.rc == ZNONODE) {
                    w = co_await asio::async_initiate<const asio::use_awaitable_t<>&, void(zk_result)>(
                        [&](auto h) { s.exists_watch(op.path_, wid, zk_handler(std::move(h))); },
                        use_awaitable);
                    if (w.rc == ZNONODE)
                        w.rc = ZOK; // armed on the creation
                    else if (w.rc == ZOK)
                        op.recheck_ = true; // made meanwhile: list again
                } else {
                    w = co_await s.async_get_children_watch(op.path_, wid, use_awaitable);
                    if (w.rc == ZOK &&
                        sorted_contenders(w.children, lock_dialect::curator, lock_family::mutex, w.cversion)
                                .size() != 0)
                        op.recheck_ = true;
                    if (w.rc == ZNONODE) op.recheck_ = true;
                }
                if (w.rc == ZOK) co_await op.wait_event();
                s.drop_watch(wid, w.rc == ZOK);
                if (op.should_stop()) co_return op.finish(op.stop_reason(), std::nullopt);
                if (!is_connection_rc(w.rc) && w.rc != ZOK && w.rc != ZNONODE)
                    co_return op.finish(op.fail_code(w.rc), std::nullopt);
                continue;
            }
            const auto wid = op.observe_ ? op.new_watch() : 0;
            auto g = co_await s.async_get_data(*first, wid, use_awaitable);
            if (g.rc != ZOK) {
                if (wid) s.drop_watch(wid);
                if (g.rc == ZNONODE || is_connection_rc(g.rc)) continue; // gone meanwhile: list again
                co_return op.finish(op.fail_code(g.rc), std::nullopt);
            }
            leader_info now{std::move(g.data), *first, fencing_token(g.stat.czxid, 0), g.stat.ephemeralOwner};
            if (!op.observe_ || !op.last_ || *op.last_ != now) {
                if (wid) s.drop_watch(wid, true);
                co_return op.finish({}, std::move(now));
            }
            co_await op.wait_event(); // the leader's node changed or went, or the session did
            s.drop_watch(wid, true);
            if (op.should_stop()) co_return op.finish(op.stop_reason(), std::nullopt);
        }
    }

    std::shared_ptr<session_impl> s_;
    std::string path_;
    bool observe_;
    std::optional<leader_info> last_;
    pending<void(error_code, std::optional<leader_info>)> handler_;
    timer wake_;
    std::uint64_t listener_id_ = 0;
    bool recheck_ = false;
    bool cancelled_ = false;
    error_code fatal_;
};

} // namespace

void start_proclaim(const std::shared_ptr<held_lock>& h, std::string value,
                    asio::any_completion_handler<void(error_code)> handler) {
    auto s = h->session;
    pending<void(error_code)> p(std::move(handler), s->executor());
    if (value.size() > max_node_data) return p.complete(errc::data_too_large);
    asio::post(s->strand(), [h, s, p = std::move(p), value = std::move(value)]() mutable {
        // Known to be lost or released: nothing is sent (a paused leader's lease has lapsed).
        if (h->st != held_lock::status::held || h->is_lost_now()) return p.complete(errc::lock_lost);
        if (s->state() == session_state::closed) return p.complete(errc::session_closed);
        s->set_data(h->node, value, -1, zk_handler([p = std::move(p)](zk_result r) mutable {
                        if (r.rc == ZOK) return p.complete({});
                        if (r.rc == ZNONODE) return p.complete(errc::lock_lost);
                        p.complete(error_code(r.rc, zookeeper_category()));
                    }));
    });
}

void start_campaign(const std::shared_ptr<session_impl>& s, std::string path, const election_options& o,
                    std::string value, std::optional<std::chrono::steady_clock::time_point> deadline,
                    bool try_only, asio::any_completion_handler<void(error_code, leadership)> handler) {
    acquire_request req;
    req.path = std::move(path);
    req.node_data = std::move(value);
    req.deadline = deadline;
    req.try_only = try_only;
    req.dialect = o.dialect == election_dialect::kazoo ? lock_dialect::kazoo : lock_dialect::curator;
    req.latch = o.dialect == election_dialect::curator_latch;
    req.loss = o.loss;
    req.metered = true;
    req.election = true;
    if (!o.node_acl.is_open()) req.node_acl = std::make_shared<const acl>(o.node_acl);
    pending<void(error_code, leadership)> p(std::move(handler), s->executor());
    auto slot = p.slot(); // the acquire's cancellation is the campaign's
    start_node_acquire(s, std::move(req),
                       asio::bind_cancellation_slot(slot, [p = std::move(p)](error_code ec, guard g) mutable {
                           p.complete(ec, leadership(std::move(g)));
                       }));
}

void start_leader(const std::shared_ptr<session_impl>& s, std::string path, bool observe,
                  std::optional<leader_info> last_seen, leader_handler handler) {
    pending<void(error_code, std::optional<leader_info>)> p(std::move(handler), s->executor());
    if (auto ec = validate_lock_path(path)) return p.complete(ec, std::nullopt);
    if (s->state() == session_state::disconnected) return p.complete(errc::not_connected, std::nullopt);
    if (s->state() == session_state::closed) return p.complete(errc::session_closed, std::nullopt);
    leader_op::start(
        std::make_shared<leader_op>(s, std::move(path), observe, std::move(last_seen), std::move(p)));
}

} // namespace zklock::detail
