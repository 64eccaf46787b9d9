// zklock/shared_mutex.hpp: the herd-free read/write lock of the ZooKeeper recipes.
#pragma once

#include <zklock/config.hpp>
#include <zklock/completion.hpp>

#include <zklock/detail/deadline.hpp>

#include <zklock/dialect.hpp>
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
ZKLOCK_DECL void start_downgrade(const std::shared_ptr<session_impl>& s, acquire_request req, guard write,
                                 asio::any_completion_handler<void(error_code, guard)> handler);
ZKLOCK_DECL void start_upgrade(const std::shared_ptr<session_impl>& s, guard read,
                               asio::any_completion_handler<void(error_code, guard)> handler);
} // namespace detail

/// A read/write lock on a ZooKeeper path: many readers or one writer, granted in FIFO order.
///
/// Protocol (recipes.md, "shared locks"): readers create "<path>/_c_<uuid>-__READ__<seq>", writers
/// "<path>/_c_<uuid>-__WRIT__<seq>" (Curator's InterProcessReadWriteLock naming, so the two
/// interoperate on one path; lock_dialect::kazoo uses kazoo's "__rlock__"/"__lock__"). A writer
/// holds when its node is the lowest and otherwise watches the next lower node; a reader holds
/// when no write node is below it and otherwise watches the nearest lower write node, so a
/// release wakes only the contenders it unblocks. Only lower nodes matter: a later writer never
/// blocks an earlier reader.
///
/// Every acquire has the mutex's guarantees: any completion token, per-operation cancellation
/// (terminal, partial, total), deadlines, no node left behind, the guard's loss signal and
/// fencing token, guaranteed release. Do not put mutex and shared_mutex nodes on one path.
///
/// Like a mutex object, a shared_mutex object is a cheap description (session + path) that may
/// be destroyed while its operations are pending: the session owns them.
/// Thread safety: distinct and shared objects: safe.
class ZKLOCK_DECL shared_mutex {
public:
    /// A read/write lock on `path` of session `s`, with `opts`.
    ///
    /// Sends nothing: the path and the options are checked by each acquire. `opts.strategy` is
    /// ignored (the read/write rules need lock_strategy::predecessor); a non-zero
    /// `opts.local_handoff` fails every acquire with errc::local_handoff_unsupported.
    shared_mutex(session& s, std::string path, mutex_options opts = {})
        : session_(s.impl()), path_(std::move(path)), opts_(std::move(opts)) {}

    /// The lock path given to the constructor.
    const std::string& path() const noexcept { return path_; }

    /// Waits for the write (exclusive) lock, with no deadline.
    ///
    /// A writer holds when its node is the lowest; otherwise it watches the next lower node.
    ///
    /// \signature `void(error_code, guard)`: on success no error and a guard that owns the write
    /// lock; on failure the error and an empty guard. The token defaults to asio::deferred
    /// (zklock::default_completion_token).
    /// \executor The handler's associated executor (default: the session's executor); never inside
    /// the initiating function.
    /// \cancellation Terminal, partial, total, as mutex::async_acquire: no node is left behind.
    /// \errors As mutex::async_acquire, plus errc::local_handoff_unsupported
    /// (mutex_options::local_handoff is set).
    /// \lifetimes The shared_mutex object may be destroyed while the operation is pending: the
    /// session owns the operation. The operation keeps the session's implementation alive, and the
    /// handler's executor busy (outstanding work), until it completes; closing or destroying the
    /// session object completes it with asio::error::operation_aborted.
    /// \threadsafety Distinct and shared shared_mutex objects: safe.
    template <BOOST_ASIO_COMPLETION_TOKEN_FOR(void(error_code, guard))
                  CompletionToken = default_completion_token>
    auto async_acquire(CompletionToken&& token = default_completion_token{}) {
        return initiate(false, {}, false, std::forward<CompletionToken>(token));
    }
    /// As async_acquire, failing with errc::acquire_timeout once `timeout` has passed.
    ///
    /// As mutex::async_acquire_for: the timeout counts from when the operation starts, and a zero
    /// timeout is one try, as async_try_acquire, failing with errc::acquire_timeout when the lock
    /// is taken.
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
    auto async_acquire_for(std::chrono::duration<Rep, Period> timeout,
                           CompletionToken&& token = default_completion_token{}) {
        return initiate(false, detail::deadline_spec::after(timeout), false,
                        std::forward<CompletionToken>(token));
    }
    /// As async_acquire, failing with errc::acquire_timeout once `deadline` has passed.
    ///
    /// As mutex::async_acquire_until: a deadline already past when the operation starts is one
    /// try, failing with errc::acquire_timeout when the lock is taken.
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
    auto async_acquire_until(std::chrono::steady_clock::time_point deadline,
                             CompletionToken&& token = default_completion_token{}) {
        return initiate(false, detail::deadline_spec::at(deadline), false,
                        std::forward<CompletionToken>(token));
    }
    /// Takes the write lock only if it is free now: errc::lock_busy otherwise.
    ///
    /// As mutex::async_try_acquire: the node it created is deleted before completion, and while
    /// the connection is down it fails at once with zk_errc::connection_loss.
    ///
    /// \signature As async_acquire. The token defaults to asio::deferred
    /// (zklock::default_completion_token).
    /// \executor As async_acquire.
    /// \cancellation As async_acquire.
    /// \errors As async_acquire, plus:
    /// - errc::lock_busy: the write lock is not free now.
    /// - zk_errc::connection_loss: the connection is down.
    /// \lifetimes As async_acquire.
    /// \threadsafety As async_acquire.
    template <BOOST_ASIO_COMPLETION_TOKEN_FOR(void(error_code, guard))
                  CompletionToken = default_completion_token>
    auto async_try_acquire(CompletionToken&& token = default_completion_token{}) {
        return initiate(false, {}, true, std::forward<CompletionToken>(token));
    }

