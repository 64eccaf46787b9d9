// guard::async_commit against the real server: the writes land only while the lock is
// held. The tests whose holder does not know that its lock is gone (a break, a takeover) fail if
// the lock check is dropped from the multi: its write would then be applied.
#include <zklock/inspect.hpp>
#include <zklock/mutex.hpp>
#include <zklock/semaphore.hpp>
#include <zklock/shared_mutex.hpp>
#include <zklock/znode.hpp>

#include "common.hpp"
#include "proxy.hpp"
#include "raw_zk.hpp"

#include <boost/asio/as_tuple.hpp>

using namespace zt;
using zklock::errc;
using zklock::zk_errc;

namespace {

/// A data node for the test, next to (not under) the lock path; deleted by the caller.
awaitable<std::string> data_node(zklock::session& s, const std::string& lock, std::string value) {
    auto p = lock + "-data";
    co_await zklock::async_create_node(s, p, std::move(value), use_awaitable);
    co_return p;
}

awaitable<std::string> value_of(zklock::session& s, const std::string& p) {
    co_return (co_await zklock::async_get_data(s, p, use_awaitable)).data;
}

} // namespace

using Commit = zt::zk_test;

TEST_F(Commit, AReadModifyWriteUnderTheLockCommitsAndReportsEachOperation) {
    run_test([&]() -> awaitable<void> {
        auto path = lock_path();
        auto a = co_await connect();
        auto counter = co_await data_node(*a, path, "41");
        zklock::mutex m(*a, path);
        auto g = co_await m.async_acquire(use_awaitable);
        auto d = co_await zklock::async_get_data(*a, counter, use_awaitable);
        const auto before = a->statistics().multis;
        auto [ec, r] = co_await g.async_commit(
            zklock::transaction{}
                .set_data(counter, std::to_string(std::stoi(d.data) + 1), d.version)
                .create(counter + "-log-", "+1", zklock::create_mode::persistent_sequential)
                .check(counter, d.version + 1),
            asio::as_tuple(use_awaitable));
        EXPECT_FALSE(ec) << ec.message();
        CO_REQUIRE(r.ops.size() == 3u);
        EXPECT_EQ(r.failed, zklock::commit_result::npos);
        EXPECT_EQ(r.ops[0].version, d.version + 1);
        EXPECT_EQ(r.ops[1].path.rfind(counter + "-log-", 0), 0u) << r.ops[1].path;
        EXPECT_EQ(r.ops[1].path.size(), counter.size() + 5 + 10) << "the sequence suffix";
        for (auto& o : r.ops) EXPECT_FALSE(o.ec) << o.ec.message();
        EXPECT_EQ(co_await value_of(*a, counter), "42");
        EXPECT_EQ(a->statistics().multis, before + 1);
        co_await g.async_release(use_awaitable);
        co_await zklock::async_delete_node(*a, r.ops[1].path, -1, use_awaitable);
        co_await zklock::async_delete_node(*a, counter, -1, use_awaitable);
    });
}

TEST_F(Commit, ABrokenLockCommitsNothing) {
    // The holder has not noticed the break (no watch on its node): only the check in the multi
    // stands between its write and the data.
    run_test([&]() -> awaitable<void> {
        auto path = lock_path();
        auto a = co_await connect();
        auto admin = co_await connect();
        auto data = co_await data_node(*admin, path, "before");
        zklock::mutex m(*a, path);
        auto g = co_await m.async_acquire(use_awaitable);
        co_await zklock::async_break_lock(*admin, g.node_path(), use_awaitable);
        EXPECT_FALSE(g.is_lost()) << "(the test needs a holder that does not know yet)";
        const auto before = a->statistics().multis;
        auto [ec, r] =
            co_await g.async_commit(zklock::transaction{}.set_data(data, "after").create(data + "-new"),
                                    asio::as_tuple(use_awaitable));
        EXPECT_EQ(ec, errc::lock_lost) << ec.message();
        EXPECT_EQ(r.failed, zklock::commit_result::npos);
        EXPECT_EQ(a->statistics().multis, before + 1) << "the check was made by the server";
        EXPECT_EQ(co_await value_of(*admin, data), "before");
        auto [nec, n] = co_await zklock::async_get_data(*admin, data + "-new", asio::as_tuple(use_awaitable));
        EXPECT_EQ(nec, zk_errc::no_node) << "a write of the failed transaction was applied";
        co_await g.async_release(use_awaitable);
        co_await zklock::async_delete_node(*admin, data, -1, use_awaitable);
    });
}

