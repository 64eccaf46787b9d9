// The acquire's decisions (src/protocol/acquire_steps.hpp): what mutex.cpp's coroutine and the
// simulator do after a listing and after a wake-up.
#include "protocol/acquire_steps.hpp"

#include <gtest/gtest.h>

#include <string>
#include <vector>

using namespace zklock::detail;

namespace {
/// A guid of one repeated hex digit ("a" -> "aaaaaaaa-aaaa-4aaa-8aaa-aaaaaaaaaaaa"), as long as a real one.
std::string guid(const std::string& d) {
    std::string g = "xxxxxxxx-xxxx-4xxx-8xxx-xxxxxxxxxxxx";
    for (auto& c : g)
        if (c == 'x') c = d[0];
    return g;
}
std::string node(const std::string& d, int seq) {
    char s[16];
    std::snprintf(s, sizeof s, "%010d", seq);
    return "_c_" + guid(d) + "-lock-" + s;
}
} // namespace

TEST(AcquireSteps, TheLowestIsGrantedTheNextWaitsAloneDeeperOnesWatchTheMarker) {
    std::vector<std::string> kids{node("a", 1), node("b", 2), node("c", 3)};
    acquire_shape shape;
    auto first = after_listing(kids, node("a", 1), guid("a"), shape, 4);
    EXPECT_EQ(first.what, listing_step::grant);
    auto second = after_listing(kids, node("b", 2), guid("b"), shape, 4);
    EXPECT_EQ(second.what, listing_step::wait);
    EXPECT_EQ(second.predecessor, node("a", 1));
    EXPECT_TRUE(second.alone);
    EXPECT_FALSE(second.watch_marker); // (alone: the deletion itself grants)
    auto third = after_listing(kids, node("c", 3), guid("c"), shape, 4);
    EXPECT_EQ(third.what, listing_step::wait);
    EXPECT_EQ(third.predecessor, node("b", 2));
    EXPECT_FALSE(third.alone);
    EXPECT_TRUE(third.watch_marker);
    shape.try_only = true;
    EXPECT_EQ(after_listing(kids, node("c", 3), guid("c"), shape, 4).what, listing_step::busy);
    // the herd-prone variant: never alone, never a marker
    shape.try_only = false;
    shape.watch_children = true;
    auto herd = after_listing(kids, node("b", 2), guid("b"), shape, 4);
    EXPECT_EQ(herd.what, listing_step::wait);
    EXPECT_FALSE(herd.alone);
    EXPECT_FALSE(herd.watch_marker);
}

TEST(AcquireSteps, OurOtherNodesGoAndTheRestFailsWithTheirReason) {
    // a lost create applied, then created again: the earlier one (same guid) sorts first
    std::vector<std::string> kids{node("g", 1), node("x", 2), node("g", 3)};
    auto s = after_listing(kids, node("g", 3), guid("g"), acquire_shape{}, 4);
    ASSERT_EQ(s.duplicates, std::vector<std::string>{node("g", 1)});
    EXPECT_EQ(s.what, listing_step::wait);
    EXPECT_EQ(s.predecessor, node("x", 2));
    // without a guid (a caller that has none), nothing is taken for ours
    EXPECT_TRUE(after_listing(kids, node("g", 3), "", acquire_shape{}, 4).duplicates.empty());
    // our node is gone
    auto gone = after_listing({node("x", 2)}, node("g", 3), guid("g"), acquire_shape{}, 4);
    EXPECT_EQ(gone.what, listing_step::fail);
    EXPECT_EQ(gone.why, listing_step::node_missing);
    // the counter wrapped: the order is unknown
    auto wrapped = after_listing({"_c_x-lock--000000001", node("g", 3)}, node("g", 3), guid("g"),
                                 acquire_shape{}, std::nullopt);
    EXPECT_EQ(wrapped.why, listing_step::sequence_overflow);
    // an election in Curator's LeaderSelector naming on a LeaderLatch's path
    acquire_shape e;
    e.election = true;
    auto mixed = after_listing({"_c_l-latch-0000000001", node("g", 2)}, node("g", 2), guid("g"), e, 3);
    EXPECT_EQ(mixed.what, listing_step::fail);
    EXPECT_EQ(mixed.why, listing_step::dialect_mixed);
    e.election = false; // a mutex counts the latch node as a contender instead
    EXPECT_EQ(after_listing({"_c_l-latch-0000000001", node("g", 2)}, node("g", 2), guid("g"), e, 3).what,
              listing_step::wait);
}

TEST(AcquireSteps, AWakeUpGrantsOnlyOnTheMarkerOrTheDeletionOfAnAlonePredecessor) {
    EXPECT_EQ(after_wake(wake::marker_created, false), wake_step::grant);
    EXPECT_EQ(after_wake(wake::predecessor_deleted, true), wake_step::grant);
    EXPECT_EQ(after_wake(wake::predecessor_missing, true), wake_step::grant);
    EXPECT_EQ(after_wake(wake::predecessor_deleted, false), wake_step::list);
    EXPECT_EQ(after_wake(wake::predecessor_missing, false), wake_step::list);
    EXPECT_EQ(after_wake(wake::other, true), wake_step::list);
    EXPECT_EQ(after_wake(wake::other, false), wake_step::list);
}
