// zklock/completion.hpp: the completion token that an operation uses when it is given none.
#pragma once

#include <boost/asio/async_result.hpp>
#include <boost/asio/deferred.hpp>

namespace zklock {

namespace asio = boost::asio;

/// The completion token of every zklock operation called without one: asio::deferred, which is
/// what Asio itself defaults to from Boost 1.86 on (Boost 1.81, which zklock builds against,
/// has no default for asio::any_io_executor). So `co_await m.async_acquire()` works in an
/// asio::awaitable coroutine, and `auto op = m.async_acquire();` makes an operation that starts
/// when it is awaited or called with a token.
///
/// Every operation's token is constrained to its completion signature
/// (BOOST_ASIO_COMPLETION_TOKEN_FOR): a token that cannot take it fails to compile at the call.
using default_completion_token = asio::deferred_t;

} // namespace zklock
