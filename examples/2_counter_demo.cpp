// The main demo: several processes, each with many coroutines, increment one counter stored in
// ZooKeeper by read-modify-write WITHOUT compare-and-set on the counter. Only the lock keeps
// increments from being lost: each write is committed with guard::async_commit, in one
// ZooKeeper transaction with a check that the lock node still exists, so a holder whose lock is
// gone (session expired, lock broken) cannot write a stale value. Every write also carries the
// writer's fencing token, and the writer checks that the token stored before it is smaller: the
// tokens seen must be strictly increasing.
//
//   zklock_counter_demo --connect HOST:PORT [--processes 4] [--coroutines 16] [--increments 10]
//   zklock_counter_demo --connect HOST:PORT --pause-holder
//
// --pause-holder runs the demo twice, with a 2 s session timeout. Each time one holder stops its
// whole process (SIGSTOP, as a GC pause, swap or a stopped VM would) between reading the counter
// and writing it, for 5 s: its session expires, its lock goes to the others, and then it goes on.
// Its session renews itself, and its write, retried like any write that failed on a dropped
// connection, lands through the new session. First with a plain async_set_data: the stale value
// overwrites the others' increments, and the count comes out wrong. Then with async_commit: the
// commit fails with errc::lock_lost, the increment is done again under a new grant, and the count
// is exact. (Pausing only the io_context would not do it: the C client's own threads keep the
// session alive, so the lock is not lost, and the paused holder finds it held when it goes on.)
#include <zklock.hpp>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <signal.h>
#include <sys/wait.h>
#include <time.h>
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

enum class write_mode { commit, plain };

