// The in-process hand-off's queue as a machine (src/protocol/handoff_fsm.hpp), fed events by
// hand: one node for the whole queue, grants passed on without a request up to the bound, no
// node outliving the last waiter, and every waiter told once. No server needed.
#include "protocol/handoff_fsm.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <set>

using namespace zklock::detail;
using fx = handoff_effect;
using nr = handoff_fsm::node_result;

namespace {
std::vector<fx::kind> kinds(const handoff_fsm::effects& e) {
    std::vector<fx::kind> k;
    for (auto& x : e) k.push_back(x.what);
    return k;
}
const fx* find(const handoff_fsm::effects& e, fx::kind k) {
    auto it = std::find_if(e.begin(), e.end(), [k](const fx& x) { return x.what == k; });
    return it == e.end() ? nullptr : &*it;
}
} // namespace

TEST(HandoffFsm, OneNodeServesTheQueueAndPassesTheLockOnUpToTheBound) {
    handoff_fsm m(2);
    auto e = m.enqueue(1, false, false, false);
    ASSERT_EQ(kinds(e), std::vector<fx::kind>{fx::start_node});
    EXPECT_FALSE(e[0].try_only);
    EXPECT_EQ(m.state(), handoff_fsm::phase::acquiring);
    EXPECT_TRUE(m.enqueue(2, false, false, false).empty()) << "one node-acquire for the whole queue";
    EXPECT_TRUE(m.enqueue(3, false, false, false).empty());
    e = m.on_node(nr::granted, true, false);
    ASSERT_EQ(kinds(e), (std::vector<fx::kind>{fx::keep_node, fx::grant}));
    EXPECT_EQ(e[1].id, 1u);
    EXPECT_EQ(e[1].index, 0u);
    EXPECT_EQ(m.state(), handoff_fsm::phase::held);
    // 1 releases: 2 is granted under the same node, no request.
    e = m.local_release(true, true, true);
    ASSERT_EQ(kinds(e), (std::vector<fx::kind>{fx::release_done, fx::grant}));
    EXPECT_EQ(e[1].id, 2u);
    EXPECT_EQ(e[1].index, 1u);
    // 2 releases: the bound (2) is reached, so the node goes and the queue asks again (others
    // get their turn in ZooKeeper).
    e = m.local_release(true, true, true);
    ASSERT_EQ(kinds(e), (std::vector<fx::kind>{fx::release_node, fx::start_node}));
    EXPECT_EQ(m.on_node(nr::granted, true, false)[1].id, 3u);
    // 3 releases, nobody waits: the node goes and the queue may be forgotten.
    e = m.local_release(true, true, true);
    ASSERT_EQ(kinds(e), (std::vector<fx::kind>{fx::release_node, fx::forget}));
    EXPECT_TRUE(m.idle());
}

TEST(HandoffFsm, NoHandOffUnderALostNodeOrWhileDisconnected) {
    for (bool node_held : {false, true}) {
        handoff_fsm m(100);
        m.enqueue(1, false, false, false);
        m.enqueue(2, false, false, false);
        m.on_node(nr::granted, true, false);
        auto e = m.local_release(true, node_held, !node_held);
        EXPECT_EQ(kinds(e), (std::vector<fx::kind>{fx::release_node, fx::start_node}));
    }
}

TEST(HandoffFsm, TriesFailWhileTheQueueIsBusyAndATryOnlyNodeAcquireFailsOnlyTheTries) {
    handoff_fsm m(4);
    auto e = m.enqueue(1, true, false, false);
    ASSERT_EQ(kinds(e), std::vector<fx::kind>{fx::start_node});
    EXPECT_TRUE(e[0].try_only) << "every waiter is a try";
    e = m.enqueue(2, true, false, false); // the queue is busy: a try fails at once
    ASSERT_EQ(kinds(e), (std::vector<fx::kind>{fx::fail, fx::forget}));
    EXPECT_EQ(e[0].why, handoff_reason::busy);
    m.enqueue(3, false, false, false); // a waiter that came meanwhile
    e = m.on_node(nr::busy, true, false);
    ASSERT_EQ(kinds(e), (std::vector<fx::kind>{fx::fail, fx::start_node}));
    EXPECT_EQ(e[0].id, 1u);
    EXPECT_FALSE(e[1].try_only) << "the waiter left waits";
}

