// One path, one lock, whatever the recipe: for every ordered pair of recipes,
// a holder of the first on a path, then an attempt of the second on the same path. Exclusive kinds
// exclude everything; readers share with readers only; a semaphore and a lock, or the unique_node
// strategy and the sequential nodes, cannot share a path: the second fails with an error that
// names the other kind, and leaves nothing behind.
#include <zklock/multi_lock.hpp>
#include <zklock/reentrant_mutex.hpp>
#include <zklock/semaphore.hpp>
#include <zklock/shared_mutex.hpp>
#include <zklock/inspect.hpp>

#include "common.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/steady_timer.hpp>

#include <functional>

using namespace zt;
using zklock::errc;
using zklock::error_code;

namespace {

/// How a kind takes the path: exclusively, shared with readers, as a semaphore lease, or as the
/// unique_node strategy's one node.
enum class share { exclusive, reader, lease, unique };

struct kind {
    const char* name;
    share how;
    /// Acquires on `path`, waiting at most `limit` (then the kind's own "not granted" error).
    std::function<awaitable<std::pair<error_code, zklock::guard>>(zklock::session&, std::string,
                                                                  std::chrono::milliseconds)>
        acquire;
};

zklock::mutex_options with(zklock::lock_dialect d,
                           zklock::lock_strategy st = zklock::lock_strategy::predecessor,
                           bool revocable = false) {
    zklock::mutex_options o;
    o.dialect = d;
    o.strategy = st;
    o.revocable = revocable;
    return o;
}

std::vector<kind> kinds() {
    using P = std::pair<error_code, zklock::guard>;
    using zklock::lock_dialect;
    auto mutex_kind = [](const char* name, share how, zklock::mutex_options o) {
        return kind{name, how,
                    [o](zklock::session& s, std::string p, std::chrono::milliseconds l) -> awaitable<P> {
                        zklock::mutex m(s, p, o);
                        auto [ec, g] = co_await m.async_acquire_for(l, asio::as_tuple(use_awaitable));
                        co_return P{ec, std::move(g)};
                    }};
    };
    std::vector<kind> k;
    k.push_back(mutex_kind("mutex", share::exclusive, with(lock_dialect::curator)));
    k.push_back(mutex_kind("mutex (kazoo naming)", share::exclusive, with(lock_dialect::kazoo)));
    k.push_back(mutex_kind("revocable mutex", share::exclusive,
                           with(lock_dialect::curator, zklock::lock_strategy::predecessor, true)));
    k.push_back(mutex_kind("mutex (watch_children)", share::exclusive,
                           with(lock_dialect::curator, zklock::lock_strategy::watch_children)));
    k.push_back(mutex_kind("mutex (unique_node)", share::unique,
                           with(lock_dialect::curator, zklock::lock_strategy::unique_node)));
    for (auto d : {lock_dialect::curator, lock_dialect::kazoo}) {
        const bool kz = d == lock_dialect::kazoo;
        k.push_back(kind{kz ? "write lock (kazoo naming)" : "write lock", share::exclusive,
                         [d](zklock::session& s, std::string p, std::chrono::milliseconds l) -> awaitable<P> {
                             zklock::shared_mutex m(s, p, with(d));
                             auto [ec, g] = co_await m.async_acquire_for(l, asio::as_tuple(use_awaitable));
                             co_return P{ec, std::move(g)};
                         }});
        k.push_back(kind{kz ? "read lock (kazoo naming)" : "read lock", share::reader,
                         [d](zklock::session& s, std::string p, std::chrono::milliseconds l) -> awaitable<P> {
                             zklock::shared_mutex m(s, p, with(d));
                             auto [ec, g] =
                                 co_await m.async_acquire_shared_for(l, asio::as_tuple(use_awaitable));
                             co_return P{ec, std::move(g)};
                         }});
    }
    k.push_back(kind{"reentrant mutex", share::exclusive,
                     [](zklock::session& s, std::string p, std::chrono::milliseconds l) -> awaitable<P> {
                         // (no timed form: a cancellation after `l` bounds it)
                         zklock::reentrant_mutex m(s, p);
                         asio::cancellation_signal cancel;
                         asio::steady_timer t(co_await asio::this_coro::executor, l);
                         t.async_wait([&](error_code ec) {
                             if (!ec) cancel.emit(asio::cancellation_type::terminal);
                         });
                         auto [ec, g] = co_await m.async_acquire(
                             reinterpret_cast<std::uintptr_t>(&s),
                             asio::bind_cancellation_slot(cancel.slot(), asio::as_tuple(use_awaitable)));
                         t.cancel();
                         co_return P{ec, std::move(g)};
                     }});
    k.push_back(kind{"multi-lock", share::exclusive,
                     [](zklock::session& s, std::string p, std::chrono::milliseconds l) -> awaitable<P> {
                         std::vector<zklock::mutex> ms;
                         ms.emplace_back(s, p);
                         auto [ec, g] = co_await zklock::async_acquire_all_for(std::move(ms), l,
                                                                               asio::as_tuple(use_awaitable));
                         co_return P{ec, g.empty() ? zklock::guard{} : std::move(g.front())};
                     }});
    k.push_back(kind{"semaphore of 1", share::lease,
                     [](zklock::session& s, std::string p, std::chrono::milliseconds l) -> awaitable<P> {
                         zklock::semaphore m(s, p, 1);
                         auto [ec, g] = co_await m.async_acquire_for(l, asio::as_tuple(use_awaitable));
                         co_return P{ec, std::move(g)};
                     }});
    k.push_back(kind{"semaphore of 2", share::lease,
                     [](zklock::session& s, std::string p, std::chrono::milliseconds l) -> awaitable<P> {
                         zklock::semaphore m(s, p, 2);
                         auto [ec, g] = co_await m.async_acquire_for(l, asio::as_tuple(use_awaitable));
                         co_return P{ec, std::move(g)};
                     }});
    return k;
}

/// What the second acquire must end with while the first one holds.
struct outcome {
    bool granted = false;
    std::vector<error_code> errors; // any of these (empty when granted)
};

outcome expected(const kind& held, const kind& next) {
    const std::vector<error_code> excluded{errc::acquire_timeout, asio::error::operation_aborted};
    if (held.how == share::lease || next.how == share::lease) {
        if (held.how == share::lease && next.how == share::lease) {
            // Two semaphores: the same N shares up to N; another N is refused.
            if (std::string(held.name) != next.name) return {false, {errc::semaphore_size_mismatch}};
            return std::string(held.name) == "semaphore of 2" ? outcome{true, {}} : outcome{false, excluded};
        }
        if (next.how == share::lease) return {false, {errc::path_used_by_lock}};
        return {false, {next.how == share::unique ? errc::strategy_conflict : errc::path_used_by_semaphore}};
    }
    if ((held.how == share::unique) != (next.how == share::unique)) return {false, {errc::strategy_conflict}};
    if (held.how == share::reader && next.how == share::reader) return {true, {}};
    return {false, excluded};
}

} // namespace

