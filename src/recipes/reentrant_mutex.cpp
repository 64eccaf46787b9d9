#include <zklock/reentrant_mutex.hpp>
#include <zklock/path.hpp>

#include "recipes/held_lock.hpp"

#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/bind_executor.hpp>
#include <boost/asio/post.hpp>

#include <map>

namespace zklock::detail {
namespace {

/// Per session: who holds (or is acquiring) which path. Lives on the session's strand.
struct reentrancy_table {
    /// One acquire of the owner waiting for the node, with its own deadline (a timer) if any.
    struct waiter {
        pending<void(error_code, guard)> p;
        std::unique_ptr<timer> deadline; // (destroyed with the waiter: cancelled)
    };
    struct entry {
        std::weak_ptr<held_lock> held;
        bool acquiring = false;
        bool trying = false; // the node acquire in flight is a try (async_try_acquire, or a deadline past)
        /// The owner's acquires waiting for the node (the first one and any that joined it):
        /// each can be cancelled, or reach its deadline, on its own; the node acquire stops when
        /// none is left.
        std::map<std::uint64_t, waiter> waiters;
        /// The last waiter to give up while the node is being acquired, and its error
        /// (operation_aborted, acquire_timeout): completed once that acquire has ended (and
        /// deleted its node).
        std::vector<std::pair<pending<void(error_code, guard)>, error_code>> leaving;
        std::unique_ptr<asio::cancellation_signal> cancel;
        bool cancelled_by_us = false;
        error_code busy; // a try's failure: lock_busy, or acquire_timeout for a deadline already past
        std::uint64_t try_id = 0; // the waiter whose try the node acquire in flight is
    };
    std::map<std::pair<std::string, std::uint64_t>, entry> entries;
    std::uint64_t next_id = 1;
};

using table_key = std::pair<std::string, std::uint64_t>;

/// Links a caller's cancellation to its place among the owner's waiters.
struct ticket {
    std::weak_ptr<reentrancy_table> table; // set once the acquire is queued
    table_key key;
    std::uint64_t id = 0;
    bool cancelled = false; // cancelled before it was queued
};

std::shared_ptr<reentrancy_table> table_of(session_impl& s) {
    // One table per session, created on first use (on the strand).
    static const std::uint64_t key = 0x7265656e74ULL; // "reent"
    auto& slot = s.extension(key);
    if (!slot) slot = std::make_shared<reentrancy_table>();
    return std::static_pointer_cast<reentrancy_table>(slot);
}

void acquire_node(const std::shared_ptr<session_impl>& s, const std::shared_ptr<reentrancy_table>& table,
                  const table_key& key, acquire_request req);

/// The node acquire of an owner completed (strand).
void on_node(const std::shared_ptr<session_impl>& s, const std::shared_ptr<reentrancy_table>& table,
             const table_key& key, const acquire_request& req, error_code ec, guard g) {
    auto it = table->entries.find(key);
    if (it == table->entries.end()) return g.release_in_background();
    auto& e = it->second;
    e.acquiring = false;
    auto signal = std::move(e.cancel); // (its slot was cleared before this handler ran)
    const bool we_cancelled = e.cancelled_by_us;
    e.cancelled_by_us = false;
    auto leaving = std::move(e.leaving);
    e.leaving.clear();
    if (e.waiters.empty() && g.owns_lock() && !g.is_lost()) {
        // Granted just as the last waiter gave up: delete the node first, then let it complete.
        table->entries.erase(it);
        return release_then(std::move(g), [leaving = std::move(leaving)]() mutable {
            for (auto& [w, why] : leaving) w.complete(why, guard{});
        });
    }
    for (auto& [w, why] : leaving) w.complete(why, guard{});
    if (e.waiters.empty()) { // everyone gave up meanwhile
        g.release_in_background();
        table->entries.erase(it);
        return;
    }
    const bool tried = std::exchange(e.trying, false);
    auto again = req;
    again.try_only = false; // (those left waiting did not ask for a try: they joined one)
    if (ec == asio::error::operation_aborted && we_cancelled && s->state() != session_state::closed)
        return acquire_node(s, table, key, again); // we cancelled it, and new acquires came
    if (ec && tried) {
        // The try's own waiter fails (lock_busy, or acquire_timeout for a deadline already past);
        // acquires of the owner that joined it meanwhile did not ask for a try: they go on
        // waiting, on a new node.
        if (auto mine = e.waiters.find(e.try_id); mine != e.waiters.end()) {
            auto w = std::move(mine->second);
            e.waiters.erase(mine);
            w.p.complete(ec == errc::lock_busy ? e.busy : ec, guard{});
        }
        if (e.waiters.empty()) {
            table->entries.erase(it);
            return;
        }
        if (s->state() != session_state::closed) return acquire_node(s, table, key, again);
    }
    auto waiters = std::move(e.waiters);
    e.waiters.clear();
    if (ec) {
        table->entries.erase(it);
        for (auto& [id, w] : waiters) w.p.complete(ec, guard{});
        return;
    }
    auto h = g.state();
    e.held = h;
    h->holds += static_cast<int>(waiters.size()) - 1;
    bool first = true;
    for (auto& [id, w] : waiters) {
        if (first)
            w.p.complete({}, std::move(g));
        else
            w.p.complete({}, guard(h));
        first = false;
    }
}

void acquire_node(const std::shared_ptr<session_impl>& s, const std::shared_ptr<reentrancy_table>& table,
                  const table_key& key, acquire_request req) {
    auto& e = table->entries[key];
    e.acquiring = true;
    e.trying = req.try_only;
    e.cancel = std::make_unique<asio::cancellation_signal>();
    auto slot = e.cancel->slot();
    auto strand = s->strand();
    auto copy = req;
    copy.metered = false;         // (the owner's acquires are counted one by one)
    copy.deadline = std::nullopt; // (each waiter has its own: leave())
    start_acquire(
        s, std::move(copy),
        asio::any_completion_handler<void(error_code, guard)>(asio::bind_cancellation_slot(
            slot, asio::bind_executor(strand, [s, table, key, req = std::move(req)](error_code ec, guard g) {
                on_node(s, table, key, req, ec, std::move(g));
            }))));
}

/// A waiter gives up (cancelled, or its deadline passed): it completes with `why` at once, or,
/// if it was the last one while the node is being acquired, once that acquire has ended (strand).
void leave(const std::shared_ptr<reentrancy_table>& table, const table_key& key, std::uint64_t id,
           error_code why) {
    auto it = table->entries.find(key);
    if (it == table->entries.end()) return;
    auto& e = it->second;
    auto wi = e.waiters.find(id);
    if (wi == e.waiters.end()) return;
    auto waiter = std::move(wi->second);
    e.waiters.erase(wi);
    if (e.waiters.empty() && e.acquiring && e.cancel) {
        e.leaving.emplace_back(std::move(waiter.p), why); // completed when the node acquire has ended
        e.cancelled_by_us = true;
        e.cancel->emit(asio::cancellation_type::terminal);
        return;
    }
    waiter.p.complete(why, guard{});
}

} // namespace

void start_reentrant_acquire(const std::shared_ptr<session_impl>& s, acquire_request req, std::uint64_t owner,
                             asio::any_completion_handler<void(error_code, guard)> handler) {
    pending<void(error_code, guard)> p(std::move(handler), s->executor());
    if (auto ec = validate_lock_path(req.path)) return p.complete(ec, guard{});
    if (req.metered) meter_acquire(*s, req.path, p);
    // The cancellation handler goes in now, before anything is posted, so that a cancellation
    // emitted at once is not lost; it and the code below run on the strand, in that order.
    auto t = std::make_shared<ticket>();
    p.on_cancel([t, strand = s->strand()](asio::cancellation_type) {
        asio::post(strand, [t] {
            auto table = t->table.lock();
            if (!table) {
                t->cancelled = true;
                return;
            }
            leave(table, t->key, t->id, asio::error::operation_aborted);
        });
    });
    asio::post(s->strand(), [s, req = std::move(req), owner, p = std::move(p), t]() mutable {
        auto table = table_of(*s);
        if (table->entries.size() > 64) // forget owners that hold nothing any more
            std::erase_if(table->entries, [](const auto& kv) {
                auto h = kv.second.held.lock();
                return !kv.second.acquiring && kv.second.waiters.empty() && kv.second.leaving.empty() &&
                       (!h || (h->st != held_lock::status::held && h->st != held_lock::status::suspended));
            });
        auto key = std::make_pair(req.path, owner);
        auto& e = table->entries[key];
        if (auto h = e.held.lock(); h && h->st == held_lock::status::held) {
            ++h->holds; // nested: no request to ZooKeeper
            return p.complete({}, guard(std::move(h)));
        } else if (h && h->st == held_lock::status::suspended) {
            // The owner's hold is suspended (its lease lapsed, its node kept): a nested acquire is
            // not granted (the owner was told its lock is lost), and a new node would queue behind
            // the owner's own. It fails with the loss; after a regain, nested acquires work again.
            return p.complete(h->reason(), guard{});
        }
        if (t->cancelled) return p.complete(asio::error::operation_aborted, guard{});
        // A deadline already past is one try, as for the mutex: errc::acquire_timeout if taken.
        const bool past = req.deadline && *req.deadline <= s->plat()->steady_now();
        const bool try_only = req.try_only || past;
        const error_code busy =
            req.try_only ? make_error_code(errc::lock_busy) : make_error_code(errc::acquire_timeout);
        // (the owner's own acquire is waiting: the lock is not free now)
        if (try_only && e.acquiring) return p.complete(busy, guard{});
        const auto id = table->next_id++;
        t->table = table;
        t->key = key;
        t->id = id;
        auto& w = e.waiters.emplace(id, reentrancy_table::waiter{std::move(p), nullptr}).first->second;
        if (req.deadline && !past && *req.deadline != std::chrono::steady_clock::time_point::max()) {
            w.deadline = std::make_unique<timer>(s->plat(), s->strand(), *req.deadline);
            w.deadline->async_wait([wt = std::weak_ptr<reentrancy_table>(table), key, id](error_code ec) {
                auto table = wt.lock();
                if (!ec && table) leave(table, key, id, errc::acquire_timeout);
            });
        }
        if (!e.acquiring) {
            e.busy = busy;
            e.try_id = try_only ? id : 0;
            req.try_only = try_only;
            acquire_node(s, table, key, std::move(req));
        }
    });
}

} // namespace zklock::detail
