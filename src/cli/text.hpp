// The zklock program's output of node data and ids: JSON strings, terminal-safe text, hex ids.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>

namespace zklock::cli {

inline std::string hex(std::int64_t v) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "0x%016llx", static_cast<unsigned long long>(v));
    return buf;
}

/// Length of the valid UTF-8 sequence at the start of `s`, or 0.
inline std::size_t utf8_sequence(std::string_view s) {
    auto b = [&](std::size_t i) { return static_cast<unsigned char>(s[i]); };
    auto cont = [&](std::size_t i) { return i < s.size() && (b(i) & 0xC0) == 0x80; };
    unsigned char c = b(0);
    if (c >= 0xC2 && c <= 0xDF && cont(1)) return 2;
    if (c == 0xE0 && cont(1) && b(1) >= 0xA0 && cont(2)) return 3;
    if (((c >= 0xE1 && c <= 0xEC) || c == 0xEE || c == 0xEF) && cont(1) && cont(2)) return 3;
    if (c == 0xED && cont(1) && b(1) < 0xA0 && cont(2)) return 3;
    if (c == 0xF0 && cont(1) && b(1) >= 0x90 && cont(2) && cont(3)) return 4;
    if (c >= 0xF1 && c <= 0xF3 && cont(1) && cont(2) && cont(3)) return 4;
    if (c == 0xF4 && cont(1) && b(1) < 0x90 && cont(2) && cont(3)) return 4;
    return 0;
}

/// A JSON string; bytes that are not valid UTF-8 (binary node data) become U+FFFD.
inline std::string json_string(std::string_view s) {
    std::string out = "\"";
    for (std::size_t i = 0; i < s.size(); ++i) {
        unsigned char c = static_cast<unsigned char>(s[i]);
        if (c >= 0x80) {
            if (std::size_t n = utf8_sequence(s.substr(i))) {
                out.append(s.substr(i, n));
                i += n - 1;
            } else {
                out += "\\ufffd";
            }
            continue;
        }
        switch (c) {
        case '"':
            out += "\\\"";
            break;
        case '\\':
            out += "\\\\";
            break;
        case '\n':
            out += "\\n";
            break;
        case '\r':
            out += "\\r";
            break;
        case '\t':
            out += "\\t";
            break;
        default:
            if (c < 0x20 || c == 0x7f) {
                char buf[8];
                std::snprintf(buf, sizeof buf, "\\u%04x", c);
                out += buf;
            } else {
                out += static_cast<char>(c);
            }
        }
    }
    return out + "\"";
}

/// Node data for a terminal: valid UTF-8 stays, control bytes and bytes that are not valid UTF-8
/// (binary data) become '?', so no escape sequence reaches the terminal.
inline std::string printable(std::string_view s) {
    std::string out;
    for (std::size_t i = 0; i < s.size(); ++i) {
        unsigned char c = static_cast<unsigned char>(s[i]);
        if (c >= 0x80) {
            std::size_t n = utf8_sequence(s.substr(i));
            if (n)
                out.append(s.substr(i, n));
            else
                out += '?';
            i += n ? n - 1 : 0;
            continue;
        }
        out += (c < 0x20 || c == 0x7f) ? '?' : static_cast<char>(c);
    }
    return out;
}

} // namespace zklock::cli
