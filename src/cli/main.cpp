// zklock: flock(1) across machines, on ZooKeeper, plus the admin commands list, break and
// revoke. See `zklock --help` and docs/operations.md ("On the command line").
#include "cli/duration.hpp"

#include <zklock.hpp>

#include <CLI/CLI.hpp>
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/steady_timer.hpp>

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <iostream>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <fcntl.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

extern char** environ;

namespace {

namespace asio = boost::asio;
using zklock::errc;
using zklock::error_code;

/// Exit codes (documented in --help and docs/operations.md). The command's own status passes through
/// unchanged (128 + N if a signal N ended it).
enum exit_code : int {
    ex_failure = 1,      ///< the server refused (e.g. no such node, not authorised)
    ex_usage = 64,       ///< bad arguments: nothing was sent to ZooKeeper
    ex_unavailable = 69, ///< no ZooKeeper server could be reached
    ex_software = 70,    ///< an internal error
    ex_expired = 74,     ///< the session expired while waiting for the lock: the request is gone
    ex_busy = 75,        ///< --nonblock: the lock is held; --timeout: it passed first
    ex_lost = 76,        ///< the lock was lost while the command ran; the command was terminated
    ex_cannot_run = 126, ///< the command could not be executed
    ex_not_found = 127,  ///< the command was not found
};

constexpr const char* exit_codes_help = R"(Exit status of run: the command's own (128+N if signal N ended it), or
  64 bad arguments (nothing was sent)     69 no ZooKeeper server reachable
  75 lock busy (--nonblock) or --timeout passed first
  74 the session expired while waiting     76 lock lost while the command ran (it was sent
     SIGTERM, then SIGKILL), or before it started (then it was not run)
  126 command not executable              127 command not found
  1 the server refused (e.g. not authorised)   70 internal error
Other commands: 0 on success, 1 refused by the server, 64, 69 or 70 as above.)";

int fail(int code, const std::string& message) {
    std::cerr << "zklock: " << message << "\n";
    return code;
}

struct connection_args {
    std::string connect;
    std::string session_timeout = "10s";
    std::string connect_timeout = "10s";
    std::string dialect = "curator";
    std::string tls_ca, tls_cert, tls_key, tls_server_name;
};

void add_connection_options(CLI::App& cmd, connection_args& c, bool with_dialect = true) {
    cmd.add_option("-c,--connect", c.connect, "ZooKeeper connect string host:port[,host:port...][/chroot] (default: $ZK_CONNECT)");
    cmd.add_option("--session-timeout", c.session_timeout, "session timeout T, at least 100ms (the lock is lost within about 0.3 T of a partition)")
        ->capture_default_str();
    cmd.add_option("--connect-timeout", c.connect_timeout, "how long to try to reach a server (positive)")->capture_default_str();
    cmd.add_option("--tls-ca", c.tls_ca, "connect with TLS, trusting the CA certificates of this PEM file (default: $ZK_TLS_CA)");
    cmd.add_option("--tls-cert", c.tls_cert, "the client certificate (PEM) for mutual TLS (default: $ZK_TLS_CERT)");
    cmd.add_option("--tls-key", c.tls_key, "its private key (PEM; if encrypted, the password in $ZK_TLS_KEY_PASSWORD) (default: $ZK_TLS_KEY)");
    cmd.add_option("--tls-server-name", c.tls_server_name, "the name the servers' certificates must carry (default: each server's host)");
    if (with_dialect)
        cmd.add_option("--dialect", c.dialect, "lock node naming: curator (also Apache Curator's) or kazoo")
        ->check(CLI::IsMember({"curator", "kazoo"}))
        ->capture_default_str();
}

