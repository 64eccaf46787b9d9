#include "protocol/protocol.hpp"
#include "session/platform.hpp"

#include <gtest/gtest.h>

#include <set>
#include <string>
#include <vector>

using namespace zklock::detail;

TEST(Protocol, ParsesCuratorStyleNames) {
    auto c = parse_contender("_c_5f3e1b52-9d7c-4f0e-8a4b-1234567890ab-lock-0000000042");
    ASSERT_TRUE(c);
    EXPECT_EQ(c->seq, 42);
    EXPECT_EQ(c->seq_text, "0000000042");
    auto plain = parse_contender("lock-0000000007"); // Curator without protection
    ASSERT_TRUE(plain);
    EXPECT_EQ(plain->seq, 7);
}

TEST(Protocol, ParsesOverflowedNegativeSequences) {
    auto c = parse_contender("x-lock--000000001"); // "%010d" of -1
    ASSERT_TRUE(c);
    EXPECT_EQ(c->seq, -1);
    auto m = parse_contender("x-lock--214748364");
    ASSERT_TRUE(m);
    EXPECT_EQ(m->seq, -214748364);
    EXPECT_EQ(parse_sequence("2147483647"), 2147483647);
}

TEST(Protocol, RejectsForeignChildren) {
    for (const char* bad :
         {"0", "lock", "-lock-", "x-lock-12345", "x-lock-00000000001", "x-lock-00000a0001",
          "x-lock-+000000001", "x-lock- 000000001", "x-lock-0000000001 ", "leader", "",
          "x-lock-9999999999" /* above INT32_MAX */, "x-lock---00000001", "abc__lock__000000001",
          "abc__lock_0000000001", "abc__rlock__000000001", "x-__READ_0000000001"}) {
        EXPECT_FALSE(parse_contender(bad)) << bad;
    }
}

TEST(Protocol, SortsBySequenceTextNotFullName) {
    std::vector<std::string> children{"_c_bbbb-lock-0000000003", "_c_aaaa-lock-0000000005",
                                      "_c_cccc-lock-0000000001", "foreign", "0"};
    auto s = sorted_contenders(children);
    ASSERT_EQ(s.size(), 3u);
    EXPECT_EQ(s[0].name, "_c_cccc-lock-0000000001");
    EXPECT_EQ(s[1].name, "_c_bbbb-lock-0000000003");
    EXPECT_EQ(s[2].name, "_c_aaaa-lock-0000000005");
}

TEST(Protocol, NegativeSequencesSortFirstAsStringsLikePeers) {
    // Curator and kazoo compare suffixes as strings: '-' < '0' (listing and inspection keep
    // their order). So "-000000001" (-1) sorts before "-000000005" (-5), and both before any
    // positive sequence: after the counter wraps, the order is wrong, so no grant may rest on it.
    std::vector<std::string> children{"a-lock-2147483647", "b-lock--000000005", "c-lock--000000001"};
    auto s = sorted_contenders(children);
    ASSERT_EQ(s.size(), 3u);
    EXPECT_EQ(s[0].name, "c-lock--000000001");
    EXPECT_EQ(s[1].name, "b-lock--000000005");
    EXPECT_EQ(s[2].name, "a-lock-2147483647");
    EXPECT_EQ(decide_exclusive(children, "c-lock--000000001").what, exclusive_decision::ambiguous);
}

