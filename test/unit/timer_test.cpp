// The platform's timer (src/session/timer.hpp) on production's platform: what the session's lease
// timer relies on. Its re-arm is skipped when the timer's expiry is already the deadline it wants
// (session_heartbeat.cpp, arm_lease_timer), so a cancelled timer must report no deadline: the
// wrapper's first version kept the old one, and a lock taken after the last one was released,
// with the same lease deadline, then had no lease timer at all; its holder was never told of a
// lapse (found by the whole-library simulation's margin oracle, --faults).
#include "session/platform.hpp"
#include "session/timer.hpp"

#include <boost/asio/io_context.hpp>

#include <gtest/gtest.h>

#include <chrono>
#include <limits>
#include <optional>

namespace {

using zklock::detail::real_platform;
using zklock::detail::timer;
using zklock::detail::timer_clock;

constexpr auto never = std::numeric_limits<std::int64_t>::max();

TEST(Timer, ACancelledTimerHasNoDeadline) {
    boost::asio::io_context io;
    for (auto c : {timer_clock::boot, timer_clock::steady}) {
        timer t(real_platform(), io.get_executor(), c);
        EXPECT_EQ(t.expiry_ns(), never) << "a new timer has no deadline";
        const auto at = real_platform()->boot_now() + 3'600'000'000'000; // an hour on
        if (c == timer_clock::boot)
            t.expires_at_boot(at);
        else
            t.expires_after(std::chrono::hours(1));
        std::optional<boost::system::error_code> got;
        t.async_wait([&](boost::system::error_code ec) { got = ec; });
        EXPECT_NE(t.expiry_ns(), never);
        t.cancel();
        EXPECT_EQ(t.expiry_ns(), never) << "cancel() left a deadline that no wait stands for";
        io.run();
        io.restart();
        ASSERT_TRUE(got.has_value());
        EXPECT_EQ(*got, boost::asio::error::operation_aborted);
    }
}

TEST(Timer, ARearmAfterACancelWaitsAgainAndFires) {
    boost::asio::io_context io;
    timer t(real_platform(), io.get_executor(), timer_clock::boot);
    const auto at = real_platform()->boot_now() + 20'000'000; // 20 ms on
    t.expires_at_boot(at);
    t.async_wait([](boost::system::error_code) {});
    t.cancel();
    // the same deadline again: a caller comparing expiry_ns() with it must see none pending
    EXPECT_NE(t.expiry_ns(), at);
    t.expires_at_boot(at);
    std::optional<boost::system::error_code> got;
    t.async_wait([&](boost::system::error_code ec) { got = ec; });
    io.run();
    ASSERT_TRUE(got.has_value());
    EXPECT_FALSE(*got) << got->message();
    EXPECT_GE(real_platform()->boot_now(), at);
}

} // namespace