/// Checks the connection arguments; on success fills `o`. Returns 0 or an exit code (reported).
int make_session_options(const connection_args& c, zklock::session_options& o, zklock::lock_dialect& dialect) {
    std::string connect = c.connect;
    if (connect.empty())
        if (const char* env = std::getenv("ZK_CONNECT")) connect = env;
    if (connect.empty())
        return fail(ex_usage, "no ZooKeeper to connect to: give --connect host:port[,host:port...] or set ZK_CONNECT");
    if (auto ec = zklock::validate_connect_string(connect))
        return fail(ex_usage, "bad connect string '" + connect + "': " + ec.message());
    std::string err;
    auto st = zklock::cli::parse_duration(c.session_timeout, err);
    if (!st) return fail(ex_usage, "--session-timeout: " + err);
    if (*st < std::chrono::milliseconds(100)) return fail(ex_usage, "--session-timeout: at least 100ms");
    auto ct = zklock::cli::parse_duration(c.connect_timeout, err);
    if (!ct) return fail(ex_usage, "--connect-timeout: " + err);
    if (ct->count() <= 0) return fail(ex_usage, "--connect-timeout: must be positive");
    auto arg_or_env = [](const std::string& arg, const char* var) {
        if (!arg.empty()) return arg;
        const char* v = std::getenv(var);
        return std::string(v ? v : "");
    };
    const auto ca = arg_or_env(c.tls_ca, "ZK_TLS_CA"), cert = arg_or_env(c.tls_cert, "ZK_TLS_CERT"),
               key = arg_or_env(c.tls_key, "ZK_TLS_KEY");
    if (ca.empty() && (!cert.empty() || !key.empty() || !c.tls_server_name.empty()))
        return fail(ex_usage, "--tls-cert, --tls-key and --tls-server-name need --tls-ca (or ZK_TLS_CA): the CA that signed the servers' certificates");
    if (!ca.empty()) {
        if (cert.empty() != key.empty())
            return fail(ex_usage, cert.empty() ? "--tls-key without --tls-cert" : "--tls-cert without --tls-key");
        zklock::tls_options t;
        t.ca_file = ca;
        t.certificate_file = cert;
        t.private_key_file = key;
        t.server_name = c.tls_server_name;
        if (const char* pw = std::getenv("ZK_TLS_KEY_PASSWORD")) t.private_key_password = pw;
        o.tls = std::move(t);
    }
    o.connect = connect;
    o.session_timeout = *st;
    o.connect_timeout = *ct;
    dialect = c.dialect == "kazoo" ? zklock::lock_dialect::kazoo : zklock::lock_dialect::curator;
    return 0;
}

/// Connects; 0 or an exit code (reported). Returns 0 early when `*stopped` turns non-zero.
int connect(asio::io_context& io, zklock::session& s, const int* stopped = nullptr) {
    std::optional<error_code> result;
    s.async_connect([&](error_code ec) { result = ec; });
    while (!result && !(stopped && *stopped) && io.run_one()) {
    }
    io.restart(); // (an io_context that ran out of work stops itself)
    if (stopped && *stopped) return 0;
    if (!result) return fail(ex_software, "connect did not complete");
    if (*result) {
        auto tried = s.last_connect_attempts();
        return fail(*result == errc::connect_timeout ? ex_unavailable : *result == errc::tls_config_invalid ? ex_usage : ex_failure,
                    "cannot connect to ZooKeeper at " + s.options().connect + ": " + result->message() +
                        (tried.empty() ? "" : " (last attempts: " + tried + ")"));
    }
    return 0;
}

int server_error(const std::string& what, const error_code& ec) {
    if (ec == errc::not_connected || zklock::is_connection_error(ec) || ec == errc::connect_timeout)
        return fail(ex_unavailable, what + ": " + ec.message());
    return fail(ex_failure, what + ": " + ec.message());
}

std::string hex(std::int64_t v) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "0x%016llx", static_cast<unsigned long long>(v));
    return buf;
}

// ------------------------------------------------------------------------------------ run
struct run_args {
    connection_args conn;
    std::string path;
    std::vector<std::string> command;
    std::string timeout;
    bool nonblock = false;
    bool shared = false;
    bool ignore_revoke = false;
    std::string kill_after = "10s";
    std::string data;
    bool data_given = false; // --data was given (even empty: refused)
};

/// The guardian: a small process that kills the command's whole process group when zklock dies,
/// however it dies (SIGKILL, OOM killer). The child's parent-death signal reaches the command's
/// first process only: a shell's children (`sh -c 'sleep 31'` forks `sleep`) would run on,
/// reparented to init, without the lock. The guardian waits for EOF on a pipe whose write end only
/// zklock holds (close-on-exec: the command does not inherit it); EOF comes when zklock exits.
/// It lives in a process group of its own, so a signal to zklock's group does not take it along,
/// and ignores the terminal's signals. Not covered: processes that leave the command's group
/// (setsid, setpgid: daemons), and a guardian killed on its own (zklock_run's --help says so).
/// Returns the pipe's write end (-1 without a guardian): a byte written to it sends the guardian
/// away without a kill (the command never ran).
int start_guardian(pid_t group) {
    int fds[2];
    if (pipe2(fds, O_CLOEXEC) != 0) return -1; // (without a guardian, the parent-death signal still covers the first process)
    pid_t g = fork();
    if (g == 0) {
        // async-signal-safe calls only (see spawn)
        close(fds[1]);
        setpgid(0, 0);
        for (int sig : {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGTSTP, SIGTTIN, SIGTTOU, SIGPIPE}) signal(sig, SIG_IGN);
        // every other descriptor is closed: the guardian holds no socket, no terminal
        for (int fd = 0; fd < 1024; ++fd)
            if (fd != fds[0]) close(fd);
        char c;
        ssize_t n;
        while ((n = read(fds[0], &c, 1)) < 0 && errno == EINTR) {
        }
        if (n == 1) _exit(0);  // sent away: the command never ran
        kill(-group, SIGKILL); // (ESRCH when the group has ended: nothing to do)
        _exit(0);
    }
    close(fds[0]);
    if (g < 0) {
        close(fds[1]);
        return -1;
    }
    return fds[1]; // open (close-on-exec) until zklock exits, whichever way
}

