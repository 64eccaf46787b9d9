// libFuzzer target: lock-path and connect-string validation, and the path helpers. A path that
// validates is absolute, has no empty, "." or ".." segment, only UTF-8 the server takes, and fits
// the cap.
#include <zklock/path.hpp>

#include "protocol/protocol.hpp"

#include <cstdint>
#include <cstdlib>
#include <string_view>

namespace {
// The server's rule, stated on the bytes as the Unicode standard's table of well-formed UTF-8
// (Table 3-7) and independently of the library's decoder: sequences of one to three bytes (four
// would be past U+FFFF), without U+0000-U+001F, U+007F-U+009F, U+E000-U+F8FF or U+FFF0-U+FFFF.
bool utf8_the_server_takes(std::string_view s) {
    auto in = [](unsigned char c, unsigned lo, unsigned hi) { return c >= lo && c <= hi; };
    for (std::size_t i = 0; i < s.size();) {
        const auto b0 = static_cast<unsigned char>(s[i]);
        const auto b1 = i + 1 < s.size() ? static_cast<unsigned char>(s[i + 1]) : 0;
        const auto b2 = i + 2 < s.size() ? static_cast<unsigned char>(s[i + 2]) : 0;
        if (b0 < 0x80) {
            if (b0 < 0x20 || b0 == 0x7f) return false;
            i += 1;
        } else if (in(b0, 0xc2, 0xdf) && in(b1, 0x80, 0xbf)) {
            if (b0 == 0xc2 && b1 < 0xa0) return false; // U+0080-U+009F
            i += 2;
        } else if (((b0 == 0xe0 && in(b1, 0xa0, 0xbf)) || (in(b0, 0xe1, 0xec) && in(b1, 0x80, 0xbf)) ||
                    (b0 == 0xed && in(b1, 0x80, 0x9f)) || (in(b0, 0xee, 0xef) && in(b1, 0x80, 0xbf))) &&
                   in(b2, 0x80, 0xbf)) {
            if (b0 == 0xee || (b0 == 0xef && b1 <= 0xa3)) return false; // U+E000-U+F8FF
            if (b0 == 0xef && b1 == 0xbf && b2 >= 0xb0) return false;   // U+FFF0-U+FFFF
            i += 3;
        } else {
            return false;
        }
    }
    return true;
}
} // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    std::string_view s(reinterpret_cast<const char*>(data), size);
    (void)zklock::validate_connect_string(s);
    if (auto ec = zklock::validate_lock_path(s)) {
        if (ec.message().empty()) std::abort(); // every refusal names the problem
        return 0;
    }
    if (s.empty() || s.front() != '/' || s.back() == '/' || s.size() > zklock::max_path_length) std::abort();
    if (s.find("//") != std::string_view::npos) std::abort();
    if (!utf8_the_server_takes(s)) std::abort();
    auto chain = zklock::detail::ancestors(s);
    for (const auto& a : chain) {
        if (!s.starts_with(a) || s[a.size()] != '/') std::abort();
        if (zklock::validate_lock_path(a)) std::abort(); // ancestors of a valid path are valid
    }
    auto last = zklock::detail::last_segment(s);
    if (last.empty() || last == "." || last == "..") std::abort();
    return 0;
}
