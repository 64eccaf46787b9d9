// Across processes and servers: a killed holder process, and failover in a 3-server ensemble.
#include <zklock/mutex.hpp>

#include "common.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/write.hpp>

#include <csignal>
#include <fstream>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

extern char** environ;

using namespace zt;
using zklock::errc;

namespace {

std::string env_or_fail(const char* name) {
    const char* v = std::getenv(name);
    if (!v || !*v) ADD_FAILURE() << name << " is not set: run the suite with scripts/test.sh";
    return v ? v : "";
}

/// A ZooKeeper four-letter word, answered synchronously (test helper only).
std::string four_letter(unsigned short port, const std::string& word) {
    try {
        asio::io_context io;
        asio::ip::tcp::socket s(io);
        s.connect({asio::ip::make_address("127.0.0.1"), port});
        asio::write(s, asio::buffer(word));
        std::string out;
        boost::system::error_code ec;
        asio::read(s, asio::dynamic_buffer(out), ec);
        return out;
    } catch (const std::exception&) {
        return {};
    }
}

int read_int(const std::string& file) {
    std::ifstream in(file);
    int v = 0;
    in >> v;
    return v;
}

} // namespace

TEST(Processes, KillingAHolderProcessFreesTheLockWithinTheSessionTimeout) {
    asio::io_context io;
    run(io, [&]() -> awaitable<void> {
        auto path = unique_path("lock");
        const int timeout_ms = 2000;
        int out[2];
        CO_REQUIRE(::pipe(out) == 0);
        posix_spawn_file_actions_t fa;
        posix_spawn_file_actions_init(&fa);
        posix_spawn_file_actions_adddup2(&fa, out[1], 1);
        posix_spawn_file_actions_addclose(&fa, out[0]);
        std::string bin = ZKLOCK_HOLDER_BIN, conn = zk_connect(), tmo = std::to_string(timeout_ms);
        char* args[] = {bin.data(), conn.data(), path.data(), tmo.data(), nullptr};
        pid_t pid = 0;
        int rc = posix_spawn(&pid, bin.c_str(), &fa, nullptr, args, environ);
        posix_spawn_file_actions_destroy(&fa);
        ::close(out[1]);
        CO_REQUIRE(rc == 0);
        char buf[64] = {};
        auto n = ::read(out[0], buf, sizeof buf - 1); // blocks until the holder has the lock
        ::close(out[0]);
        EXPECT_GT(n, 0);
        EXPECT_EQ(std::string(buf).rfind("HELD ", 0), 0u) << buf;
        long long holder_token = std::atoll(buf + 5);

        auto s = co_await connect();
        zklock::mutex m(*s, path);
        auto [busy, none] = co_await m.async_try_acquire(boost::asio::as_tuple(use_awaitable));
        EXPECT_EQ(busy, errc::lock_busy);
        ::kill(pid, SIGKILL);
        int status = 0;
        ::waitpid(pid, &status, 0);
        auto t0 = std::chrono::steady_clock::now();
        auto g = co_await m.async_acquire_for(std::chrono::milliseconds(timeout_ms + 5000), use_awaitable);
        auto waited = std::chrono::steady_clock::now() - t0;
        EXPECT_TRUE(g.owns_lock());
        EXPECT_GT(g.fencing_token(), holder_token);
        // the server expires the dead session after its timeout (rounded up to the next tick)
        EXPECT_LT(waited, std::chrono::milliseconds(timeout_ms + 1500));
        co_await g.async_release(use_awaitable);
        co_await expect_no_leftovers(*s, path);
    }());
}

TEST(Ensemble, LockSurvivesTheLossOfTheServerItsSessionUses) {
    const std::string connect = env_or_fail("ZK_ENSEMBLE_CONNECT");
    const std::string dir = env_or_fail("ZK_ENSEMBLE_DIR");
    const std::string scripts = env_or_fail("ZKLOCK_SCRIPTS");
    ASSERT_FALSE(connect.empty() || dir.empty() || scripts.empty());
    asio::io_context io;
    int killed = 0;
    run(io, [&]() -> awaitable<void> {
        auto path = unique_path("lock");
        auto o = options(connect);
        o.session_timeout = 6000ms;
        o.lost_after_suspended = 0.6;
        auto a = co_await connect_session(o);
        auto b = co_await connect_session(o);
        zklock::mutex ma(*a, path), mb(*b, path);
        auto g = co_await ma.async_acquire(use_awaitable);

        // which server is A's session on?
        char sid[32];
        std::snprintf(sid, sizeof sid, "sid=0x%llx", static_cast<unsigned long long>(a->session_id()));
        for (int i = 1; i <= 3 && !killed; ++i)
            if (four_letter(static_cast<unsigned short>(read_int(dir + "/port" + std::to_string(i))), "cons").find(sid) != std::string::npos)
                killed = i;
        CO_REQUIRE(killed != 0);
        auto id = a->session_id();
        EXPECT_EQ(std::system((scripts + "/zk.sh kill " + dir + " " + std::to_string(killed)).c_str()), 0);
        // A fails over to another server with the same session, and keeps the lock
        co_await eventually([&] { return a->state() != zklock::session_state::connected; }, 2000ms);
        co_await eventually([&] { return a->state() == zklock::session_state::connected; }, 10000ms);
        EXPECT_EQ(a->state(), zklock::session_state::connected);
        EXPECT_EQ(a->session_id(), id);
        EXPECT_FALSE(g.is_lost()) << g.loss_reason().message();
        auto [ec, g2] = co_await mb.async_try_acquire(boost::asio::as_tuple(use_awaitable));
        EXPECT_EQ(ec, errc::lock_busy) << ec.message();
        co_await g.async_release(use_awaitable);
        auto g3 = co_await mb.async_acquire_for(10s, use_awaitable);
        EXPECT_TRUE(g3.owns_lock());
        co_await g3.async_release(use_awaitable);
        co_await expect_no_leftovers(*b, path);
    }(), 90s);
    if (killed) EXPECT_EQ(std::system((scripts + "/zk.sh restart " + dir + " " + std::to_string(killed) + " >/dev/null").c_str()), 0);
}
