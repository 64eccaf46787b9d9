// Multi-locks, inspection, breaking and revoking locks, against a real ZooKeeper.
#include <zklock/inspect.hpp>
#include <zklock/multi_lock.hpp>
#include <zklock/reentrant_mutex.hpp>
#include <zklock/semaphore.hpp>
#include <zklock/shared_mutex.hpp>

#include "common.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/detached.hpp>

#include <unistd.h>

using namespace zt;
using zklock::errc;

using MultiLock = zt::zk_test;
using Inspect = zt::zk_test;
using Reentrant = zt::zk_test;
using Semaphore = zt::zk_test;

TEST_F(MultiLock, AllOrNothingInCanonicalOrderWithoutDeadlock) {
    run_test(
        [&]() -> awaitable<void> {
            auto base = unique_path("multi");
            std::vector<std::string> paths{base + "/c", base + "/a", base + "/b"};
            auto s1 = co_await connect();
            auto s2 = co_await connect();
            // two callers take overlapping sets in opposite orders, many times: never a deadlock
            int done = 0, inside = 0, violations = 0;
            auto ex = co_await asio::this_coro::executor;
            for (int k = 0; k < 2; ++k)
                asio::co_spawn(
                    ex,
                    [&, k]() -> awaitable<void> {
                        auto& s = k ? *s2 : *s1;
                        for (int i = 0; i < 10; ++i) {
                            // (no braced lists of non-trivial objects in coroutines: GCC 12 rejects them)
                            std::vector<zklock::mutex> set;
                            if (k) {
                                set.emplace_back(s, paths[2]);
                                set.emplace_back(s, paths[1]);
                                set.emplace_back(s, paths[0]);
                            } else {
                                set.emplace_back(s, paths[0]);
                                set.emplace_back(s, paths[1]);
                            }
                            auto gs = co_await zklock::async_acquire_all_for(set, 10s, use_awaitable);
                            if (gs.size() != set.size()) ++violations;
                            for (std::size_t j = 1; j < gs.size(); ++j)
                                if (!(gs[j - 1].node_path() < gs[j].node_path()))
                                    ++violations; // canonical order
                            if (inside++) ++violations;
                            co_await sleep_for(2ms);
                            --inside;
                            for (auto it = gs.rbegin(); it != gs.rend(); ++it)
                                co_await it->async_release(use_awaitable);
                        }
                        ++done;
                    },
                    boost::asio::detached);
            co_await eventually([&] { return done >= 2; }, 20000ms);
            EXPECT_EQ(done, 2) << "the multi-lockers deadlocked";
            EXPECT_EQ(violations, 0);

            // one lock of the set busy: the deadline covers the set, and what was taken is rolled back
            zklock::mutex blocker(*s2, paths[2]);
            auto held = co_await blocker.async_acquire(use_awaitable);
            std::vector<zklock::mutex> set;
            for (auto& p : paths) set.emplace_back(*s1, p);
            auto t0 = std::chrono::steady_clock::now();
            auto [ec, gs] =
                co_await zklock::async_acquire_all_for(set, 300ms, boost::asio::as_tuple(use_awaitable));
            EXPECT_EQ(ec, errc::acquire_timeout) << ec.message();
            EXPECT_LT(std::chrono::steady_clock::now() - t0, 2s);
            EXPECT_TRUE(gs.empty());
            EXPECT_TRUE((co_await children_of(*s1, paths[0])).empty()) << "not rolled back";
            EXPECT_TRUE((co_await children_of(*s1, paths[1])).empty()) << "not rolled back";
            // cancellation rolls back too
            asio::cancellation_signal sig;
            bool cancelled = false;
            zklock::async_acquire_all(
                set, asio::bind_cancellation_slot(sig.slot(),
                                                  [&](zklock::error_code e, std::vector<zklock::guard> g) {
                                                      EXPECT_EQ(e, asio::error::operation_aborted);
                                                      EXPECT_TRUE(g.empty());
                                                      cancelled = true;
                                                  }));
            co_await wait_for_children(*s1, paths[2], 2);
            sig.emit(asio::cancellation_type::terminal);
            co_await eventually([&] { return cancelled; }, 3000ms);
            EXPECT_TRUE(cancelled);
            co_await held.async_release(use_awaitable);
            // bad sets
            auto [e1, g1] = co_await zklock::async_acquire_all(std::vector<zklock::mutex>{},
                                                               boost::asio::as_tuple(use_awaitable));
            EXPECT_EQ(e1, errc::multi_lock_empty);
            std::vector<zklock::mutex> twice;
            twice.emplace_back(*s1, paths[0]);
            twice.emplace_back(*s2, paths[0]);
            auto [e2, g2] = co_await zklock::async_acquire_all(twice, boost::asio::as_tuple(use_awaitable));
            EXPECT_EQ(e2, errc::multi_lock_duplicate_path);
            for (auto& p : paths) co_await expect_no_leftovers(*s1, p);
        },
        90s);
}

