// Starting the command of `zklock run` (spawn.hpp).
#include "cli/spawn.hpp"
#include "cli/exit_codes.hpp"

#include <cerrno>
#include <csignal>
#include <string_view>

#include <fcntl.h>
#include <pthread.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

extern char** environ;

namespace zklock::cli {

namespace {

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
    if (pipe2(fds, O_CLOEXEC) != 0)
        return -1; // (without a guardian, the parent-death signal still covers the first process)
    pid_t g = fork();
    if (g == 0) {
        // async-signal-safe calls only (see spawn)
        close(fds[1]);
        setpgid(0, 0);
        for (int sig : {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGTSTP, SIGTTIN, SIGTTOU, SIGPIPE})
            signal(sig, SIG_IGN);
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

} // namespace

pid_t spawn(const std::vector<std::string>& argv, const std::vector<std::string>& extra_env,
            const sigset_t& old_mask) {
    // Everything the child needs is built before fork: between fork and exec only
    // async-signal-safe calls (the C client's threads may hold malloc's locks).
    std::vector<char*> args;
    for (auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    std::vector<std::string> env_strings;
    for (char** e = environ; *e; ++e) {
        std::string_view kv(*e);
        // The private key's password is zklock's, not the command's: it does not inherit it.
        if (kv.rfind("ZK_TLS_KEY_PASSWORD=", 0) == 0) continue;
        bool ours = false;
        for (auto& x : extra_env)
            ours = ours || kv.substr(0, kv.find('=') + 1) == std::string_view(x).substr(0, x.find('=') + 1);
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
        for (int sig : {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGCHLD, SIGPIPE, SIGTSTP, SIGTTIN, SIGTTOU})
            signal(sig, SIG_DFL);
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

} // namespace zklock::cli
