// The main demo: several processes, each with many coroutines, increment one counter stored in
// ZooKeeper by read-modify-write WITHOUT compare-and-set on the counter. Only the lock keeps
// increments from being lost: each write is committed with guard::async_commit, in one
// ZooKeeper transaction with a check that the lock node still exists, so a holder whose lock is
// gone (session expired, lock broken) cannot write a stale value. Every write also carries the
// writer's fencing token, and the writer checks that the token stored before it is smaller: the
// tokens seen must be strictly increasing.
//
//   zklock_counter_demo --connect HOST:PORT [--processes 4] [--coroutines 16] [--increments 10]
#include <zklock.hpp>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <sstream>
#include <string>

namespace asio = boost::asio;
using namespace std::chrono_literals;
using asio::use_awaitable;

struct config {
    std::string connect;
    int processes = 4, coroutines = 16, increments = 10;
    std::string base;
};

struct stats {
    long increments = 0, fencing_violations = 0;
    std::int64_t first_token = 0, last_token = 0;
};

// "value token"
static std::pair<long, std::int64_t> parse(const std::string& s) {
    long v = 0;
    long long t = 0;
    std::sscanf(s.c_str(), "%ld %lld", &v, &t);
    return {v, t};
}

asio::awaitable<void> worker(zklock::session& zk, const config& cfg, stats& st, int id) {
    zklock::mutex lock{zk, cfg.base + "/lock"};
    const std::string counter = cfg.base + "/counter";
    for (int i = 0; i < cfg.increments; ++i) {
        auto guard = co_await lock.async_acquire(use_awaitable);
        auto token = guard.fencing_token();
        auto node = co_await zklock::async_get_data(zk, counter, use_awaitable);
        auto [value, stored_token] = parse(node.data);
        if (stored_token >= token) ++st.fencing_violations; // a stale holder would be refused here
        // Version -1: no compare-and-set on the counter. The lock check in the same transaction
        // is what makes it safe: the write lands only while our lock node exists.
        auto [ec, result] = co_await guard.async_commit(
            zklock::transaction{}.set_data(counter, std::to_string(value + 1) + " " + std::to_string(token)),
            asio::as_tuple(use_awaitable));
        co_await guard.async_release(use_awaitable);
        if (ec == zklock::errc::lock_lost) { // nothing was written: do this increment again
            std::printf("  worker %d: lock lost before the commit, increment retried\n", id);
            --i;
            continue;
        }
        if (ec) throw boost::system::system_error(ec, "commit");
        if (!st.first_token) st.first_token = token;
        st.last_token = token;
        ++st.increments;
    }
}

int child(const config& cfg, int proc) {
    asio::io_context io;
    stats st;
    int rc = 1;
    asio::co_spawn(io, [&]() -> asio::awaitable<void> {
        auto ex = co_await asio::this_coro::executor; // (not inside the braces below: GCC 12 bug)
        zklock::session zk{ex, {.connect = cfg.connect, .session_timeout = 10s}};
        co_await zk.async_connect(use_awaitable);
        co_await zklock::async_create_node(zk, cfg.base + "/counter", "0 0", use_awaitable);
        int done = 0;
        for (int c = 0; c < cfg.coroutines; ++c)
            asio::co_spawn(ex, worker(zk, cfg, st, c), [&](std::exception_ptr e) {
                if (e) try { std::rethrow_exception(e); } catch (const std::exception& x) { std::cerr << "process " << proc << ": " << x.what() << "\n"; }
                ++done;
            });
        const long total = static_cast<long>(cfg.coroutines) * cfg.increments;
        long reported = 0;
        asio::steady_timer t(ex);
        while (done < cfg.coroutines) {
            t.expires_after(50ms);
            co_await t.async_wait(use_awaitable);
            if (st.increments - reported >= total / 4 || (done == cfg.coroutines && st.increments != reported)) {
                reported = st.increments;
                std::printf("  process %d: %ld/%ld increments\n", proc, reported, total);
                std::fflush(stdout);
            }
        }
        std::printf("  process %d: done, fencing tokens %lld..%lld, violations %ld\n", proc,
                    static_cast<long long>(st.first_token), static_cast<long long>(st.last_token), st.fencing_violations);
        std::fflush(stdout);
        rc = (st.increments == total && st.fencing_violations == 0) ? 0 : 3;
    }, [&](std::exception_ptr e) {
        if (e) try { std::rethrow_exception(e); } catch (const std::exception& x) { std::cerr << "process " << proc << ": " << x.what() << "\n"; rc = 2; }
    });
    io.run();
    return rc;
}