/// Starts `argv` in a process group of its own (so that a lost lock stops the whole command,
/// not only a shell in front of it), with `extra_env` added. Returns the pid, or -1 with errno.
pid_t spawn(const std::vector<std::string>& argv, const std::vector<std::string>& extra_env, const sigset_t& old_mask) {
    // Everything the child needs is built before fork: between fork and exec only
    // async-signal-safe calls (the C client's threads may hold malloc's locks).
    std::vector<char*> args;
    for (auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    std::vector<std::string> env_strings;
    for (char** e = environ; *e; ++e) {
        std::string_view kv(*e);
        bool ours = false;
        for (auto& x : extra_env) ours = ours || kv.substr(0, kv.find('=') + 1) == std::string_view(x).substr(0, x.find('=') + 1);
        if (!ours) env_strings.emplace_back(kv);
    }
    for (auto& x : extra_env) env_strings.push_back(x);
    std::vector<char*> env;
    for (auto& e : env_strings) env.push_back(const_cast<char*>(e.c_str()));
    env.push_back(nullptr);
    const pid_t parent = getpid();
    int pipefd[2]; // exec's outcome: EOF when it succeeded, else its errno
    if (pipe2(pipefd, O_CLOEXEC) != 0) return -1;
    // The go-ahead: the child execs the command only once the guardian is in place. (Started
    // after the exec, the guardian came too late for a zklock killed just after it: the
    // command's own children ran on, without the lock. Seen under load.)
    int gofd[2];
    if (pipe2(gofd, O_CLOEXEC) != 0) {
        close(pipefd[0]);
        close(pipefd[1]);
        return -1;
    }
    pid_t pid = fork();
    if (pid == 0) {
        close(pipefd[0]);
        close(gofd[1]);
        setpgid(0, 0);
        // If zklock dies (SIGKILL, OOM), its session and lock go within the session timeout:
        // the command must not outlive it.
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != parent) _exit(ex_software);
        char go = 0;
        ssize_t got;
        while ((got = read(gofd[0], &go, 1)) < 0 && errno == EINTR) {
        }
        if (got != 1) _exit(ex_software); // zklock went away before the guardian was in place
        close(gofd[0]);
        for (int sig : {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGCHLD, SIGPIPE, SIGTSTP, SIGTTIN, SIGTTOU}) signal(sig, SIG_DFL);
        // The command inherits none of zklock's descriptors: the C client's connection and the
        // TLS relay's sockets would stay open in it (no EOF, no reset would reach the server
        // when zklock closes them), and it could accept on the relay's listeners.
        if (::close_range(3, ~0U, CLOSE_RANGE_CLOEXEC) != 0)
            for (int fd = 3; fd < 4096; ++fd) ::fcntl(fd, F_SETFD, FD_CLOEXEC); // (kernels before 5.11)
        pthread_sigmask(SIG_SETMASK, &old_mask, nullptr);
        execvpe(args[0], args.data(), env.data());
        int err = errno;
        (void)!write(pipefd[1], &err, sizeof err);
        _exit(err == ENOENT ? ex_not_found : ex_cannot_run);
    }
    close(pipefd[1]);
    close(gofd[0]);
    if (pid < 0) {
        close(pipefd[0]);
        close(gofd[1]);
        return -1;
    }
    setpgid(pid, pid); // (also in the child: whichever runs first)
    const int guardian = start_guardian(pid);
    (void)!write(gofd[1], "g", 1);
    close(gofd[1]);
    int err = 0;
    ssize_t n = read(pipefd[0], &err, sizeof err); // EOF: exec succeeded
    close(pipefd[0]);
    if (n == static_cast<ssize_t>(sizeof err)) {
        waitpid(pid, nullptr, 0);
        if (guardian >= 0) {
            (void)!write(guardian, "x", 1); // (its group is gone: its number may be reused)
            close(guardian);
        }
        errno = err;
        return -1;
    }
    return pid;
}