TEST(Protocol, OverflowedSequencesMakeTheOrderUnknown) {
    using zklock::lock_dialect;
    const auto mutex = zklock::detail::lock_family::mutex;
    auto amb = [&](std::vector<std::string> c) {
        return sequence_ambiguous(c, mutex, lock_dialect::curator);
    };
    EXPECT_FALSE(amb({"_c_a-lock-0000000001", "_c_b-lock-0000000002", "foreign", "x-lock-2147483646"}));
    EXPECT_TRUE(amb({"_c_a-lock-2147483647"}));                          // the stuck counter
    EXPECT_TRUE(amb({"_c_a-lock-0000000001", "_c_b-lock--000000007"}));  // wrapped
    EXPECT_TRUE(amb({"_c_a-lock-0000000001", "_c_b-lock--2147483648"})); // 11 characters
    EXPECT_TRUE(amb({"_c_a-lock-0000000005", "_c_b-lock-0000000005"}));  // repeated
    EXPECT_TRUE(amb({"aa__lock__0000000005", "_c_b-lock-0000000005"}));  // repeated across dialects
    EXPECT_FALSE(amb({"_c_a-lock-0000000001", "leader--2147483648"}));   // a foreign child stays foreign
    // The holder with the lowest suffix would be granted by string order: the newcomer whose
    // suffix repeats the holder's must not be, or two clients would hold the lock at once.
    std::vector<std::string> repeated{"_c_zzzz-lock-2147483647", "_c_aaaa-lock-2147483647"};
    EXPECT_EQ(decide_exclusive(repeated, "_c_aaaa-lock-2147483647").what, exclusive_decision::ambiguous);
    // an 11-character suffix of our own is not "missing" (that forgot the node and left it behind)
    std::vector<std::string> own{"_c_aaaa-lock--2147483648"};
    EXPECT_EQ(decide_exclusive(own, "_c_aaaa-lock--2147483648").what, exclusive_decision::ambiguous);
    // read/write names too
    std::vector<std::string> rw{"_c_a-__READ__0000000003", "_c_b-__WRIT__0000000003"};
    EXPECT_TRUE(sequence_ambiguous(rw, zklock::detail::lock_family::rw, lock_dialect::curator));
}

