// The other recipes, as docs/recipes.md shows them: read/write lock, multi-lock, revocation, semaphore,
// reentrancy, in-process hand-off, inspection.
//   zklock_recipes [connect-string]      (default: $ZK_CONNECT or 127.0.0.1:2181)
#include <zklock.hpp>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <cstdlib>
#include <iostream>
#include <stdexcept>

namespace asio = boost::asio;
using namespace std::chrono_literals;

asio::awaitable<void> run(std::string connect) {
    auto ex = co_await asio::this_coro::executor;
    zklock::session zk{ex, {.connect = connect}};
    co_await zk.async_connect(asio::use_awaitable);

    // read/write lock: many readers or one writer, FIFO, herd-free
    zklock::shared_mutex rw{zk, "/locks/catalog"};
    auto r = co_await rw.async_acquire_shared(asio::use_awaitable);        // readers share
    co_await r.async_release(asio::use_awaitable);
    auto w = co_await rw.async_acquire_for(2s, asio::use_awaitable);        // a writer excludes everyone
    auto r2 = co_await rw.async_downgrade(std::move(w), asio::use_awaitable); // write -> read, no gap
    std::cout << "downgraded to " << r2.node_path() << "\n";
    co_await r2.async_release(asio::use_awaitable);

    // several locks, all or nothing, one deadline: no deadlock between overlapping sets
    std::vector<zklock::mutex> set;
    set.emplace_back(zk, "/locks/a");
    set.emplace_back(zk, "/locks/b");
    auto guards = co_await zklock::async_acquire_all_for(set, 5s, asio::use_awaitable);
    std::cout << "holding " << guards.size() << " locks\n";
    guards.clear(); // released in the background

    // revocable: the holder is told when someone asks it to let go
    zklock::mutex m{zk, "/locks/report", {.revocable = true}};
    auto g = co_await m.async_acquire(asio::use_awaitable);
    co_await zklock::async_revoke(zk, "/locks/report", asio::use_awaitable);
    auto [ec] = co_await g.async_wait_revoked(asio::as_tuple(asio::use_awaitable)); // errc::revocation_requested
    std::cout << "revocation: " << ec.message() << "\n";

    // a counting semaphore: at most 3 leases at once (N is stored on the path and checked)
    zklock::semaphore pool{zk, "/locks/pool", 3};
    auto lease = co_await pool.async_acquire_for(5s, asio::use_awaitable);
    std::cout << "lease " << lease.node_path() << "\n";

    // reentrancy, keyed to an explicit owner (not a thread)
    zklock::reentrant_mutex rm{zk, "/locks/account-7"};
    auto outer = co_await rm.async_acquire(/*owner=*/42, asio::use_awaitable);
    auto inner = co_await rm.async_acquire(42, asio::use_awaitable); // at once, same node
    std::cout << "re-entered: " << (outer.node_path() == inner.node_path()) << "\n";

    // in-process hand-off: 100 coroutines of this process pass one lock node between them,
    // at most 32 grants per node, with fencing tokens that still increase at every grant
    zklock::mutex hot{zk, "/locks/hot", {.local_handoff = 32}};
    int grants = 0, running = 100;
    std::int64_t last_token = 0;
    bool increasing = true;
    for (int i = 0; i < 100; ++i)
        asio::co_spawn(ex, [&]() -> asio::awaitable<void> {
            auto h = co_await hot.async_acquire(asio::use_awaitable);
            increasing = increasing && h.fencing_token() > last_token;
            last_token = h.fencing_token();
            ++grants;
            co_await h.async_release(asio::use_awaitable);
            --running;
        }, asio::detached);
    for (asio::steady_timer t{ex}; running > 0;) {
        t.expires_after(5ms);
        co_await t.async_wait(asio::use_awaitable);
    }
    std::cout << grants << " grants by hand-off, fencing tokens increasing: " << std::boolalpha << increasing << "\n";
    if (!increasing) throw std::runtime_error("fencing tokens did not increase");

    // leader election: campaign, publish a value, observe, resign (a leadership is a guard:
    // fencing token, loss signal, guarded commits)
    zklock::election primary{zk, "/services/billing/leader"};
    auto leader = co_await primary.async_campaign("10.0.0.7:8080", asio::use_awaitable);
    co_await leader.async_proclaim("10.0.0.7:9090", asio::use_awaitable); // only while leading
    auto now = co_await primary.async_leader(asio::use_awaitable);        // what everyone sees
    std::cout << "leader " << now->value << " token " << now->fencing_token << "\n";
    // (in a watcher: `now = co_await primary.async_observe(now, ...)` waits for the next change)
    co_await leader.async_resign(asio::use_awaitable);
    if (now->value != "10.0.0.7:9090") throw std::runtime_error("the proclaimed value was not seen");

    // who holds it? (holder first, with the holder's description and the age of each node)
    for (auto& c : co_await zklock::async_list_contenders(zk, "/locks/report", asio::use_awaitable))
        std::cout << (c.holder ? "holds " : "waits ") << c.data << " for " << c.age.count() << " ms\n";
    co_await g.async_release(asio::use_awaitable);
}

int main(int argc, char** argv) {
    const char* env = std::getenv("ZK_CONNECT");
    std::string connect = argc > 1 ? argv[1] : env ? env : "127.0.0.1:2181";
    asio::io_context io;
    int rc = 0;
    asio::co_spawn(io, run(connect), [&](std::exception_ptr e) {
        if (!e) return;
        try { std::rethrow_exception(e); } catch (const std::exception& x) { std::cerr << "error: " << x.what() << "\n"; rc = 1; }
    });
    io.run();
    return rc;
}