TEST(HandoffFsm, AWaiterCancelledOrPastItsDeadlineBeforeItQueuesIsToldAtOnce) {
    handoff_fsm m(4);
    auto e = m.enqueue(1, false, true, false);
    ASSERT_EQ(kinds(e), (std::vector<fx::kind>{fx::fail, fx::forget}));
    EXPECT_EQ(e[0].why, handoff_reason::cancelled);
    e = m.enqueue(2, false, false, true);
    EXPECT_EQ(e[0].why, handoff_reason::timed_out);
    EXPECT_TRUE(m.idle()) << "nothing was started";
}

TEST(HandoffFsm, TheLastWaiterToLeaveDuringTheNodesAcquireIsToldOnlyAfterItEnded) {
    // Granted just as the last waiter left: the node goes first, then the leavers complete.
    {
        handoff_fsm m(4);
        m.enqueue(1, false, false, false);
        m.enqueue(2, false, false, false);
        auto e = m.leave(1, handoff_reason::timed_out);
        ASSERT_EQ(kinds(e), std::vector<fx::kind>{fx::fail}) << "not the last: told at once";
        e = m.leave(2, handoff_reason::cancelled);
        ASSERT_EQ(kinds(e), std::vector<fx::kind>{fx::cancel_node});
        EXPECT_FALSE(m.idle());
        e = m.on_node(nr::granted, true, false);
        ASSERT_EQ(kinds(e), (std::vector<fx::kind>{fx::drop_result_then_complete, fx::forget}));
        ASSERT_EQ(e[0].leavers.size(), 1u);
        EXPECT_EQ(e[0].leavers[0], std::make_pair(std::uint64_t{2}, handoff_reason::cancelled));
        EXPECT_TRUE(m.idle());
    }
    // The cancel took: the leaver is told, and nothing is left.
    {
        handoff_fsm m(4);
        m.enqueue(1, false, false, false);
        m.leave(1, handoff_reason::cancelled);
        auto e = m.on_node(nr::cancelled, true, false);
        ASSERT_EQ(kinds(e), (std::vector<fx::kind>{fx::fail, fx::drop_result, fx::forget}));
        EXPECT_TRUE(m.idle());
    }
    // New waiters came while our cancel was on its way: the queue starts again for them.
    {
        handoff_fsm m(4);
        m.enqueue(1, false, false, false);
        m.leave(1, handoff_reason::cancelled);
        m.enqueue(2, false, false, false);
        auto e = m.on_node(nr::cancelled, true, false);
        ASSERT_EQ(kinds(e), (std::vector<fx::kind>{fx::fail, fx::start_node}));
        EXPECT_EQ(e[0].id, 1u);
    }
    // ... unless the session was closed: then they are told it was cancelled.
    {
        handoff_fsm m(4);
        m.enqueue(1, false, false, false);
        m.leave(1, handoff_reason::cancelled);
        m.enqueue(2, false, false, false);
        auto e = m.on_node(nr::cancelled, true, true);
        ASSERT_EQ(kinds(e), (std::vector<fx::kind>{fx::fail, fx::fail, fx::forget}));
        EXPECT_EQ(e[1].id, 2u);
        EXPECT_EQ(e[1].why, handoff_reason::cancelled);
    }
}

TEST(HandoffFsm, ANodeAcquireThatFailsFailsEveryWaiterWithItsError) {
    handoff_fsm m(4);
    m.enqueue(1, false, false, false);
    m.enqueue(2, true, false, false); // (busy: refused at once)
    m.enqueue(3, false, false, false);
    auto e = m.on_node(nr::failed, true, false);
    ASSERT_EQ(kinds(e), (std::vector<fx::kind>{fx::fail, fx::fail, fx::forget}));
    EXPECT_EQ(e[0].why, handoff_reason::node_failed);
    EXPECT_TRUE(m.idle());
}

TEST(HandoffFsm, ANodeLostBeforeOrWhileHeldIsLetGoAndTheQueueStartsAgain) {
    handoff_fsm m(4);
    m.enqueue(1, false, false, false);
    m.enqueue(2, false, false, false);
    auto e = m.on_node(nr::lost, true, false); // lost between the grant and now
    ASSERT_EQ(kinds(e), (std::vector<fx::kind>{fx::drop_result, fx::start_node}));
    m.on_node(nr::granted, true, false); // 1 holds
    EXPECT_TRUE(m.lent());
    e = m.node_lost(false);
    ASSERT_EQ(kinds(e), (std::vector<fx::kind>{fx::release_node, fx::start_node}));
    EXPECT_FALSE(m.lent()) << "the grant out passes nothing on";
    // The lost node's grant is released later: it is not the current one, and passes nothing on.
    e = m.local_release(false, false, true);
    EXPECT_EQ(kinds(e), std::vector<fx::kind>{fx::release_done});
    EXPECT_EQ(m.on_node(nr::granted, true, false)[1].id, 2u);
    EXPECT_TRUE(m.node_lost(true).size() == 2 && m.idle()) << "closed: let go, nothing started";
    EXPECT_TRUE(m.node_lost(false).empty()) << "released meanwhile: nothing to do";
}

