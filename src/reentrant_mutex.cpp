#include <zklock/reentrant_mutex.hpp>
#include <zklock/path.hpp>

#include "detail/held_lock.hpp"

#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/bind_executor.hpp>
#include <boost/asio/post.hpp>

#include <map>

namespace zklock::detail {
namespace {

/// Per session: who holds (or is acquiring) which path. Lives on the session's strand.
struct reentrancy_table {
    struct entry {
        std::weak_ptr<held_lock> held;
        bool acquiring = false;
        /// The owner's acquires waiting for the node (the first one and any that joined it):
        /// each can be cancelled on its own; the node acquire stops when none is left.
        std::map<std::uint64_t, pending<void(error_code, guard)>> waiters;
        /// The last waiter to give up while the node is being acquired: completed once that
        /// acquire has ended (and deleted its node).
        std::vector<pending<void(error_code, guard)>> leaving;
        std::unique_ptr<asio::cancellation_signal> cancel;
        bool cancelled_by_us = false;
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
            for (auto& w : leaving) w.complete(asio::error::operation_aborted, guard{});
        });
    }
    for (auto& w : leaving) w.complete(asio::error::operation_aborted, guard{});
    if (e.waiters.empty()) { // everyone gave up meanwhile
        g.release_in_background();
        table->entries.erase(it);
        return;
    }
    if (ec == asio::error::operation_aborted && we_cancelled && s->state() != session_state::closed)
        return acquire_node(s, table, key, req); // we cancelled it, and new acquires came
    auto waiters = std::move(e.waiters);
    e.waiters.clear();
    if (ec) {
        table->entries.erase(it);
        for (auto& [id, w] : waiters) w.complete(ec, guard{});
        return;
    }
    auto h = g.state();
    e.held = h;
    h->holds += static_cast<int>(waiters.size()) - 1;
    bool first = true;
    for (auto& [id, w] : waiters) {
        if (first)
            w.complete({}, std::move(g));
        else
            w.complete({}, guard(h));
        first = false;
    }
}

void acquire_node(const std::shared_ptr<session_impl>& s, const std::shared_ptr<reentrancy_table>& table,
                  const table_key& key, acquire_request req) {
    auto& e = table->entries[key];
    e.acquiring = true;
    e.cancel = std::make_unique<asio::cancellation_signal>();
    auto slot = e.cancel->slot();
    auto strand = s->strand();
    auto copy = req;
    copy.metered = false; // (the owner's acquires are counted one by one)
    start_acquire(
        s, std::move(copy),
        asio::any_completion_handler<void(error_code, guard)>(asio::bind_cancellation_slot(
            slot, asio::bind_executor(strand, [s, table, key, req = std::move(req)](error_code ec, guard g) {
                on_node(s, table, key, req, ec, std::move(g));
            }))));
}

} // namespace

void start_reentrant_acquire(const std::shared_ptr<session_impl>& s, acquire_request req, std::uint64_t owner,
                             asio::any_completion_handler<void(error_code, guard)> handler) {
    pending<void(error_code, guard)> p(std::move(handler), s->executor());
    if (auto ec = validate_lock_path(req.path)) return p.complete(ec, guard{});
    if (req.metered) s->meter_acquire(req.path, p);
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
            auto it = table->entries.find(t->key);
            if (it == table->entries.end()) return;
            auto& e = it->second;
            auto wi = e.waiters.find(t->id);
            if (wi == e.waiters.end()) return;
            auto waiter = std::move(wi->second);
            e.waiters.erase(wi);
            if (e.waiters.empty() && e.acquiring && e.cancel) {
                e.leaving.push_back(std::move(waiter)); // completed when the node acquire has ended
                e.cancelled_by_us = true;
                e.cancel->emit(asio::cancellation_type::terminal);
                return;
            }
            waiter.complete(asio::error::operation_aborted, guard{});
        });
    });
    asio::post(s->strand(), [s, req = std::move(req), owner, p = std::move(p), t]() mutable {
        auto table = table_of(*s);
        if (table->entries.size() > 64) // forget owners that hold nothing any more
            std::erase_if(table->entries, [](const auto& kv) {
                auto h = kv.second.held.lock();
                return !kv.second.acquiring && kv.second.waiters.empty() && kv.second.leaving.empty() &&
                       (!h || h->st != held_lock::status::held);
            });
        auto key = std::make_pair(req.path, owner);
        auto& e = table->entries[key];
        if (auto h = e.held.lock(); h && h->st == held_lock::status::held) {
            ++h->holds; // nested: no request to ZooKeeper
            return p.complete({}, guard(std::move(h)));
        }
        if (t->cancelled) return p.complete(asio::error::operation_aborted, guard{});
        const auto id = table->next_id++;
        t->table = table;
        t->key = key;
        t->id = id;
        e.waiters.emplace(id, std::move(p));
        if (!e.acquiring) acquire_node(s, table, key, std::move(req));
    });
}

} // namespace zklock::detail
