#include <zklock/shared_mutex.hpp>

#include "recipes/held_lock.hpp"
#include "protocol/protocol.hpp"

#include <boost/asio/bind_executor.hpp>
#include <boost/asio/post.hpp>

namespace zklock::detail {

void start_downgrade(const std::shared_ptr<session_impl>& s, acquire_request req, guard write,
                     asio::any_completion_handler<void(error_code, guard)> handler) {
    // The write guard must be a write node of this path.
    const auto& node = write.node_path();
    auto name = last_segment(node);
    auto parsed = parse_contender(name, lock_family::rw, req.dialect);
    bool ok = write.owns_lock() && !write.is_lost() && node.size() > req.path.size() + 1 &&
              node.compare(0, req.path.size() + 1, req.path + "/") == 0 && parsed && parsed->writer;
    if (!ok) {
        pending<void(error_code, guard)> p(std::move(handler), s->executor());
        write.release_in_background();
        return p.complete(errc::not_a_write_guard, guard{});
    }
    req.own_writer = std::string(name);
    // Our write node is the lowest node. The read node is granted at once unless a writer queued
    // between the two: then that writer would be granted (it is lower than our read node) as soon
    // as our write node goes, so the downgrade is refused instead (lock_busy, write lock kept).
    req.try_only = true;
    struct state {
        guard write;
        std::optional<pending<void(error_code, guard)>> user;
    };
    auto st = std::make_shared<state>();
    st->write = std::move(write);
    st->user.emplace(std::move(handler), s->executor());
    auto strand = s->strand();
    start_acquire(s, std::move(req),
                  asio::any_completion_handler<void(error_code, guard)>(
                      asio::bind_executor(strand, [st, strand](error_code ec, guard read) {
                          if (ec == errc::lock_busy) return st->user->complete(ec, std::move(st->write));
                          if (ec) {
                              st->write.release_in_background();
                              return st->user->complete(ec, guard{});
                          }
                          auto rd = std::make_shared<guard>(std::move(read));
                          st->write.async_release(asio::bind_executor(
                              strand, [st, rd](error_code) { st->user->complete({}, std::move(*rd)); }));
                      })));
}

void start_upgrade(const std::shared_ptr<session_impl>& s, guard read,
                   asio::any_completion_handler<void(error_code, guard)> handler) {
    pending<void(error_code, guard)> p(std::move(handler), s->executor());
    p.complete(errc::upgrade_not_supported, std::move(read));
}

} // namespace zklock::detail