void release_and_wait(asio::io_context& io, zklock::guard& g) {
    bool done = false;
    g.async_release([&](error_code) { done = true; });
    while (!done && io.run_one()) {
    }
    io.restart(); // (an io_context that ran out of work stops itself)
}

int run_command(const run_args& a) {
    // The run's own arguments first: a mistake in them is named even without ZK_CONNECT.
    if (auto ec = zklock::validate_lock_path(a.path)) return fail(ex_usage, "bad lock path '" + a.path + "': " + ec.message());
    if (a.command.empty()) return fail(ex_usage, "no command to run: zklock run [options] /lock/path -- command [args...]");
    if (a.nonblock && !a.timeout.empty()) return fail(ex_usage, "--nonblock and --timeout exclude each other");
    if (a.data_given && a.data.empty()) return fail(ex_usage, "--data: the node data must not be empty (leave --data out for the default)");
    std::string err;
    std::optional<std::chrono::milliseconds> timeout;
    if (!a.timeout.empty() && !(timeout = zklock::cli::parse_duration(a.timeout, err))) return fail(ex_usage, "--timeout: " + err);
    auto kill_after = zklock::cli::parse_duration(a.kill_after, err);
    if (!kill_after) return fail(ex_usage, "--kill-after: " + err);
    zklock::session_options so;
    zklock::lock_dialect dialect{};
    if (int rc = make_session_options(a.conn, so, dialect)) return rc;

    asio::io_context io;
    // One handler for the termination signals, for the whole run; what it does depends on the
    // phase (a signal that arrives between two phases is acted on in the next one, never lost).
    enum class phase { connecting, waiting, running, finished } ph = phase::connecting;
    asio::signal_set term(io, SIGINT, SIGTERM, SIGHUP);
    asio::signal_set chld(io, SIGCHLD);
    std::signal(SIGPIPE, SIG_IGN);
    // zklock must never be stopped while it holds the lock (its heartbeats would stop, the
    // session expire and the lock pass on while the command runs): job-control stops are ignored.
    for (int sig : {SIGTSTP, SIGTTIN, SIGTTOU}) std::signal(sig, SIG_IGN);
    int stopped_by = 0;
    pid_t pid = -1;
    asio::cancellation_signal cancel;
    auto signal_child = [&](int sig) {
        if (pid > 0) kill(-pid, sig);
    };
    std::function<void()> arm_term = [&] {
        term.async_wait([&](error_code ec, int sig) {
            if (ec) return;
            switch (ph) {
            case phase::connecting: stopped_by = sig; break;
            case phase::waiting:
                stopped_by = sig;
                cancel.emit(asio::cancellation_type::total); // no node is left
                break;
            case phase::running: signal_child(sig); break; // passed on; the lock goes when the command ends
            case phase::finished: break;
            }
            arm_term();
        });
    };
    arm_term();
    auto interrupted = [&](const char* when) {
        const char* abbrev = sigabbrev_np(stopped_by);
        return fail(128 + stopped_by, std::string("interrupted by ") + (abbrev ? std::string("SIG") + abbrev : std::to_string(stopped_by)) + when);
    };

    zklock::session s(io.get_executor(), so);
    // However the run ends, the session is closed, not just destroyed: the server ends it at
    // once instead of at its timeout (through the TLS relay, the close request needs the
    // io_context to run until it has gone out: async_close waits for that).
    struct close_at_exit {
        asio::io_context& io;
        zklock::session& s;
        ~close_at_exit() {
            io.restart();
            bool closed = false;
            s.async_close([&](error_code) { closed = true; });
            while (!closed && io.run_one()) {
            }
        }
    } closer{io, s};
    if (int rc = connect(io, s, &stopped_by)) return rc;
    if (stopped_by) return interrupted(" while connecting");

    zklock::mutex_options mo;
    mo.dialect = dialect;
    mo.revocable = !a.ignore_revoke;
    if (!a.data.empty()) mo.node_data = a.data;

    // ---- acquire (a signal gives it up: total cancellation leaves no node)
    ph = phase::waiting;
    std::optional<std::pair<error_code, zklock::guard>> got;
    auto on_acquired = asio::bind_cancellation_slot(cancel.slot(), [&](error_code ec, zklock::guard g) {
        got.emplace(ec, std::move(g));
    });
    if (a.shared) {
        zklock::shared_mutex m(s, a.path, mo);
        if (a.nonblock) m.async_try_acquire_shared(std::move(on_acquired));
        else if (timeout) m.async_acquire_shared_for(*timeout, std::move(on_acquired));
        else m.async_acquire_shared(std::move(on_acquired));
    } else {
        zklock::mutex m(s, a.path, mo);
        if (a.nonblock) m.async_try_acquire(std::move(on_acquired));
        else if (timeout) m.async_acquire_for(*timeout, std::move(on_acquired));
        else m.async_acquire(std::move(on_acquired));
    }
    // (Not io.run(): a held lock keeps the io_context busy with its lease heartbeats.)
    while (!got && io.run_one()) {
    }
    io.restart(); // (an io_context that ran out of work stops itself)
    if (!got) return fail(ex_software, "the lock request did not complete");
    const error_code aec = got->first; // (named variables: clang 14 cannot capture structured bindings)
    zklock::guard g = std::move(got->second);
    if (stopped_by) { // while waiting, or just as the lock was granted: give it back
        if (g.owns_lock()) release_and_wait(io, g);
        return interrupted(" while waiting for the lock");
    }
    if (aec == errc::lock_busy) return fail(ex_busy, "lock " + a.path + " is held by someone else");
    if (aec == errc::acquire_timeout) return fail(ex_busy, "timed out waiting for lock " + a.path);
    if (aec == errc::session_expired)
        return fail(ex_expired, "the ZooKeeper session expired while waiting for lock " + a.path);
    if (aec) return server_error("cannot acquire " + a.path, aec);

    // ---- the lock may be lost before the command starts (its node deleted, the lease lapsed):
    // then the command must not run at all. The loss watch is armed now, and looked at last
    // thing before the spawn. (ZKLOCK_TEST_SPAWN_DELAY_MS, for the tests only, widens the gap.)
    bool lost_before_spawn = false;
    g.async_wait_lost([&](error_code ec) { lost_before_spawn = lost_before_spawn || ec != errc::lock_released; });
    if (const char* d = std::getenv("ZKLOCK_TEST_SPAWN_DELAY_MS"); d && std::atoi(d) > 0) {
        asio::steady_timer delay(io, std::chrono::milliseconds(std::atoi(d)));
        bool waited = false;
        delay.async_wait([&](error_code) { waited = true; });
        while (!waited && io.run_one()) {
        }
    }
    io.poll(); // (events that have arrived: a watch, a lease check)
    if (lost_before_spawn || g.is_lost()) {
        const auto why = g.loss_reason();
        release_and_wait(io, g);
        return fail(ex_lost, "lock " + a.path + " lost before the command started (" + why.message() +
                                 "); the command was not run");
    }

    // ---- run the command, holding the lock
    std::vector<std::string> env{"ZKLOCK_FENCING_TOKEN=" + std::to_string(g.fencing_token()),
                                 "ZKLOCK_NODE=" + g.node_path(), "ZKLOCK_SESSION_ID=" + hex(s.session_id()),
                                 "ZKLOCK_PATH=" + a.path};
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, &old); // no signal handler may run in the child before exec
    pid = spawn(a.command, env, old);
    int spawn_errno = errno;
    pthread_sigmask(SIG_SETMASK, &old, nullptr);
    if (pid < 0) {
        release_and_wait(io, g);
        return fail(spawn_errno == ENOENT ? ex_not_found : ex_cannot_run,
                    "cannot run '" + a.command[0] + "': " + std::strerror(spawn_errno));
    }
    ph = phase::running;

    bool exited = false, lost = false, released = false, terminating = false;
    int status = 0;
    asio::steady_timer kill_timer(io);
    // After a loss, the command must be gone before the lock can go to someone else: the lease
    // reports the loss at least 0.35 T (with its default fraction) before the earliest moment a
    // leader could expire the session, and the lock node stays until the release or that moment
    // (docs/lease.md). So SIGKILL comes no later than 0.25 x T after the SIGTERM, whatever
    // --kill-after says. After a revoke the lock is still held, and --kill-after applies as given.
    auto terminate_child = [&](std::chrono::milliseconds grace) {
        if (terminating) { // a second reason (loss after revoke): only ever bring SIGKILL closer
            if (kill_timer.expiry() - std::chrono::steady_clock::now() <= grace) return;
        }
        terminating = true;
        signal_child(SIGTERM);
        kill_timer.expires_after(grace);
        kill_timer.async_wait([&](error_code ec) {
            if (!ec) signal_child(SIGKILL);
        });
    };
    auto on_exit = [&](int st) {
        exited = true;
        status = st;
        ph = phase::finished;
        // Whatever the command left running in its process group goes with it, before the lock.
        kill(-pid, SIGKILL);
        chld.cancel();
        term.cancel();
        kill_timer.cancel();
        g.async_release([&](error_code) { released = true; }); // bounded by the lease
    };
    std::function<void()> arm_chld = [&] {
        chld.async_wait([&](error_code ec, int) {
            if (ec) return;
            int st = 0;
            if (waitpid(pid, &st, WNOHANG) != pid) return arm_chld();
            on_exit(st);
        });
    };
    arm_chld();
    g.async_wait_lost([&](error_code ec) {
        if (ec == errc::lock_released || exited) return;
        lost = true;
        std::cerr << "zklock: lock " << a.path << " lost (" << ec.message() << "); stopping the command\n";
        auto bound = std::chrono::duration_cast<std::chrono::milliseconds>(s.negotiated_timeout() / 4);
        terminate_child(std::min(*kill_after, bound));
    });
    if (mo.revocable)
        g.async_wait_revoked([&](error_code ec) {
            if (ec != errc::revocation_requested || exited) return;
            std::cerr << "zklock: asked to release " << a.path << " (zklock revoke); stopping the command\n";
            terminate_child(*kill_after);
        });
    // The command may have ended before the SIGCHLD handler was installed: look once.
    if (int st = 0; waitpid(pid, &st, WNOHANG) == pid) on_exit(st);
    while (!released && io.run_one()) {
    }
    if (lost) return ex_lost;
    if (WIFEXITED(status)) return WEXITSTATUS(status);
    if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
    return ex_software;
}

