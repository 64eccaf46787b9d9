// The exit codes of the zklock program (documented in --help, hence zklock(1), and in
// docs/operations.md; test/cli/cli_test.py checks that both list every one of them).
#pragma once

namespace zklock::cli {

/// Exit codes (documented in --help and docs/operations.md). The command's own status passes through
/// unchanged (128 + N if a signal N ended it).
enum exit_code : int {
    ex_failure = 1,      ///< the server refused (e.g. not authorised, a TLS verdict)
    ex_nothing = 3,      ///< revoke: nobody holds the lock; break: no such lock node (nothing was changed);
                         ///< leader: no leader
    ex_usage = 64,       ///< bad arguments: nothing was sent to ZooKeeper
    ex_unavailable = 69, ///< no ZooKeeper server reachable: none answered, no host resolved, or the
                         ///< connection was lost and not re-established before --timeout passed
    ex_software = 70,    ///< an internal error
    ex_expired = 74,     ///< the session expired while waiting for the lock: the request is gone
    ex_busy = 75,        ///< --nonblock: the lock is held; --timeout: it passed first (while connected)
    ex_lost = 76,        ///< the lock was lost while the command ran; the command was terminated
    ex_cannot_run = 126, ///< the command could not be executed
    ex_not_found = 127,  ///< the command was not found
    // 128 + N: zklock was interrupted by signal N (SIGHUP 129, SIGINT 130, SIGTERM 143) while
    // connecting or waiting; or the command's own status, if signal N ended it.
};

constexpr const char* exit_codes_help =
    R"(Exit status of run: the command's own (128+N if signal N ended it), or
  64 bad arguments (nothing was sent)
  69 no ZooKeeper server reachable (none answered within --connect-timeout, no host
     resolved, or the connection was lost and not back when --timeout passed)
  75 lock busy (--nonblock), or --timeout passed first while connected
  74 the session expired while waiting
  76 lock lost while the command ran (it was sent SIGTERM, then SIGKILL), or before
     it started (then it was not run)
  126 command not executable              127 command not found
  129, 130, 143 interrupted by SIGHUP, SIGINT, SIGTERM while connecting or waiting
     (no lock node is left)
  1 the server refused (e.g. not authorised, a TLS verdict)   70 internal error
Other commands: 0 on success; 3 nothing to act on (revoke: nobody holds the lock;
break: no such lock node; leader: no leader); 1, 64, 69 or 70 as above.)";

} // namespace zklock::cli
