#!/usr/bin/env bash
# A/B of two zklock_bench binaries on one throwaway ZooKeeper, the contended workloads of
# bench/compare, alternating A and B so that drift hits both alike. Prints a markdown table of the
# median cycles/s and client CPU per cycle of each.
#   bench/ab.sh OLD_BENCH NEW_BENCH [--reps N] [--seconds S] [--fsync no|yes]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
a=$1 b=$2; shift 2
reps=3 secs=4 fsync=no
while [ $# -gt 0 ]; do
  case "$1" in
    --reps) reps=$2; shift 2;; --seconds) secs=$2; shift 2;; --fsync) fsync=$2; shift 2;;
    *) sed -n '2,6p' "$0"; exit 2;;
  esac
done
# (the server as bench/compare runs it: a full JIT, quiet logs)
out=$(ZK_JVM_OPTS="-XX:+UseParallelGC" ZK_LOG_LEVEL=warn "$root/scripts/zk.sh" start --fsync "$fsync"); dir=$(echo "$out" | sed -n 's/^ZK_DIR=//p')
connect=$(echo "$out" | sed -n 's/^ZK_CONNECT=//p')
trap '"$root/scripts/zk.sh" stop "$dir"' EXIT
res=$(mktemp)
# name workers sessions locks
for w in "1w-1l 1 1 1" "8s-1l 8 8 1" "32s-1l 32 32 1" "32s-32l 32 32 32"; do
  set -- $w
  for r in $(seq 1 "$reps"); do
    for which in A B; do
      bin=$a; [ $which = B ] && bin=$b
      j=$("$bin" --connect "$connect" --workers "$2" --sessions "$3" --locks "$4" --duration "$secs" 2>/dev/null | tail -1)
      echo "$1 $which $j" >>"$res"
    done
  done
done
/usr/bin/python3 - "$res" <<'PY'
import json, statistics, sys
rows = {}
for line in open(sys.argv[1]):
    name, which, js = line.split(" ", 2)
    d = json.loads(js)
    rows.setdefault(name, {}).setdefault(which, []).append(d)
print("| workload | A cycles/s | B cycles/s | B/A | A CPU us/cycle | B CPU us/cycle | B/A |")
print("|---|---:|---:|---:|---:|---:|---:|")
for name, v in rows.items():
    ca = statistics.median(x["cycles_per_s"] for x in v["A"]); cb = statistics.median(x["cycles_per_s"] for x in v["B"])
    ua = statistics.median(x["cpu_us_per_cycle"] for x in v["A"]); ub = statistics.median(x["cpu_us_per_cycle"] for x in v["B"])
    print(f"| {name} | {ca:,.0f} | {cb:,.0f} | {cb/ca:.3f} | {ua:.1f} | {ub:.1f} | {ub/ua:.3f} |")
PY
rm -f "$res"
