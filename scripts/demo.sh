#!/usr/bin/env bash
# The main demo: set-up, build, a throwaway local ZooKeeper (unless ZK_CONNECT is set), then
# several processes x many coroutines incrementing one counter under one lock.
#   scripts/demo.sh [--processes N] [--coroutines M] [--increments K]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
"$root/scripts/setup.sh"
build=$("$root/scripts/build.sh")
zkdir=""
if [ -z "${ZK_CONNECT:-}" ]; then
  trap '[ -n "$zkdir" ] && "$root/scripts/zk.sh" stop "$zkdir"' EXIT
  trap 'exit 130' INT TERM
  out=$("$root/scripts/zk.sh" start)
  ZK_CONNECT=$(echo "$out" | sed -n 's/^ZK_CONNECT=//p'); zkdir=$(echo "$out" | sed -n 's/^ZK_DIR=//p')
  echo "demo: started a throwaway ZooKeeper at $ZK_CONNECT" >&2
fi
"$build/examples/zklock_counter_demo" --connect "$ZK_CONNECT" "$@"
