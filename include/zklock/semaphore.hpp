// zklock/semaphore.hpp: a counting semaphore: at most N leases held at once on one path.
#pragma once

#include <zklock/config.hpp>
#include <zklock/completion.hpp>

#include <zklock/detail/deadline.hpp>

#include <zklock/error.hpp>
#include <zklock/guard.hpp>
#include <zklock/mutex.hpp>
#include <zklock/session.hpp>

#include <boost/asio/any_completion_handler.hpp>
#include <boost/asio/async_result.hpp>

#include <chrono>
#include <memory>
#include <optional>
#include <string>

namespace zklock {

namespace asio = boost::asio;

namespace detail {
ZKLOCK_DECL void start_lease(const std::shared_ptr<session_impl>& s, std::string path, int max_leases,
                             std::string data, std::optional<std::chrono::steady_clock::time_point> deadline,
                             asio::any_completion_handler<void(error_code, guard)> handler, acl node_acl,
                             bool try_only = false);
} // namespace detail

/// A counting semaphore on a ZooKeeper path: at most `max_leases` leases are held at once.
///
/// Protocol (the layout of Curator's InterProcessSemaphoreV2): an acquire takes an internal
/// exclusive lock on "<path>/locks", creates its lease "<path>/leases/_c_<uuid>-lease-<seq>"
/// (EPHEMERAL_SEQUENTIAL), and while more than N leases exist waits on a children watch of
/// "<path>/leases"; then it lets the internal lock go. Only the one client holding the internal
/// lock ever waits on the children, so a released lease wakes one client, not all of them.
///
/// The source of truth for N: the first acquire on a path writes N as the data of
/// "<path>/leases"; an acquire with another N fails with errc::semaphore_size_mismatch instead of
/// letting clients with different views overrun the limit. (Delete the path to change N.)
///
/// A lease is a guard: release it (or let it go out of scope), watch it for loss
/// (session expiry, ...) and use its fencing token, like any lock. Cancellation and deadlines
/// leave no lease behind. A connection loss while an acquire is under way is waited out, as a
/// mutex's is: a lease whose create's reply was lost is found again by the guid in its name (or
/// created again if the create was not applied), so the acquire goes on after the reconnect.
/// (Only async_try_acquire fails on a connection loss, with no lease left.)
///
/// Like a mutex object, a semaphore object is a cheap description (session + path + N) that may
/// be destroyed while its operations are pending: the session owns them.
/// Thread safety: distinct and shared objects: safe.
class ZKLOCK_DECL semaphore {
public:
    /// A semaphore of `max_leases` leases on `path` of session `s`.
    ///
    /// Sends nothing: the path and N are checked by each acquire. Of `opts` only node_data (the
    /// data of the lease and internal lock nodes; empty means "zklock <hostname> pid <pid>", as
    /// for a mutex) and node_acl are used: the leases follow the session's loss policy
    /// (session_options::loss).
    semaphore(session& s, std::string path, int max_leases, mutex_options opts = {})
        : session_(s.impl()), path_(std::move(path)), max_(max_leases), opts_(std::move(opts)) {}

    /// The semaphore path given to the constructor.
    const std::string& path() const noexcept { return path_; }
    /// N, the number of leases that may be held at once, as given to the constructor.
    int max_leases() const noexcept { return max_; }