TEST_F(Inspect, ListsContendersBreaksAndRevokes) {
    run_test([&]() -> awaitable<void> {
        auto path = lock_path("inspect");
        auto a = co_await connect();
        auto b = co_await connect();
        zklock::mutex_options oa;
        oa.node_data = "holder A";
        oa.revocable = true;
        zklock::mutex_options ob;
        ob.node_data = "waiter B";
        zklock::mutex ma(*a, path, oa), mb(*b, path, ob);
        auto g = co_await ma.async_acquire(use_awaitable);
        zklock::guard gb;
        bool b_done = false;
        mb.async_acquire([&](zklock::error_code ec, zklock::guard x) {
            EXPECT_FALSE(ec);
            gb = std::move(x);
            b_done = true;
        });
        co_await wait_for_children(*a, path, 2);
        // a foreign child is not listed
        co_await zklock::async_create_node(*a, path + "/not-a-lock", "", use_awaitable);

        // (without an inspect_options: it had no effect, and had to be passed; the old overload
        // is used by acl_test.cpp and foreign_children_test.cpp)
        auto list = co_await zklock::async_list_contenders(*b, path, use_awaitable);
        CO_REQUIRE(list.size() == 2u);
        EXPECT_TRUE(list[0].holder);
        EXPECT_FALSE(list[1].holder);
        EXPECT_EQ(list[0].data, "holder A");
        EXPECT_EQ(list[1].data, "waiter B");
        EXPECT_EQ(list[0].node_path, g.node_path());
        EXPECT_EQ(list[0].session_id, a->session_id());
        EXPECT_EQ(list[0].czxid, g.node_czxid());
        EXPECT_GE(list[0].age.count(), 0);
        EXPECT_LT(list[0].age, 60s);

        // revoke: the holder is asked, not forced
        zklock::error_code revoked;
        g.async_wait_revoked([&](zklock::error_code ec) { revoked = ec; });
        auto node = co_await zklock::async_revoke(*b, path, use_awaitable);
        EXPECT_EQ(node, g.node_path());
        co_await eventually([&] { return revoked; }, 3000ms);
        EXPECT_EQ(revoked, errc::revocation_requested) << revoked.message();
        EXPECT_FALSE(g.is_lost());
        EXPECT_FALSE(b_done);
        // a lock that did not opt in says so
        auto [ec_nr] = co_await gb.async_wait_revoked(boost::asio::as_tuple(use_awaitable));
        EXPECT_EQ(ec_nr, errc::not_held);

        // break the lock: the holder learns it through its loss signal, the waiter gets it
        zklock::error_code lost;
        g.async_wait_lost([&](zklock::error_code ec) { lost = ec; });
        co_await zklock::async_break_lock(*b, g.node_path(), use_awaitable);
        co_await eventually([&] { return b_done && lost; }, 3000ms);
        EXPECT_TRUE(b_done);
        EXPECT_EQ(lost, errc::lock_node_deleted);
        auto [ec_bad] =
            co_await zklock::async_break_lock(*b, path + "/not-a-lock", boost::asio::as_tuple(use_awaitable));
        EXPECT_EQ(ec_bad, errc::not_a_lock_node) << "only lock nodes may be broken";
        co_await gb.async_release(use_awaitable);
        co_await g.async_release(use_awaitable);
        co_await zklock::async_delete_node(*a, path + "/not-a-lock", -1, use_awaitable);
    });
}

