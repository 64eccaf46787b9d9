// zklock/reentrant_mutex.hpp: an exclusive lock that its owner may take again.
#pragma once

#include <zklock/config.hpp>

#include <zklock/error.hpp>
#include <zklock/guard.hpp>
#include <zklock/mutex.hpp>
#include <zklock/session.hpp>

#include <boost/asio/any_completion_handler.hpp>
#include <boost/asio/async_result.hpp>

#include <cstdint>
#include <memory>
#include <string>

namespace zklock {

namespace asio = boost::asio;

namespace detail {
ZKLOCK_DECL void start_reentrant_acquire(const std::shared_ptr<session_impl>& s, acquire_request req, std::uint64_t owner,
                             asio::any_completion_handler<void(error_code, guard)> handler);
} // namespace detail

/// The mutex, reentrant for an explicit owner. Ownership is not tied to a thread (a coroutine
/// moves between threads): the caller names the owner, e.g. a request id or a task id. An owner
/// that already holds the lock on this session and path gets another guard at once, with no
/// request to ZooKeeper; the node is deleted when the owner's last guard is released. An acquire
/// by an owner whose first acquire is still waiting waits with it (on the same node; each of
/// them can be cancelled on its own, and the node goes when all of them have given up). Different owners exclude each
/// other exactly as with zklock::mutex (and with Curator and kazoo). The plain mutex stays the
/// default: reentrancy hides the nesting that usually deserves a second look.
///
/// All guards of one owner share the node, the fencing token and the loss signal: a nested
/// acquire is not a new grant, so it gets the same token, never a larger one (a larger one would
/// tell a fencing store that the outer guard is stale while it is still the owner's). The next
/// owner's grant gets a strictly larger token. See guard::fencing_token.
class ZKLOCK_DECL reentrant_mutex {
public:
    reentrant_mutex(session& s, std::string path, mutex_options opts = {})
        : session_(s.impl()), path_(std::move(path)), opts_(std::move(opts)) {}

    const std::string& path() const noexcept { return path_; }

    /// Completion signature: void(error_code, guard). Errors, cancellation and executor as
    /// mutex::async_acquire (cancelling a nested acquire that was satisfied at once is a no-op).
    template <class CompletionToken>
    auto async_acquire(std::uint64_t owner, CompletionToken&& token) {
        return asio::async_initiate<CompletionToken, void(error_code, guard)>(
            [](auto handler, std::shared_ptr<detail::session_impl> s, detail::acquire_request req, std::uint64_t o) {
                detail::start_reentrant_acquire(s, std::move(req), o,
                    asio::any_completion_handler<void(error_code, guard)>(std::move(handler)));
            },
            token, session_, request(), owner);
    }

private:
    detail::acquire_request request() const {
        auto r = detail::make_request(path_, opts_);
        r.strategy = lock_strategy::predecessor;
        return r;
    }

    std::shared_ptr<detail::session_impl> session_;
    std::string path_;
    mutex_options opts_;
};

} // namespace zklock
