#include "protocol/protocol.hpp"

#include <zklock/path.hpp>

#include <algorithm>
#include <arpa/inet.h>
#include <charconv>
#include <cstdio>

namespace zklock::detail {

std::string holder_description(std::string_view host, long pid) {
    return "zklock " + std::string(host) + " pid " + std::to_string(pid);
}

std::optional<std::int32_t> parse_sequence(std::string_view t) noexcept {
    if (t.size() != 10) return std::nullopt;
    std::size_t first = (t[0] == '-') ? 1 : 0;
    for (std::size_t i = first; i < t.size(); ++i)
        if (t[i] < '0' || t[i] > '9') return std::nullopt;
    std::int64_t v = 0;
    auto [p, ec] = std::from_chars(t.data(), t.data() + t.size(), v);
    if (ec != std::errc{} || p != t.data() + t.size()) return std::nullopt;
    if (v < INT32_MIN || v > INT32_MAX) return std::nullopt;
    return static_cast<std::int32_t>(v);
}

bool is_semaphore_lease(std::string_view name) noexcept {
    constexpr std::string_view marker = "-lease-";
    return name.size() >= marker.size() + 10 &&
           name.substr(name.size() - 10 - marker.size(), marker.size()) == marker &&
           parse_sequence(name.substr(name.size() - 10)).has_value();
}

std::string_view node_marker(lock_family f, bool reader, lock_dialect d) noexcept {
    if (f == lock_family::mutex) return d == lock_dialect::kazoo ? "__lock__" : "-lock-";
    if (f == lock_family::latch) return "-latch-";
    if (d == lock_dialect::kazoo) return reader ? "__rlock__" : "__lock__";
    return reader ? "-__READ__" : "-__WRIT__";
}

std::optional<contender> parse_contender(std::string_view child, lock_family f, lock_dialect d) noexcept {
    // Every recipe on a path sees every other's nodes, whatever its family and dialect (a mutex
    // and a read/write lock on one path must exclude each other). The family and the
    // dialect only decide the names zklock creates (node_marker).
    (void)f;
    (void)d;
    auto ends_with_marker = [&](std::string_view marker) {
        return child.size() >= marker.size() + 10 &&
               child.substr(child.size() - 10 - marker.size(), marker.size()) == marker;
    };
    bool writer = true;
    if (ends_with_marker("__READ__") || ends_with_marker("__rlock__")) {
        writer = false; // Curator's and kazoo's read nodes
    } else if (!ends_with_marker("lock-") && !ends_with_marker("__lock__") && !ends_with_marker("__WRIT__") &&
               !ends_with_marker("latch-")) {
        // Exclusive nodes: Curator's mutex "[_c_<uuid>-]lock-<seq>", kazoo's Lock and WriteLock
        // "<hex>__lock__<seq>", Curator's write lock "_c_<uuid>-__WRIT__<seq>", Curator's
        // LeaderLatch "[_c_<uuid>-]latch-<seq>".
        return std::nullopt;
    }
    auto seq_text = child.substr(child.size() - 10);
    auto seq = parse_sequence(seq_text);
    if (!seq) return std::nullopt;
    return contender{child, seq_text, *seq, writer};
}

std::optional<contender> parse_contender(std::string_view child, lock_dialect d) noexcept {
    return parse_contender(child, lock_family::mutex, d);
}

namespace {
/// True if `child` carries one of the lock markers followed by something: a lock node's
/// name, whether or not its suffix is well formed.
bool has_marker(std::string_view child) noexcept {
    auto after = [&](std::string_view marker) {
        auto at = child.rfind(marker);
        return at != std::string_view::npos && at + marker.size() < child.size();
    };
    return after("lock-") || after("__lock__") || after("__READ__") || after("__WRIT__") ||
           after("__rlock__") || after("latch-");
}
} // namespace

child_kind classify_child(std::string_view child, lock_family f, lock_dialect d,
                          parent_cversion cv) noexcept {
    if (auto p = parse_contender(child, f, d)) {
        if (!counter_may_have_wrapped(cv) && (p->seq < 0 || p->seq >= *cv)) return child_kind::foreign;
        return child_kind::contender;
    }
    return has_marker(child) ? child_kind::foreign : child_kind::other;
}

std::vector<contender> sorted_contenders(std::span<const std::string> children, lock_dialect dialect,
                                         lock_family family, parent_cversion cv) {
    std::vector<contender> out;
    out.reserve(children.size());
    const bool wrap = counter_may_have_wrapped(cv);
    for (const auto& c : children)
        if (auto p = parse_contender(c, family, dialect); p && (wrap || (p->seq >= 0 && p->seq < *cv)))
            out.push_back(*p);
    std::sort(out.begin(), out.end(), [](const contender& a, const contender& b) {
        if (a.seq_text != b.seq_text) return a.seq_text < b.seq_text;
        return a.name < b.name;
    });
    return out;
}

bool sequence_ambiguous(std::span<const std::string> children, lock_family f, lock_dialect d,
                        parent_cversion cv) {
    if (!counter_may_have_wrapped(cv)) return false;
    std::vector<std::string_view> seen;
    seen.reserve(children.size());
    for (const auto& c : children) {
        if (auto p = parse_contender(c, f, d)) {
            if (p->seq < 0 || p->seq == INT32_MAX) return true;
            seen.push_back(p->seq_text);
            continue;
        }
        // "<marker>-2147483648": an 11-character wrapped suffix, which parse_contender refuses.
        if (c.size() > 11 && c[c.size() - 11] == '-' &&
            std::all_of(c.end() - 10, c.end(), [](char ch) { return ch >= '0' && ch <= '9'; })) {
            std::string unwrapped = c.substr(0, c.size() - 11) + "0000000000";
            if (parse_contender(unwrapped, f, d)) return true;
        }
    }
    std::sort(seen.begin(), seen.end());
    return std::adjacent_find(seen.begin(), seen.end()) != seen.end();
}

exclusive_decision decide(std::span<const std::string> children, std::string_view mine, lock_family f,
                          lock_dialect dialect, std::string_view own_writer, parent_cversion cv) {
    if (sequence_ambiguous(children, f, dialect, cv)) {
        exclusive_decision amb;
        amb.what = exclusive_decision::ambiguous;
        return amb;
    }
    auto all = sorted_contenders(children, dialect, f, cv);
    auto it = std::find_if(all.begin(), all.end(), [&](const contender& c) { return c.name == mine; });
    exclusive_decision d;
    if (it == all.end()) return d; // missing
    d.position = static_cast<std::size_t>(it - all.begin());
    auto blocker = all.end();
    if (it->writer) {
        if (it != all.begin()) blocker = it - 1;
    } else {
        for (auto j = it; j != all.begin();) {
            --j;
            if (j->writer && j->name != own_writer) {
                blocker = j;
                break;
            }
        }
    }
    if (blocker == all.end()) {
        d.what = exclusive_decision::acquired;
    } else {
        d.what = exclusive_decision::wait;
        d.predecessor = std::string(blocker->name);
        // Alone: a writer's predecessor is the only lower node; a reader's blocker is the only
        // lower writer (the nearest one: none lies between it and us).
        if (it->writer) {
            d.alone = d.position == 1;
        } else {
            d.alone = std::none_of(all.begin(), blocker,
                                   [&](const contender& c) { return c.writer && c.name != own_writer; });
        }
    }
    return d;
}

bool granted_once_gone(std::span<const std::string> children, std::string_view mine,
                       std::string_view predecessor, lock_family f, lock_dialect d,
                       std::string_view own_writer, parent_cversion cv) {
    if (predecessor.empty() || predecessor == mine) return false;
    std::vector<std::string> rest;
    rest.reserve(children.size());
    bool seen = false;
    for (const auto& c : children) {
        if (c == predecessor)
            seen = true;
        else
            rest.push_back(c);
    }
    return seen && decide(rest, mine, f, d, own_writer, cv).what == exclusive_decision::acquired;
}

exclusive_decision decide_exclusive(std::span<const std::string> children, std::string_view mine,
                                    lock_dialect dialect, parent_cversion cv) {
    return decide(children, mine, lock_family::mutex, dialect, {}, cv);
}

std::optional<std::string> find_by_guid(std::span<const std::string> children, std::string_view guid) {
    if (guid.empty()) return std::nullopt;
    for (const auto& c : children)
        if (c.find(guid) != std::string::npos && c.size() > 10 &&
            parse_sequence(std::string_view(c).substr(c.size() - 10)))
            return c;
    return std::nullopt;
}

std::string format_guid(std::uint64_t hi, std::uint64_t lo) {
    hi = (hi & 0xffffffffffff0fffULL) | 0x0000000000004000ULL; // version 4
    lo = (lo & 0x3fffffffffffffffULL) | 0x8000000000000000ULL; // variant 10
    static constexpr char hex[] = "0123456789abcdef";
    std::string s;
    s.reserve(36);
    auto put = [&](std::uint64_t v, int nibbles) {
        for (int i = nibbles - 1; i >= 0; --i) s.push_back(hex[(v >> (i * 4)) & 0xf]);
    };
    put(hi >> 32, 8);
    s.push_back('-');
    put(hi >> 16, 4);
    s.push_back('-');
    put(hi, 4);
    s.push_back('-');
    put(lo >> 48, 4);
    s.push_back('-');
    put(lo, 12);
    return s;
}

std::string guid_in_name(std::string_view guid, lock_dialect d) {
    std::string g(guid);
    if (d == lock_dialect::kazoo) std::erase(g, '-');
    return g;
}

naming naming_of(std::string_view name) noexcept {
    auto marker_at_end = [&](std::string_view m) {
        return name.size() >= m.size() + 10 && name.substr(name.size() - 10 - m.size(), m.size()) == m;
    };
    if (marker_at_end("__lock__") || marker_at_end("__rlock__")) return naming::kazoo;
    if (marker_at_end("latch-")) return naming::curator_latch;
    return naming::curator_lock; // "lock-", "__READ__", "__WRIT__"
}

std::optional<std::string> other_naming(std::span<const std::string> children, naming ours) {
    for (const auto& c : children)
        if (parse_contender(c) && naming_of(c) != ours) return c;
    return std::nullopt;
}

std::string protected_node_prefix(std::string_view parent, std::string_view guid, lock_dialect d,
                                  lock_family f, bool reader) {
    auto marker = node_marker(f, reader, d);
    std::string s;
    s.reserve(parent.size() + 1 + protected_prefix.size() + guid.size() + marker.size());
    s.append(parent).append("/");
    if (d == lock_dialect::curator) s.append(protected_prefix);
    s.append(guid_in_name(guid, d)).append(marker);
    return s;
}

std::string release_marker(std::string_view node) {
    std::string s(node);
    s.append(".released");
    return s;
}

bool may_mark_release(std::string_view predecessor, lock_family f, lock_dialect d) noexcept {
    auto c = parse_contender(predecessor, f, d);
    return c && c->writer;
}

std::string_view last_segment(std::string_view path) noexcept {
    auto at = path.rfind('/');
    return at == std::string_view::npos ? path : path.substr(at + 1);
}

bool path_segment_chars_ok(std::string_view seg) noexcept {
    // The server decodes a path as UTF-8 into Java chars (UTF-16 code units: a malformed sequence
    // becomes U+FFFD, a code point past U+FFFF a surrogate pair) and refuses U+0000-U+001F,
    // U+007F-U+009F, U+D800-U+F8FF and U+FFF0-U+FFFF (PathUtils.validatePath). The same rule
    // on the bytes: strict UTF-8, and none of those code points nor any past U+FFFF.
    for (std::size_t i = 0; i < seg.size();) {
        const auto b0 = static_cast<unsigned char>(seg[i]);
        std::uint32_t cp = 0;
        std::size_t n = 0;
        if (b0 < 0x80) {
            cp = b0;
            n = 1;
        } else if (b0 >= 0xc2 && b0 <= 0xdf) { // (0xc0, 0xc1: overlong)
            cp = b0 & 0x1fu;
            n = 2;
        } else if (b0 >= 0xe0 && b0 <= 0xef) {
            cp = b0 & 0x0fu;
            n = 3;
        } else {
            return false; // a continuation byte first, or a 4-byte sequence (past U+FFFF), or not UTF-8
        }
        if (seg.size() - i < n) return false; // truncated
        for (std::size_t k = 1; k < n; ++k) {
            const auto b = static_cast<unsigned char>(seg[i + k]);
            if ((b & 0xc0u) != 0x80u) return false;
            cp = (cp << 6) | (b & 0x3fu);
        }
        if (n == 3 && cp < 0x800) return false; // overlong
        if (cp < 0x20 || (cp >= 0x7f && cp <= 0x9f) || (cp >= 0xd800 && cp <= 0xf8ff) || cp >= 0xfff0)
            return false;
        i += n;
    }
    return true;
}

std::vector<std::string> ancestors(std::string_view path) {
    std::vector<std::string> out;
    for (std::size_t at = path.find('/', 1); at != std::string_view::npos; at = path.find('/', at + 1))
        out.emplace_back(path.substr(0, at));
    return out;
}

} // namespace zklock::detail