TEST(Protocol, AParentCversionBelowTheCapMakesOddSuffixesForeign) {
    // A sequential create names its node from the parent's cversion
    // before counting itself, and the stored cversion stays at INT32_MAX once the counter wraps.
    // While the cversion is below that cap, no wrap has happened: a suffix that is negative or not
    // below the cversion was made by hand. Such a child is ignored, and cannot deny the lock.
    using zklock::lock_dialect;
    using zklock::detail::child_kind;
    using zklock::detail::classify_child;
    using zklock::detail::counter_may_have_wrapped;
    const auto mutex = zklock::detail::lock_family::mutex;
    const zklock::detail::parent_cversion cv = 20;
    EXPECT_FALSE(counter_may_have_wrapped(cv));
    EXPECT_TRUE(counter_may_have_wrapped(std::nullopt));
    EXPECT_TRUE(counter_may_have_wrapped(INT32_MAX));
    EXPECT_TRUE(counter_may_have_wrapped(-5));
    EXPECT_EQ(classify_child("_c_a-lock-0000000019", mutex, lock_dialect::curator, cv),
              child_kind::contender);
    EXPECT_EQ(classify_child("_c_a-lock-0000000020", mutex, lock_dialect::curator, cv), child_kind::foreign);
    EXPECT_EQ(classify_child("x-lock-2147483647", mutex, lock_dialect::curator, cv), child_kind::foreign);
    EXPECT_EQ(classify_child("x-lock--000000001", mutex, lock_dialect::curator, cv), child_kind::foreign);
    EXPECT_EQ(classify_child("x-lock--2147483648", mutex, lock_dialect::curator, cv), child_kind::foreign);
    EXPECT_EQ(classify_child("x-lock-00000000zz", mutex, lock_dialect::curator, cv), child_kind::foreign);
    EXPECT_EQ(classify_child("x__lock__12", mutex, lock_dialect::kazoo, cv), child_kind::foreign);
    EXPECT_EQ(classify_child("leases", mutex, lock_dialect::curator, cv), child_kind::other);
    EXPECT_EQ(classify_child("x-lock-", mutex, lock_dialect::curator, cv), child_kind::other);
    // with the cap reached, only the ambiguity rules decide (the suffix may be a wrapped one)
    EXPECT_EQ(classify_child("x-lock-2147483647", mutex, lock_dialect::curator, INT32_MAX),
              child_kind::contender);

    // Every odd child at once: the well-formed contenders are still ordered and granted.
    std::vector<std::string> children{"_c_b-lock-0000000007", "x-lock-2147483647", "y-lock--000000001",
                                      "z-lock--2147483648",   "w-lock-0000000099", "v-lock-12345678zz",
                                      "_c_a-lock-0000000003", "u-lock-0000000003"};
    EXPECT_TRUE(sequence_ambiguous(children, mutex, lock_dialect::curator)); // not knowing the cversion
    EXPECT_FALSE(sequence_ambiguous(children, mutex, lock_dialect::curator, cv));
    auto sorted = sorted_contenders(children, lock_dialect::curator, mutex, cv);
    ASSERT_EQ(sorted.size(), 3u);
    // "u-lock-0000000003" repeats a suffix: only a hand-made child can, so it is ordered by name
    // like any other (it blocks whoever sorts after it, as a holder that never lets go would)
    EXPECT_EQ(sorted[0].name, "_c_a-lock-0000000003");
    EXPECT_EQ(sorted[1].name, "u-lock-0000000003");
    EXPECT_EQ(sorted[2].name, "_c_b-lock-0000000007");
    EXPECT_EQ(decide_exclusive(children, "_c_a-lock-0000000003", lock_dialect::curator, cv).what,
              exclusive_decision::acquired);
    auto d = decide_exclusive(children, "_c_b-lock-0000000007", lock_dialect::curator, cv);
    EXPECT_EQ(d.what, exclusive_decision::wait);
    EXPECT_EQ(d.predecessor, "u-lock-0000000003");
    // the same children on a parent whose counter may have wrapped: nobody is granted
    EXPECT_EQ(decide_exclusive(children, "_c_a-lock-0000000003", lock_dialect::curator, INT32_MAX).what,
              exclusive_decision::ambiguous);
    // read/write family
    const auto rw = zklock::detail::lock_family::rw;
    std::vector<std::string> rwc{"_c_r-__READ__0000000004", "x-__WRIT__2147483647",
                                 "_c_w-__WRIT__0000000005"};
    EXPECT_EQ(decide(rwc, "_c_r-__READ__0000000004", rw, lock_dialect::curator, {}, cv).what,
              exclusive_decision::acquired);
    EXPECT_EQ(decide(rwc, "_c_w-__WRIT__0000000005", rw, lock_dialect::curator, {}, cv).predecessor,
              "_c_r-__READ__0000000004");
    EXPECT_EQ(classify_child("x-__WRIT__2147483647", rw, lock_dialect::curator, cv), child_kind::foreign);
}

