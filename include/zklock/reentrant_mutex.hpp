// zklock/reentrant_mutex.hpp: an exclusive lock that its owner may take again.
#pragma once

#include <zklock/config.hpp>
#include <zklock/completion.hpp>

#include <zklock/error.hpp>
#include <zklock/guard.hpp>
#include <zklock/mutex.hpp>
#include <zklock/detail/deadline.hpp>
#include <zklock/session.hpp>

#include <boost/asio/any_completion_handler.hpp>
#include <boost/asio/async_result.hpp>

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>

namespace zklock {

namespace asio = boost::asio;

namespace detail {
ZKLOCK_DECL void start_reentrant_acquire(const std::shared_ptr<session_impl>& s, acquire_request req,
                                         std::uint64_t owner,
                                         asio::any_completion_handler<void(error_code, guard)> handler);
} // namespace detail

/// The mutex, reentrant for an explicit owner. Ownership is not tied to a thread (a coroutine
/// moves between threads): the caller names the owner, e.g. a request id or a task id. An owner
/// that already holds the lock on this session and path gets another guard at once, with no
/// request to ZooKeeper; the node is deleted when the owner's last guard is released. An acquire
/// by an owner whose first acquire is still waiting waits with it (on the same node; each of
/// them can be cancelled on its own, and the node goes when all of them have given up).
/// Different owners exclude each other exactly as with zklock::mutex (and with Curator and
/// kazoo). The plain mutex stays the default: reentrancy hides the nesting that usually deserves
/// a second look.
///
/// All guards of one owner share the node, the fencing token and the loss signal: a nested
/// acquire is not a new grant, so it gets the same token, never a larger one (a larger one would
/// tell a fencing store that the outer guard is stale while it is still the owner's). The next
/// owner's grant gets a strictly larger token. See guard::fencing_token.
///
/// Like a mutex object, a reentrant_mutex object is a cheap description (session + path) that
/// may be destroyed while its operations are pending: the session owns them, and the owners'
/// records are kept per session and path, not per object.
/// Thread safety: distinct and shared objects: safe.
class ZKLOCK_DECL reentrant_mutex {
public:
    /// A reentrant lock on `path` of session `s`, with `opts`.
    ///
    /// Sends nothing: the path and the options are checked by each acquire. `opts.strategy` is
    /// ignored: always lock_strategy::predecessor.
    reentrant_mutex(session& s, std::string path, mutex_options opts = {})
        : session_(s.impl()), path_(std::move(path)), opts_(std::move(opts)) {}

    /// The lock path given to the constructor.
    const std::string& path() const noexcept { return path_; }

    /// Waits for the lock on behalf of `owner`, with no deadline.
    ///
    /// An `owner` that already holds the lock on this session and path gets another guard at once
    /// (posted), with no request to ZooKeeper. An acquire by an owner whose first acquire is still
    /// waiting waits with it, on the same node, and completes with the same outcome.
    ///
    /// \signature `void(error_code, guard)`: on success no error and a guard of the owner's hold;
    /// on failure the error and an empty guard. The token defaults to asio::deferred
    /// (zklock::default_completion_token).
    /// \executor As mutex::async_acquire: the handler's associated executor (default: the
    /// session's executor); never inside the initiating function.
    /// \cancellation As mutex::async_acquire: terminal, partial, total. Cancelling a nested
    /// acquire that was satisfied at once is a no-op. An acquire that waits with others of its
    /// owner completes with asio::error::operation_aborted on its own; when the last of them gives
    /// up, the node acquire is cancelled, and that last one completes once it has ended (and
    /// deleted its node).
    /// \errors As mutex::async_acquire; and, for a nested acquire while the owner's hold is
    /// suspended (guard::is_suspended), the loss reason (errc::lease_expired) at once: the owner
    /// was told its lock is lost, and a node of its own would queue behind its own.
    /// \lifetimes As mutex::async_acquire: the reentrant_mutex object may be destroyed while the
    /// operation is pending; the operation keeps the session's implementation alive, and the
    /// handler's executor busy (outstanding work), until it completes.
    /// \threadsafety Distinct and shared reentrant_mutex objects: safe.
    template <BOOST_ASIO_COMPLETION_TOKEN_FOR(void(error_code, guard))
                  CompletionToken = default_completion_token>
    auto async_acquire(std::uint64_t owner, CompletionToken&& token = default_completion_token{}) {
        return initiate(owner, {}, false, std::forward<CompletionToken>(token));
    }