TEST_F(Commit, AnOldHoldersCommitFailsAndTheNewHoldersValueStands) {
    run_test([&]() -> awaitable<void> {
        auto path = lock_path();
        auto a = co_await connect();
        auto b = co_await connect();
        auto admin = co_await connect();
        auto data = co_await data_node(*admin, path, "0");
        zklock::mutex ma(*a, path), mb(*b, path);
        auto ga = co_await ma.async_acquire(use_awaitable);
        auto read_a = co_await zklock::async_get_data(*a, data, use_awaitable); // a reads, then stalls
        co_await zklock::async_break_lock(*admin, ga.node_path(), use_awaitable);
        auto gb = co_await mb.async_acquire_for(5s, use_awaitable);
        auto read_b = co_await zklock::async_get_data(*b, data, use_awaitable);
        auto [bec, br] = co_await gb.async_commit(zklock::transaction{}.set_data(data, "b", read_b.version),
                                                  asio::as_tuple(use_awaitable));
        EXPECT_FALSE(bec) << bec.message();
        // a wakes up and writes without a version check, as a careless holder would
        auto [aec, ar] = co_await ga.async_commit(
            zklock::transaction{}.set_data(data, "a (stale, from " + read_a.data + ")"),
            asio::as_tuple(use_awaitable));
        EXPECT_EQ(aec, errc::lock_lost) << aec.message();
        EXPECT_EQ(co_await value_of(*admin, data), "b");
        co_await gb.async_release(use_awaitable);
        co_await ga.async_release(use_awaitable);
        co_await zklock::async_delete_node(*admin, data, -1, use_awaitable);
    });
}

TEST_F(Commit, AFailedOperationIsReportedByItsIndexAndNothingIsApplied) {
    run_test([&]() -> awaitable<void> {
        auto path = lock_path();
        auto a = co_await connect();
        auto x = co_await data_node(*a, path, "x0");
        auto y = path + "-y";
        co_await zklock::async_create_node(*a, y, "y0", use_awaitable);
        zklock::mutex m(*a, path);
        auto g = co_await m.async_acquire(use_awaitable);
        auto [ec, r] = co_await g.async_commit(zklock::transaction{}
                                                   .set_data(x, "x1")
                                                   .set_data(y, "y1", 7) // wrong version
                                                   .remove(x),
                                               asio::as_tuple(use_awaitable));
        EXPECT_EQ(ec, zk_errc::bad_version) << ec.message();
        EXPECT_EQ(r.failed, 1u);
        CO_REQUIRE(r.ops.size() == 3u);
        EXPECT_EQ(r.ops[1].ec, zk_errc::bad_version);
        EXPECT_EQ(co_await value_of(*a, x), "x0") << "the operation before the failed one was applied";
        EXPECT_EQ(co_await value_of(*a, y), "y0");
        // a missing node, at index 0
        auto [ec2, r2] = co_await g.async_commit(
            zklock::transaction{}.remove(path + "-missing").set_data(x, "x2"), asio::as_tuple(use_awaitable));
        EXPECT_EQ(ec2, zk_errc::no_node) << ec2.message();
        EXPECT_EQ(r2.failed, 0u);
        EXPECT_EQ(co_await value_of(*a, x), "x0");
        EXPECT_FALSE(g.is_lost()) << "a failed user operation says nothing about the lock";
        co_await g.async_release(use_awaitable);
        co_await zklock::async_delete_node(*a, x, -1, use_awaitable);
        co_await zklock::async_delete_node(*a, y, -1, use_awaitable);
    });
}

