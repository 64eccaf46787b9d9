// zklock/multi_lock.hpp: several locks, all or nothing.
#pragma once

#include <zklock/config.hpp>
#include <zklock/completion.hpp>

#include <zklock/detail/deadline.hpp>
#include <zklock/detail/no_session.hpp>

#include <zklock/error.hpp>
#include <zklock/guard.hpp>
#include <zklock/mutex.hpp>

#include <boost/asio/any_completion_handler.hpp>
#include <boost/asio/async_result.hpp>

#include <chrono>
#include <optional>
#include <vector>

namespace zklock {

namespace asio = boost::asio;

namespace detail {
ZKLOCK_DECL void
start_acquire_all(std::vector<mutex> locks, std::optional<std::chrono::steady_clock::time_point> deadline,
                  asio::any_completion_handler<void(error_code, std::vector<guard>)> handler);
} // namespace detail

/// Acquires every lock of `locks`, or none.
///
/// The locks are taken one at a time in a canonical order (sorted by path, so two callers with
/// overlapping sets cannot deadlock), each with mutex::async_acquire (or async_acquire_until,
/// with the set's deadline). On failure or cancellation the locks taken so far are given up in
/// reverse order before the handler runs: their deletes are sent (and retried in the background
/// until they land, or the session ends), but the handler does not wait for them. A lock of the
/// set that is lost while later ones are still being acquired is returned as part of the set:
/// check guard::is_lost() of each guard (or wait on its loss) before relying on it.
///
/// \signature `void(error_code, std::vector<guard>)`: on success no error and the guards in
/// canonical (path) order; on failure the error and an empty vector. The token defaults to
/// asio::deferred (zklock::default_completion_token).
/// \executor The handler's associated executor (default: the session executor of the first lock
/// of `locks`, in the caller's order; an empty set, which has no session, completes on the
/// handler's own executor, and a plain callback with none on asio::system_executor); never inside
/// the initiating function.
/// \cancellation Terminal, partial, total: the acquire in flight is cancelled with the same type
/// (as mutex::async_acquire: its node is deleted), and the locks taken so far are given up as on
/// failure. No node is left.
/// \errors
/// - errc::multi_lock_empty: `locks` is empty.
/// - errc::multi_lock_duplicate_path: one path twice (it would wait for itself).
/// - asio::error::operation_aborted: cancelled.
/// - any error of mutex::async_acquire.
/// \lifetimes `locks` is taken by value (the operation owns its mutex objects): the caller's
/// need not outlive it. The operation keeps the sessions' implementations alive (through the
/// mutex objects), and the handler's executor busy (outstanding work), until it completes.
/// \threadsafety Calls from several threads are safe: the mutex objects are taken by value, and
/// mutex objects are safe to share.
template <BOOST_ASIO_COMPLETION_TOKEN_FOR(void(error_code, std::vector<guard>))
              CompletionToken = default_completion_token>
auto async_acquire_all(std::vector<mutex> locks, CompletionToken&& token = default_completion_token{}) {
    return asio::async_initiate<CompletionToken, void(error_code, std::vector<guard>)>(
        [](auto handler, std::vector<mutex> l) {
            if (l.empty())
                return detail::complete_without_session(
                    std::move(handler), error_code(errc::multi_lock_empty), std::vector<guard>{});
            detail::start_acquire_all(
                std::move(l), std::nullopt,
                asio::any_completion_handler<void(error_code, std::vector<guard>)>(std::move(handler)));
        },
        token, std::move(locks));
}

/// As async_acquire_all, failing with errc::acquire_timeout once `timeout` has passed.
///
/// One deadline for the whole set. The timeout counts from when the operation starts (with a
/// deferred token, when it is launched); each lock is acquired with
/// mutex::async_acquire_until at that deadline. On timeout the locks taken so far are given up
/// as on failure.
///
/// \signature As async_acquire_all. The token defaults to asio::deferred
/// (zklock::default_completion_token).
/// \executor As async_acquire_all.
/// \cancellation As async_acquire_all.
/// \errors As async_acquire_all, plus errc::acquire_timeout.
/// \lifetimes As async_acquire_all.
/// \threadsafety As async_acquire_all.
template <class Rep, class Period,
          BOOST_ASIO_COMPLETION_TOKEN_FOR(void(error_code, std::vector<guard>))
              CompletionToken = default_completion_token>
auto async_acquire_all_for(std::vector<mutex> locks, std::chrono::duration<Rep, Period> timeout,
                           CompletionToken&& token = default_completion_token{}) {
    return asio::async_initiate<CompletionToken, void(error_code, std::vector<guard>)>(
        [](auto handler, std::vector<mutex> l, detail::deadline_spec d) {
            if (l.empty())
                return detail::complete_without_session(
                    std::move(handler), error_code(errc::multi_lock_empty), std::vector<guard>{});
            // (the clock starts with the operation, on the first lock's session's clock; read
            // before `l` is moved: the order of a call's arguments is unspecified)
            const auto deadline = d.resolve(detail::steady_now_of(l.front().session_impl().get()));
            detail::start_acquire_all(
                std::move(l), deadline,
                asio::any_completion_handler<void(error_code, std::vector<guard>)>(std::move(handler)));
        },
        token, std::move(locks), detail::deadline_spec::after(timeout));
}

} // namespace zklock