TEST(Protocol, APredecessorThatIsAllInTheWayGrantsOnItsDeletion) {
    using zklock::lock_dialect;
    const auto mutex = zklock::detail::lock_family::mutex;
    const auto rw = zklock::detail::lock_family::rw;
    const auto cur = lock_dialect::curator;
    auto gone = [&](std::vector<std::string> c, std::string mine, std::string pred,
                    lock_family f = lock_family::mutex) {
        const bool spec = granted_once_gone(c, mine, pred, f, cur);
        auto d = decide(c, mine, f, cur);
        if (d.what == exclusive_decision::wait && d.predecessor == pred)
            EXPECT_EQ(d.alone, spec) << mine << " behind " << pred; // what the acquire uses
        return spec;
    };
    // [holder, me]: the holder's deletion grants
    EXPECT_TRUE(gone({"_c_a-lock-0000000001", "_c_b-lock-0000000002"}, "_c_b-lock-0000000002",
                     "_c_a-lock-0000000001"));
    // [holder, w1, me]: w1's deletion does not (the holder may still hold)
    EXPECT_FALSE(gone({"_c_a-lock-0000000001", "_c_w-lock-0000000002", "_c_b-lock-0000000003"},
                      "_c_b-lock-0000000003", "_c_w-lock-0000000002"));
    // nodes after ours never matter; other children neither
    EXPECT_TRUE(gone({"_c_a-lock-0000000001", "_c_b-lock-0000000002", "_c_c-lock-0000000003", "leases"},
                     "_c_b-lock-0000000002", "_c_a-lock-0000000001"));
    // a predecessor not in the listing, or ourselves: no
    EXPECT_FALSE(gone({"_c_b-lock-0000000002"}, "_c_b-lock-0000000002", "_c_a-lock-0000000001"));
    EXPECT_FALSE(gone({"_c_b-lock-0000000002"}, "_c_b-lock-0000000002", "_c_b-lock-0000000002"));
    // peers' names count like ours
    EXPECT_TRUE(gone({"0123abcd__lock__0000000007", "_c_b-lock-0000000008"}, "_c_b-lock-0000000008",
                     "0123abcd__lock__0000000007"));
    // read/write: a reader behind [reader, writer]: the writer's deletion grants (readers share)
    EXPECT_TRUE(gone({"_c_r-__READ__0000000001", "_c_w-__WRIT__0000000002", "_c_m-__READ__0000000003"},
                     "_c_m-__READ__0000000003", "_c_w-__WRIT__0000000002", rw));
    // ... but not behind [writer, writer]
    EXPECT_FALSE(gone({"_c_v-__WRIT__0000000001", "_c_w-__WRIT__0000000002", "_c_m-__READ__0000000003"},
                      "_c_m-__READ__0000000003", "_c_w-__WRIT__0000000002", rw));
    // a writer behind [reader, reader]: it waits for the next lower one, and another reader remains
    EXPECT_FALSE(gone({"_c_r-__READ__0000000001", "_c_s-__READ__0000000002", "_c_w-__WRIT__0000000003"},
                      "_c_w-__WRIT__0000000003", "_c_s-__READ__0000000002", rw));
    // an order that cannot be trusted never grants (a counter that may have wrapped, a negative suffix)
    EXPECT_FALSE(granted_once_gone(
        std::vector<std::string>{"_c_a-lock-0000000001", "_c_x-lock--000000005", "_c_b-lock-0000000002"},
        "_c_b-lock-0000000002", "_c_a-lock-0000000001", mutex, cur, {}, INT32_MAX));
    // while the cversion rules a wrap out, the same negative suffix is a hand-made child: ignored
    EXPECT_TRUE(granted_once_gone(
        std::vector<std::string>{"_c_a-lock-0000000001", "_c_x-lock--000000005", "_c_b-lock-0000000002"},
        "_c_b-lock-0000000002", "_c_a-lock-0000000001", mutex, cur, {}, 3));
}

TEST(Protocol, DecideExclusive) {
    std::vector<std::string> children{"_c_a-lock-0000000010", "_c_b-lock-0000000011", "_c_c-lock-0000000012",
                                      "junk"};
    auto d0 = decide_exclusive(children, "_c_a-lock-0000000010");
    EXPECT_EQ(d0.what, exclusive_decision::acquired);
    EXPECT_EQ(d0.position, 0u);
    auto d2 = decide_exclusive(children, "_c_c-lock-0000000012");
    EXPECT_EQ(d2.what, exclusive_decision::wait);
    EXPECT_EQ(d2.predecessor, "_c_b-lock-0000000011"); // only the next lower one: no herd
    EXPECT_EQ(d2.position, 2u);
    auto missing = decide_exclusive(children, "_c_z-lock-0000000013");
    EXPECT_EQ(missing.what, exclusive_decision::missing);
}

TEST(Protocol, ForeignChildNeverBlocksTheLock) {
    // CURATOR-43: a persistent child "0" wedged Curator. It is not a contender here.
    std::vector<std::string> children{"0", "_c_a-lock-0000000004"};
    EXPECT_EQ(decide_exclusive(children, "_c_a-lock-0000000004").what, exclusive_decision::acquired);
}

