// libFuzzer target: the in-process hand-off's queue (src/protocol/handoff_fsm.hpp) fed any
// sequence of events its driver could see: waiters that come (tries, cancelled, past their
// deadline) and leave, the node's acquire ending any way, the lent grant released (its node held
// or not, connected or not), the node lost, the session's end. The invariants:
//  - every waiter is granted or failed at most once, and only a waiter that came;
//  - one grant is out at a time, and only under a node the queue keeps (keep_node, not released);
//  - one node acquire is in flight at a time; a cancel only while one is;
//  - a try is never granted after waiting behind a busy queue (it is failed at once);
//  - at the end (the session ends, the acquire in flight fails), every waiter has been told and
//    the queue is idle.
//
// Input: byte 0 picks the bound (1 to 4); then each event takes one byte (which event, and what
// it varies).
#include "fuzz_input.hpp"
#include "protocol/handoff_fsm.hpp"

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <set>

using namespace zklock::detail;
using zklock::fuzz::input;
using fx = handoff_effect;

namespace {

[[noreturn]] void violated(const char* what) {
    std::fprintf(stderr, "handoff_fsm: %s\n", what);
    std::abort();
}

struct world {
    handoff_fsm m;
    std::map<std::uint64_t, int> told; // every waiter that came: how often it was told
    std::set<std::uint64_t> waiting;   // came, not yet told
    bool acquiring = false;            // a node acquire in flight
    bool node = false;                 // the queue keeps a node
    bool out = false;                  // a grant is out (its release not yet fed)
    bool node_result = false;          // the last on_node's result was a node (granted)

    explicit world(std::uint32_t bound) : m(bound) {}

    void apply(const handoff_fsm::effects& e) {
        for (const auto& f : e) {
            switch (f.what) {
            case fx::start_node:
                if (acquiring) violated("two node acquires at once");
                acquiring = true;
                break;
            case fx::cancel_node:
                if (!acquiring) violated("a cancel with no node acquire in flight");
                break;
            case fx::grant:
                if (!node) violated("a grant without a node");
                if (out) violated("two grants out");
                out = true;
                tell(f.id);
                break;
            case fx::fail:
                tell(f.id);
                break;
            case fx::keep_node:
                if (!node_result) violated("kept a result that was not a node");
                node = true;
                break;
            case fx::drop_result_then_complete:
                for (auto& [id, why] : f.leavers) tell(id);
                break;
            case fx::release_node:
                node = false;
                break;
            case fx::drop_result:
            case fx::release_done:
            case fx::forget:
                break;
            }
        }
    }
    void tell(std::uint64_t id) {
        if (!told.count(id)) violated("an effect for a waiter that never came");
        if (++told[id] > 1) violated("a waiter told twice");
        waiting.erase(id);
    }
};

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    if (size < 1) return 0;
    input in{data + 1, size - 1};
    world w(1 + data[0] % 4);
    std::uint64_t next_id = 1;
    for (int step = 0; step < 200 && !in.done(); ++step) {
        const std::uint8_t b = in.next();
        switch (b % 7) {
        case 0: { // a waiter comes
            const auto id = next_id++;
            w.told[id];
            w.waiting.insert(id);
            w.apply(w.m.enqueue(id, (b & 8) != 0, (b & 16) != 0 && (b & 32) != 0,
                                (b & 64) != 0 && (b & 128) != 0));
            break;
        }
        case 1: // one leaves
            if (!w.waiting.empty()) {
                auto it = w.waiting.begin();
                std::advance(it, (b >> 3) % w.waiting.size());
                w.apply(w.m.leave(*it, (b & 128) ? handoff_reason::timed_out : handoff_reason::cancelled));
            }
            break;
        case 2: // the node's acquire ends
            if (w.acquiring) {
                w.acquiring = false;
                const auto r = static_cast<handoff_fsm::node_result>((b >> 3) % 5);
                w.node_result = r == handoff_fsm::node_result::granted;
                w.apply(w.m.on_node(r, true, (b & 128) != 0));
            }
            break;
        case 3: // the grant out is released
            if (w.out) {
                w.out = false;
                w.apply(w.m.local_release(true, (b & 8) != 0, (b & 16) != 0));
            }
            break;
        case 4: // the node is lost
            if (w.node) {
                w.out = false; // (its release passes nothing on: not fed)
                w.apply(w.m.node_lost((b & 8) != 0));
            }
            break;
        case 5: // the session ends
            w.out = false;
            w.apply(w.m.session_ended());
            if (w.node) violated("a node kept past the session's end");
            break;
        case 6: // an earlier node's grant released late
            w.apply(w.m.local_release(false, false, (b & 8) != 0));
            break;
        }
    }
    // The end: the session ends, and the node acquire in flight fails with it.
    w.apply(w.m.session_ended());
    if (w.acquiring) {
        w.acquiring = false;
        w.node_result = false;
        w.apply(w.m.on_node(handoff_fsm::node_result::failed, true, false));
    }
    for (auto& [id, n] : w.told)
        if (n != 1) violated("a waiter never told");
    if (!w.m.idle()) violated("the queue is not idle at the end");
    return 0;
}
