// zklock/detail/no_session.hpp: completing an operation that has no session to run on.
#pragma once

#include <boost/asio/append.hpp>
#include <boost/asio/associated_executor.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/system_executor.hpp>

#include <utility>

namespace zklock::detail {

/// Completes `handler` with `args` on its associated executor, never inside the caller: for
/// operations that know no session (a default-constructed guard, an empty multi-lock set). The
/// concrete handler type is still known here, so a coroutine or a handler bound to an executor
/// completes there directly; only a plain callback with no executor at all falls back to
/// asio::system_executor, as asio::post does.
template <class Handler, class... Args>
void complete_without_session(Handler&& handler, Args&&... args) {
    auto ex = boost::asio::get_associated_executor(handler, boost::asio::system_executor());
    boost::asio::post(ex, boost::asio::append(std::forward<Handler>(handler), std::forward<Args>(args)...));
}

} // namespace zklock::detail
