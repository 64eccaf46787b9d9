// The completion mechanism every zklock operation uses (detail::pending): exactly once, on the
// handler's associated executor, never inside the initiating call, cancellation slot cleared
// before the upcall, outstanding work kept while pending. No server needed.
#include "common/pending.hpp"

#include <zklock/guard.hpp>
#include <zklock/multi_lock.hpp>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/bind_executor.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/strand.hpp>
#include <gtest/gtest.h>

#include <filesystem>
#include <thread>

namespace asio = boost::asio;
using boost::system::error_code;
using zklock::detail::pending;

TEST(Completion, PostsExactlyOnceNeverInline) {
    asio::io_context io;
    int calls = 0;
    pending<void(error_code, int)> p(
        asio::any_completion_handler<void(error_code, int)>([&](error_code ec, int v) {
            ++calls;
            EXPECT_FALSE(ec);
            EXPECT_EQ(v, 42);
        }),
        io.get_executor());
    p.complete({}, 42);
    EXPECT_EQ(calls, 0) << "completed inline";
    EXPECT_FALSE(p);
    io.run();
    EXPECT_EQ(calls, 1);
}

TEST(Completion, RunsOnTheAssociatedExecutor) {
    asio::io_context io, other;
    auto strand = asio::make_strand(io);
    bool on_strand = false;
    int calls = 0;
    pending<void(error_code)> p(
        asio::any_completion_handler<void(error_code)>(
            asio::bind_executor(strand,
                                [&](error_code) {
                                    on_strand = strand.running_in_this_thread();
                                    ++calls;
                                })),
        other.get_executor()); // the completion hops through the fallback, then the handler's executor
    p.complete({});
    EXPECT_EQ(calls, 0);
    other.run();
    EXPECT_EQ(calls, 0) << "ran on the fallback instead of the handler's strand";
    io.run();
    EXPECT_EQ(calls, 1);
    EXPECT_TRUE(on_strand);
}

TEST(Completion, KeepsOutstandingWorkWhilePending) {
    asio::io_context io;
    int calls = 0;
    std::optional<pending<void(error_code)>> p;
    p.emplace(asio::any_completion_handler<void(error_code)>([&](error_code) { ++calls; }),
              io.get_executor());
    // io.run() would block while p is pending: complete it from another thread after a while
    std::thread t([&] {
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
        p->complete({});
    });
    io.run(); // returns only after the handler ran
    t.join();
    EXPECT_EQ(calls, 1);
}

TEST(Completion, ClearsTheCancellationSlotBeforeTheUpcall) {
    asio::io_context io;
    asio::cancellation_signal sig;
    int cancels = 0, calls = 0;
    pending<void(error_code)> p(asio::any_completion_handler<void(error_code)>(
                                    asio::bind_cancellation_slot(sig.slot(), [&](error_code) { ++calls; })),
                                io.get_executor());
    p.on_cancel([&](asio::cancellation_type) { ++cancels; });
    EXPECT_TRUE(sig.slot().has_handler());
    p.complete({});
    io.run(); // the slot is cleared on the handler's side, just before the upcall
    // (Boost 1.81's any_completion_handler keeps a forwarding handler in the outer slot; what
    //  matters is that ours was removed: a late emit reaches nothing.)
    sig.emit(asio::cancellation_type::terminal);
    EXPECT_EQ(cancels, 0);
    EXPECT_EQ(calls, 1);
}

// Operations that know no session: a default-constructed guard and an empty
// multi-lock set complete with their error on the handler's own executor, never inside the
// call, and start no hidden thread (Asio's system_context starts its pool on first use). Each
// ctest runs in a process of its own, so the thread count is this test's alone.
namespace {
std::size_t threads_of_this_process() {
    std::size_t n = 0;
    for (auto& e : std::filesystem::directory_iterator("/proc/self/task")) {
        (void)e;
        ++n;
    }
    return n;
}
} // namespace

