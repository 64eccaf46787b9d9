// Starting the command of `zklock run`: in a process group of its own, with a guardian process
// that kills the group when zklock dies, however it dies.
#pragma once

#include <csignal>
#include <string>
#include <vector>

#include <sys/types.h>

namespace zklock::cli {

/// Starts `argv` in a process group of its own (so that a lost lock stops the whole command,
/// not only a shell in front of it), with `extra_env` added, and a guardian for its group.
/// Returns the pid, or -1 with errno.
pid_t spawn(const std::vector<std::string>& argv, const std::vector<std::string>& extra_env,
            const sigset_t& old_mask);

} // namespace zklock::cli
