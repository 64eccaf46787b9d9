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
        std::vector<pending<void(error_code, guard)>> joiners; // same owner, waiting with the first acquire
    };
    std::map<std::pair<std::string, std::uint64_t>, entry> entries;
};

std::shared_ptr<reentrancy_table> table_of(session_impl& s) {
    // One table per session, created on first use (on the strand).
    static const std::uint64_t key = 0x7265656e74ULL; // "reent"
    auto& slot = s.extension(key);
    if (!slot) slot = std::make_shared<reentrancy_table>();
    return std::static_pointer_cast<reentrancy_table>(slot);
}

} // namespace

void start_reentrant_acquire(const std::shared_ptr<session_impl>& s, acquire_request req, std::uint64_t owner,
                             asio::any_completion_handler<void(error_code, guard)> handler) {
    pending<void(error_code, guard)> p(std::move(handler), s->executor());
    if (auto ec = validate_lock_path(req.path)) return p.complete(ec, guard{});
    asio::post(s->strand(), [s, req = std::move(req), owner, p = std::move(p)]() mutable {
        auto table = table_of(*s);
        if (table->entries.size() > 64) // forget owners that hold nothing any more
            std::erase_if(table->entries, [](const auto& kv) {
                auto h = kv.second.held.lock();
                return !kv.second.acquiring && (!h || h->st != held_lock::status::held);
            });
        auto key = std::make_pair(req.path, owner);
        auto& e = table->entries[key];
        if (auto h = e.held.lock(); h && h->st == held_lock::status::held) {
            ++h->holds; // nested: no request to ZooKeeper
            return p.complete({}, guard(std::move(h)));
        }
        if (e.acquiring) return e.joiners.push_back(std::move(p));
        e.acquiring = true;
        auto strand = s->strand();
        auto slot = p.slot(); // the caller's cancellation reaches the acquire in flight
        auto user = std::make_shared<std::optional<pending<void(error_code, guard)>>>(std::move(p));
        start_acquire(s, std::move(req), asio::any_completion_handler<void(error_code, guard)>(asio::bind_cancellation_slot(slot, asio::bind_executor(strand,
            [table, key, user](error_code ec, guard g) {
                auto& e = table->entries[key];
                e.acquiring = false;
                auto joiners = std::move(e.joiners);
                e.joiners.clear();
                if (ec) {
                    table->entries.erase(key);
                    for (auto& j : joiners) j.complete(ec, guard{});
                    return (**user).complete(ec, guard{});
                }
                auto h = g.state();
                e.held = h;
                h->holds += static_cast<int>(joiners.size());
                for (auto& j : joiners) j.complete({}, guard(h));
                (**user).complete({}, std::move(g));
            }))));
    });
}

} // namespace zklock::detail