TEST(Protocol, FindsNodeByGuid) {
    std::string guid = make_guid();
    std::vector<std::string> children{"_c_" + make_guid() + "-lock-0000000001",
                                      "_c_" + guid + "-lock-0000000002"};
    auto f = find_by_guid(children, guid);
    ASSERT_TRUE(f);
    EXPECT_EQ(*f, children[1]);
    EXPECT_FALSE(find_by_guid(children, make_guid()));
    EXPECT_FALSE(find_by_guid(children, ""));
}

TEST(Protocol, GuidsAreVersion4AndUnique) {
    std::set<std::string> seen;
    for (int i = 0; i < 1000; ++i) {
        auto g = make_guid();
        ASSERT_EQ(g.size(), 36u);
        EXPECT_EQ(g[8], '-');
        EXPECT_EQ(g[14], '4');
        EXPECT_TRUE(g[19] == '8' || g[19] == '9' || g[19] == 'a' || g[19] == 'b') << g;
        EXPECT_TRUE(seen.insert(g).second);
    }
}

TEST(Protocol, NodePrefixIsCuratorCompatible) {
    auto p = protected_node_prefix("/locks/orders", "0123");
    EXPECT_EQ(p, "/locks/orders/_c_0123-lock-");
}

TEST(Protocol, PathHelpers) {
    EXPECT_EQ(last_segment("/a/b/c"), "c");
    EXPECT_EQ(ancestors("/a/b/c"), (std::vector<std::string>{"/a", "/a/b"}));
    EXPECT_TRUE(ancestors("/a").empty());
}

TEST(Protocol, KazooDialect) {
    using zklock::lock_dialect;
    const std::string kazoo = "0123456789abcdef0123456789abcdef__lock__0000000003";
    EXPECT_TRUE(parse_contender(kazoo)); // the default (Curator) dialect counts kazoo's nodes too
    auto k = parse_contender(kazoo, lock_dialect::kazoo);
    ASSERT_TRUE(k);
    EXPECT_EQ(k->seq, 3);
    EXPECT_TRUE(
        parse_contender("_c_x-lock-0000000001", lock_dialect::kazoo)); // kazoo with extra_lock_patterns
    std::vector<std::string> children{kazoo, "_c_x-lock-0000000004"};
    // Measured before: zklock's default dialect held "-lock-0000000004" while kazoo held
    // "__lock__0000000003" on the same path. Now it waits for kazoo's node.
    auto dc = decide_exclusive(children, "_c_x-lock-0000000004");
    EXPECT_EQ(dc.what, exclusive_decision::wait);
    EXPECT_EQ(dc.predecessor, kazoo);
    auto d = decide_exclusive(children, "_c_x-lock-0000000004", lock_dialect::kazoo);
    EXPECT_EQ(d.what, exclusive_decision::wait);
    EXPECT_EQ(d.predecessor, kazoo);
    auto g = make_guid();
    auto prefix = protected_node_prefix("/p", g, lock_dialect::kazoo);
    EXPECT_EQ(prefix, "/p/" + guid_in_name(g, lock_dialect::kazoo) + "__lock__");
    EXPECT_EQ(guid_in_name(g, lock_dialect::kazoo).size(), 32u);
    std::vector<std::string> mine{"/p"};
    mine[0] = std::string(last_segment(prefix)) + "0000000009";
    EXPECT_TRUE(find_by_guid(mine, guid_in_name(g, lock_dialect::kazoo)));
}