TEST(HandoffFsm, TheSessionsEndTellsEveryWaiterAndLetsGoOfTheNode) {
    handoff_fsm m(4);
    m.enqueue(1, false, false, false);
    m.enqueue(2, false, false, false);
    m.enqueue(3, false, false, false);
    m.on_node(nr::granted, true, false); // 1 holds
    auto e = m.session_ended();
    ASSERT_EQ(kinds(e), (std::vector<fx::kind>{fx::fail, fx::fail, fx::release_node, fx::forget}));
    EXPECT_EQ(e[0].why, handoff_reason::session_end);
    // 1's release comes afterwards: the queue let go already.
    e = m.local_release(true, false, false);
    EXPECT_EQ(kinds(e), (std::vector<fx::kind>{fx::release_done, fx::forget}));
    EXPECT_TRUE(m.idle());
}

TEST(HandoffFsm, EveryWaiterIsToldExactlyOnceWhateverTheOrderOfEvents) {
    // A seeded walk over every event: each waiter is granted or failed exactly once, grants
    // never overlap (one out at a time), one node acquire at a time, and the queue is idle at the end.
    for (unsigned seed = 1; seed <= 2000; ++seed) {
        handoff_fsm m(1 + seed % 3);
        std::uint64_t next = 1, x = seed;
        auto rnd = [&x](unsigned n) {
            x = x * 6364136223846793005ULL + 1442695040888963407ULL;
            return static_cast<unsigned>((x >> 33) % n);
        };
        std::map<std::uint64_t, int> told;
        std::set<std::uint64_t> queued;
        bool out = false, acquiring = false;
        auto apply = [&](const handoff_fsm::effects& e) {
            for (auto& f : e) {
                if (f.what == fx::grant || f.what == fx::fail) {
                    ++told[f.id];
                    queued.erase(f.id);
                    if (f.what == fx::grant) {
                        ASSERT_FALSE(out) << "seed " << seed << ": two grants out";
                        out = true;
                    }
                }
                if (f.what == fx::drop_result_then_complete)
                    for (auto& [id, why] : f.leavers) ++told[id], queued.erase(id);
                if (f.what == fx::start_node) {
                    ASSERT_FALSE(acquiring) << "seed " << seed << ": two node acquires at once";
                    acquiring = true;
                }
            }
        };
        for (int step = 0; step < 60; ++step) {
            switch (rnd(6)) {
            case 0: {
                auto id = next++;
                queued.insert(id);
                told[id];
                apply(m.enqueue(id, rnd(4) == 0, rnd(10) == 0, rnd(10) == 0));
                break;
            }
            case 1:
                if (!queued.empty()) {
                    auto it = queued.begin();
                    std::advance(it, rnd(static_cast<unsigned>(queued.size())));
                    apply(m.leave(*it, handoff_reason::cancelled));
                }
                break;
            case 2:
                if (acquiring && m.state() == handoff_fsm::phase::acquiring) {
                    acquiring = false;
                    apply(m.on_node(static_cast<nr>(rnd(5)), true, false));
                }
                break;
            case 3:
                if (out) {
                    out = false;
                    apply(m.local_release(true, rnd(4) != 0, rnd(4) != 0));
                }
                break;
            case 4:
                if (m.state() == handoff_fsm::phase::held && rnd(3) == 0) apply(m.node_lost(false));
                break;
            case 5:
                if (rnd(8) == 0) {
                    apply(m.session_ended());
                    out = false; // (the grant out went with the session: its release passes nothing on)
                }
                break;
            }
            if (m.state() != handoff_fsm::phase::held && !m.lent()) out = false;
        }
        // The end: the session ends, and the node acquire in flight (if any) fails with it.
        apply(m.session_ended());
        if (acquiring) apply(m.on_node(nr::failed, true, false));
        EXPECT_TRUE(m.idle()) << "seed " << seed;
        for (auto& [id, n] : told)
            EXPECT_EQ(n, 1) << "seed " << seed << ": waiter " << id << " told " << n << " times";
    }
}
