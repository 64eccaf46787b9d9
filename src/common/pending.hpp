// A parked completion handler: keeps its executor busy, completes exactly once by posting.
#pragma once

#include <boost/asio/any_completion_executor.hpp>
#include <boost/asio/any_completion_handler.hpp>
#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/associated_cancellation_slot.hpp>
#include <boost/asio/associated_executor.hpp>
#include <boost/asio/execution/blocking.hpp>
#include <boost/asio/execution/outstanding_work.hpp>
#include <boost/asio/execution/relationship.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/prefer.hpp>

#include <cassert>
#include <functional>
#include <optional>
#include <utility>

namespace zklock::detail {

namespace asio = boost::asio;

template <class Signature>
class pending;

/// Holds a user's handler while its operation is outstanding. The handler's associated executor
/// (or `fallback`) is kept busy (outstanding work tracked) until completion. complete() clears
/// the cancellation slot, releases the handler and posts it: it never runs inline.
template <class... Args>
class pending<void(Args...)> {
public:
    using handler_type = asio::any_completion_handler<void(Args...)>;

    pending(handler_type h, const asio::any_io_executor& fallback)
        : ex_(asio::prefer(asio::get_associated_executor(h, fallback),
                           asio::execution::outstanding_work.tracked)),
          post_ex_(fallback) {
        h_.emplace(std::move(h));
    }
    pending(pending&&) noexcept = default;
    pending& operator=(pending&&) noexcept = default;

    explicit operator bool() const noexcept { return h_.has_value(); }

    /// Installs `f(asio::cancellation_type)` in the handler's cancellation slot, if it has one.
    /// `f` runs on whichever thread emits the signal: it must only post.
    template <class F>
    void on_cancel(F&& f) {
        if (!h_) return;
        auto slot = asio::get_associated_cancellation_slot(*h_);
        if (slot.is_connected()) slot.assign(std::forward<F>(f));
    }

    /// The handler's cancellation slot (to bind an inner operation to it).
    asio::cancellation_slot slot() const {
        return h_ ? asio::get_associated_cancellation_slot(*h_) : asio::cancellation_slot();
    }

    /// Never runs the handler inside this call: first a post to an io executor (any_completion_executor
    /// cannot be required to be blocking.never), then the handler's own executor. The cancellation
    /// slot is cleared there, on the handler's side, where the user emits.
    /// `f(const Args&...)` runs inside complete(), before the handler is posted (the metrics
    /// see each outcome exactly once, on the thread that completes).
    template <class F>
    void observe(F&& f) {
        observer_ = std::forward<F>(f);
    }

    void complete(Args... args) {
        assert(h_);
        if (observer_) {
            auto obs = std::move(observer_);
            observer_ = nullptr;
            obs(args...);
        }
        handler_type h = std::move(*h_);
        h_.reset();
        asio::any_completion_executor work = std::move(ex_);
        ex_ = asio::any_completion_executor();
        asio::post(post_ex_, [h = std::move(h), work = std::move(work), ... a = std::move(args)]() mutable {
            auto ex = work;
            ex.execute([h = std::move(h), work = std::move(work), ... a = std::move(a)]() mutable {
                auto slot = asio::get_associated_cancellation_slot(h);
                if (slot.is_connected()) slot.clear();
                std::move(h)(std::move(a)...);
            });
        });
    }

private:
    std::optional<handler_type> h_;
    asio::any_completion_executor ex_; // the handler's executor, keeping it busy
    asio::any_io_executor post_ex_;    // where the completion is posted first
    std::function<void(const Args&...)> observer_;
};

} // namespace zklock::detail