TEST(Protocol, ReadWriteRules) {
    using zklock::lock_dialect;
    auto R = [](int n) {
        return "_c_r" + std::to_string(n) + "-__READ__" + std::string(9, '0') + std::to_string(n);
    };
    auto W = [](int n) {
        return "_c_w" + std::to_string(n) + "-__WRIT__" + std::string(9, '0') + std::to_string(n);
    };
    std::vector<std::string> c{R(1), R(2), W(3), R(4), W(5), R(6), "junk", "_c_x-lock-0000000007"};
    auto d = [&](const std::string& mine, std::string_view own = {}) {
        return decide(c, mine, lock_family::rw, lock_dialect::curator, own);
    };
    EXPECT_EQ(d(R(1)).what, exclusive_decision::acquired);
    EXPECT_EQ(d(R(2)).what, exclusive_decision::acquired); // readers share
    EXPECT_EQ(d(W(3)).predecessor, R(2));                  // a writer watches the next lower node
    EXPECT_EQ(d(R(4)).predecessor, W(3));                  // a reader: the nearest lower writer
    EXPECT_EQ(d(W(5)).predecessor, R(4));
    EXPECT_EQ(d(R(6)).predecessor, W(5)); // not W(3): no herd when W(3) goes
    // a later writer never blocks an earlier reader (kazoo #649)
    std::vector<std::string> c2{R(1), W(2)};
    EXPECT_EQ(decide(c2, R(1), lock_family::rw, lock_dialect::curator).what, exclusive_decision::acquired);
    // downgrade: our own write node does not block our read node
    std::vector<std::string> c3{W(1), R(2)};
    EXPECT_EQ(decide(c3, R(2), lock_family::rw, lock_dialect::curator).what, exclusive_decision::wait);
    EXPECT_EQ(decide(c3, R(2), lock_family::rw, lock_dialect::curator, W(1)).what,
              exclusive_decision::acquired);
    // one path, one lock whatever the recipe: a mutex node is a writer to the read/write lock,
    // and read and write nodes are contenders to a mutex
    EXPECT_TRUE(parse_contender("_c_x-lock-0000000007", lock_family::rw, lock_dialect::curator)->writer);
    EXPECT_TRUE(parse_contender(W(3), lock_family::mutex, lock_dialect::curator)->writer);
    EXPECT_FALSE(parse_contender(R(1), lock_family::mutex, lock_dialect::curator)->writer);
}

TEST(Protocol, EveryRecipeOnAPathExcludesEveryOther) {
    using zklock::lock_dialect;
    const std::string M1 = "_c_m-lock-0000000001", R2 = "_c_r-__READ__0000000002",
                      W3 = "_c_w-__WRIT__0000000003", K4 = "ab__lock__0000000004",
                      KR5 = "cd__rlock__0000000005", M6 = "_c_n-lock-0000000006";
    std::vector<std::string> c{M1, R2, W3, K4, KR5, M6};
    for (auto f : {lock_family::mutex, lock_family::rw})
        for (auto dl : {lock_dialect::curator, lock_dialect::kazoo}) {
            EXPECT_EQ(decide(c, M1, f, dl).what, exclusive_decision::acquired);
            EXPECT_EQ(decide(c, R2, f, dl).predecessor, M1); // a reader waits for a mutex holder
            EXPECT_EQ(decide(c, W3, f, dl).predecessor, R2); // a writer for a reader
            EXPECT_EQ(decide(c, K4, f, dl).predecessor, W3); // kazoo's lock for Curator's writer
            EXPECT_EQ(decide(c, KR5, f, dl).predecessor, K4);
            EXPECT_EQ(decide(c, M6, f, dl).predecessor, KR5); // a mutex for a kazoo reader
            EXPECT_EQ(sorted_contenders(c, dl, f).size(), c.size());
        }
    // the mutex's herd-free hand-off: a mutex behind a reader is granted once that reader goes
    std::vector<std::string> c2{R2, M6};
    EXPECT_TRUE(granted_once_gone(c2, M6, R2, lock_family::mutex, lock_dialect::curator));
    // readers behind a mutex node share once it goes
    std::vector<std::string> c3{M1, R2, KR5};
    EXPECT_TRUE(granted_once_gone(c3, KR5, M1, lock_family::rw, lock_dialect::kazoo));
}

