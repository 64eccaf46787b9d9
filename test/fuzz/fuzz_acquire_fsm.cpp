// libFuzzer target: the acquire's state machine (src/protocol/acquire_fsm.hpp) fed any sequence of
// results a server, a connection or a user could give. The invariants:
//  - a grant comes only right after a lease check that succeeded without a stop, and holds a node
//    this machine created or adopted as this session's own;
//  - the machine never asks to delete (in the background) the node it goes on with;
//  - a watch, a read and a listing name the lock path or a node in it;
//  - once every result carries a stop (the input ran out: the user cancels), it ends within a
//    few steps, and a failure that says its node is gone leaves no node to delete.
//
// Input: byte 0 picks the shape (try, read/write, reader, watch_children, election); then each
// result takes one byte (its outcome, the stop bit and what it varies) and, for listings, one more
// that picks which children appear.
#include "fuzz_input.hpp"
#include "protocol/acquire_fsm.hpp"

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

using namespace zklock::detail;
using A = acquire_action;

namespace {

const std::string path = "/p";
const std::string guid = "gggggggg-gggg-4ggg-8ggg-gggggggggggg";
constexpr std::int64_t session = 8;

[[noreturn]] void violated(const char* what) {
    std::fprintf(stderr, "acquire_fsm: %s\n", what);
    std::abort();
}

using zklock::fuzz::input;
using zklock::fuzz::seq;

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    if (size < 1) return 0;
    input in{data + 1, size - 1};
    acquire_shape shape;
    shape.try_only = data[0] & 1;
    const bool rw = data[0] & 2;
    const bool reader = rw && (data[0] & 4);
    shape.family = rw ? lock_family::rw : lock_family::mutex;
    shape.watch_children = data[0] & 8;
    shape.election = !rw && (data[0] & 16);
    const auto prefix =
        protected_node_prefix(path, guid, zklock::lock_dialect::curator, shape.family, reader);
    acquire_fsm m({path, prefix, guid, shape});

    // Names a listing can hold: ours (by sequence), others below and above, our guid on another
    // sequence (a duplicate), a semaphore's "leases", the unique node "lock", a LeaderLatch node,
    // and a foreign child.
    int my_seq = -1;
    std::vector<std::string> adoptable; // nodes the machine may take as its own
    auto mine = [&](int s) { return prefix.substr(path.size() + 1) + seq(s); };
    auto listing = [&](std::uint8_t pick) {
        std::vector<std::string> kids;
        const std::string w = rw ? "__WRIT__" : "-lock-";
        if (pick & 1) kids.push_back("_c_" + std::string(36, 'a') + w + seq(1));
        if (pick & 2) kids.push_back("_c_" + std::string(36, 'b') + "__READ__" + seq(2));
        if ((pick & 4) && my_seq >= 0) kids.push_back(mine(my_seq));
        if (pick & 8) kids.push_back(mine(7)); // our guid on another sequence
        if (pick & 16) kids.push_back("_c_" + std::string(36, 'c') + w + seq(40));
        if (pick & 32) kids.push_back((pick & 64) ? "leases" : "lock");
        if (pick & 128) kids.push_back((pick & 64) ? "_c_" + std::string(36, 'd') + "-latch-" + seq(3) : "x");
        return kids;
    };
    auto outcome_of = [](std::uint8_t b) { return static_cast<outcome>(b & 3); };

    A a = m.start(false);
    A::kind last = A::create_and_list;
    bool last_lease_ok = false;
    int steps_after_stop = 0;
    for (int step = 0; step < 4096; ++step) {
        for (const auto& d : a.delete_nodes)
            if (!m.node().empty() && d == m.node())
                violated("deletes, in the background, the node it goes on with");
        if (a.what == A::grant) {
            if (last != A::check_lease || !last_lease_ok)
                violated("granted without a lease check that succeeded");
            if (m.node().empty()) violated("granted without a node");
            bool known = false;
            for (const auto& n : adoptable) known = known || n == m.node();
            if (!known) violated("granted a node it neither created nor adopted");
            return 0;
        }
        if (a.what == A::fail) {
            if (a.why == A::node_deleted && !m.node().empty())
                violated("its node is gone, yet it has one to delete");
            return 0;
        }
        if ((a.what == A::watch || a.what == A::read_node) &&
            a.node.compare(0, path.size() + 1, path + "/") != 0)
            violated("a watch or a read outside the lock path");
        if (in.done() && ++steps_after_stop > 16) violated("a stop did not end it within 16 steps");

        const std::uint8_t b = in.next();
        acquire_input r;
        r.stop = (b & 0x80) != 0;
        r.result = outcome_of(b);
        r.rc = r.result == outcome::ok           ? 0
               : r.result == outcome::no_node    ? -101
               : r.result == outcome::connection ? -4
                                                 : -102;
        switch (a.what) {
        case A::wait_connected:
            r.ok = (b & 4) != 0;
            break;
        case A::create_and_list: {
            if (r.result == outcome::ok) {
                my_seq = 10 + step;
                r.path = path + "/" + mine(my_seq);
                adoptable.push_back(r.path);
                r.czxid = my_seq;
            }
            r.listed = outcome_of(b >> 2);
            r.children = listing(in.next());
            r.cv = (b & 16) ? parent_cversion{} : parent_cversion{1000};
            break;
        }
        case A::read_node:
            r.owner = (b & 4) ? session : session + 1;
            r.session = session;
            if (r.result == outcome::ok && r.owner == session) adoptable.push_back(a.node);
            break;
        case A::list:
        case A::list_leases:
        case A::watch:
            r.children = listing(in.next());
            if (a.what == A::list_leases && (b & 4))
                r.children = {"_c_" + std::string(36, 'e') + "-lease-" + seq(1)};
            r.cv = (b & 16) ? parent_cversion{} : parent_cversion{1000};
            r.marked = a.what == A::watch && a.watch_marker && (b & 8);
            break;
        case A::wait:
            r.pred_deleted = (b & 4) != 0;
            r.marked = (b & 8) != 0;
            break;
        case A::make_parents:
        case A::check_lease:
        case A::grant:
        case A::fail:
            break;
        }
        last = a.what;
        last_lease_ok = a.what == A::check_lease && r.result == outcome::ok && !r.stop;
        a = m.resume(std::move(r));
    }
    violated("no end within 4096 steps");
}
