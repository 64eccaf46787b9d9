// libFuzzer target: lock-path and connect-string validation, and the path helpers. A path that
// validates is absolute, has no empty, "." or ".." segment, no control byte, and fits the cap.
#include <zklock/path.hpp>

#include "detail/protocol.hpp"

#include <cstdint>
#include <cstdlib>
#include <string_view>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    std::string_view s(reinterpret_cast<const char*>(data), size);
    (void)zklock::validate_connect_string(s);
    if (auto ec = zklock::validate_lock_path(s)) {
        if (ec.message().empty()) std::abort(); // every refusal names the problem
        return 0;
    }
    if (s.empty() || s.front() != '/' || s.back() == '/' || s.size() > zklock::max_path_length) std::abort();
    if (s.find("//") != std::string_view::npos) std::abort();
    for (unsigned char c : s)
        if (c < 0x20 || c == 0x7f) std::abort();
    auto chain = zklock::detail::ancestors(s);
    for (const auto& a : chain) {
        if (!s.starts_with(a) || s[a.size()] != '/') std::abort();
        if (zklock::validate_lock_path(a)) std::abort(); // ancestors of a valid path are valid
    }
    auto last = zklock::detail::last_segment(s);
    if (last.empty() || last == "." || last == "..") std::abort();
    return 0;
}