TEST_F(Reentrant, OwnerReentersOthersExcludedNodeGoesWithTheLastGuard) {
    run_test([&]() -> awaitable<void> {
        auto path = lock_path("reentrant");
        auto a = co_await connect();
        auto b = co_await connect();
        zklock::reentrant_mutex ra(*a, path), rb(*b, path);
        auto g1 = co_await ra.async_acquire(1, use_awaitable);
        auto before = a->statistics().requests();
        auto g2 = co_await ra.async_acquire(1, use_awaitable); // same owner: at once, same node
        EXPECT_EQ(a->statistics().requests(), before) << "a nested acquire must not talk to ZooKeeper";
        EXPECT_EQ(g1.node_path(), g2.node_path());
        EXPECT_EQ(g1.fencing_token(), g2.fencing_token());
        // another owner, same session: excluded
        zklock::guard g3;
        bool g3_done = false;
        ra.async_acquire(2, [&](zklock::error_code ec, zklock::guard g) {
            EXPECT_FALSE(ec);
            g3 = std::move(g);
            g3_done = true;
        });
        // another session: excluded too
        zklock::mutex mb(*b, path);
        auto [ec, none] = co_await mb.async_try_acquire(boost::asio::as_tuple(use_awaitable));
        EXPECT_EQ(ec, errc::lock_busy);
        co_await g2.async_release(use_awaitable);
        co_await sleep_for(100ms);
        EXPECT_FALSE(g3_done) << "released after the first of two holds";
        auto kids = co_await children_of(*a, path);
        EXPECT_NE(
            std::find(kids.begin(), kids.end(), std::string(zklock::detail::last_segment(g1.node_path()))),
            kids.end());
        co_await g1.async_release(use_awaitable); // the last hold: the node goes, owner 2 gets it
        co_await eventually([&] { return g3_done; }, 3000ms);
        EXPECT_TRUE(g3_done);
        // owner 2 re-enters while holding, and a third nested acquire joins... then all release
        auto g4 = co_await ra.async_acquire(2, use_awaitable);
        EXPECT_EQ(g4.node_path(), g3.node_path());
        g4.release_in_background();
        co_await g3.async_release(use_awaitable);
    });
}

