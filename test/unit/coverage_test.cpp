// The state machines' transition counters (src/protocol/coverage.hpp), which the whole-library
// simulation reads to fail when a transition its seeds reached is reached no more. No server.
#include "protocol/acquire_fsm.hpp"
#include "protocol/coverage.hpp"
#include "protocol/handoff_fsm.hpp"
#include "protocol/semaphore_fsm.hpp"
#include "protocol/unique_fsm.hpp"
#include "session/regain_fsm.hpp"
#include "session/session_fsm.hpp"

#include <gtest/gtest.h>

#include <string>

using namespace zklock::detail;

namespace {
const transition_table* table_of(const std::string& machine) {
    for (const auto* t : transition_table::all())
        if (machine == t->machine()) return t;
    return nullptr;
}
std::size_t index_of(const transition_table& t, const std::string& state) {
    for (std::size_t i = 0; i < t.states().size(); ++i)
        if (state == t.states()[i]) return i;
    ADD_FAILURE() << "no state " << state << " in " << t.machine();
    return 0;
}
} // namespace

TEST(Coverage, ATableCountsEachTransitionAndIgnoresStatesItDoesNotName) {
    transition_table t("test-machine", {"a", "b"});
    t.note(0, 1);
    t.note(0, 1);
    t.note(1, 1);
    t.note(2, 0);  // (no such state: not counted, no crash)
    t.note(-1, 0); // (nor this)
    EXPECT_EQ(t.count(0, 1), 2u);
    EXPECT_EQ(t.count(1, 1), 1u);
    EXPECT_EQ(t.count(0, 0), 0u);
    EXPECT_EQ(t.count(1, 0), 0u);
    EXPECT_EQ(table_of("test-machine"), &t); // registered
}

TEST(Coverage, EveryMachineOfTheLibraryRegistersItsTableWithItsStatesNamed) {
    // (the machines' tables are statics of their headers, included here; the two templates'
    // tables exist once the machine is used, as the library uses it)
    EXPECT_STREQ(basic_acquire_fsm<>::transitions.machine(), "acquire");
    EXPECT_STREQ(basic_semaphore_fsm<>::transitions.machine(), "semaphore");
    for (const char* m : {"acquire", "semaphore", "unique_node", "handoff", "session", "regain"}) {
        const auto* t = table_of(m);
        ASSERT_NE(t, nullptr) << m;
        EXPECT_GE(t->states().size(), 3u) << m;
    }
}

TEST(Coverage, AStepOfAMachineIsCountedFromTheStateItLeftToTheStateItEntered) {
    const auto& t = *table_of("unique_node");
    const auto creating = index_of(t, "creating"), listing = index_of(t, "listing");
    const auto before = t.count(creating, listing), started = t.count(creating, creating);
    unique_fsm m("/l/lock", "0f8fad5b-d9cb-469f-a165-70867728950e", false);
    ASSERT_EQ(m.start(false).what, unique_action::create);
    EXPECT_EQ(t.count(creating, creating), started + 1); // (the start: from its first state, creating)
    unique_input won;
    won.result = outcome::ok;
    won.czxid = 42;
    EXPECT_EQ(m.resume(won).what, unique_action::list); // the winner checks the path
    EXPECT_EQ(t.count(creating, listing), before + 1);

    const auto& h = *table_of("handoff");
    const auto idle = index_of(h, "idle"), acquiring = index_of(h, "acquiring");
    const auto queued = h.count(idle, acquiring);
    handoff_fsm q(4);
    q.enqueue(1, false, false, false); // the first waiter: the queue acquires the node
    EXPECT_EQ(h.count(idle, acquiring), queued + 1);
}