// ------------------------------------------------------------------------------------ admin
struct admin_args {
    connection_args conn;
    std::string path;
    bool json = false;
    bool read_write = false;
};

/// Length of the valid UTF-8 sequence at the start of `s`, or 0.
std::size_t utf8_sequence(std::string_view s) {
    auto b = [&](std::size_t i) { return static_cast<unsigned char>(s[i]); };
    auto cont = [&](std::size_t i) { return i < s.size() && (b(i) & 0xC0) == 0x80; };
    unsigned char c = b(0);
    if (c >= 0xC2 && c <= 0xDF && cont(1)) return 2;
    if (c == 0xE0 && cont(1) && b(1) >= 0xA0 && cont(2)) return 3;
    if (((c >= 0xE1 && c <= 0xEC) || c == 0xEE || c == 0xEF) && cont(1) && cont(2)) return 3;
    if (c == 0xED && cont(1) && b(1) < 0xA0 && cont(2)) return 3;
    if (c == 0xF0 && cont(1) && b(1) >= 0x90 && cont(2) && cont(3)) return 4;
    if (c >= 0xF1 && c <= 0xF3 && cont(1) && cont(2) && cont(3)) return 4;
    if (c == 0xF4 && cont(1) && b(1) < 0x90 && cont(2) && cont(3)) return 4;
    return 0;
}

