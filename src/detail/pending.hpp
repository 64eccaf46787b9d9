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
                           asio::execution::outstanding_work.tracked)) {
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

    void complete(Args... args) {
        assert(h_);
        auto slot = asio::get_associated_cancellation_slot(*h_);
        if (slot.is_connected()) slot.clear();
        handler_type h = std::move(*h_);
        h_.reset();
        // blocking.never: like asio::post, never run inside this call
        auto ex = asio::prefer(ex_, asio::execution::blocking.never, asio::execution::relationship.fork);
        ex_ = asio::any_completion_executor(); // the work is now carried by the posted function
        ex.execute([h = std::move(h), ... a = std::move(args)]() mutable { std::move(h)(std::move(a)...); });
    }

private:
    std::optional<handler_type> h_;
    asio::any_completion_executor ex_;
};

} // namespace zklock::detail
