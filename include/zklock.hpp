// zklock: distributed locks on Apache ZooKeeper for Boost.Asio programs.
#pragma once

#include <zklock/acl.hpp>
#include <zklock/election.hpp>
#include <zklock/error.hpp>
#include <zklock/guard.hpp>
#include <zklock/inspect.hpp>
#include <zklock/metrics.hpp>
#include <zklock/multi_lock.hpp>
#include <zklock/mutex.hpp>
#include <zklock/path.hpp>
#include <zklock/reentrant_mutex.hpp>
#include <zklock/semaphore.hpp>
#include <zklock/session.hpp>
#include <zklock/shared_mutex.hpp>
#include <zklock/tls.hpp>
#include <zklock/transaction.hpp>
#include <zklock/version.hpp>
#include <zklock/znode.hpp>