/// A JSON string; bytes that are not valid UTF-8 (binary node data) become U+FFFD.
std::string json_string(std::string_view s) {
    std::string out = "\"";
    for (std::size_t i = 0; i < s.size(); ++i) {
        unsigned char c = static_cast<unsigned char>(s[i]);
        if (c >= 0x80) {
            if (std::size_t n = utf8_sequence(s.substr(i))) {
                out.append(s.substr(i, n));
                i += n - 1;
            } else {
                out += "\\ufffd";
            }
            continue;
        }
        switch (c) {
        case '"': out += "\\\""; break;
        case '\\': out += "\\\\"; break;
        case '\n': out += "\\n"; break;
        case '\r': out += "\\r"; break;
        case '\t': out += "\\t"; break;
        default:
            if (c < 0x20 || c == 0x7f) {
                char buf[8];
                std::snprintf(buf, sizeof buf, "\\u%04x", c);
                out += buf;
            } else {
                out += static_cast<char>(c);
            }
        }
    }
    return out + "\"";
}

/// Node data for a terminal: valid UTF-8 stays, control bytes and bytes that are not valid UTF-8
/// (binary data) become '?', so no escape sequence reaches the terminal.
std::string printable(std::string_view s) {
    std::string out;
    for (std::size_t i = 0; i < s.size(); ++i) {
        unsigned char c = static_cast<unsigned char>(s[i]);
        if (c >= 0x80) {
            std::size_t n = utf8_sequence(s.substr(i));
            if (n) out.append(s.substr(i, n));
            else out += '?';
            i += n ? n - 1 : 0;
            continue;
        }
        out += (c < 0x20 || c == 0x7f) ? '?' : static_cast<char>(c);
    }
    return out;
}