    /// As async_acquire, failing with errc::acquire_timeout once `timeout` has passed.
    ///
    /// As mutex::async_acquire_for: the timeout counts from when the operation starts, and a zero
    /// timeout is one try, failing with errc::acquire_timeout when the lock is taken (also by an
    /// acquire of the same owner still waiting). An `owner` that holds the lock gets another
    /// guard at once, whatever the timeout. An acquire that waits with others of its owner times
    /// out on its own; the last of them to go ends the node acquire, as a cancellation does.
    ///
    /// \signature As async_acquire. The token defaults to asio::deferred
    /// (zklock::default_completion_token).
    /// \executor As async_acquire.
    /// \cancellation As async_acquire; the deadline too completes the operation within 40 ms and
    /// leaves no node behind.
    /// \errors As async_acquire, plus errc::acquire_timeout.
    /// \lifetimes As async_acquire.
    /// \threadsafety As async_acquire.
    template <class Rep, class Period,
              BOOST_ASIO_COMPLETION_TOKEN_FOR(void(error_code, guard))
                  CompletionToken = default_completion_token>
    auto async_acquire_for(std::uint64_t owner, std::chrono::duration<Rep, Period> timeout,
                           CompletionToken&& token = default_completion_token{}) {
        return initiate(owner, detail::deadline_spec::after(timeout), false,
                        std::forward<CompletionToken>(token));
    }

    /// As async_acquire, failing with errc::acquire_timeout once `deadline` has passed.
    ///
    /// As async_acquire_for (and mutex::async_acquire_until): a deadline already past when the
    /// operation starts is one try.
    ///
    /// \signature As async_acquire. The token defaults to asio::deferred
    /// (zklock::default_completion_token).
    /// \executor As async_acquire.
    /// \cancellation As async_acquire; the deadline too completes the operation within 40 ms and
    /// leaves no node behind.
    /// \errors As async_acquire, plus errc::acquire_timeout.
    /// \lifetimes As async_acquire.
    /// \threadsafety As async_acquire.
    template <BOOST_ASIO_COMPLETION_TOKEN_FOR(void(error_code, guard))
                  CompletionToken = default_completion_token>
    auto async_acquire_until(std::uint64_t owner, std::chrono::steady_clock::time_point deadline,
                             CompletionToken&& token = default_completion_token{}) {
        return initiate(owner, detail::deadline_spec::at(deadline), false,
                        std::forward<CompletionToken>(token));
    }

    /// Takes the lock for `owner` only if it is free now: errc::lock_busy otherwise.
    ///
    /// An `owner` that holds the lock gets another guard at once. Otherwise as
    /// mutex::async_try_acquire (busy if another contender holds or is queued, and also while an
    /// acquire of the same owner is still waiting; the node it created is deleted before
    /// completion; while the connection is down it fails at once with zk_errc::connection_loss).
    ///
    /// \signature As async_acquire. The token defaults to asio::deferred
    /// (zklock::default_completion_token).
    /// \executor As async_acquire.
    /// \cancellation As async_acquire.
    /// \errors As async_acquire, plus:
    /// - errc::lock_busy: the lock is not free now.
    /// - zk_errc::connection_loss: the connection is down.
    /// \lifetimes As async_acquire.
    /// \threadsafety As async_acquire.
    template <BOOST_ASIO_COMPLETION_TOKEN_FOR(void(error_code, guard))
                  CompletionToken = default_completion_token>
    auto async_try_acquire(std::uint64_t owner, CompletionToken&& token = default_completion_token{}) {
        return initiate(owner, {}, true, std::forward<CompletionToken>(token));
    }

private:
    template <class CompletionToken>
    auto initiate(std::uint64_t owner, detail::deadline_spec deadline, bool try_only,
                  CompletionToken&& token) {
        return asio::async_initiate<CompletionToken, void(error_code, guard)>(
            [](auto handler, std::shared_ptr<detail::session_impl> s, detail::acquire_request req,
               std::uint64_t o, detail::deadline_spec d) {
                req.deadline =
                    d.resolve(detail::steady_now_of(s.get())); // the clock starts with the operation
                detail::start_reentrant_acquire(
                    s, std::move(req), o,
                    asio::any_completion_handler<void(error_code, guard)>(std::move(handler)));
            },
            token, session_, request(try_only), owner, deadline);
    }

    detail::acquire_request request(bool try_only) const {
        auto r = detail::make_request(path_, opts_, std::nullopt, try_only);
        r.strategy = lock_strategy::predecessor;
        return r;
    }

    std::shared_ptr<detail::session_impl> session_;
    std::string path_;
    mutex_options opts_;
};

} // namespace zklock