    /// Waits for a lease, with no deadline.
    ///
    /// \signature `void(error_code, guard)`: on success no error and a guard that owns the lease;
    /// on failure the error and an empty guard. The token defaults to asio::deferred
    /// (zklock::default_completion_token).
    /// \executor The handler's associated executor (default: the session's executor); never inside
    /// the initiating function.
    /// \cancellation Terminal, partial, total (the type is passed on to the internal lock's acquire
    /// in flight). No lease is left behind: it is deleted before completion when the session is
    /// connected, in the background otherwise; the internal lock is released in the background.
    /// As with mutex::async_acquire, a cancel or the deadline completes the operation within 40 ms
    /// even when the server sits on a request; what the late reply brings is let go then.
    /// \errors As mutex::async_acquire (those of the internal lock on "<path>/locks" among them),
    /// plus:
    /// - errc::invalid_max_leases: N < 1.
    /// - errc::semaphore_size_mismatch: N differs from the path's.
    /// - errc::path_used_by_lock: the path holds mutex or read/write lock nodes (one path, one
    ///   lock).
    /// - errc::lock_node_deleted: our lease was deleted by someone else while waiting.
    /// \lifetimes The semaphore object may be destroyed while the operation is pending: the session
    /// owns the operation. The operation keeps the session's implementation alive, and the
    /// handler's executor busy (outstanding work), until it completes; closing or destroying the
    /// session object completes it with asio::error::operation_aborted.
    /// \threadsafety Distinct and shared semaphore objects: safe.
    template <BOOST_ASIO_COMPLETION_TOKEN_FOR(void(error_code, guard))
                  CompletionToken = default_completion_token>
    auto async_acquire(CompletionToken&& token = default_completion_token{}) {
        return initiate({}, false, std::forward<CompletionToken>(token));
    }
    /// As async_acquire, failing with errc::acquire_timeout once `timeout` has passed.
    ///
    /// The timeout counts from when the operation starts (with a deferred token, when it is
    /// launched); it covers the internal lock's acquire too.
    ///
    /// \signature As async_acquire. The token defaults to asio::deferred
    /// (zklock::default_completion_token).
    /// \executor As async_acquire.
    /// \cancellation As async_acquire.
    /// \errors As async_acquire, plus errc::acquire_timeout.
    /// \lifetimes As async_acquire.
    /// \threadsafety As async_acquire.
    template <class Rep, class Period,
              BOOST_ASIO_COMPLETION_TOKEN_FOR(void(error_code, guard))
                  CompletionToken = default_completion_token>
    auto async_acquire_for(std::chrono::duration<Rep, Period> timeout,
                           CompletionToken&& token = default_completion_token{}) {
        return initiate(detail::deadline_spec::after(timeout), false, std::forward<CompletionToken>(token));
    }
    /// As async_acquire, failing with errc::acquire_timeout once `deadline` has passed.
    ///
    /// As mutex::async_acquire_until; the deadline covers the internal lock's acquire too.
    ///
    /// \signature As async_acquire. The token defaults to asio::deferred
    /// (zklock::default_completion_token).
    /// \executor As async_acquire.
    /// \cancellation As async_acquire.
    /// \errors As async_acquire, plus errc::acquire_timeout.
    /// \lifetimes As async_acquire.
    /// \threadsafety As async_acquire.
    template <BOOST_ASIO_COMPLETION_TOKEN_FOR(void(error_code, guard))
                  CompletionToken = default_completion_token>
    auto async_acquire_until(std::chrono::steady_clock::time_point deadline,
                             CompletionToken&& token = default_completion_token{}) {
        return initiate(detail::deadline_spec::at(deadline), false, std::forward<CompletionToken>(token));
    }
    /// Takes a lease only if one is free now and nobody is queued for one: errc::lock_busy
    /// otherwise.
    ///
    /// As mutex::async_try_acquire: the internal lock on "<path>/locks" is tried (busy while
    /// another acquire waits for a lease), and a lease made while N are held is deleted before
    /// completion; it never waits for a lease. While the connection is down it fails at once with
    /// zk_errc::connection_loss: it never waits for a reconnect.
    ///
    /// \signature As async_acquire. The token defaults to asio::deferred
    /// (zklock::default_completion_token).
    /// \executor As async_acquire.
    /// \cancellation As async_acquire.
    /// \errors As async_acquire, plus:
    /// - errc::lock_busy: N leases are held, or another acquire is queued for one.
    /// - zk_errc::connection_loss: the connection is down.
    /// \lifetimes As async_acquire.
    /// \threadsafety As async_acquire.
    template <BOOST_ASIO_COMPLETION_TOKEN_FOR(void(error_code, guard))
                  CompletionToken = default_completion_token>
    auto async_try_acquire(CompletionToken&& token = default_completion_token{}) {
        return initiate({}, true, std::forward<CompletionToken>(token));
    }

private:
    template <class CompletionToken>
    auto initiate(detail::deadline_spec deadline, bool try_only, CompletionToken&& token) {
        return asio::async_initiate<CompletionToken, void(error_code, guard)>(
            [](auto handler, std::shared_ptr<detail::session_impl> s, std::string p, int n, std::string d,
               detail::deadline_spec dl, acl a, bool t) {
                detail::start_lease(s, std::move(p), n, std::move(d),
                                    dl.resolve(detail::steady_now_of(s.get())), // (the clock starts now)
                                    asio::any_completion_handler<void(error_code, guard)>(std::move(handler)),
                                    std::move(a), t);
            },
            token, session_, path_, max_, opts_.node_data, deadline, opts_.node_acl, try_only);
    }

    std::shared_ptr<detail::session_impl> session_;
    std::string path_;
    int max_;
    mutex_options opts_;
};

} // namespace zklock
