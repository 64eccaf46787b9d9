// The CLI's duration syntax (src/cli/duration.hpp). No server needed.
#include "cli/duration.hpp"

#include <gtest/gtest.h>

using zklock::cli::parse_duration;
using namespace std::chrono_literals;

TEST(CliDuration, AcceptsUnitsAndPlainSeconds) {
    std::string err;
    EXPECT_EQ(parse_duration("250ms", err), 250ms);
    EXPECT_EQ(parse_duration("10s", err), 10s);
    EXPECT_EQ(parse_duration("10", err), 10s);
    EXPECT_EQ(parse_duration("1.5s", err), 1500ms);
    EXPECT_EQ(parse_duration("0.25", err), 250ms);
    EXPECT_EQ(parse_duration("2m", err), 120s);
    EXPECT_EQ(parse_duration("2min", err), 120s);
    EXPECT_EQ(parse_duration("1h", err), 3600s);
    EXPECT_EQ(parse_duration("0", err), 0ms);
    EXPECT_TRUE(err.empty()) << err;
}

TEST(CliDuration, RefusesWhatIsNotADurationWithAMessage) {
    for (const char* bad : {"", "-1s", "abc", "10x", "1..5s", ".", "s", "10 s", "1e3", "nan", "99999999h"}) {
        std::string err;
        EXPECT_FALSE(parse_duration(bad, err).has_value()) << bad;
        EXPECT_NE(err.find("bad duration"), std::string::npos) << bad << ": " << err;
    }
    std::string err;
    parse_duration("10x", err);
    EXPECT_NE(err.find("unknown unit 'x'"), std::string::npos) << err;
    parse_duration("-5", err);
    EXPECT_NE(err.find("negative"), std::string::npos) << err;
}
