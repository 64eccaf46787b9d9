// zklock: flock(1) across machines, on ZooKeeper, plus the admin commands list, break and
// revoke, and leader (an election's leader). See `zklock --help` and docs/operations.md ("On the command line").
#include "cli/duration.hpp"
#include "cli/exit_codes.hpp"
#include "cli/spawn.hpp"
#include "cli/text.hpp"

#include <zklock.hpp>

#include <CLI/CLI.hpp>
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/steady_timer.hpp>

#include <algorithm>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <iostream>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <fcntl.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

namespace {

namespace asio = boost::asio;
using zklock::errc;
using zklock::error_code;
using namespace zklock::cli;

int fail(int code, const std::string& message) {
    std::cerr << "zklock: " << message << "\n";
    return code;
}

/// The library's messages name its C++ options; a user of the program needs its flags.
std::string in_cli_words(std::string m) {
    static const std::pair<std::string_view, std::string_view> words[] = {
        {"tls_options::certificate_file and private_key_file", "--tls-cert and --tls-key"},
        {"tls_options::ca_file", "--tls-ca"},
        {"tls_options::certificate_file", "--tls-cert"},
        {"tls_options::private_key_file", "--tls-key"},
        {"tls_options::server_name", "--tls-server-name"},
        {"session_options::session_timeout", "--session-timeout"},
        {"session_options::connect_timeout", "--connect-timeout"},
        {"zklock::max_node_data = ", ""},
        {" (session::last_connect_attempts() says which)", ""}, // (the attempts follow)
        {" (session::last_connect_attempts() says why)", ""},
    };
    for (const auto& [from, to] : words)
        for (auto at = m.find(from); at != std::string::npos; at = m.find(from, at + to.size()))
            m.replace(at, from.size(), to);
    return m;
}

/// Errors of a connect that mean "no server to talk to" (nothing refused us): 69.
bool unavailable(const error_code& ec) {
    return ec == errc::connect_timeout || ec.category() == asio::error::get_netdb_category() ||
           ec.category() == asio::error::get_addrinfo_category();
}

struct connection_args {
    std::string connect;
    std::string session_timeout = "10s";
    std::string connect_timeout = "10s";
    std::string dialect = "curator";
    std::string tls_ca, tls_cert, tls_key, tls_server_name;
};

void add_connection_options(CLI::App& cmd, connection_args& c, bool with_dialect = true) {
    cmd.add_option("-c,--connect", c.connect,
                   "ZooKeeper connect string host:port[,host:port...][/chroot] (default: $ZK_CONNECT)");
    cmd.add_option("--session-timeout", c.session_timeout,
                   "session timeout T, at least 100ms (the lock is lost within about 0.3 T of a partition)")
        ->capture_default_str();
    cmd.add_option("--connect-timeout", c.connect_timeout, "how long to try to reach a server (positive)")
        ->capture_default_str();
    cmd.add_option("--tls-ca", c.tls_ca,
                   "connect with TLS, trusting the CA certificates of this PEM file (default: $ZK_TLS_CA)");
    cmd.add_option("--tls-cert", c.tls_cert,
                   "the client certificate (PEM) for mutual TLS (default: $ZK_TLS_CERT)");
    cmd.add_option(
        "--tls-key", c.tls_key,
        "its private key (PEM; if encrypted, the password in $ZK_TLS_KEY_PASSWORD) (default: $ZK_TLS_KEY)");
    cmd.add_option("--tls-server-name", c.tls_server_name,
                   "the name the servers' certificates must carry (default: each server's host)");
    if (with_dialect)
        cmd.add_option("--dialect", c.dialect, "lock node naming: curator (also Apache Curator's) or kazoo")
            ->check(CLI::IsMember({"curator", "kazoo"}))
            ->capture_default_str();
}

/// Checks the connection arguments; on success fills `o`. Returns 0 or an exit code (reported).
int make_session_options(const connection_args& c, zklock::session_options& o,
                         zklock::lock_dialect& dialect) {
    std::string connect = c.connect;
    if (connect.empty())
        if (const char* env = std::getenv("ZK_CONNECT")) connect = env;
    if (connect.empty())
        return fail(ex_usage,
                    "no ZooKeeper to connect to: give --connect host:port[,host:port...] or set ZK_CONNECT");
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
        return fail(ex_usage, "--tls-cert, --tls-key and --tls-server-name need --tls-ca (or ZK_TLS_CA): the "
                              "CA that signed the servers' certificates");
    if (!ca.empty()) {
        if (cert.empty() != key.empty())
            return fail(ex_usage,
                        cert.empty() ? "--tls-key without --tls-cert" : "--tls-cert without --tls-key");
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

/// Whether session::last_connect_attempts() says that every server of the connect string
/// refused the connection ("127.0.0.1:2181: connection refused, 127.0.0.1:2182: connection
/// refused"): an entry per host at least (a host name may stand for several addresses).
bool all_refused(std::string_view tried, std::string_view connect) {
    const auto hosts = connect.substr(0, connect.find('/'));
    const auto servers = static_cast<std::size_t>(std::count(hosts.begin(), hosts.end(), ',')) + 1;
    std::size_t refused = 0;
    for (std::size_t start = 0; start < tried.size(); ++refused) {
        auto end = std::min(tried.find(", ", start), tried.size());
        if (!tried.substr(start, end - start).ends_with(": connection refused")) return false;
        start = end + 2;
    }
    return refused >= servers;
}

/// Connects; 0 or an exit code (reported). When `*stopped` turns non-zero, the connect is
/// cancelled and 0 returned.
int connect(asio::io_context& io, zklock::session& s, const int* stopped = nullptr) {
    std::optional<error_code> result;
    asio::cancellation_signal cancel;
    s.async_connect(asio::bind_cancellation_slot(cancel.slot(), [&](error_code ec) { result = ec; }));
    // A round in which every server refused the connection is said at once, and the connect goes
    // on until --connect-timeout (a restarting server refuses for a few seconds).
    asio::steady_timer poll(io);
    bool polling = false, said = false;
    std::function<void()> watch = [&] {
        polling = true;
        poll.expires_after(std::chrono::milliseconds(50));
        poll.async_wait([&](error_code ec) {
            polling = false;
            if (ec || result) return;
            const auto tried = s.last_connect_attempts();
            if (!said && all_refused(tried, s.options().connect)) {
                said = true;
                std::cerr << "zklock: every server of " << s.options().connect << " refused the connection ("
                          << tried << "); still trying until --connect-timeout passes ("
                          << s.options().connect_timeout.count() << " ms)\n";
            }
            if (!said) watch();
        });
    };
    watch();
    // Until the handlers have run: they write to this frame. (Returning at the signal left the
    // connect pending, and the session's close ran its handler later over a dead frame: SIGSEGV.)
    for (bool cancelled = false; !result && io.run_one();)
        if (stopped && *stopped && !cancelled) {
            cancelled = true;
            cancel.emit(asio::cancellation_type::terminal); // (completes with operation_aborted)
        }
    poll.cancel();
    while (polling && io.run_one()) {
    }
    io.restart(); // (an io_context that ran out of work stops itself)
    if (stopped && *stopped) return 0;
    if (!result) return fail(ex_software, "connect did not complete");
    if (*result) {
        auto tried = s.last_connect_attempts();
        return fail(unavailable(*result)                  ? ex_unavailable
                    : *result == errc::tls_config_invalid ? ex_usage
                                                          : ex_failure,
                    "cannot connect to ZooKeeper at " + s.options().connect + ": " +
                        in_cli_words(result->message()) +
                        (tried.empty() ? "" : " (last attempts: " + in_cli_words(tried) + ")"));
    }
    return 0;
}

int server_error(const std::string& what, const error_code& ec) {
    if (ec == errc::not_connected || zklock::is_connection_error(ec) || ec == errc::connect_timeout)
        return fail(ex_unavailable, what + ": " + in_cli_words(ec.message()));
    return fail(ex_failure, what + ": " + in_cli_words(ec.message()));
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

void release_and_wait(asio::io_context& io, zklock::guard& g) {
    bool done = false;
    g.async_release([&](error_code) { done = true; });
    while (!done && io.run_one()) {
    }
    io.restart(); // (an io_context that ran out of work stops itself)
}

int run_command(const run_args& a) {
    // The run's own arguments first: a mistake in them is named even without ZK_CONNECT.
    if (auto ec = zklock::validate_lock_path(a.path))
        return fail(ex_usage, "bad lock path '" + a.path + "': " + ec.message());
    if (a.command.empty())
        return fail(ex_usage, "no command to run: zklock run [options] /lock/path -- command [args...]");
    if (a.nonblock && !a.timeout.empty())
        return fail(ex_usage, "--nonblock and --timeout exclude each other");
    if (a.data_given && a.data.empty())
        return fail(ex_usage, "--data: the node data must not be empty (leave --data out for the default)");
    if (a.data.size() > zklock::max_node_data)
        return fail(ex_usage, "--data: " + std::to_string(a.data.size()) + " bytes, more than the " +
                                  std::to_string(zklock::max_node_data) + " a lock node may hold");
    std::string err;
    std::optional<std::chrono::milliseconds> timeout;
    if (!a.timeout.empty() && !(timeout = zklock::cli::parse_duration(a.timeout, err)))
        return fail(ex_usage, "--timeout: " + err);
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
            case phase::connecting:
                stopped_by = sig;
                break;
            case phase::waiting:
                stopped_by = sig;
                cancel.emit(asio::cancellation_type::total); // no node is left
                break;
            case phase::running:
                signal_child(sig);
                break; // passed on; the lock goes when the command ends
            case phase::finished:
                break;
            }
            arm_term();
        });
    };
    arm_term();
    auto interrupted = [&](const char* when) {
        const char* abbrev = sigabbrev_np(stopped_by);
        return fail(128 + stopped_by,
                    std::string("interrupted by ") +
                        (abbrev ? std::string("SIG") + abbrev : std::to_string(stopped_by)) + when);
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
    auto on_acquired = asio::bind_cancellation_slot(
        cancel.slot(), [&](error_code ec, zklock::guard g) { got.emplace(ec, std::move(g)); });
    if (a.shared) {
        zklock::shared_mutex m(s, a.path, mo);
        if (a.nonblock)
            m.async_try_acquire_shared(std::move(on_acquired));
        else if (timeout)
            m.async_acquire_shared_for(*timeout, std::move(on_acquired));
        else
            m.async_acquire_shared(std::move(on_acquired));
    } else {
        zklock::mutex m(s, a.path, mo);
        if (a.nonblock)
            m.async_try_acquire(std::move(on_acquired));
        else if (timeout)
            m.async_acquire_for(*timeout, std::move(on_acquired));
        else
            m.async_acquire(std::move(on_acquired));
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
    if (aec == errc::acquire_timeout && s.state() != zklock::session_state::connected) {
        // Not a busy lock: no server to ask. (Its request is gone, or goes with the session.)
        auto tried = s.last_connect_attempts();
        return fail(ex_unavailable,
                    "gave up on lock " + a.path + " at --timeout: the connection to ZooKeeper at " +
                        s.options().connect + " was lost and not re-established (session " +
                        std::string(zklock::to_string(s.state())) + ")" +
                        (tried.empty() ? "" : " (last attempts: " + in_cli_words(tried) + ")"));
    }
    if (aec == errc::acquire_timeout) return fail(ex_busy, "timed out waiting for lock " + a.path);
    if (aec == errc::session_expired)
        return fail(ex_expired, "the ZooKeeper session expired while waiting for lock " + a.path);
    if (aec) return server_error("cannot acquire " + a.path, aec);

    // ---- the lock may be lost before the command starts (its node deleted, the lease lapsed):
    // then the command must not run at all. The loss watch is armed now, and looked at last
    // thing before the spawn. (ZKLOCK_TEST_SPAWN_DELAY_MS, for the tests only, widens the gap.)
    bool lost_before_spawn = false;
    g.async_wait_lost(
        [&](error_code ec) { lost_before_spawn = lost_before_spawn || ec != errc::lock_released; });
#ifdef ZKLOCK_CLI_TEST_HOOKS // (the test build only: test/CMakeLists.txt, zklock_cli_test_hooks)
    if (const char* d = std::getenv("ZKLOCK_TEST_SPAWN_DELAY_MS"); d && std::atoi(d) > 0) {
        asio::steady_timer delay(io, std::chrono::milliseconds(std::atoi(d)));
        bool waited = false;
        delay.async_wait([&](error_code) { waited = true; });
        while (!waited && io.run_one()) {
        }
    }
#endif
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
    // reports the loss at least 0.2875 T (with its default fraction) before the earliest moment a
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

template <class Start>
int with_session(const admin_args& a, bool path_is_node, Start start) {
    zklock::session_options so;
    zklock::lock_dialect dialect{};
    if (int rc = make_session_options(a.conn, so, dialect)) return rc;
    if (auto ec = zklock::validate_lock_path(a.path))
        return fail(ex_usage, std::string(path_is_node ? "bad node path '" : "bad lock path '") + a.path +
                                  "': " + ec.message());
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
const char* role(const zklock::contender_info& c) {
    return c.foreign ? "foreign" : c.holder ? "holder" : "waiter";
}

/// What a node is to the lock: "write" (a mutex's node or a write node), "read" or "lease".
const char* kind(const zklock::contender_info& c) { return c.lease ? "lease" : c.writer ? "write" : "read"; }

int list_command(const admin_args& a) {
    return with_session(a, false, [&](zklock::session& s, zklock::inspect_options o, int& rc, bool& done) {
        zklock::async_list_contenders(
            s, a.path, o, [&](error_code ec, std::vector<zklock::contender_info> cs) {
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
                                  << ",\"node\":" << json_string(c.node_path)
                                  << ",\"sequence\":" << c.sequence << ",\"kind\":" << json_string(kind(c))
                                  << ",\"age_ms\":" << c.age.count()
                                  << ",\"session\":" << json_string(hex(c.session_id))
                                  << ",\"czxid\":" << c.czxid << ",\"data\":" << json_string(c.data) << "}";
                    }
                    std::cout << "]\n";
                } else {
                    for (auto& c : cs)
                        std::cout << role(c) << "  " << c.node_path << "  age " << c.age.count() / 1000.0
                                  << "s  session " << hex(c.session_id) << "  " << kind(c) << "  "
                                  << printable(c.data) << "\n";
                    // (a typo in the path lists nothing as well: say so, on stderr, exit 0)
                    if (cs.empty())
                        std::cerr << "zklock: no holder and no waiter on " << a.path
                                  << " (or no such path)\n";
                }
                rc = 0;
            });
    });
}

int break_command(const admin_args& a) {
    return with_session(a, true, [&](zklock::session& s, zklock::inspect_options, int& rc, bool& done) {
        zklock::async_break_lock(s, a.path, [&](error_code ec) {
            done = true;
            if (ec == zklock::zk_errc::no_node)
                rc = fail(ex_nothing, "no such lock node: " + a.path + " (nothing was deleted)");
            else if (ec == errc::not_a_lock_node) // (refused by its name: nothing was sent)
                rc = fail(ex_usage, "cannot break " + a.path + ": " + in_cli_words(ec.message()));
            else if (ec)
                rc = server_error("cannot break " + a.path, ec);
            else
                rc = 0;
        });
    });
}

int revoke_command(const admin_args& a) {
    return with_session(a, false, [&](zklock::session& s, zklock::inspect_options o, int& rc, bool& done) {
        zklock::async_revoke(s, a.path, o, [&](error_code ec, std::string holder) {
            done = true;
            if (ec == zklock::zk_errc::no_node)
                rc = fail(ex_nothing, "nobody holds " + a.path + ": nothing to revoke");
            else if (ec)
                rc = server_error("cannot revoke " + a.path, ec);
            else {
                std::cout << "asked " << holder << " to release\n";
                rc = 0;
            }
        });
    });
}

// ------------------------------------------------------------------------------------ leader
struct leader_args {
    admin_args admin;
    bool watch = false;
};

/// One line per leader: its value, or the JSON object (null: no leader).
void print_leader(const std::optional<zklock::leader_info>& l, bool json) {
    if (json) {
        if (!l)
            std::cout << "null\n";
        else
            std::cout << "{\"value\":" << json_string(l->value) << ",\"node\":" << json_string(l->node_path)
                      << ",\"fencing_token\":" << l->fencing_token
                      << ",\"session\":" << json_string(hex(l->session_id)) << "}\n";
    } else if (!l) {
        std::cout << "(no leader)\n";
    } else {
        std::cout << printable(l->value) << "\n";
    }
    std::cout.flush();
}

/// zklock leader PATH: the current leader's value (exit 3 if there is none); --watch: that, then
/// one line per change, until SIGINT, SIGTERM or SIGHUP (exit 0).
int leader_command(const leader_args& la) {
    const auto& a = la.admin;
    zklock::session_options so;
    zklock::lock_dialect dialect{};
    if (int rc = make_session_options(a.conn, so, dialect)) return rc;
    if (auto ec = zklock::validate_lock_path(a.path))
        return fail(ex_usage, "bad election path '" + a.path + "': " + ec.message());
    asio::io_context io;
    zklock::session s(io.get_executor(), so);
    if (int rc = connect(io, s)) return rc;
    zklock::election e(s, a.path);
    std::optional<asio::signal_set> signals; // (watching only: a plain read ends by itself)
    if (la.watch) signals.emplace(io, SIGINT, SIGTERM, SIGHUP);
    asio::cancellation_signal stop_observing;
    int rc = ex_software;
    bool done = false;
    auto finish = [&](int code) {
        rc = code;
        done = true;
        if (signals) signals->cancel();
    };
    std::function<void(std::optional<zklock::leader_info>)> observe =
        [&](std::optional<zklock::leader_info> last) {
            e.async_observe(
                std::move(last),
                asio::bind_cancellation_slot(
                    stop_observing.slot(), [&](error_code ec, std::optional<zklock::leader_info> l) {
                        if (ec == asio::error::operation_aborted) return finish(0); // interrupted
                        if (ec) return finish(server_error("cannot watch " + a.path, ec));
                        print_leader(l, a.json);
                        observe(std::move(l));
                    }));
        };
    e.async_leader([&](error_code ec, std::optional<zklock::leader_info> l) {
        if (ec) return finish(server_error("cannot read the leader of " + a.path, ec));
        print_leader(l, a.json);
        if (!la.watch) {
            if (!l) std::cerr << "zklock: no leader on " << a.path << " (no candidate, or no such path)\n";
            return finish(l ? 0 : ex_nothing);
        }
        observe(std::move(l));
    });
    if (signals)
        signals->async_wait([&](error_code ec, int) {
            if (!ec) stop_observing.emit(asio::cancellation_type::terminal);
        });
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

} // namespace

/// CLI11's parse errors, in zklock's words: an unknown subcommand or option is named as such.
std::string usage_error(const CLI::ParseError& e, int argc, char** argv) {
    static const std::set<std::string> subcommands{"run", "list", "break", "revoke", "leader"};
    if (argc >= 2 && argv[1][0] != '-' && !subcommands.count(argv[1]))
        return std::string("unknown subcommand '") + argv[1] + "': use run, list, break, revoke or leader";
    if (argc >= 2 && argv[1][0] == '-' && std::string_view(argv[1]) != "-h" &&
        std::string_view(argv[1]) != "--help" && std::string_view(argv[1]) != "--version")
        return std::string("unknown option '") + argv[1] +
               "' (options go after the subcommand: zklock run --timeout 5s /path -- cmd)";
    if (dynamic_cast<const CLI::RequiredError*>(&e) && argc < 2)
        return "a subcommand is required: run, list, break, revoke or leader";
    if (dynamic_cast<const CLI::ExtrasError*>(&e)) {
        // `zklock run /p ls -la`: the command's own options are taken for zklock's unless the
        // command follows "--"
        bool separated = false;
        for (int i = 1; i < argc; ++i) separated = separated || std::string_view(argv[i]) == "--";
        const std::string hint =
            argc >= 2 && std::string_view(argv[1]) == "run" && !separated
                ? " (the command and its arguments go after '--': zklock run /path -- ls -la)"
                : "";
        // the first unexpected argument, as given (CLI11's list adds "--" separators of its own)
        for (int i = 1; i < argc; ++i) {
            std::string_view arg = argv[i];
            if (arg == "--") break;
            if (arg.size() > 1 && arg[0] == '-' &&
                std::string_view(e.what()).find(arg) != std::string_view::npos)
                return "unknown option '" + std::string(arg) + "'" + hint;
        }
        std::string what = e.what();
        for (const char* prefix :
             {"The following arguments were not expected: ", "The following argument was not expected: "})
            if (what.rfind(prefix, 0) == 0) return "unexpected argument: " + what.substr(std::strlen(prefix));
    }
    return e.what();
}

int main(int argc, char** argv) {
    CLI::App app{"zklock: distributed locks on ZooKeeper from the command line (flock(1) across machines)",
                 "zklock"};
    app.require_subcommand(1);
    app.set_version_flag("--version", std::string("zklock ") + std::string(zklock::version()));
    app.footer(std::string("Durations: 30s, 500ms, 2m, 1h; a bare number is seconds.\n\n") + exit_codes_help);

    run_args r;
    auto* run = app.add_subcommand("run", "run a command while holding a lock");
    add_connection_options(*run, r.conn);
    run->add_option("--timeout", r.timeout,
                    "give up if the lock is not had within DURATION (e.g. 30s, 500ms, 2m)");
    run->add_flag("-n,--nonblock", r.nonblock, "fail at once if the lock is held");
    run->add_flag("--shared", r.shared, "take a read (shared) lock instead of the exclusive one");
    run->add_option("--kill-after", r.kill_after,
                    "after a lost lock or a revoke, SIGKILL the command this long after SIGTERM")
        ->capture_default_str();
    run->add_flag("--ignore-revoke", r.ignore_revoke, "do not stop the command when `zklock revoke` asks");
    run->add_option("--data", r.data, "the lock node's data, non-empty (default: zklock <host> pid <pid>)")
        ->each([&r](const std::string&) { r.data_given = true; });
    run->add_option("path", r.path, "the lock path, e.g. /locks/nightly-backup")->required();
    run->add_option("command", r.command, "the command and its arguments, after --")->required();
    run->footer(
        "The command gets ZKLOCK_FENCING_TOKEN, ZKLOCK_NODE, ZKLOCK_SESSION_ID and ZKLOCK_PATH in its\n"
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
    rev->add_flag("--read-write", v.read_write, "(no effect: the first holder of any kind is asked)")
        ->group("");
    rev->add_option("path", v.path, "the lock path")->required();
    leader_args ld;
    auto* lead = app.add_subcommand("leader", "show an election's leader (its value); --watch: every change");
    add_connection_options(*lead, ld.admin.conn, false);
    lead->add_flag("-w,--watch", ld.watch,
                   "print each change of leader (or of its value), one line each, "
                   "until interrupted");
    lead->add_flag("--json", ld.admin.json, "one JSON object per line (null: no leader)");
    lead->add_option("path", ld.admin.path, "the election path")->required();
    lead->footer("Prints the value the leader published (zklock::election's campaign or proclaim, a\n"
                 "Curator LeaderSelector's or LeaderLatch's id, a kazoo Election's identifier, or\n"
                 "`zklock run --data VALUE`'s), or \"(no leader)\" and exit status 3. To run a command\n"
                 "as the leader: zklock run --data VALUE PATH -- command.");

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
#ifdef ZKLOCK_CLI_TEST_HOOKS // (the test build only: the path of an exception, exit 70)
        if (const char* t = std::getenv("ZKLOCK_TEST_INTERNAL_ERROR"); t && *t) throw std::runtime_error(t);
#endif
        if (run->parsed()) return run_command(r);
        if (list->parsed()) return list_command(l);
        if (brk->parsed()) return break_command(b);
        if (rev->parsed()) return revoke_command(v);
        if (lead->parsed()) return leader_command(ld);
    } catch (const std::exception& e) {
        return fail(ex_software, std::string("internal error: ") + e.what());
    }
    return fail(ex_usage, "no command (see zklock --help)");
}
