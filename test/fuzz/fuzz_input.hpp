// What the state machines' libFuzzer targets share: the input read a byte at a time (0xff once
// it runs out, which every target reads as "the user cancels": every later result stops), and
// sequence suffixes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string>

namespace zklock::fuzz {

struct input {
    const std::uint8_t* p;
    std::size_t n;
    std::uint8_t next() {
        if (n == 0) return 0xff; // ran out: every later result stops
        --n;
        return *p++;
    }
    bool done() const { return n == 0; }
};

/// A sequential node's 10-digit suffix.
inline std::string seq(int n) {
    char s[16];
    std::snprintf(s, sizeof s, "%010d", n);
    return s;
}

} // namespace zklock::fuzz