template <class Start>
int with_session(const admin_args& a, bool path_is_node, Start start) {
    zklock::session_options so;
    zklock::lock_dialect dialect{};
    if (int rc = make_session_options(a.conn, so, dialect)) return rc;
    if (auto ec = zklock::validate_lock_path(a.path))
        return fail(ex_usage, std::string(path_is_node ? "bad node path '" : "bad lock path '") + a.path + "': " + ec.message());
    asio::io_context io;
    zklock::session s(io.get_executor(), so);
    if (int rc = connect(io, s)) return rc;
    int rc = ex_software;
    bool done = false;
    start(s, zklock::inspect_options{dialect, a.read_write}, rc, done);
    // (Not io.run(): a connected session keeps its io_context busy with its connection.)
    while (!done && io.run_one()) {
    }
    io.restart();
    bool closed = false;
    s.async_close([&](error_code) { closed = true; });
    while (!closed && io.run_one()) {
    }
    return rc;
}

/// holder, waiter, or foreign: a child named like a lock node that no sequential create made
/// (ignored for ordering; `zklock break` removes it).
const char* role(const zklock::contender_info& c) { return c.foreign ? "foreign" : c.holder ? "holder" : "waiter"; }

/// What a node is to the lock: "write" (a mutex's node or a write node), "read" or "lease".
const char* kind(const zklock::contender_info& c) { return c.lease ? "lease" : c.writer ? "write" : "read"; }

int list_command(const admin_args& a) {
    return with_session(a, false, [&](zklock::session& s, zklock::inspect_options o, int& rc, bool& done) {
        zklock::async_list_contenders(s, a.path, o, [&](error_code ec, std::vector<zklock::contender_info> cs) {
            done = true;
            if (ec) {
                rc = server_error("cannot list " + a.path, ec);
                return;
            }
            if (a.json) {
                std::cout << "[";
                for (std::size_t i = 0; i < cs.size(); ++i) {
                    auto& c = cs[i];
                    std::cout << (i ? ",\n " : "") << "{\"role\":" << json_string(role(c))
                              << ",\"node\":" << json_string(c.node_path) << ",\"sequence\":" << c.sequence
                              << ",\"kind\":" << json_string(kind(c))
                              << ",\"age_ms\":" << c.age.count() << ",\"session\":" << json_string(hex(c.session_id))
                              << ",\"czxid\":" << c.czxid << ",\"data\":" << json_string(c.data) << "}";
                }
                std::cout << "]\n";
            } else {
                for (auto& c : cs)
                    std::cout << role(c) << "  " << c.node_path << "  age "
                              << c.age.count() / 1000.0 << "s  session " << hex(c.session_id)
                              << "  " << kind(c) << "  " << printable(c.data)
                              << "\n";
                // (a typo in the path lists nothing as well: say so, on stderr, exit 0)
                if (cs.empty()) std::cerr << "zklock: no holder and no waiter on " << a.path << " (or no such path)\n";
            }
            rc = 0;
        });
    });
}

int break_command(const admin_args& a) {
    return with_session(a, true, [&](zklock::session& s, zklock::inspect_options, int& rc, bool& done) {
        zklock::async_break_lock(s, a.path, [&](error_code ec) {
            done = true;
            if (ec == zklock::zk_errc::no_node) rc = fail(ex_failure, "no such lock node: " + a.path);
            else if (ec) rc = server_error("cannot break " + a.path, ec);
            else rc = 0;
        });
    });
}

int revoke_command(const admin_args& a) {
    return with_session(a, false, [&](zklock::session& s, zklock::inspect_options o, int& rc, bool& done) {
        zklock::async_revoke(s, a.path, o, [&](error_code ec, std::string holder) {
            done = true;
            if (ec == zklock::zk_errc::no_node) rc = fail(ex_failure, "nobody holds " + a.path);
            else if (ec) rc = server_error("cannot revoke " + a.path, ec);
            else {
                std::cout << "asked " << holder << " to release\n";
                rc = 0;
            }
        });
    });
}

} // namespace

/// CLI11's parse errors, in zklock's words: an unknown subcommand or option is named as such.
std::string usage_error(const CLI::ParseError& e, int argc, char** argv) {
    static const std::set<std::string> subcommands{"run", "list", "break", "revoke"};
    if (argc >= 2 && argv[1][0] != '-' && !subcommands.count(argv[1]))
        return std::string("unknown subcommand '") + argv[1] + "': use run, list, break or revoke";
    if (argc >= 2 && argv[1][0] == '-' && std::string_view(argv[1]) != "-h" && std::string_view(argv[1]) != "--help" &&
        std::string_view(argv[1]) != "--version")
        return std::string("unknown option '") + argv[1] + "' (options go after the subcommand: zklock run --timeout 5s /path -- cmd)";
    if (dynamic_cast<const CLI::RequiredError*>(&e) && argc < 2) return "a subcommand is required: run, list, break or revoke";
    if (dynamic_cast<const CLI::ExtrasError*>(&e)) {
        // the first unexpected argument, as given (CLI11's list adds "--" separators of its own)
        for (int i = 1; i < argc; ++i) {
            std::string_view arg = argv[i];
            if (arg == "--") break;
            if (arg.size() > 1 && arg[0] == '-' && std::string_view(e.what()).find(arg) != std::string_view::npos)
                return "unknown option '" + std::string(arg) + "'";
        }
        std::string what = e.what();
        for (const char* prefix : {"The following arguments were not expected: ", "The following argument was not expected: "})
            if (what.rfind(prefix, 0) == 0) return "unexpected argument: " + what.substr(std::strlen(prefix));
    }
    return e.what();
}

