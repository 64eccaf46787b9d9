// zklock/shared_mutex.hpp: the herd-free read/write lock of the ZooKeeper recipes.
#pragma once

#include <zklock/config.hpp>

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
class ZKLOCK_DECL shared_mutex {
public:
    shared_mutex(session& s, std::string path, mutex_options opts = {})
        : session_(s.impl()), path_(std::move(path)), opts_(std::move(opts)) {}

    const std::string& path() const noexcept { return path_; }

    /// The write (exclusive) lock. Completion signature: void(error_code, guard). Errors as mutex.
    template <class CompletionToken>
    auto async_acquire(CompletionToken&& token) {
        return initiate(false, {}, false, std::forward<CompletionToken>(token));
    }
    template <class Rep, class Period, class CompletionToken>
    auto async_acquire_for(std::chrono::duration<Rep, Period> timeout, CompletionToken&& token) {
        return initiate(false, detail::deadline_spec::after(timeout), false, std::forward<CompletionToken>(token));
    }
    /// errc::lock_busy unless the write lock is free now.
    template <class CompletionToken>
    auto async_try_acquire(CompletionToken&& token) {
        return initiate(false, {}, true, std::forward<CompletionToken>(token));
    }

    /// The read (shared) lock. Completion signature: void(error_code, guard).
    template <class CompletionToken>
    auto async_acquire_shared(CompletionToken&& token) {
        return initiate(true, {}, false, std::forward<CompletionToken>(token));
    }
    template <class Rep, class Period, class CompletionToken>
    auto async_acquire_shared_for(std::chrono::duration<Rep, Period> timeout, CompletionToken&& token) {
        return initiate(true, detail::deadline_spec::after(timeout), false, std::forward<CompletionToken>(token));
    }
    /// errc::lock_busy if a writer holds or waits below.
    template <class CompletionToken>
    auto async_try_acquire_shared(CompletionToken&& token) {
        return initiate(true, {}, true, std::forward<CompletionToken>(token));
    }

    /// Downgrade: takes the read lock while holding `write` (a write guard of this path), then
    /// releases the write lock, with no moment in between where neither is held. Completion
    /// signature: void(error_code, guard): the read guard on success.
    ///  - errc::lock_busy, with the write guard handed back (still held): another writer queued
    ///    while we held the lock. Its node is lower than the read node we would create, so it
    ///    would be granted the moment our write node goes, while we read: the downgrade is refused
    ///    rather than letting a writer and a reader overlap (Curator's downgrade has that hole).
    ///  - errc::not_a_write_guard if `write` is not a write guard of this path (it is released).
    ///  - a session error: the write lock is released too.
    /// Not cancellable.
    template <class CompletionToken>
    auto async_downgrade(guard write, CompletionToken&& token) {
        return asio::async_initiate<CompletionToken, void(error_code, guard)>(
            [](auto handler, std::shared_ptr<detail::session_impl> s, detail::acquire_request req, guard w) {
                detail::start_downgrade(s, std::move(req), std::move(w),
                    asio::any_completion_handler<void(error_code, guard)>(std::move(handler)));
            },
            token, session_, request(true, false), std::move(write));
    }

    /// Upgrading a read lock to a write lock would deadlock (the write node would wait for our
    /// own read node): this always fails with errc::upgrade_not_supported, and `read` stays held
    /// (returned in the handler). Release the read lock, then acquire the write lock.
    template <class CompletionToken>
    auto async_upgrade(guard read, CompletionToken&& token) {
        return asio::async_initiate<CompletionToken, void(error_code, guard)>(
            [](auto handler, std::shared_ptr<detail::session_impl> s, guard r) {
                detail::start_upgrade(s, std::move(r),
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
                req.deadline = d.resolve(); // the clock starts with the operation
                detail::start_acquire(s, std::move(req),
                    asio::any_completion_handler<void(error_code, guard)>(std::move(handler)));
            },
            token, session_, request(reader, try_only), deadline);
    }

    std::shared_ptr<detail::session_impl> session_;
    std::string path_;
    mutex_options opts_;
};

} // namespace zklock
