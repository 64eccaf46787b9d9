// libFuzzer target: the unique_node strategy's machine (src/protocol/unique_fsm.hpp) fed any
// sequence of results a server, a connection or a user could give. The invariants:
//  - a grant comes only right after a lease check that succeeded without a stop, and only when
//    the machine owns the node: its own create succeeded, or a read found our guid in the data;
//  - it never owns a node on someone else's data alone;
//  - a try never waits;
//  - at most five parent attempts in a row (a create that finds the node taken ends a row: the
//    path was there), and five lost parent rounds per acquire;
//  - once every result carries a stop (the input ran out: the user cancels), it ends within a
//    few steps.
//
// Input: byte 0 picks try; then each result takes one byte (its outcome, the stop bit, and
// whose data a read finds).
#include "fuzz_input.hpp"
#include "protocol/unique_fsm.hpp"

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

using namespace zklock::detail;
using zklock::fuzz::input;
using ua = unique_action;

namespace {

const std::string guid = "gggggggg-gggg-4ggg-8ggg-gggggggggggg";

[[noreturn]] void violated(const char* what) {
    std::fprintf(stderr, "unique_fsm: %s\n", what);
    std::abort();
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    if (size < 1) return 0;
    input in{data + 1, size - 1};
    const bool try_only = (data[0] & 1) != 0;
    unique_fsm m("/l/lock", guid, try_only);
    auto a = m.start((data[0] & 2) != 0);
    bool created = false, read_ours = false, path_checked = false;
    int parents = 0, lost_parent_rounds = 0, steps_after_end = 0;
    ua::kind last = ua::fail;
    unique_input last_in;
    for (;;) { // (ends: every result once the input has run out carries a stop)
        if (a.what == ua::grant) {
            if (last != ua::check_lease || last_in.result != outcome::ok || last_in.stop)
                violated("a grant not right after a lease check that succeeded without a stop");
            if (!m.owns_node()) violated("a grant without owning the node");
            if (!path_checked) violated("a grant without a clean listing of the path once the node was ours");
            return 0;
        }
        if (m.owns_node() && !created && !read_ours)
            violated("owns a node it neither created nor read as ours");
        if (a.what == ua::fail) return 0;
        if (a.what == ua::wait && try_only) violated("a try waits");
        // (five attempts in a row, and five lost in all; the sixth lost ends it)
        if (a.what == ua::make_parents && ++parents > 11) violated("more than eleven parent rounds in a row");
        if (last == ua::make_parents && last_in.result == outcome::connection) ++lost_parent_rounds;
        if (in.done() && ++steps_after_end > 8) violated("a stop did not end it within 8 steps");
        const std::uint8_t b = in.next();
        unique_input r;
        r.stop = (b & 0x80) != 0;
        r.result = static_cast<outcome>(b & 3);
        r.rc = r.result == outcome::ok           ? 0
               : r.result == outcome::no_node    ? -101
               : r.result == outcome::connection ? -4
                                                 : ((b & 4) ? -110 : -102);
        r.ok = (b & 8) != 0 && !r.stop;
        r.czxid = b;
        if (a.what == ua::read || a.what == ua::read_own) {
            r.data = (b & 16) ? guid + " ours" : "hhhhhhhh-hhhh-4hhh-8hhh-hhhhhhhhhhhh theirs";
            if (r.result == outcome::ok && (b & 16)) read_ours = true;
        }
        if (a.what == ua::list && (b & 32)) r.children = {"lock", "leases"};
        if (a.what == ua::list && r.result == outcome::ok && !(b & 32) && m.owns_node()) path_checked = true;
        if (a.what == ua::create && r.result == outcome::ok) created = true;
        // (a create that finds the node taken found the path there: the bound counts reaps in a
        // row, so a long wait may remake the path any number of times)
        if (a.what == ua::create && r.result == outcome::other && r.rc == -110) parents = lost_parent_rounds;
        last = a.what;
        last_in = r;
        a = m.resume(r);
    }
}