namespace zklock {

error_code validate_lock_path(std::string_view p) noexcept {
    if (p.empty()) return errc::path_empty;
    if (p.size() > max_path_length) return errc::path_too_long;
    if (p.front() != '/') return errc::path_not_absolute;
    if (p.size() == 1) return errc::path_reserved; // "/" itself: the lock would own the root
    if (p.back() == '/') return errc::path_trailing_slash;
    std::size_t start = 1;
    while (start <= p.size()) {
        auto end = p.find('/', start);
        if (end == std::string_view::npos) end = p.size();
        auto seg = p.substr(start, end - start);
        if (seg.empty()) return errc::path_empty_segment;
        if (seg == "." || seg == "..") return errc::path_relative_segment;
        if (!detail::path_segment_chars_ok(seg)) return errc::path_bad_character;
        start = end + 1;
    }
    if (p == "/zookeeper" || p.starts_with("/zookeeper/")) return errc::path_reserved;
    return {};
}

error_code validate_connect_string(std::string_view s) noexcept {
    if (s.empty() || s.find("://") != std::string_view::npos) return errc::invalid_connect_string;
    auto slash = s.find('/');
    auto hosts = s.substr(0, slash);
    if (slash != std::string_view::npos) {
        auto chroot = s.substr(slash);
        if (chroot != "/") {
            if (auto ec = validate_lock_path(chroot); ec && ec != errc::path_reserved)
                return ec == errc::path_too_long ? ec : errc::invalid_chroot;
        }
    }
    if (hosts.empty()) return errc::invalid_connect_string;
    // (';' is no host character: "zk1:2181;zk2:2181" read as host "zk1:2181;zk2" failed at the
    // resolver with "Host not found", naming nothing)
    if (hosts.find(';') != std::string_view::npos) return errc::invalid_connect_separator;
    std::size_t start = 0;
    while (start <= hosts.size()) {
        auto end = hosts.find(',', start);
        if (end == std::string_view::npos) end = hosts.size();
        auto hp = hosts.substr(start, end - start);
        auto colon = hp.rfind(':');
        if (colon == std::string_view::npos || colon == 0) return errc::invalid_connect_string;
        auto host = hp.substr(0, colon);
        auto port = hp.substr(colon + 1);
        for (unsigned char c : host)
            if (c <= 0x20 || c == 0x7f) return errc::invalid_connect_string;
        if (host.front() == '[' && host.back() != ']') return errc::invalid_connect_string;
        unsigned v = 0;
        auto [ptr, ec] = std::from_chars(port.data(), port.data() + port.size(), v);
        if (port.empty() || ec != std::errc{} || ptr != port.data() + port.size() || v == 0 || v > 65535)
            return errc::invalid_connect_string;
        start = end + 1;
    }
    return {};
}

namespace detail {

connect_spec parse_connect_string(std::string_view s) {
    connect_spec out;
    auto slash = s.find('/');
    if (slash != std::string_view::npos && s.substr(slash) != "/") out.chroot = std::string(s.substr(slash));
    auto hosts = s.substr(0, slash);
    std::size_t start = 0;
    while (start < hosts.size()) {
        auto end = hosts.find(',', start);
        if (end == std::string_view::npos) end = hosts.size();
        auto hp = hosts.substr(start, end - start);
        auto colon = hp.rfind(':');
        if (colon != std::string_view::npos)
            out.hosts.push_back({std::string(hp.substr(0, colon)), std::string(hp.substr(colon + 1))});
        start = end + 1;
    }
    return out;
}

bool is_address_literal(std::string_view host) noexcept {
    if (host.size() >= 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
    if (host.empty() || host.size() >= 64) return false;
    char buf[64];
    std::copy(host.begin(), host.end(), buf);
    buf[host.size()] = '\0';
    unsigned char addr[16];
    return ::inet_pton(AF_INET, buf, addr) == 1 || ::inet_pton(AF_INET6, buf, addr) == 1;
}

bool needs_resolution(std::string_view s) {
    auto spec = parse_connect_string(s);
    return std::any_of(spec.hosts.begin(), spec.hosts.end(),
                       [](const connect_host& h) { return !is_address_literal(h.host); });
}

std::string c_client_connect_string(std::string_view s) {
    const auto slash = s.find('/');
    const auto hosts = s.substr(0, slash);
    std::string out;
    std::size_t start = 0;
    while (start <= hosts.size()) {
        auto end = hosts.find(',', start);
        if (end == std::string_view::npos) end = hosts.size();
        auto hp = hosts.substr(start, end - start);
        const auto colon = hp.rfind(':');
        if (!out.empty() || start > 0) out += ',';
        if (colon != std::string_view::npos && colon >= 2 && hp.front() == '[' && hp[colon - 1] == ']')
            out.append(hp.substr(1, colon - 2)).append(hp.substr(colon));
        else
            out.append(hp);
        start = end + 1;
    }
    if (slash != std::string_view::npos) out.append(s.substr(slash));
    return out;
}

std::string numeric_connect_string(const std::vector<std::pair<std::string, unsigned short>>& addresses,
                                   std::string_view chroot) {
    std::string out;
    std::vector<std::string> seen;
    for (auto& [a, port] : addresses) {
        auto hp = a + ":" + std::to_string(port);
        if (std::find(seen.begin(), seen.end(), hp) != seen.end()) continue;
        seen.push_back(hp);
        if (!out.empty()) out += ',';
        out += hp;
    }
    out += chroot;
    return out;
}

} // namespace detail

} // namespace zklock
