// Build configuration shared by every public header: the export macro.
#pragma once

/// Marks what the shared library exports. libzklock.so is built with -fvisibility=hidden: only
/// the declarations of the public headers marked with it are in its dynamic symbol table (the
/// implementation's own classes are not). For the static library it changes nothing.
#if defined(__GNUC__) || defined(__clang__)
#define ZKLOCK_DECL __attribute__((visibility("default")))
#else
#define ZKLOCK_DECL
#endif

/// \namespace zklock
/// Distributed locks on ZooKeeper for Boost.Asio programs: zklock::session, the recipes
/// (zklock::mutex, zklock::shared_mutex, zklock::semaphore, zklock::reentrant_mutex,
/// zklock::async_acquire_all) and the zklock::guard that a grant returns.