TEST_F(Commit, ReadGuardsSemaphoreLeasesAndHandOffGrantsCommitToo) {
    run_test([&]() -> awaitable<void> {
        auto path = lock_path();
        auto sem = semaphore_path();
        auto a = co_await connect();
        auto admin = co_await connect();
        auto data = co_await data_node(*admin, path, "0");
        {
            zklock::shared_mutex rw(*a, path);
            auto r = co_await rw.async_acquire_shared(use_awaitable);
            auto [ec, res] = co_await r.async_commit(zklock::transaction{}.set_data(data, "read"),
                                                     asio::as_tuple(use_awaitable));
            EXPECT_FALSE(ec) << ec.message();
            co_await r.async_release(use_awaitable);
        }
        {
            zklock::semaphore s(*a, sem, 2);
            auto l = co_await s.async_acquire(use_awaitable);
            auto [ec, res] = co_await l.async_commit(zklock::transaction{}.set_data(data, "lease"),
                                                     asio::as_tuple(use_awaitable));
            EXPECT_FALSE(ec) << ec.message();
            co_await zklock::async_delete_node(*admin, l.node_path(), -1, use_awaitable);
            auto [ec2, res2] = co_await l.async_commit(zklock::transaction{}.set_data(data, "broken lease"),
                                                       asio::as_tuple(use_awaitable));
            EXPECT_EQ(ec2, errc::lock_lost) << ec2.message();
            co_await l.async_release(use_awaitable);
        }
        EXPECT_EQ(co_await value_of(*admin, data), "lease");
        {
            zklock::mutex_options o;
            o.local_handoff = 16;
            zklock::mutex m(*a, path, o);
            auto g1 = co_await m.async_acquire(use_awaitable);
            auto w = in_background([&](auto h) { m.async_acquire_for(10s, h); });
            auto [ec, res] = co_await g1.async_commit(zklock::transaction{}.set_data(data, "grant 0"),
                                                      asio::as_tuple(use_awaitable));
            EXPECT_FALSE(ec) << ec.message();
            const auto shared_node = g1.node_path();
            co_await g1.async_release(use_awaitable);
            co_await eventually([&] { return w->done; });
            CO_REQUIRE(w->granted());
            EXPECT_EQ(w->guard.node_path(), shared_node) << "(handed off under the same node)";
            // the shared node is lost: the grant that is out learns it from its queue, and its
            // commit fails without sending anything (the node might be someone's again)
            co_await zklock::async_break_lock(*admin, w->guard.node_path(), use_awaitable);
            co_await eventually([&] { return w->guard.is_lost(); });
            const auto before = a->statistics().multis;
            auto [ec2, res2] = co_await w->guard.async_commit(zklock::transaction{}.set_data(data, "grant 1"),
                                                              asio::as_tuple(use_awaitable));
            EXPECT_EQ(ec2, errc::lock_lost) << ec2.message();
            EXPECT_EQ(a->statistics().multis, before) << "a lost grant sent its transaction";
            co_await w->guard.async_release(use_awaitable);
        }
        EXPECT_EQ(co_await value_of(*admin, data), "grant 0");
        co_await zklock::async_delete_node(*admin, data, -1, use_awaitable);
    });
}

TEST_F(Commit, AnExpiredHoldersCommitFailsAndChangesNothing) {
    // The session expires (partition) between the read and the commit: the guard is lost, and
    // its commit is refused before anything is sent.
    run_test([&]() -> awaitable<void> {
        auto path = lock_path();
        auto admin = co_await connect();
        auto data = co_await data_node(*admin, path, "0");
        tcp_proxy proxy(first_port(zk_connect()));
        auto o = through(proxy);
        o.session_timeout = 2000ms;
        auto a = co_await connect(o);
        zklock::mutex m(*a, path);
        auto g = co_await m.async_acquire(use_awaitable);
        auto d = co_await zklock::async_get_data(*a, data, use_awaitable);
        proxy.blackhole(true);
        co_await sleep_for(3000ms); // past T: the server expires the session and deletes the node
        proxy.blackhole(false);
        co_await eventually([&] { return a->state() == zklock::session_state::expired; }, 5000ms);
        auto [ec, r] = co_await g.async_commit(zklock::transaction{}.set_data(data, "stale", d.version),
                                               asio::as_tuple(use_awaitable));
        EXPECT_EQ(ec, errc::lock_lost) << ec.message();
        EXPECT_EQ(co_await value_of(*admin, data), "0");
        co_await zklock::async_delete_node(*admin, data, -1, use_awaitable);
    });
}