TEST(Protocol, ReadWriteKazooNames) {
    using zklock::lock_dialect;
    std::vector<std::string> c{"aa__rlock__0000000001", "bb__lock__0000000002", "cc__rlock__0000000003"};
    auto r = parse_contender(c[0], lock_family::rw, lock_dialect::kazoo);
    ASSERT_TRUE(r);
    EXPECT_FALSE(r->writer);
    EXPECT_TRUE(parse_contender(c[1], lock_family::rw, lock_dialect::kazoo)->writer);
    EXPECT_EQ(decide(c, c[2], lock_family::rw, lock_dialect::kazoo).predecessor, c[1]);
    EXPECT_EQ(protected_node_prefix("/p", "ab-cd", lock_dialect::kazoo, lock_family::rw, true),
              "/p/abcd__rlock__");
    EXPECT_EQ(protected_node_prefix("/p", "ab-cd", lock_dialect::curator, lock_family::rw, false),
              "/p/_c_ab-cd-__WRIT__");
}

TEST(Protocol, FencingTokensIncreaseAcrossNodesAndLocalGrants) {
    // zxids as ZooKeeper makes them: epoch in the high 32 bits, a counter in the low 32
    auto zxid = [](std::int64_t epoch, std::int64_t counter) { return (epoch << 32) | counter; };
    std::vector<std::int64_t> czxids{zxid(1, 5), zxid(1, 6), zxid(1, 0xffffffff), zxid(2, 1),
                                     zxid((1 << 19) - 1, 1)};
    std::int64_t last = 0;
    for (auto c : czxids) {
        for (std::uint32_t i = 0; i < max_local_grants; i += 1023) {
            auto t = zklock::detail::fencing_token(c, i);
            EXPECT_GT(t, last) << "czxid " << c << " grant " << i;
            EXPECT_EQ(t >> local_grant_bits, c);
            last = t;
        }
        // the last grant a node may make stays below the next node's first
        EXPECT_LT(zklock::detail::fencing_token(c, max_local_grants - 1),
                  zklock::detail::fencing_token(c + 1, 0));
    }
    EXPECT_EQ(zklock::detail::fencing_token(7, 0), 7 * 4096);
}

TEST(Protocol, HandOffDecisionAfterARelease) {
    using A = after_release;
    // nobody local waits: the node goes
    EXPECT_EQ(decide_after_release(true, true, 0, 1, 8), A::release);
    // waiters, node held, connected, under the bound: hand off without a request
    EXPECT_EQ(decide_after_release(true, true, 3, 1, 8), A::hand_off);
    EXPECT_EQ(decide_after_release(true, true, 3, 7, 8), A::hand_off);
    // the bound reached: the node goes and the queue lines up again (other processes' turn)
    EXPECT_EQ(decide_after_release(true, true, 3, 8, 8), A::release_requeue);
    // node lost (expiry, deleted by someone else) or connection down: never hand off
    EXPECT_EQ(decide_after_release(false, true, 3, 1, 8), A::release_requeue);
    EXPECT_EQ(decide_after_release(true, false, 3, 1, 8), A::release_requeue);
    // bound 1: every grant has its own node, still queued locally
    EXPECT_EQ(decide_after_release(true, true, 3, 1, 1), A::release_requeue);
}

TEST(Protocol, OnlyWriteNodesMayMarkTheirRelease) {
    EXPECT_EQ(release_marker("/locks/a/_c_x-lock-0000000007"), "/locks/a/_c_x-lock-0000000007.released");
    // Writers of every recipe and dialect: a mutex's, Curator's write lock, kazoo's Lock.
    EXPECT_TRUE(may_mark_release("_c_x-lock-0000000007", lock_family::mutex, zklock::lock_dialect::curator));
    EXPECT_TRUE(may_mark_release("_c_x-__WRIT__0000000007", lock_family::rw, zklock::lock_dialect::curator));
    EXPECT_TRUE(may_mark_release("abc__lock__0000000007", lock_family::rw, zklock::lock_dialect::kazoo));
    // Readers never: their grant does not show that no writer is below them.
    EXPECT_FALSE(may_mark_release("_c_x-__READ__0000000007", lock_family::rw, zklock::lock_dialect::curator));
    EXPECT_FALSE(may_mark_release("abc__rlock__0000000007", lock_family::rw, zklock::lock_dialect::kazoo));
    // Not a contender (a marker itself, a helper node).
    EXPECT_FALSE(
        may_mark_release("_c_x-lock-0000000007.released", lock_family::mutex, zklock::lock_dialect::curator));
    EXPECT_FALSE(may_mark_release("leases", lock_family::mutex, zklock::lock_dialect::curator));
}

