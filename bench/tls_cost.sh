#!/usr/bin/env bash
# What TLS costs, and where: zklock (its relay) and Curator (the ZooKeeper Java client's Netty
# TLS), plain and over TLS, on one throwaway ZooKeeper with a secure port (zk.sh start --tls),
# 1w-1l and 32s-32l. For each run: cycles/s, p50, and the CPU per cycle of the client process
# and of the server process (read from /proc before and after), so that the client's share of
# the cost is told from the server's. Each row is run twice, alternating plain and TLS.
#   bench/tls_cost.sh [--seconds N]        (default 4)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
secs=4
[ "${1:-}" = --seconds ] && secs=$2
"$root/scripts/setup.sh"
build=$("$root/scripts/build.sh")
work=$(mktemp -d /tmp/zklock-tlscost.XXXXXX)
zkdir=""
trap '[ -n "$zkdir" ] && "$root/scripts/zk.sh" stop "$zkdir"; rm -rf "$work"' EXIT INT TERM
out=$(ZK_JVM_OPTS="-XX:+UseParallelGC" ZK_LOG_LEVEL=warn "$root/scripts/zk.sh" start --tls)
zkdir=$(echo "$out" | sed -n 's/^ZK_DIR=//p')
plain=$(cat "$zkdir/connect"); tls=$(cat "$zkdir/tls_connect"); pki=$zkdir/tls
spid=$(cat "$zkdir/server1.pid")
CP=$("$root/scripts/curator-classpath.sh")
javac -d "$work" -cp "$CP" "$root/bench/CuratorBench.java" 2>/dev/null
jtls=(-Dzookeeper.client.secure=true -Dzookeeper.clientCnxnSocket=org.apache.zookeeper.ClientCnxnSocketNetty
      -Dzookeeper.ssl.protocol=TLSv1.3
      -Dzookeeper.ssl.keyStore.location="$pki/client-keystore.pem" -Dzookeeper.ssl.keyStore.type=PEM
      -Dzookeeper.ssl.trustStore.location="$pki/ca.pem" -Dzookeeper.ssl.trustStore.type=PEM)
server_cpu() { awk '{print $14 + $15}' "/proc/$spid/stat"; } # (clock ticks: 10 ms)
# row LABEL WORKLOAD COMMAND...: runs the command, prints its line with the server's CPU per cycle
row() {
  local label=$1 wl=$2; shift 2
  local a b line
  a=$(server_cpu); line=$("$@" 2>/dev/null | head -1); b=$(server_cpu)
  echo "$line" | /usr/bin/python3 -c "
import json, sys
d = json.loads(sys.stdin.readline())
srv = ($b - $a) * 10000.0 / max(d['cycles'], 1)
print(f\"| $wl | $label | {d['cycles_per_s']:,.0f} | {d['p50_us']:,.0f} | {d.get('cpu_us_per_cycle') or 0:,.1f} | {srv:,.1f} |\")"
}
# warm the server's JIT on both ports
"$build/bench/zklock_bench" --connect "$plain" --workers 8 --sessions 8 --duration 2 --warmup 0.5 >/dev/null 2>&1 || true
"$build/bench/zklock_bench" --connect "$tls" --tls-dir "$pki" --workers 8 --sessions 8 --duration 2 --warmup 0.5 >/dev/null 2>&1 || true
echo "| workload | client | cycles/s | p50 µs | client CPU µs/cycle | server CPU µs/cycle |"
echo "|---|---|---:|---:|---:|---:|"
for spec in "1w-1l 1 1" "32s-32l 32 32"; do
  read -r wl w l <<<"$spec"
  for _ in 1 2; do
    row "zklock" "$wl" "$build/bench/zklock_bench" --connect "$plain" --workers "$w" --sessions "$w" --locks "$l" --duration "$secs" --warmup 0.5
    row "zklock TLS" "$wl" "$build/bench/zklock_bench" --connect "$tls" --tls-dir "$pki" --label zklock-tls --workers "$w" --sessions "$w" --locks "$l" --duration "$secs" --warmup 0.5
  done
  for _ in 1 2; do
    row "Curator" "$wl" java -cp "$work:$CP" CuratorBench "$plain" "$w" "$l" 0 "$secs"
    row "Curator TLS" "$wl" java "${jtls[@]}" -cp "$work:$CP" CuratorBench "$tls" "$w" "$l" 0 "$secs"
  done
done