int main(int argc, char** argv) {
    CLI::App app{"zklock: distributed locks on ZooKeeper from the command line (flock(1) across machines)", "zklock"};
    app.require_subcommand(1);
    app.set_version_flag("--version", std::string("zklock ") + std::string(zklock::version()));
    app.footer(std::string("Durations: 30s, 500ms, 2m, 1h; a bare number is seconds.\n\n") + exit_codes_help);

    run_args r;
    auto* run = app.add_subcommand("run", "run a command while holding a lock");
    add_connection_options(*run, r.conn);
    run->add_option("--timeout", r.timeout, "give up if the lock is not had within DURATION (e.g. 30s, 500ms, 2m)");
    run->add_flag("-n,--nonblock", r.nonblock, "fail at once if the lock is held");
    run->add_flag("--shared", r.shared, "take a read (shared) lock instead of the exclusive one");
    run->add_option("--kill-after", r.kill_after, "after a lost lock or a revoke, SIGKILL the command this long after SIGTERM")
        ->capture_default_str();
    run->add_flag("--ignore-revoke", r.ignore_revoke, "do not stop the command when `zklock revoke` asks");
    run->add_option("--data", r.data, "the lock node's data, non-empty (default: zklock <host> pid <pid>)")
        ->each([&r](const std::string&) { r.data_given = true; });
    run->add_option("path", r.path, "the lock path, e.g. /locks/nightly-backup")->required();
    run->add_option("command", r.command, "the command and its arguments, after --")->required();
    run->footer("The command gets ZKLOCK_FENCING_TOKEN, ZKLOCK_NODE, ZKLOCK_SESSION_ID and ZKLOCK_PATH in its\n"
                "environment and runs in a process group of its own. SIGINT, SIGTERM and SIGHUP are passed on\n"
                "to it; the lock is released when it ends. If zklock itself is killed (even by SIGKILL), a\n"
                "guardian process kills the command's whole process group at once (the lock goes with\n"
                "zklock's session, within the session timeout). Not covered: processes that leave the\n"
                "group (setsid, setpgid: daemons), and a guardian killed on its own.\n"
                "Durations: 30s, 500ms, 2m, 1h; a bare number is seconds.");

    admin_args l, b, v;
    auto* list = app.add_subcommand("list", "show a lock's holder and waiters");
    add_connection_options(*list, l.conn);
    list->add_flag("--json", l.json, "machine-readable output");
    // (every recipe's nodes are listed: the flag is kept, without effect, for older scripts)
    list->add_flag("--read-write", l.read_write, "(no effect: every kind of node is listed)")->group("");
    list->add_option("path", l.path, "the lock path")->required();
    auto* brk = app.add_subcommand("break", "delete one lock node (a stuck holder's, say)");
    add_connection_options(*brk, b.conn, false); // (a node path: no naming dialect involved)
    brk->add_option("node", b.path, "the node's full path, as `zklock list` shows it")->required();
    auto* rev = app.add_subcommand("revoke", "ask the holder of a lock to let go");
    add_connection_options(*rev, v.conn);
    rev->add_flag("--read-write", v.read_write, "(no effect: the first holder of any kind is asked)")->group("");
    rev->add_option("path", v.path, "the lock path")->required();

    try {
        app.parse(argc, argv);
    } catch (const CLI::CallForHelp& e) {
        return app.exit(e);
    } catch (const CLI::CallForAllHelp& e) {
        return app.exit(e);
    } catch (const CLI::CallForVersion& e) {
        return app.exit(e);
    } catch (const CLI::ParseError& e) {
        return fail(ex_usage, usage_error(e, argc, argv) + " (see zklock --help)");
    }
    try {
        if (run->parsed()) return run_command(r);
        if (list->parsed()) return list_command(l);
        if (brk->parsed()) return break_command(b);
        if (rev->parsed()) return revoke_command(v);
    } catch (const std::exception& e) {
        return fail(ex_software, std::string("internal error: ") + e.what());
    }
    return fail(ex_usage, "no command (see zklock --help)");
}