    /// Waits for the read (shared) lock, with no deadline.
    ///
    /// A reader holds when no write node is below it; otherwise it watches the nearest lower
    /// write node.
    ///
    /// \signature `void(error_code, guard)`: on success no error and a guard that owns the read
    /// lock; on failure the error and an empty guard. The token defaults to asio::deferred
    /// (zklock::default_completion_token).
    /// \executor As async_acquire.
    /// \cancellation As async_acquire.
    /// \errors As async_acquire.
    /// \lifetimes As async_acquire.
    /// \threadsafety As async_acquire.
    template <BOOST_ASIO_COMPLETION_TOKEN_FOR(void(error_code, guard))
                  CompletionToken = default_completion_token>
    auto async_acquire_shared(CompletionToken&& token = default_completion_token{}) {
        return initiate(true, {}, false, std::forward<CompletionToken>(token));
    }
    /// As async_acquire_shared, failing with errc::acquire_timeout once `timeout` has passed.
    ///
    /// The timeout counts from when the operation starts; a zero timeout is one try, as
    /// async_try_acquire_shared, failing with errc::acquire_timeout when a writer is in the way.
    ///
    /// \signature As async_acquire_shared. The token defaults to asio::deferred
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
    auto async_acquire_shared_for(std::chrono::duration<Rep, Period> timeout,
                                  CompletionToken&& token = default_completion_token{}) {
        return initiate(true, detail::deadline_spec::after(timeout), false,
                        std::forward<CompletionToken>(token));
    }
    /// As async_acquire_shared, failing with errc::acquire_timeout once `deadline` has passed.
    ///
    /// A deadline already past when the operation starts is one try, failing with
    /// errc::acquire_timeout when a writer is in the way.
    ///
    /// \signature As async_acquire_shared. The token defaults to asio::deferred
    /// (zklock::default_completion_token).
    /// \executor As async_acquire.
    /// \cancellation As async_acquire; the deadline too completes the operation within 40 ms and
    /// leaves no node behind.
    /// \errors As async_acquire, plus errc::acquire_timeout.
    /// \lifetimes As async_acquire.
    /// \threadsafety As async_acquire.
    template <BOOST_ASIO_COMPLETION_TOKEN_FOR(void(error_code, guard))
                  CompletionToken = default_completion_token>
    auto async_acquire_shared_until(std::chrono::steady_clock::time_point deadline,
                                    CompletionToken&& token = default_completion_token{}) {
        return initiate(true, detail::deadline_spec::at(deadline), false,
                        std::forward<CompletionToken>(token));
    }
    /// Takes the read lock only if no writer holds or waits below: errc::lock_busy otherwise.
    ///
    /// As mutex::async_try_acquire: the node it created is deleted before completion, and while
    /// the connection is down it fails at once with zk_errc::connection_loss.
    ///
    /// \signature As async_acquire_shared. The token defaults to asio::deferred
    /// (zklock::default_completion_token).
    /// \executor As async_acquire.
    /// \cancellation As async_acquire.
    /// \errors As async_acquire, plus:
    /// - errc::lock_busy: a writer holds or waits below.
    /// - zk_errc::connection_loss: the connection is down.
    /// \lifetimes As async_acquire.
    /// \threadsafety As async_acquire.
    template <BOOST_ASIO_COMPLETION_TOKEN_FOR(void(error_code, guard))
                  CompletionToken = default_completion_token>
    auto async_try_acquire_shared(CompletionToken&& token = default_completion_token{}) {
        return initiate(true, {}, true, std::forward<CompletionToken>(token));
    }