TEST_F(Reentrant, TryForAndUntilAsTheMutexHasThem) {
    run_test([&]() -> awaitable<void> {
        auto path = lock_path("reentrant-timed");
        auto a = co_await connect();
        auto b = co_await connect();
        zklock::reentrant_mutex ra(*a, path), rb(*b, path);
        auto g1 = co_await ra.async_try_acquire(1, use_awaitable); // free: granted
        // the owner re-enters with every form, at once
        auto g2 = co_await ra.async_try_acquire(1, use_awaitable);
        auto g3 = co_await ra.async_acquire_for(1, 0ms, use_awaitable);
        auto g4 = co_await ra.async_acquire_until(1, std::chrono::steady_clock::now() - 1s, use_awaitable);
        EXPECT_EQ(g2.node_path(), g1.node_path());
        EXPECT_EQ(g4.node_path(), g1.node_path());
        // another owner: busy, timed out; no node of theirs is left
        auto [e1, x1] = co_await rb.async_try_acquire(7, boost::asio::as_tuple(use_awaitable));
        EXPECT_EQ(e1, errc::lock_busy) << e1.message();
        const auto t0 = std::chrono::steady_clock::now();
        auto [e2, x2] = co_await rb.async_acquire_for(7, 300ms, boost::asio::as_tuple(use_awaitable));
        EXPECT_EQ(e2, errc::acquire_timeout) << e2.message();
        EXPECT_GE(std::chrono::steady_clock::now() - t0, 250ms);
        auto [e3, x3] = co_await rb.async_acquire_until(7, std::chrono::steady_clock::now() + 200ms,
                                                        boost::asio::as_tuple(use_awaitable));
        EXPECT_EQ(e3, errc::acquire_timeout) << e3.message();
        auto [e4, x4] = co_await rb.async_acquire_for(7, 0ms, boost::asio::as_tuple(use_awaitable));
        EXPECT_EQ(e4, errc::acquire_timeout) << e4.message(); // a zero timeout is one try
        EXPECT_EQ((co_await children_of(*a, path)).size(), 1u) << "a try or a deadline left a node";

        // owner 7 waits (no deadline); a second acquire of 7 with a deadline times out on its
        // own, a try of 7 is busy at once, and the first still gets the lock
        zklock::guard w;
        bool w_done = false;
        rb.async_acquire(7, [&](zklock::error_code ec, zklock::guard g) {
            EXPECT_FALSE(ec) << ec.message();
            w = std::move(g);
            w_done = true;
        });
        co_await wait_for_children(*a, path, 2);
        auto [e5, x5] = co_await rb.async_acquire_for(7, 200ms, boost::asio::as_tuple(use_awaitable));
        EXPECT_EQ(e5, errc::acquire_timeout) << e5.message();
        auto [e6, x6] = co_await rb.async_try_acquire(7, boost::asio::as_tuple(use_awaitable));
        EXPECT_EQ(e6, errc::lock_busy) << e6.message();
        EXPECT_FALSE(w_done);
        EXPECT_EQ((co_await children_of(*a, path)).size(), 2u) << "the waiting acquire lost its node";
        for (auto* g : {&g4, &g3, &g2, &g1}) co_await g->async_release(use_awaitable);
        co_await eventually([&] { return w_done; }, 5000ms);
        CO_REQUIRE(w_done);
        // a lone waiter whose deadline passes: its node goes with it
        auto [e7, x7] = co_await ra.async_acquire_for(1, 200ms, boost::asio::as_tuple(use_awaitable));
        EXPECT_EQ(e7, errc::acquire_timeout) << e7.message();
        EXPECT_EQ((co_await children_of(*a, path)).size(), 1u);
        co_await w.async_release(use_awaitable);
    });
}

TEST_F(Reentrant, AFencingStoreAcceptsTheNestedHoldersWritesAndRefusesTheFormerOwners) {
    // A nested acquire is not a new grant: same token. A store that refuses
    // tokens smaller than the largest it has seen (as guard::fencing_token says) accepts the outer
    // and the nested guard's writes, then the next owner's, and refuses the former owner's after.
    struct fencing_store {
        std::int64_t largest = 0;
        int value = 0;
        bool write(std::int64_t token, int v) {
            if (token < largest) return false;
            largest = token;
            value = v;
            return true;
        }
    };
    run_test([&]() -> awaitable<void> {
        auto path = lock_path("fenced");
        auto a = co_await connect();
        zklock::reentrant_mutex ra(*a, path);
        fencing_store store;
        auto outer = co_await ra.async_acquire(1, use_awaitable);
        auto nested = co_await ra.async_acquire(1, use_awaitable);
        EXPECT_EQ(nested.fencing_token(), outer.fencing_token()) << "a nested acquire is the same grant";
        EXPECT_TRUE(store.write(outer.fencing_token(), 1));
        EXPECT_TRUE(store.write(nested.fencing_token(), 2)) << "the nested holder's write was refused";
        EXPECT_TRUE(store.write(outer.fencing_token(), 3)) << "the outer guard's write after the nested one";
        const auto old_token = outer.fencing_token();
        co_await nested.async_release(use_awaitable);
        co_await outer.async_release(use_awaitable);
        auto next = co_await ra.async_acquire(2, use_awaitable); // the next owner: a new grant
        EXPECT_GT(next.fencing_token(), old_token);
        EXPECT_TRUE(store.write(next.fencing_token(), 4));
        EXPECT_FALSE(store.write(old_token, 5)) << "the former owner's stale write was accepted";
        EXPECT_EQ(store.value, 4);
        co_await next.async_release(use_awaitable);
    });
}