struct config {
    std::string connect;
    int processes = 4, coroutines = 16, increments = 10;
    std::string base;
    bool pause_holder = false;
    write_mode mode = write_mode::commit;
    std::chrono::milliseconds session_timeout{10'000};
};

struct stats {
    long increments = 0, fencing_violations = 0, redone = 0;
    bool paused = false; // --pause-holder: this process has been stopped once
    std::int64_t first_token = 0, last_token = 0;
};

// "value token"
static std::pair<long, std::int64_t> parse(const std::string& s) {
    long v = 0;
    long long t = 0;
    std::sscanf(s.c_str(), "%ld %lld", &v, &t);
    return {v, t};
}

/// Stops this whole process for `d`: a helper process sends SIGCONT when it is over.
static void pause_process(std::chrono::milliseconds d) {
    pid_t self = ::getpid();
    if (::fork() == 0) { // (only async-signal-safe calls in the child of a threaded process)
        timespec ts{static_cast<time_t>(d.count() / 1000), static_cast<long>(d.count() % 1000) * 1'000'000};
        ::nanosleep(&ts, nullptr);
        ::kill(self, SIGCONT);
        ::_exit(0);
    }
    ::raise(SIGSTOP);
}

/// Waits until the session is connected again (after a renewal, a new ZooKeeper session).
static asio::awaitable<void> wait_connected(zklock::session& zk) {
    asio::steady_timer t(co_await asio::this_coro::executor);
    while (zk.state() != zklock::session_state::connected) {
        t.expires_after(50ms);
        co_await t.async_wait(use_awaitable);
    }
}

asio::awaitable<void> worker(zklock::session& zk, const config& cfg, stats& st, int proc, int id) {
    zklock::mutex lock{zk, cfg.base + "/lock"};
    const std::string counter = cfg.base + "/counter";
    for (int i = 0; i < cfg.increments; ++i) {
        auto [aec, guard] = co_await lock.async_acquire(asio::as_tuple(use_awaitable));
        if (aec == zklock::errc::session_expired || aec == zklock::zk_errc::session_expired) {
            co_await wait_connected(zk); // (the session renews itself: try again)
            --i;
            continue;
        }
        if (aec) throw boost::system::system_error(aec, "acquire");
        auto token = guard.fencing_token();
        auto node = co_await zklock::async_get_data(zk, counter, use_awaitable);
        auto [value, stored_token] = parse(node.data);
        if (stored_token >= token) ++st.fencing_violations; // a stale holder would be refused here
        const std::string next = std::to_string(value + 1) + " " + std::to_string(token);
        if (cfg.pause_holder && proc == 0 && id == 0 && !st.paused) {
            st.paused = true;
            std::printf("  process %d: holding the lock, read %ld; stopping for %.1f s (session timeout %.1f s)\n", proc,
                        value, (cfg.session_timeout * 5 / 2).count() / 1000.0, cfg.session_timeout.count() / 1000.0);
            std::fflush(stdout);
            pause_process(cfg.session_timeout * 5 / 2);
            std::printf("  process %d: going on, writing %ld\n", proc, value + 1);
            std::fflush(stdout);
        }
        if (cfg.mode == write_mode::plain) {
            // A plain write, retried after a dropped connection or an expiry, as many programs do.
            // Nothing ties it to the lock: after the pause it lands through the renewed session.
            for (;;) {
                auto [ec] = co_await zklock::async_set_data(zk, counter, next, -1, asio::as_tuple(use_awaitable));
                if (!ec) break;
                if (!zklock::is_connection_error(ec) && !zklock::is_fatal(ec) && ec != zklock::errc::not_connected)
                    throw boost::system::system_error(ec, "set_data");
                co_await wait_connected(zk);
            }
            co_await guard.async_release(use_awaitable);
        } else {
            // Version -1: no compare-and-set on the counter. The lock check in the same transaction
            // is what makes it safe: the write lands only while our lock node exists.
            auto [ec, result] = co_await guard.async_commit(zklock::transaction{}.set_data(counter, next),
                                                            asio::as_tuple(use_awaitable));
            co_await guard.async_release(use_awaitable);
            if (ec == zklock::errc::lock_lost) { // nothing was written: do this increment again
                std::printf("  process %d: the commit failed (%s); increment done again\n", proc, ec.message().c_str());
                std::fflush(stdout);
                ++st.redone;
                --i;
                continue;
            }
            if (ec) throw boost::system::system_error(ec, "commit");
        }
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
        zklock::session zk{ex, {.connect = cfg.connect, .session_timeout = cfg.session_timeout}};
        co_await zk.async_connect(use_awaitable);
        co_await zklock::async_create_node(zk, cfg.base + "/counter", "0 0", use_awaitable);
        int done = 0;
        for (int c = 0; c < cfg.coroutines; ++c)
            asio::co_spawn(ex, worker(zk, cfg, st, proc, c), [&](std::exception_ptr e) {
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

struct outcome {
    long final_value = -1;
    std::size_t leftover = 0;
    bool children_ok = false;
    double secs = 0;
};

/// Forks the processes, waits for them, reads the counter and cleans up.
outcome run(const config& cfg) {
    outcome o;
    auto t0 = std::chrono::steady_clock::now();
    // fork before any thread exists in this process
    std::vector<pid_t> kids;
    for (int p = 0; p < cfg.processes; ++p) {
        pid_t pid = ::fork();
        if (pid == 0) std::_Exit(child(cfg, p));
        kids.push_back(pid);
    }
    o.children_ok = true;
    for (pid_t k : kids) {
        int status = 0;
        while (::waitpid(k, &status, 0) < 0 && errno == EINTR) {}
        o.children_ok = o.children_ok && WIFEXITED(status) && WEXITSTATUS(status) == 0;
    }
    o.secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();

    // Read the result, then clean up.
    asio::io_context io;
    asio::co_spawn(io, [&]() -> asio::awaitable<void> {
        auto ex = co_await asio::this_coro::executor;
        zklock::session zk{ex, {.connect = cfg.connect}};
        co_await zk.async_connect(use_awaitable);
        auto node = co_await zklock::async_get_data(zk, cfg.base + "/counter", use_awaitable);
        o.final_value = parse(node.data).first;
        auto [ec, kids] = co_await zklock::async_get_children(zk, cfg.base + "/lock", asio::as_tuple(use_awaitable));
        o.leftover = kids.size();
        co_await zklock::async_delete_node(zk, cfg.base + "/counter", -1, use_awaitable);
    }, [&](std::exception_ptr e) {
        if (e) try { std::rethrow_exception(e); } catch (const std::exception& x) { std::cerr << "result: " << x.what() << "\n"; }
    });
    io.run();
    return o;
}

int main(int argc, char** argv) {
    config cfg;
    if (const char* env = std::getenv("ZK_CONNECT")) cfg.connect = env;
    for (int i = 1; i < argc; ++i) {
        std::string k = argv[i];
        if (k == "--pause-holder") {
            cfg.pause_holder = true;
            continue;
        }
        if (i + 1 >= argc) { std::cerr << "option " << k << " needs a value\n"; return 2; }
        std::string v = argv[++i];
        if (k == "--connect") cfg.connect = v;
        else if (k == "--processes") cfg.processes = std::atoi(v.c_str());
        else if (k == "--coroutines") cfg.coroutines = std::atoi(v.c_str());
        else if (k == "--increments") cfg.increments = std::atoi(v.c_str());
        else { std::cerr << "unknown option " << k << "\n"; return 2; }
    }
    if (cfg.connect.empty() || cfg.processes < 1 || cfg.coroutines < 1 || cfg.increments < 1) {
        std::cerr << "usage: " << argv[0] << " --connect HOST:PORT [--processes N] [--coroutines M] [--increments K] [--pause-holder]\n";
        return 2;
    }
    const long expected = static_cast<long>(cfg.processes) * cfg.coroutines * cfg.increments;
    auto base = "/zklock-demo/run-" + std::to_string(::getpid()) + "-" + std::to_string(std::time(nullptr));

    if (cfg.pause_holder) {
        cfg.session_timeout = 2000ms;
        std::printf("zklock demo --pause-holder: %d processes x %d coroutines x %d increments on %s\n", cfg.processes,
                    cfg.coroutines, cfg.increments, cfg.connect.c_str());
        long results[2] = {-1, -1};
        bool clean = true;
        for (auto mode : {write_mode::plain, write_mode::commit}) {
            cfg.mode = mode;
            cfg.base = base + (mode == write_mode::plain ? "-plain" : "-commit");
            std::printf("%s:\n", mode == write_mode::plain ? "plain async_set_data" : "guard.async_commit");
            std::fflush(stdout);
            auto o = run(cfg);
            results[mode == write_mode::plain ? 0 : 1] = o.final_value;
            clean = clean && o.leftover == 0;
        }
        std::printf("\nwith a holder paused past its session timeout (expected %ld):\n", expected);
        std::printf("  plain async_set_data: final value %ld: %s\n", results[0],
                    results[0] == expected ? "exact this time (the others had not moved on)" : "WRONG: increments lost or doubled");
        std::printf("  guard.async_commit:   final value %ld: %s\n", results[1], results[1] == expected ? "exact" : "WRONG");
        std::printf("lock nodes left behind: %s\n", clean ? "0" : "some");
        return results[1] == expected && clean ? 0 : 1;
    }

    cfg.base = base;
    std::printf("zklock demo: %d processes x %d coroutines x %d increments on %s (lock %s/lock)\n", cfg.processes,
                cfg.coroutines, cfg.increments, cfg.connect.c_str(), cfg.base.c_str());
    std::fflush(stdout);
    auto o = run(cfg);
    std::printf("final value: %ld (expected %ld) %s\n", o.final_value, expected, o.final_value == expected ? "OK" : "MISMATCH");
    std::printf("throughput: %.0f lock cycles/s (%ld cycles in %.2f s, %d sessions)\n", expected / o.secs, expected, o.secs,
                cfg.processes);
    std::printf("fencing tokens: strictly increasing in every write: %s\n", o.children_ok ? "yes" : "NO");
    std::printf("lock nodes left behind: %zu\n", o.leftover);
    return (o.final_value == expected && o.children_ok && o.leftover == 0) ? 0 : 1;
}
