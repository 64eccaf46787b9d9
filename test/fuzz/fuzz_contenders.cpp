// libFuzzer target: contender-name parsing and ordering, and the lock decision for both dialects
// and both families. The invariant: on any list of children, the decision never grants two
// contenders at once (a writer alone, or readers only), and an ambiguous order grants nobody.
// With a parent cversion that rules a wrap out, the order is never ambiguous, and the foreign
// children change no contender's decision (they cannot deny the lock).
//
// Input: byte 0 selects the family and dialect (bits 0-1) and the parent's cversion (bits 2-4:
// unknown, or one of a few values), the rest is the list of children, one per line.
#include "protocol/protocol.hpp"

#include <algorithm>
#include <climits>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

using namespace zklock::detail;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    if (size < 1) return 0;
    const auto family = (data[0] & 1) ? lock_family::rw : lock_family::mutex;
    const auto dialect = (data[0] & 2) ? zklock::lock_dialect::kazoo : zklock::lock_dialect::curator;
    static const parent_cversion cversions[] = {std::nullopt,  0,        3, 10, 100, 999999,
                                                INT32_MAX - 1, INT32_MAX};
    const parent_cversion cv = cversions[(data[0] >> 2) & 7];
    std::vector<std::string> children;
    std::string cur;
    for (std::size_t i = 1; i < size; ++i) {
        if (data[i] == '\n') {
            children.push_back(cur);
            cur.clear();
        } else {
            cur.push_back(static_cast<char>(data[i]));
        }
    }
    children.push_back(cur);
    if (children.size() > 64) return 0; // keep the quadratic check below fast

    auto sorted = sorted_contenders(children, dialect, family, cv);
    for (std::size_t i = 1; i < sorted.size(); ++i)
        if (sorted[i - 1].seq_text > sorted[i].seq_text) std::abort(); // ordered by suffix text
    for (const auto& c : sorted) {
        if (c.seq_text.size() != 10) std::abort();
        auto again = parse_sequence(c.seq_text);
        if (!again || *again != c.seq) std::abort();
    }
    const bool ambiguous = sequence_ambiguous(children, family, dialect, cv);
    if (ambiguous && !counter_may_have_wrapped(cv)) std::abort();
    std::vector<std::string> without_foreign;
    for (const auto& child : children)
        if (classify_child(child, family, dialect, cv) != child_kind::foreign)
            without_foreign.push_back(child);
    std::vector<std::string> names(children);
    std::sort(names.begin(), names.end());
    const bool unique_names = std::adjacent_find(names.begin(), names.end()) == names.end();
    int writers = 0, readers = 0;
    for (const auto& child : children) {
        auto d = decide(children, child, family, dialect, {}, cv);
        if (ambiguous && d.what != exclusive_decision::ambiguous) std::abort();
        const auto kind = classify_child(child, family, dialect, cv);
        if (kind != child_kind::contender && d.what != exclusive_decision::missing &&
            d.what != exclusive_decision::ambiguous)
            std::abort(); // a foreign child is never granted nor queued
        // `alone` (computed by decide) is what granted_once_gone specifies, on a real listing (no
        // name twice)
        if (d.what == exclusive_decision::wait && unique_names &&
            d.alone != granted_once_gone(children, child, d.predecessor, family, dialect, {}, cv))
            std::abort();
        if (kind == child_kind::contender && !counter_may_have_wrapped(cv)) {
            auto alone = decide(without_foreign, child, family, dialect, {}, cv);
            if (alone.what != d.what || alone.predecessor != d.predecessor)
                std::abort(); // foreign children decided something
        }
        if (d.what == exclusive_decision::wait) {
            // the predecessor is a contender that sorts before us
            auto me = parse_contender(child, family, dialect);
            auto pred = parse_contender(d.predecessor, family, dialect);
            if (!me || !pred ||
                !(pred->seq_text < me->seq_text || (pred->seq_text == me->seq_text && pred->name < me->name)))
                std::abort();
        }
        if (d.what != exclusive_decision::acquired) continue;
        auto c = parse_contender(child, family, dialect);
        if (!c) std::abort(); // only contenders are granted
        (c->writer ? writers : readers) += 1;
    }
    // duplicate child names are one node listed twice: count them once
    if (writers > 1 || (writers == 1 && readers > 0)) {
        std::vector<std::string> names;
        for (const auto& child : children)
            if (decide(children, child, family, dialect, {}, cv).what == exclusive_decision::acquired)
                names.push_back(child);
        for (const auto& n : names)
            if (n != names.front()) std::abort(); // two different contenders hold at once
    }
    return 0;
}