TEST_F(Reentrant, AcquiresOfOneOwnerWaitingTogetherAreCancelledEachOnItsOwn) {
    run_test([&]() -> awaitable<void> {
        auto path = lock_path("reentrant");
        auto a = co_await connect();
        auto b = co_await connect();
        zklock::mutex other(*b, path);
        auto held = co_await other.async_acquire(use_awaitable);
        zklock::reentrant_mutex ra(*a, path);
        auto ex = co_await asio::this_coro::executor;
        // owner 9 waits twice behind the other session's hold: the first acquire, and one joining it
        asio::cancellation_signal cancel_first, cancel_second, cancel_third;
        zklock::error_code ec1, ec2, ec3;
        zklock::guard g2;
        int done = 0;
        asio::co_spawn(
            ex,
            [&]() -> awaitable<void> {
                std::tie(ec1, std::ignore) = co_await ra.async_acquire(
                    9, asio::bind_cancellation_slot(cancel_first.slot(), asio::as_tuple(use_awaitable)));
                ++done;
            },
            asio::detached);
        co_await wait_for_children(*b, path, 2);
        asio::co_spawn(
            ex,
            [&]() -> awaitable<void> {
                std::tie(ec2, g2) = co_await ra.async_acquire(
                    9, asio::bind_cancellation_slot(cancel_second.slot(), asio::as_tuple(use_awaitable)));
                ++done;
            },
            asio::detached);
        co_await sleep_for(50ms);
        // cancelling the first leaves the second waiting, on the same node
        cancel_first.emit(asio::cancellation_type::terminal);
        co_await eventually([&] { return done == 1; });
        EXPECT_EQ(ec1, asio::error::operation_aborted);
        co_await sleep_for(50ms);
        EXPECT_EQ(done, 1) << "the joined acquire ended with the first";
        EXPECT_EQ((co_await children_of(*b, path)).size(), 2u);
        // the holder lets go: the second gets it
        co_await held.async_release(use_awaitable);
        co_await eventually([&] { return done == 2; });
        EXPECT_FALSE(ec2) << ec2.message();
        EXPECT_TRUE(g2.owns_lock());
        // and when every waiting acquire of the owner is cancelled, its node goes
        co_await g2.async_release(use_awaitable);
        held = co_await other.async_acquire(use_awaitable);
        asio::co_spawn(
            ex,
            [&]() -> awaitable<void> {
                std::tie(ec3, std::ignore) = co_await ra.async_acquire(
                    9, asio::bind_cancellation_slot(cancel_third.slot(), asio::as_tuple(use_awaitable)));
                ++done;
            },
            asio::detached);
        co_await wait_for_children(*b, path, 2);
        cancel_third.emit(asio::cancellation_type::terminal);
        co_await eventually([&] { return done == 3; });
        EXPECT_EQ(ec3, asio::error::operation_aborted);
        EXPECT_EQ((co_await children_of(*b, path)).size(), 1u) << "the cancelled acquire left its node";
        co_await held.async_release(use_awaitable);
    });
}

