#!/usr/bin/env bash
# The deterministic simulation: the whole library on the simulated platform (test/sim/whole/: the
# library's own code, recipes, drivers, session, heartbeat and lease, through its public API,
# against a model ZooKeeper ensemble on a virtual clock; each seed draws its recipe and its world).
# Prints each failing seed's class of violation and its replay command; --verbose (with --seed)
# prints the run step by step.
#   scripts/sim.sh [--seeds N | --minutes M] [--seed S] [--first S] [--faults] [--replay]
#                  [--recipe mutex|shared|semaphore|election|reentrant|multi] [--verbose]
# e.g. scripts/sim.sh --faults --minutes 30 --first 1000000 (a long run by hand).
# (--whole first is accepted too, as before.)
#
# With --lease first, the clocked world of the lease instead (test/sim/lease_sim.cpp): the real
# session_lease, heartbeat schedule, session state machine and acquire machine on one clock,
# against a model ensemble (ping loops with jitter, the expiry queue, a replica of the tree per
# server, frozen and cut-off servers, a deposed leader), the margin measured against the leader's
# own expiry:
#   scripts/sim.sh --lease [--seeds N] [--seed S] [--first S] [--trace]
#                  [--bug read-renewed|sync-renewed|quarter-gap|no-revival-confirm|regain-stale-commit|regain-any-node]
# --bug re-introduces a past defect in that world's copy of the lease's rules: the run passes when
# a seed finds it.
#
# The mutants of the library's source, each hunted by the whole-library simulation:
# scripts/sim_whole_mutants.py. See docs/internals.md, "The whole library under simulation".
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
"$root/scripts/setup.sh" >&2
build=$("$root/scripts/build.sh")
if [ "${1:-}" = --lease ]; then
    shift
    exec "$build/test/zklock_sim_lease" "$@"
fi
if [ "${1:-}" = --whole ]; then
    shift
fi
exec "$build/test/zklock_sim_whole" "$@"
