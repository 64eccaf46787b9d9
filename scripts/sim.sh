#!/usr/bin/env bash
# The deterministic simulator (test/sim/): clients that take and release one lock, each acquire
# run by zklock's own state machine (src/protocol/acquire_fsm.hpp), against a model ZooKeeper
# server, under every delivery order a seeded scheduler picks, with connection losses, expiries
# and cancellations. Prints each failing seed's replay
# command; --trace (with --seed) prints the run step by step.
#   scripts/sim.sh [--seeds N] [--seed S] [--first S] [--clients N] [--cycles N] [--rw] [--trace]
#                  [--handoff L [--bound B]]   (L local acquirers per session behind the hand-off's queue)
#                  [--bug no-guid-recovery|herd|always-alone|unwatch-once|no-barrier]
# With --semaphore first, the semaphore's world instead (test/sim/sem_sim.cpp): clients that take
# and release leases, each round run by the semaphore's state machine (src/protocol/semaphore_fsm.hpp):
#   scripts/sim.sh --semaphore [--seeds N] [--seed S] [--first S] [--clients N] [--leases N]
#                  [--cycles N] [--trace] [--bug count-others|no-sweep|no-restart|no-recovery|no-barrier]
# With --lease first, the clocked world of the lease instead (test/sim/lease_sim.cpp): the real
# session_lease, heartbeat schedule, session state machine and acquire machine on one clock,
# against a model ensemble (ping loops with jitter, the expiry queue, a replica of the tree per
# server, frozen and cut-off servers, a deposed leader), the margin measured against the leader's
# own expiry:
#   scripts/sim.sh --lease [--seeds N] [--seed S] [--first S] [--trace]
#                  [--bug read-renewed|sync-renewed|quarter-gap]
# With --whole first, the whole library on the simulated platform instead (test/sim/whole/: the
# library's own code, drivers, session, heartbeat and lease, through its public API, against a
# model server; each seed draws its recipe and its world):
#   scripts/sim.sh --whole [--seeds N | --minutes M] [--seed S] [--first S] [--faults] [--replay]
#                  [--recipe mutex|shared|semaphore|election|reentrant|multi] [--verbose]
# e.g. scripts/sim.sh --whole --faults --minutes 30 --first 1000000 (a long run by hand).
# --bug re-introduces a past defect in the simulator's copy (its decisions or its driver): the run passes when a seed finds it.
# The suite runs 10,000 seeds (of each world; 20,000 with --lease; a tenth of that under the
# sanitizers), and each --bug (sim.* in ctest). See docs/internals.md, "The
# deterministic simulator".
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
"$root/scripts/setup.sh" >&2
build=$("$root/scripts/build.sh")
if [ "${1:-}" = --semaphore ]; then
    shift
    exec "$build/test/zklock_sim_sem" "$@"
fi
if [ "${1:-}" = --whole ]; then
    shift
    exec "$build/test/zklock_sim_whole" "$@"
fi
if [ "${1:-}" = --lease ]; then
    shift
    exec "$build/test/zklock_sim_lease" "$@"
fi
exec "$build/test/zklock_sim" "$@"