TEST_F(Commit, BadTransactionsAreRefusedBeforeAnythingIsSent) {
    run_test([&]() -> awaitable<void> {
        auto path = lock_path();
        auto a = co_await connect();
        zklock::mutex m(*a, path);
        auto g = co_await m.async_acquire(use_awaitable);
        const auto before = a->statistics().requests();
        auto refused = [&](zklock::transaction t) -> awaitable<zklock::error_code> {
            auto [ec, r] = co_await g.async_commit(std::move(t), asio::as_tuple(use_awaitable));
            co_return ec;
        };
        EXPECT_EQ(co_await refused(zklock::transaction{}), errc::transaction_empty);
        zklock::transaction big;
        for (int i = 0; i < 4; ++i) big.set_data(path + "-big", std::string(300 * 1024, 'x'));
        auto ec = co_await refused(std::move(big));
        EXPECT_EQ(ec, errc::transaction_too_large) << ec.message();
        EXPECT_NE(ec.message().find("900 KiB"), std::string::npos) << ec.message();
        EXPECT_EQ(co_await refused(zklock::transaction{}.set_data("relative", "x")), errc::path_not_absolute);
        EXPECT_EQ(co_await refused(zklock::transaction{}.create(path + "//x")), errc::path_empty_segment);
        EXPECT_EQ(co_await refused(zklock::transaction{}.remove("/zookeeper/quota")), errc::path_reserved);
        EXPECT_EQ(co_await refused(zklock::transaction{}.check(path, -7)), errc::invalid_version);
        EXPECT_EQ(a->statistics().requests(), before) << "a request was sent";
        // an empty guard
        co_await g.async_release(use_awaitable);
        EXPECT_EQ(co_await refused(zklock::transaction{}.check(path, -1)), errc::not_held);
        zklock::guard none;
        auto [nec, nr] =
            co_await none.async_commit(zklock::transaction{}.check(path, -1), asio::as_tuple(use_awaitable));
        EXPECT_EQ(nec, errc::not_held);
    });
}

TEST_F(Commit, ATransactionCreatesItsNodesWithTheACLItIsGiven) {
    // transaction::create takes an ACL (open by default). A node made under a lock with the
    // creator's ACL cannot be changed by a client without the credentials, only read; a node made
    // without one can. A protected ACL on a session without credentials fails the whole commit.
    run_test([&]() -> awaitable<void> {
        auto path = lock_path();
        auto oo = options();
        oo.auth.push_back(zklock::digest("svc", "s3cret"));
        auto owner = co_await connect(oo);
        auto plain = co_await connect();
        auto parent = co_await data_node(*owner, path, "");
        zklock::mutex m(*owner, path);
        auto g = co_await m.async_acquire(use_awaitable);
        auto [ec, r] =
            co_await g.async_commit(zklock::transaction{}
                                        .create(parent + "/guarded", "v1", zklock::create_mode::persistent,
                                                zklock::acl::creator_all_world_read())
                                        .create(parent + "/open", "v1"),
                                    asio::as_tuple(use_awaitable));
        EXPECT_FALSE(ec) << ec.message();
        {
            raw_zk stranger; // no credentials
            EXPECT_EQ(stranger.set(parent + "/guarded", "v2"), ZNOAUTH) << "the ACL was not applied";
            EXPECT_EQ(stranger.set(parent + "/open", "v2"), ZOK) << "the default ACL is open";
        }
        EXPECT_EQ(co_await value_of(*owner, parent + "/guarded"), "v1");
        // The same ACL from a session without credentials: ZooKeeper refuses, nothing is applied.
        co_await g.async_release(use_awaitable);
        zklock::mutex pm(*plain, path);
        auto pg = co_await pm.async_acquire(use_awaitable);
        auto [pec, pr] =
            co_await pg.async_commit(zklock::transaction{}
                                         .create(parent + "/open2", "x")
                                         .create(parent + "/guarded2", "x", zklock::create_mode::persistent,
                                                 zklock::acl::creator_all_world_read()),
                                     asio::as_tuple(use_awaitable));
        EXPECT_EQ(pec, zk_errc::invalid_acl) << pec.message();
        EXPECT_EQ(pr.failed, 1u);
        EXPECT_TRUE((co_await children_of(*owner, parent)).size() == 2u)
            << "a refused commit applied something";
        co_await pg.async_release(use_awaitable);
        for (auto n : {"/guarded", "/open"})
            co_await zklock::async_delete_node(*owner, parent + n, -1, use_awaitable);
        co_await zklock::async_delete_node(*owner, parent, -1, use_awaitable);
        co_await owner->async_close(use_awaitable);
        co_await plain->async_close(use_awaitable);
    });
}
