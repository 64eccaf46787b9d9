// Interop test peer on the zklock side; same protocol as CuratorContender.java.
//   zklock_interop_contender CONNECT PATH ITERATIONS HOLD_MS MARKER LOG [COROUTINES [curator|kazoo [rw]]]
//   zklock_interop_contender CONNECT PATH ITERATIONS HOLD_MS MARKER LOG COROUTINES curator|latch|kazoo election
//       each coroutine campaigns ITERATIONS times (zklock::election in the dialect of Curator's
//       LeaderSelector, Curator's LeaderLatch or kazoo's Election) with the value "zklock-<c>",
//       holds as leader, resigns
//   zklock_interop_contender --observe CONNECT PATH SECONDS OUT
//       follows the leader of election PATH (async_observe) and appends each leader's value to OUT,
//       one a line; stops after SECONDS, or earlier once OUT.stop exists, or on SIGTERM or SIGINT
//       (exit 0 unless it failed)
//   With INTEROP_GATE set (run_interop.sh), once connected: creates $INTEROP_GATE.ready.<pid>, and
//   (not --observe) waits for $INTEROP_GATE.go, so that every peer contends from the first hold.
//   zklock_interop_contender --check-empty CONNECT PATH     exit 0 iff PATH has no children
//   zklock_interop_contender --create-path CONNECT PATH     PATH as a persistent node (kazoo's Lock
//                                                           needs one: see run_interop.sh)
//   zklock_interop_contender --remove-path CONNECT PATH     deletes PATH
#include <zklock.hpp>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <fcntl.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <fstream>
#include <functional>
#include <optional>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

namespace asio = boost::asio;
using asio::use_awaitable;

static long long micros() {
    return std::chrono::duration_cast<std::chrono::microseconds>(
               std::chrono::system_clock::now().time_since_epoch())
        .count();
}

/// The start gate: says this peer is connected; true if there is a gate.
static bool gate_ready() {
    const char* g = std::getenv("INTEROP_GATE");
    if (!g || !*g) return false;
    std::ofstream(std::string(g) + ".ready." + std::to_string(::getpid()));
    return true;
}

/// The session's options: TLS with $ZKLOCK_TLS_DIR's CA and client certificate if it is set
/// (zk.sh start --tls's PKI), plain otherwise.
zklock::session_options session_options_for(std::string connect) {
    zklock::session_options o;
    o.connect = std::move(connect);
    if (const char* d = std::getenv("ZKLOCK_TLS_DIR"); d && *d) {
        zklock::tls_options t;
        t.ca_file = std::string(d) + "/ca.pem";
        t.certificate_file = std::string(d) + "/client.pem";
        t.private_key_file = std::string(d) + "/client.key";
        o.tls = t;
    }
    return o;
}