    /// Downgrade: takes the read lock while holding `write` (a write guard of this path), then
    /// releases the write lock, with no moment in between where neither is held.
    ///
    /// The read acquire is a try (as async_try_acquire_shared); on success the operation waits
    /// for the write lock's release before it completes.
    ///
    /// \signature `void(error_code, guard)`: the read guard on success; on errc::lock_busy the
    /// write guard, handed back; on any other error an empty guard. The token defaults to
    /// asio::deferred (zklock::default_completion_token).
    /// \executor The handler's associated executor (default: the session's executor); never inside
    /// the initiating function.
    /// \cancellation Not cancellable.
    /// \errors
    /// - errc::lock_busy, with the write guard handed back (still held): another writer queued
    ///   while we held the lock. Its node is lower than the read node we would create, so it
    ///   would be granted the moment our write node goes, while we read: the downgrade is refused
    ///   rather than letting a writer and a reader overlap (Curator's downgrade has that hole).
    /// - errc::not_a_write_guard if `write` is not a held (and not lost) write guard of this path
    ///   (it is released, in the background).
    /// - any other error of the read acquire (a session error, for instance): the write lock is
    ///   released too (in the background).
    /// \lifetimes The shared_mutex object may be destroyed while the operation is pending. The
    /// operation owns `write` until it hands it back or releases it, and keeps the session's
    /// implementation alive and the handler's executor busy (outstanding work) until it completes.
    /// \threadsafety Distinct and shared shared_mutex objects: safe. `write` is moved in under the
    /// guard's own rules (a shared guard object is unsafe).
    template <BOOST_ASIO_COMPLETION_TOKEN_FOR(void(error_code, guard))
                  CompletionToken = default_completion_token>
    auto async_downgrade(guard write, CompletionToken&& token = default_completion_token{}) {
        return asio::async_initiate<CompletionToken, void(error_code, guard)>(
            [](auto handler, std::shared_ptr<detail::session_impl> s, detail::acquire_request req, guard w) {
                detail::start_downgrade(
                    s, std::move(req), std::move(w),
                    asio::any_completion_handler<void(error_code, guard)>(std::move(handler)));
            },
            token, session_, request(true, false), std::move(write));
    }

    /// Always fails: upgrading a read lock to a write lock would deadlock.
    ///
    /// The write node would wait for our own read node: this always fails with
    /// errc::upgrade_not_supported, and `read` stays held (returned in the handler). Release the
    /// read lock, then acquire the write lock. Nothing is sent to ZooKeeper.
    ///
    /// \signature `void(error_code, guard)`: errc::upgrade_not_supported and `read`, still held.
    /// The token defaults to asio::deferred (zklock::default_completion_token).
    /// \executor The handler's associated executor (default: the session's executor); never inside
    /// the initiating function.
    /// \cancellation Not cancellable.
    /// \errors errc::upgrade_not_supported, always.
    /// \lifetimes The shared_mutex object may be destroyed while the operation is pending. The
    /// operation owns `read` until it hands it back in the handler.
    /// \threadsafety Distinct and shared shared_mutex objects: safe. `read` is moved in under the
    /// guard's own rules (a shared guard object is unsafe).
    template <BOOST_ASIO_COMPLETION_TOKEN_FOR(void(error_code, guard))
                  CompletionToken = default_completion_token>
    auto async_upgrade(guard read, CompletionToken&& token = default_completion_token{}) {
        return asio::async_initiate<CompletionToken, void(error_code, guard)>(
            [](auto handler, std::shared_ptr<detail::session_impl> s, guard r) {
                detail::start_upgrade(
                    s, std::move(r),
                    asio::any_completion_handler<void(error_code, guard)>(std::move(handler)));
            },
            token, session_, std::move(read));
    }

private:
    detail::acquire_request request(bool reader, bool try_only) const {
        auto r = detail::make_request(path_, opts_, std::nullopt, try_only);
        r.strategy = lock_strategy::predecessor; // the read/write rules need the predecessor watch
        r.rw = true;
        r.reader = reader;
        return r;
    }
    template <class CompletionToken>
    auto initiate(bool reader, detail::deadline_spec deadline, bool try_only, CompletionToken&& token) {
        return asio::async_initiate<CompletionToken, void(error_code, guard)>(
            [](auto handler, std::shared_ptr<detail::session_impl> s, detail::acquire_request req,
               detail::deadline_spec d) {
                req.deadline =
                    d.resolve(detail::steady_now_of(s.get())); // the clock starts with the operation
                detail::start_acquire(
                    s, std::move(req),
                    asio::any_completion_handler<void(error_code, guard)>(std::move(handler)));
            },
            token, session_, request(reader, try_only), deadline);
    }

    std::shared_ptr<detail::session_impl> session_;
    std::string path_;
    mutex_options opts_;
};

} // namespace zklock