using MixedRecipes = zt::zk_test;

TEST_F(MixedRecipes, EveryPairOfRecipesOnOnePathExcludesAsItsSemanticsImply) {
    run_test(
        [&]() -> awaitable<void> {
            auto a = co_await connect();
            auto b = co_await connect();
            const auto all = kinds();
            int pairs = 0;
            for (const auto& held : all) {
                for (const auto& next : all) {
                    const std::string what = std::string(held.name) + " held, then " + next.name;
                    auto path = mixed_path("mixed");
                    auto [ec1, g1] = co_await held.acquire(*a, path, std::chrono::milliseconds(5000));
                    EXPECT_FALSE(ec1) << what << ": the first acquire: " << ec1.message();
                    auto want = expected(held, next);
                    // A wait is cut at 150 ms; a grant or a named refusal must come from the
                    // recipe's decision, not from the clock: a loaded machine (CI) once took more
                    // than 150 ms to refuse, and the acquire timed out instead.
                    const bool waits = std::find(want.errors.begin(), want.errors.end(),
                                                 errc::acquire_timeout) != want.errors.end();
                    auto [ec2, g2] =
                        co_await next.acquire(*b, path, std::chrono::milliseconds(waits ? 150 : 5000));
                    if (want.granted) {
                        EXPECT_FALSE(ec2) << what << ": " << ec2.message();
                        EXPECT_TRUE(g2.owns_lock()) << what;
                    } else {
                        EXPECT_FALSE(g2.owns_lock()) << what << ": both hold the path";
                        EXPECT_TRUE(std::find(want.errors.begin(), want.errors.end(), ec2) !=
                                    want.errors.end())
                            << what << ": got " << ec2.message();
                    }
                    // the holder was left alone: it still holds after the refused attempt
                    EXPECT_TRUE(g1.owns_lock()) << what;
                    if (g2.owns_lock()) co_await g2.async_release(use_awaitable);
                    if (g1.owns_lock()) co_await g1.async_release(use_awaitable);
                    ++pairs;
                }
            }
            EXPECT_EQ(pairs, static_cast<int>(all.size() * all.size()));
            co_await a->async_close(use_awaitable);
            co_await b->async_close(use_awaitable);
        },
        170s);
}