int main(int argc, char** argv) {
    asio::io_context io;
    int rc = 0;
    if (argc == 4 && std::string(argv[1]).starts_with("--")) {
        const std::string mode = argv[1];
        asio::co_spawn(
            io,
            [&]() -> asio::awaitable<void> {
                auto ex = co_await asio::this_coro::executor;
                zklock::session zk{ex, {.connect = argv[2]}};
                co_await zk.async_connect(use_awaitable);
                zklock::error_code ec;
                if (mode == "--check-empty") {
                    std::vector<std::string> kids;
                    std::tie(ec, kids) =
                        co_await zklock::async_get_children(zk, argv[3], asio::as_tuple(use_awaitable));
                    for (auto& k : kids) std::printf("leftover: %s\n", k.c_str());
                    if (ec == zklock::zk_errc::no_node) ec = {}; // reaped: nothing left either
                    rc = !ec && kids.empty() ? 0 : 1;
                } else if (mode == "--create-path") {
                    std::tie(ec) =
                        co_await zklock::async_create_node(zk, argv[3], "", asio::as_tuple(use_awaitable));
                    rc = ec ? 1 : 0;
                } else if (mode == "--remove-path") {
                    std::tie(ec) =
                        co_await zklock::async_delete_node(zk, argv[3], -1, asio::as_tuple(use_awaitable));
                    rc = ec ? 1 : 0;
                } else {
                    rc = 2;
                }
                if (ec) std::printf("%s %s: %s\n", mode.c_str(), argv[3], ec.message().c_str());
            },
            [&](std::exception_ptr e) {
                if (e) rc = 2;
            });
        io.run();
        return rc;
    }
    if (argc == 6 && std::string(argv[1]) == "--observe") {
        const std::string connect = argv[2], path = argv[3];
        std::ofstream out(argv[5], std::ios::app);
        asio::cancellation_signal stop_observe;
        asio::steady_timer limit(io, std::chrono::seconds(std::atoi(argv[4])));
        asio::signal_set signals(io, SIGTERM, SIGINT);
        bool stopping = false;
        asio::steady_timer* poll_timer = nullptr;
        auto stop = [&] {
            if (std::exchange(stopping, true)) return;
            stop_observe.emit(asio::cancellation_type::terminal);
            limit.cancel();
            signals.cancel();
            if (poll_timer) poll_timer->cancel();
        };
        limit.async_wait([&](zklock::error_code ec) {
            if (!ec) stop();
        });
        signals.async_wait([&](zklock::error_code ec, int) {
            if (!ec) stop();
        });
        // The script asks it to stop with a file, "<OUT>.stop", not a signal: twice under the
        // sanitizers a SIGTERM killed the observer with the signal's default action (exit 143,
        // and no "leaders seen" line) although its signal_set was in place (unexplained).
        const std::string stop_file = std::string(argv[5]) + ".stop";
        asio::steady_timer poll_stop(io);
        poll_timer = &poll_stop;
        std::function<void()> poll = [&] {
            poll_stop.expires_after(std::chrono::milliseconds(20));
            poll_stop.async_wait([&](zklock::error_code ec) {
                if (ec || stopping) return;
                if (::access(stop_file.c_str(), F_OK) == 0) return stop();
                poll();
            });
        };
        poll();
        int seen = 0;
        asio::co_spawn(
            io,
            [&]() -> asio::awaitable<void> {
                auto ex = co_await asio::this_coro::executor;
                zklock::session zk{ex, session_options_for(connect)};
                co_await zk.async_connect(use_awaitable);
                gate_ready();
                zklock::election e{zk, path};
                std::optional<zklock::leader_info> leader;
                while (!stopping) {
                    auto [ec, now] = co_await e.async_observe(
                        leader,
                        asio::bind_cancellation_slot(stop_observe.slot(), asio::as_tuple(use_awaitable)));
                    if (ec == asio::error::operation_aborted && stopping) break;
                    if (ec) {
                        std::printf("observe %s: %s\n", path.c_str(), ec.message().c_str());
                        rc = 1;
                        break;
                    }
                    leader = std::move(now);
                    if (leader) {
                        out << leader->value << std::endl;
                        ++seen;
                    }
                }
                stop();
            },
            [&](std::exception_ptr e) {
                if (!e) return;
                rc = 2;
                try {
                    std::rethrow_exception(e);
                } catch (const std::exception& x) {
                    std::printf("observer: %s\n", x.what());
                }
                stop();
            });
        io.run();
        std::printf("observer: %d leaders seen\n", seen);
        return rc;
    }
    if (argc < 7) return 2;
    std::string connect = argv[1], path = argv[2], marker = argv[5];
    int iterations = std::atoi(argv[3]), hold_ms = std::atoi(argv[4]);
    int coroutines = argc > 7 ? std::atoi(argv[7]) : 2;
    zklock::mutex_options mo;
    zklock::election_options eo;
    const std::string dialect = argc > 8 ? argv[8] : "curator";
    if (dialect == "kazoo") {
        mo.dialect = zklock::lock_dialect::kazoo;
        eo.dialect = zklock::election_dialect::kazoo;
    } else if (dialect == "latch") {
        eo.dialect = zklock::election_dialect::curator_latch;
    }
    const std::string mode = argc > 9 ? argv[9] : "mutex";
    const bool rw = mode == "rw", elect = mode == "election";
    std::ofstream log(argv[6]);
    int overlaps = 0, finished = 0;
    asio::co_spawn(
        io,
        [&]() -> asio::awaitable<void> {
            auto ex = co_await asio::this_coro::executor;
            zklock::session zk{ex, session_options_for(connect)};
            co_await zk.async_connect(use_awaitable);
            if (gate_ready()) {
                const std::string go = std::string(std::getenv("INTEROP_GATE")) + ".go";
                asio::steady_timer poll(ex);
                while (::access(go.c_str(), F_OK) != 0) {
                    poll.expires_after(std::chrono::milliseconds(5));
                    co_await poll.async_wait(use_awaitable);
                }
            }
            for (int c = 0; c < coroutines; ++c)
                asio::co_spawn(
                    ex,
                    [&, c]() -> asio::awaitable<void> {
                        zklock::mutex m{zk, path, mo};
                        zklock::shared_mutex sm{zk, path, mo};
                        zklock::election e{zk, path, eo};
                        asio::steady_timer t(co_await asio::this_coro::executor);
                        for (int i = 0; i < iterations; ++i) {
                            const bool writer = !rw || (i + c) % 3 == 0;
                            zklock::guard g;
                            zklock::leadership l;
                            if (elect)
                                l = co_await e.async_campaign("zklock-" + std::to_string(c), use_awaitable);
                            else if (!rw)
                                g = co_await m.async_acquire(use_awaitable);
                            else if (writer)
                                g = co_await sm.async_acquire(use_awaitable);
                            else
                                g = co_await sm.async_acquire_shared(use_awaitable);
                            auto start = micros();
                            if (writer) {
                                int fd = ::open(marker.c_str(), O_CREAT | O_EXCL | O_WRONLY, 0644);
                                if (fd < 0)
                                    ++overlaps;
                                else
                                    ::close(fd);
                            } else if (::access(marker.c_str(), F_OK) == 0) {
                                ++overlaps;
                            }
                            t.expires_after(std::chrono::milliseconds(hold_ms));
                            co_await t.async_wait(use_awaitable);
                            if (writer) {
                                if (::unlink(marker.c_str()) != 0) ++overlaps;
                            } else if (::access(marker.c_str(), F_OK) == 0) {
                                ++overlaps;
                            }
                            log << "zklock " << (writer ? "w " : "r ") << start << " " << micros() << "\n";
                            if (elect)
                                co_await l.async_resign(use_awaitable);
                            else
                                co_await g.async_release(use_awaitable);
                        }
                    },
                    [&, c](std::exception_ptr e) {
                        ++finished;
                        if (!e) return;
                        rc = 2; // e.g. errc::election_dialect_mixed: say so rather than hang
                        try {
                            std::rethrow_exception(e);
                        } catch (const std::exception& x) {
                            std::printf("zklock coroutine %d: %s\n", c, x.what());
                        }
                    });
            asio::steady_timer t(ex);
            while (finished < coroutines) {
                t.expires_after(std::chrono::milliseconds(20));
                co_await t.async_wait(use_awaitable);
            }
        },
        [&](std::exception_ptr e) {
            if (e) rc = 2;
        });
    io.run();
    std::printf("zklock overlaps %d\n", overlaps);
    return rc ? rc : (overlaps == 0 ? 0 : 3);
}