TEST(Completion, OperationsWithoutASessionCompleteOnTheCallersExecutorAndStartNoThread) {
    auto before = threads_of_this_process();
    asio::io_context io;
    auto main_thread = std::this_thread::get_id();
    int done = 0;
    auto expect_here = [&](error_code ec, error_code want) {
        EXPECT_EQ(ec, want) << ec.message();
        EXPECT_EQ(std::this_thread::get_id(), main_thread);
        EXPECT_TRUE(io.get_executor().running_in_this_thread());
        ++done;
    };
    zklock::guard g;
    g.async_wait_lost(
        asio::bind_executor(io, [&](error_code ec) { expect_here(ec, zklock::errc::not_held); }));
    g.async_wait_revoked(
        asio::bind_executor(io, [&](error_code ec) { expect_here(ec, zklock::errc::not_held); }));
    zklock::async_acquire_all(std::vector<zklock::mutex>{},
                              asio::bind_executor(io, [&](error_code ec, std::vector<zklock::guard> v) {
                                  EXPECT_TRUE(v.empty());
                                  expect_here(ec, zklock::errc::multi_lock_empty);
                              }));
    asio::co_spawn(
        io,
        [&]() -> asio::awaitable<void> {
            zklock::guard empty;
            auto [ec] = co_await empty.async_wait_lost(asio::as_tuple(asio::use_awaitable));
            expect_here(ec, zklock::errc::not_held);
            co_await empty.async_release(asio::use_awaitable);
            expect_here({}, {});
        },
        asio::detached);
    g.async_release(asio::bind_executor(io, [&](error_code ec) { expect_here(ec, {}); }));
    EXPECT_EQ(done, 0) << "completed inside the initiating call";
    io.run();
    EXPECT_EQ(done, 6);
    EXPECT_EQ(threads_of_this_process(), before) << "a hidden thread was started";
}

// A token that cannot take an operation's completion signature is refused at the call (the
// tokens are constrained); one that can is accepted.
template <class Token>
concept acquire_token = requires(zklock::mutex& m, Token t) {
    m.async_acquire(std::move(t));
};
template <class Token>
concept release_token = requires(zklock::guard& g, Token t) {
    g.async_release(std::move(t));
};
static_assert(acquire_token<void (*)(error_code, zklock::guard)>);
static_assert(!acquire_token<void (*)(error_code, int)>, "a handler of the wrong signature was accepted");
static_assert(!acquire_token<void (*)(error_code)>, "a handler of the wrong signature was accepted");
static_assert(release_token<void (*)(error_code)>);
static_assert(!release_token<void (*)(error_code, zklock::guard)>,
              "a handler of the wrong signature was accepted");

// Without a token an operation is asio::deferred: nothing starts until it is awaited or given a
// token, and `co_await op()` works in an asio::awaitable coroutine.
TEST(Completion, WithoutATokenAnOperationIsDeferredAndAwaitable) {
    static_assert(std::is_same_v<zklock::default_completion_token, asio::deferred_t>);
    asio::io_context io;
    int done = 0;
    zklock::guard empty;
    auto op = empty.async_wait_lost(); // made, not started
    io.run();
    EXPECT_EQ(done, 0);
    io.restart();
    std::move(op)(asio::bind_executor(io, [&](error_code ec) {
        EXPECT_EQ(ec, zklock::errc::not_held);
        ++done;
    }));
    asio::co_spawn(
        io,
        [&]() -> asio::awaitable<void> {
            zklock::guard g;
            co_await g.async_release(); // deferred, awaited
            auto [ec, guards] = co_await zklock::async_acquire_all(std::vector<zklock::mutex>{},
                                                                   asio::as_tuple(asio::deferred));
            EXPECT_EQ(ec, zklock::errc::multi_lock_empty);
            ++done;
        },
        asio::detached);
    io.run();
    EXPECT_EQ(done, 2);
}