int main(int argc, char** argv) {
    config cfg;
    if (const char* env = std::getenv("ZK_CONNECT")) cfg.connect = env;
    for (int i = 1; i + 1 < argc; i += 2) {
        std::string k = argv[i], v = argv[i + 1];
        if (k == "--connect") cfg.connect = v;
        else if (k == "--processes") cfg.processes = std::atoi(v.c_str());
        else if (k == "--coroutines") cfg.coroutines = std::atoi(v.c_str());
        else if (k == "--increments") cfg.increments = std::atoi(v.c_str());
        else { std::cerr << "unknown option " << k << "\n"; return 2; }
    }
    if (cfg.connect.empty() || cfg.processes < 1 || cfg.coroutines < 1 || cfg.increments < 1) {
        std::cerr << "usage: " << argv[0] << " --connect HOST:PORT [--processes N] [--coroutines M] [--increments K]\n";
        return 2;
    }
    cfg.base = "/zklock-demo/run-" + std::to_string(::getpid()) + "-" + std::to_string(std::time(nullptr));
    const long expected = static_cast<long>(cfg.processes) * cfg.coroutines * cfg.increments;
    std::printf("zklock demo: %d processes x %d coroutines x %d increments on %s (lock %s/lock)\n", cfg.processes,
                cfg.coroutines, cfg.increments, cfg.connect.c_str(), cfg.base.c_str());
    std::fflush(stdout);

    auto t0 = std::chrono::steady_clock::now();
    // fork before any thread exists in this process
    std::vector<pid_t> kids;
    for (int p = 0; p < cfg.processes; ++p) {
        pid_t pid = ::fork();
        if (pid == 0) std::_Exit(child(cfg, p));
        kids.push_back(pid);
    }
    bool children_ok = true;
    for (pid_t k : kids) {
        int status = 0;
        ::waitpid(k, &status, 0);
        children_ok = children_ok && WIFEXITED(status) && WEXITSTATUS(status) == 0;
    }
    double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();

    // Read the result, then clean up.
    asio::io_context io;
    long final_value = -1;
    std::size_t leftover = 0;
    asio::co_spawn(io, [&]() -> asio::awaitable<void> {
        auto ex = co_await asio::this_coro::executor;
        zklock::session zk{ex, {.connect = cfg.connect}};
        co_await zk.async_connect(use_awaitable);
        auto node = co_await zklock::async_get_data(zk, cfg.base + "/counter", use_awaitable);
        final_value = parse(node.data).first;
        auto [ec, kids] = co_await zklock::async_get_children(zk, cfg.base + "/lock", asio::as_tuple(use_awaitable));
        leftover = kids.size();
        co_await zklock::async_delete_node(zk, cfg.base + "/counter", -1, use_awaitable);
    }, [&](std::exception_ptr e) {
        if (e) try { std::rethrow_exception(e); } catch (const std::exception& x) { std::cerr << "result: " << x.what() << "\n"; }
    });
    io.run();

    std::printf("final value: %ld (expected %ld) %s\n", final_value, expected, final_value == expected ? "OK" : "MISMATCH");
    std::printf("throughput: %.0f lock cycles/s (%ld cycles in %.2f s, %d sessions)\n", expected / secs, expected, secs,
                cfg.processes);
    std::printf("fencing tokens: strictly increasing in every write: %s\n", children_ok ? "yes" : "NO");
    std::printf("lock nodes left behind: %zu\n", leftover);
    return (final_value == expected && children_ok && leftover == 0) ? 0 : 1;
}