TEST_F(MixedRecipes, AReaderQueuedBehindAMutexIsGrantedWhenItGoes) {
    run_test([&]() -> awaitable<void> {
        auto a = co_await connect();
        auto b = co_await connect();
        auto path = lock_path("mixed");
        zklock::mutex m(*a, path);
        zklock::shared_mutex rw(*b, path);
        auto g = co_await m.async_acquire(use_awaitable);
        zklock::guard r;
        bool done = false;
        rw.async_acquire_shared([&](error_code ec, zklock::guard got) {
            EXPECT_FALSE(ec) << ec.message();
            r = std::move(got);
            done = true;
        });
        co_await wait_for_children(*a, path, 2);
        co_await sleep_for(std::chrono::milliseconds(200));
        EXPECT_FALSE(done) << "a reader was granted while a mutex held the path";
        co_await g.async_release(use_awaitable);
        for (int i = 0; i < 100 && !done; ++i) co_await sleep_for(std::chrono::milliseconds(20));
        EXPECT_TRUE(done && r.owns_lock()) << "the reader was not granted after the mutex went";
        // and the listing shows every kind
        auto [lec, list] =
            co_await zklock::async_list_contenders(*a, path, {}, asio::as_tuple(use_awaitable));
        EXPECT_FALSE(lec);
        EXPECT_EQ(list.size(), 1u);
        if (!list.empty()) {
            EXPECT_TRUE(list[0].holder);
            EXPECT_FALSE(list[0].writer);
        }
        if (r.owns_lock()) co_await r.async_release(use_awaitable);
        co_await a->async_close(use_awaitable);
        co_await b->async_close(use_awaitable);
    });
}

TEST_F(MixedRecipes, ListShowsASemaphoresLeasesAndBreakTakesThem) {
    run_test([&]() -> awaitable<void> {
        auto a = co_await connect();
        auto path = mixed_path("mixed");
        zklock::semaphore sem(*a, path, 2);
        auto l1 = co_await sem.async_acquire(use_awaitable);
        auto l2 = co_await sem.async_acquire(use_awaitable);
        auto [ec, list] = co_await zklock::async_list_contenders(*a, path, {}, asio::as_tuple(use_awaitable));
        EXPECT_FALSE(ec) << ec.message();
        EXPECT_EQ(list.size(), 2u);
        if (list.size() != 2) co_return;
        for (auto& c : list) {
            EXPECT_TRUE(c.lease);
            EXPECT_TRUE(c.holder);
            EXPECT_EQ(c.node_path.rfind(path + "/leases/", 0), 0u) << c.node_path;
        }
        auto lost = l1.async_wait_lost(asio::as_tuple(use_awaitable));
        auto [bec] = co_await zklock::async_break_lock(*a, list[0].node_path, asio::as_tuple(use_awaitable));
        EXPECT_FALSE(bec) << bec.message();
        auto [why] = co_await std::move(lost);
        EXPECT_EQ(why, errc::lock_node_deleted);
        co_await l2.async_release(use_awaitable);
        co_await a->async_close(use_awaitable);
    });
}
