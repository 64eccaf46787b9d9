#!/usr/bin/env bash
# The deterministic simulator (test/sim/): clients that take and release one lock, each acquire
# run by zklock's own state machine (src/protocol/acquire_fsm.hpp), against a model ZooKeeper
# server, under every delivery order a seeded scheduler picks, with connection losses, expiries
# and cancellations. Prints each failing seed's replay
# command; --trace (with --seed) prints the run step by step.
#   scripts/sim.sh [--seeds N] [--seed S] [--first S] [--clients N] [--cycles N] [--trace]
#                  [--bug no-guid-recovery|herd|always-alone|unwatch-once|no-barrier]
# --bug re-introduces a past defect in the simulator's copy (its decisions or its driver): the run passes when a seed finds it.
# The suite runs 10,000 seeds, and each --bug (sim.* in ctest). See docs/internals.md, "The
# deterministic simulator".
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
"$root/scripts/setup.sh" >&2
build=$("$root/scripts/build.sh")
exec "$build/test/zklock_sim" "$@"
