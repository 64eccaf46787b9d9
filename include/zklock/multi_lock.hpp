// zklock/multi_lock.hpp: several locks, all or nothing.
#pragma once

#include <zklock/config.hpp>

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
ZKLOCK_DECL void start_acquire_all(std::vector<mutex> locks, std::optional<std::chrono::steady_clock::time_point> deadline,
                       asio::any_completion_handler<void(error_code, std::vector<guard>)> handler);
} // namespace detail

/// Acquires every lock of `locks`, or none: in a canonical order (sorted by path, so two callers
/// with overlapping sets cannot deadlock), with one deadline for the whole set. On failure,
/// timeout or cancellation the locks taken so far are given up in reverse order before the
/// handler runs: their deletes are sent (and retried in the background until they land, or the
/// session ends), but the handler does not wait for them. A lock of the set that is lost while
/// later ones are still being acquired is returned as part of the set: check guard::is_lost() of
/// each guard (or wait on its loss) before relying on it.
///
/// Completion signature: void(error_code, std::vector<guard>), the guards in canonical (path)
/// order. Errors: errc::multi_lock_empty, errc::multi_lock_duplicate_path (one path twice: it would wait for
/// itself), errc::acquire_timeout, asio::error::operation_aborted, and any error of
/// mutex::async_acquire. Per-operation cancellation: terminal, partial, total (no node is left).
/// Executor: the handler's associated executor (default: the first lock's session executor; an
/// empty set, which has no session, completes on the handler's own executor, and a plain
/// callback with none on asio::system_executor).
template <class CompletionToken>
auto async_acquire_all(std::vector<mutex> locks, CompletionToken&& token) {
    return asio::async_initiate<CompletionToken, void(error_code, std::vector<guard>)>(
        [](auto handler, std::vector<mutex> l) {
            if (l.empty()) return detail::complete_without_session(std::move(handler), error_code(errc::multi_lock_empty), std::vector<guard>{});
            detail::start_acquire_all(std::move(l), std::nullopt,
                asio::any_completion_handler<void(error_code, std::vector<guard>)>(std::move(handler)));
        },
        token, std::move(locks));
}

/// As async_acquire_all, failing with errc::acquire_timeout once `timeout` has passed.
template <class Rep, class Period, class CompletionToken>
auto async_acquire_all_for(std::vector<mutex> locks, std::chrono::duration<Rep, Period> timeout,
                           CompletionToken&& token) {
    return asio::async_initiate<CompletionToken, void(error_code, std::vector<guard>)>(
        [](auto handler, std::vector<mutex> l, detail::deadline_spec d) {
            if (l.empty()) return detail::complete_without_session(std::move(handler), error_code(errc::multi_lock_empty), std::vector<guard>{});
            detail::start_acquire_all(std::move(l), d.resolve(), // (the clock starts with the operation)
                asio::any_completion_handler<void(error_code, std::vector<guard>)>(std::move(handler)));
        },
        token, std::move(locks), detail::deadline_spec::after(timeout));
}

} // namespace zklock
