// Durations on the command line: "250ms", "10s", "1.5s", "2m", "1h", or a plain number of
// seconds (as timeout(1) takes them). Pure: unit-tested without a server.
#pragma once

#include <chrono>
#include <cctype>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <optional>
#include <string>
#include <string_view>

namespace zklock::cli {

/// Parses `text` into milliseconds (rounded to the nearest). On failure returns nullopt and sets
/// `error` to a message naming the problem. Negative, empty, non-finite and absurdly large
/// (more than a year) values are refused.
inline std::optional<std::chrono::milliseconds> parse_duration(std::string_view text, std::string& error) {
    const std::string s(text);
    auto bad = [&](const std::string& why) -> std::optional<std::chrono::milliseconds> {
        error = "bad duration '" + s + "': " + why;
        return std::nullopt;
    };
    if (s.empty()) return bad("empty (use e.g. 500ms, 10s, 2m, 1h)");
    std::size_t i = 0;
    while (i < s.size() && (std::isdigit(static_cast<unsigned char>(s[i])) || s[i] == '.')) ++i;
    if (i == 0) {
        if (s[0] == '-') return bad("negative");
        return bad("it must start with a number (use e.g. 500ms, 10s, 2m, 1h)");
    }
    const std::string number = s.substr(0, i), unit = s.substr(i);
    if (number.find('.') != number.rfind('.') || number == ".") return bad("not a number");
    char* end = nullptr;
    double v = std::strtod(number.c_str(), &end);
    if (end != number.c_str() + number.size() || !std::isfinite(v)) return bad("not a number");
    double ms_per_unit;
    if (unit.empty() || unit == "s")
        ms_per_unit = 1000;
    else if (unit == "ms")
        ms_per_unit = 1;
    else if (unit == "m" || unit == "min")
        ms_per_unit = 60'000;
    else if (unit == "h")
        ms_per_unit = 3'600'000;
    else
        return bad("unknown unit '" + unit + "' (use ms, s, m or h)");
    double ms = v * ms_per_unit;
    if (ms > 365.0 * 24 * 3'600'000) return bad("longer than a year");
    return std::chrono::milliseconds(static_cast<std::int64_t>(std::llround(ms)));
}

} // namespace zklock::cli