TEST_F(Semaphore, NeverMoreThanNLeasesAndNoOrphans) {
    constexpr int n = 3, sessions = 4, coroutines = 4, rounds = 3;
    int inside = 0, max_inside = 0, done = 0;
    run_test(
        [&]() -> awaitable<void> {
            auto path = semaphore_path();
            std::vector<std::unique_ptr<zklock::session>> ss;
            for (int i = 0; i < sessions; ++i) ss.push_back(co_await connect());
            auto ex = co_await asio::this_coro::executor;
            for (int i = 0; i < sessions; ++i)
                for (int c = 0; c < coroutines; ++c)
                    asio::co_spawn(
                        ex,
                        [&, i]() -> awaitable<void> {
                            zklock::semaphore sem(*ss[i], path, n);
                            for (int r = 0; r < rounds; ++r) {
                                auto lease = co_await sem.async_acquire(use_awaitable);
                                max_inside = std::max(max_inside, ++inside);
                                co_await sleep_for(10ms);
                                --inside;
                                co_await lease.async_release(use_awaitable);
                            }
                            ++done;
                        },
                        boost::asio::detached);
            co_await eventually([&] { return done >= sessions * coroutines; }, 30000ms);
            EXPECT_EQ(done, sessions * coroutines);
            EXPECT_LE(max_inside, n) << "more than N leases at once";
            // (That all N can be held at once is checked below, without depending on timing: the
            // contention above reaches N only if acquiring is faster than the 10 ms holds, which it
            // is not under ASan on a loaded machine.)

            // timeout and cancellation leave no lease; a different N is refused
            zklock::semaphore sem(*ss[0], path, n);
            std::vector<zklock::guard> held;
            for (int i = 0; i < n; ++i)
                held.push_back(co_await sem.async_acquire(use_awaitable)); // N at once
            auto [ec, g] = co_await sem.async_acquire_for(200ms, boost::asio::as_tuple(use_awaitable));
            EXPECT_EQ(ec, errc::acquire_timeout) << ec.message();
            asio::cancellation_signal sig;
            bool cancelled = false;
            sem.async_acquire(
                asio::bind_cancellation_slot(sig.slot(), [&](zklock::error_code e, zklock::guard) {
                    cancelled = e == asio::error::operation_aborted;
                }));
            co_await sleep_for(100ms);
            sig.emit(asio::cancellation_type::terminal);
            co_await eventually([&] { return cancelled; }, 3000ms);
            EXPECT_TRUE(cancelled);
            EXPECT_EQ((co_await children_of(*ss[0], path + "/leases")).size(), static_cast<std::size_t>(n))
                << "orphaned lease";
            zklock::semaphore other(*ss[1], path, n + 1);
            auto [ec2, g2] = co_await other.async_acquire_for(2s, boost::asio::as_tuple(use_awaitable));
            EXPECT_EQ(ec2, errc::semaphore_size_mismatch) << "a different N must be refused";
            for (auto& h : held) co_await h.async_release(use_awaitable);
        },
        120s);
}

TEST_F(Semaphore, ALeaseCarriesTheHolderDescriptionOfAMutexNode) {
    // docs/recipes.md: node data defaults to "zklock <hostname> pid <pid>", which zklock list
    // shows; a lease carried "zklock lease", which says nothing of its holder.
    run_test([&]() -> awaitable<void> {
        auto sem_path = semaphore_path();
        auto lock = lock_path();
        auto s = co_await connect();
        zklock::semaphore sem(*s, sem_path, 2);
        zklock::mutex m(*s, lock);
        auto lease = co_await sem.async_acquire(use_awaitable);
        auto g = co_await m.async_acquire(use_awaitable);
        auto leases = co_await zklock::async_list_contenders(*s, sem_path, use_awaitable);
        auto nodes = co_await zklock::async_list_contenders(*s, lock, use_awaitable);
        CO_REQUIRE(leases.size() == 1u && nodes.size() == 1u);
        EXPECT_TRUE(leases[0].lease);
        EXPECT_EQ(leases[0].node_path, lease.node_path());
        EXPECT_EQ(leases[0].data, nodes[0].data);
        char host[256] = {};
        CO_REQUIRE(::gethostname(host, sizeof host - 1) == 0);
        EXPECT_EQ(leases[0].data, std::string("zklock ") + host + " pid " + std::to_string(::getpid()));
        // node_data given: it is what the lease carries
        zklock::mutex_options o;
        o.node_data = "backup job 7";
        zklock::semaphore named(*s, sem_path, 2, o);
        auto lease2 = co_await named.async_acquire(use_awaitable);
        leases = co_await zklock::async_list_contenders(*s, sem_path, use_awaitable);
        CO_REQUIRE(leases.size() == 2u);
        EXPECT_EQ(leases[1].data, "backup job 7");
        co_await lease2.async_release(use_awaitable);
        co_await lease.async_release(use_awaitable);
        co_await g.async_release(use_awaitable);
    });
}

