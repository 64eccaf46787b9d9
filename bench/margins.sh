#!/usr/bin/env bash
# The loss signal against the next grant, per fault, for zklock's default (the lease) and
# loss_policy::on_disconnect side by side, on a throwaway 3-server ensemble (tickTime 500 ms).
# Prints a Markdown table (docs/benchmarks.md shows it) and writes it to bench/results/margins.md.
#   bench/margins.sh [--runs N] [--session-timeout MS]     (N runs per fault and policy, default 10)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
args=()
while [ $# -gt 0 ]; do
  case "$1" in
    --runs|--session-timeout) args+=("$1" "$2"); shift 2;;
    *) sed -n '2,6p' "$0"; exit 2;;
  esac
done
"$root/scripts/setup.sh"
build=$("$root/scripts/build.sh")
zkdir=""
trap '[ -n "$zkdir" ] && "$root/scripts/zk.sh" stop "$zkdir"' EXIT
trap 'exit 130' INT TERM
zkdir=$("$root/scripts/zk.sh" start --servers 3 | sed -n 's/^ZK_DIR=//p')
mkdir -p "$root/bench/results"
"$build/bench/zklock_loss_margins" --dir "$zkdir" --scripts "$root/scripts" "${args[@]}" | tee "$root/bench/results/margins.md"