TEST(Protocol, AMarkerIsNoContenderOfAnyRecipe) {
    // It never shows in a listing (it lives inside one transaction); one made by hand is not a
    // contender anyone waits for.
    std::vector<std::string> kids{"_c_x-lock-0000000001", "_c_x-lock-0000000001.released",
                                  "_c_y-lock-0000000002"};
    auto d = decide(kids, "_c_y-lock-0000000002", lock_family::mutex, zklock::lock_dialect::curator, {}, 3);
    EXPECT_EQ(d.what, exclusive_decision::wait);
    EXPECT_EQ(d.predecessor, "_c_x-lock-0000000001");
    EXPECT_TRUE(d.alone);
}

TEST(Protocol, LeaderLatchNamesAreWritersAndNamingsAreTold) {
    // Curator's LeaderLatch: "_c_<uuid>-latch-<seq>" (protected) or "latch-<seq>"; every recipe
    // counts it as an exclusive contender.
    auto l = parse_contender("_c_5f3e1b52-9d7c-4f0e-8a4b-1234567890ab-latch-0000000003");
    ASSERT_TRUE(l);
    EXPECT_EQ(l->seq, 3);
    EXPECT_TRUE(l->writer);
    EXPECT_TRUE(parse_contender("latch-0000000004"));
    EXPECT_FALSE(parse_contender("latch-000000004")); // 9 digits: not a sequence
    EXPECT_EQ(
        classify_child("latch-00000000x4", lock_family::mutex, zklock::lock_dialect::curator, std::nullopt),
        child_kind::foreign);
    EXPECT_EQ(node_marker(lock_family::latch, false, zklock::lock_dialect::curator), "-latch-");
    EXPECT_EQ(protected_node_prefix("/e", "g", zklock::lock_dialect::curator, lock_family::latch),
              "/e/_c_g-latch-");

    EXPECT_EQ(naming_of("_c_x-lock-0000000001"), naming::curator_lock);
    EXPECT_EQ(naming_of("lock-0000000001"), naming::curator_lock);
    EXPECT_EQ(naming_of("_c_x-__WRIT__0000000001"), naming::curator_lock);
    EXPECT_EQ(naming_of("_c_x-latch-0000000001"), naming::curator_latch);
    EXPECT_EQ(naming_of("0123abcd__lock__0000000001"), naming::kazoo);
    EXPECT_EQ(naming_of("0123abcd__rlock__0000000001"), naming::kazoo);

    // A latch leader below a latch waiter: decided like any lock.
    std::vector<std::string> kids{"_c_a-latch-0000000002", "_c_b-latch-0000000001"};
    auto d = decide_exclusive(kids, "_c_a-latch-0000000002");
    EXPECT_EQ(d.what, exclusive_decision::wait);
    EXPECT_EQ(d.predecessor, "_c_b-latch-0000000001");
    EXPECT_FALSE(other_naming(kids, naming::curator_latch));
    // Mixed: each peer would see only its own, so an election refuses (the other one named).
    kids.push_back("_c_c-lock-0000000003");
    kids.push_back("leases");  // not a contender: never a reason
    kids.push_back("zz-note"); // nor this
    EXPECT_EQ(other_naming(kids, naming::curator_latch), "_c_c-lock-0000000003");
    EXPECT_EQ(other_naming(kids, naming::curator_lock), "_c_a-latch-0000000002"); // (the first listed)
    EXPECT_EQ(other_naming(std::vector<std::string>{"abc__lock__0000000001"}, naming::curator_lock),
              "abc__lock__0000000001");
    EXPECT_FALSE(other_naming(std::vector<std::string>{"abc__lock__0000000001"}, naming::kazoo));
}