TEST_F(Semaphore, TryAndUntilAsTheMutexHasThem) {
    // The forms the mutex has: a try that never waits (errc::lock_busy, no lease left) and a
    // deadline given as a time point (errc::acquire_timeout, no lease left).
    run_test([&]() -> awaitable<void> {
        auto path = semaphore_path();
        auto a = co_await connect();
        auto b = co_await connect();
        zklock::semaphore sa(*a, path, 1), sb(*b, path, 1);
        auto held = co_await sa.async_try_acquire(use_awaitable); // free: granted at once
        EXPECT_TRUE(held.owns_lock());
        const auto t0 = std::chrono::steady_clock::now();
        auto [e1, g1] = co_await sb.async_try_acquire(boost::asio::as_tuple(use_awaitable));
        EXPECT_EQ(e1, errc::lock_busy) << e1.message();
        EXPECT_LT(std::chrono::steady_clock::now() - t0, 3s) << "a try waited";
        auto [e2, g2] = co_await sb.async_acquire_until(std::chrono::steady_clock::now() + 300ms,
                                                        boost::asio::as_tuple(use_awaitable));
        EXPECT_EQ(e2, errc::acquire_timeout) << e2.message();
        auto [e3, g3] = co_await sb.async_acquire_until(std::chrono::steady_clock::now() - 1s,
                                                        boost::asio::as_tuple(use_awaitable));
        EXPECT_EQ(e3, errc::acquire_timeout) << e3.message();
        auto leases = co_await zklock::async_list_contenders(*a, path, use_awaitable);
        EXPECT_EQ(leases.size(), 1u) << "a try or a deadline left a lease";
        co_await held.async_release(use_awaitable);
        // freed: b's try and b's _until are granted
        auto gb = co_await sb.async_try_acquire(use_awaitable);
        co_await gb.async_release(use_awaitable);
        auto gu = co_await sb.async_acquire_until(std::chrono::steady_clock::now() + 10s, use_awaitable);
        co_await gu.async_release(use_awaitable);
        // while the connection is down, a try fails at once (it never waits for a reconnect)
        zklock::session_options o;
        o.connect = "127.0.0.1:1";
        o.connect_timeout = 200ms;
        auto ex = co_await asio::this_coro::executor;
        zklock::session down(ex, o);
        zklock::semaphore sd(down, path, 1);
        auto [e4, g4] = co_await sd.async_try_acquire(boost::asio::as_tuple(use_awaitable));
        EXPECT_TRUE(e4 == errc::not_connected || e4 == zklock::zk_errc::connection_loss) << e4.message();
    });
}

using SharedMutexUntil = zt::zk_test;

TEST_F(SharedMutexUntil, BothFormsTimeOutAtTheirTimePointAndLeaveNoNode) {
    run_test([&]() -> awaitable<void> {
        auto path = lock_path();
        auto a = co_await connect();
        auto b = co_await connect();
        zklock::shared_mutex ma(*a, path), mb(*b, path);
        auto w = co_await ma.async_acquire(use_awaitable);
        auto [e1, g1] = co_await mb.async_acquire_until(std::chrono::steady_clock::now() + 300ms,
                                                        boost::asio::as_tuple(use_awaitable));
        EXPECT_EQ(e1, errc::acquire_timeout) << e1.message();
        auto [e2, g2] = co_await mb.async_acquire_shared_until(std::chrono::steady_clock::now() + 300ms,
                                                               boost::asio::as_tuple(use_awaitable));
        EXPECT_EQ(e2, errc::acquire_timeout) << e2.message();
        auto [e3, g3] = co_await mb.async_acquire_shared_until(std::chrono::steady_clock::now() - 1s,
                                                               boost::asio::as_tuple(use_awaitable));
        EXPECT_EQ(e3, errc::acquire_timeout) << e3.message();
        EXPECT_EQ((co_await children_of(*a, path)).size(), 1u) << "a deadline left a node";
        co_await w.async_release(use_awaitable);
        auto r =
            co_await mb.async_acquire_shared_until(std::chrono::steady_clock::now() + 10s, use_awaitable);
        auto r2 =
            co_await ma.async_acquire_shared_until(std::chrono::steady_clock::now() + 10s, use_awaitable);
        co_await r.async_release(use_awaitable);
        co_await r2.async_release(use_awaitable);
        auto w2 = co_await mb.async_acquire_until(std::chrono::steady_clock::now() + 10s, use_awaitable);
        co_await w2.async_release(use_awaitable);
    });
}
