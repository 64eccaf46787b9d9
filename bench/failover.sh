#!/usr/bin/env bash
# Locks through a ZooKeeper leader failover (issue 61's measurement): N holders (a session and a
# lock each) and M waiters (one behind each of the first M locks) on a throwaway 3-server ensemble
# (scripts/zk.sh, tickTime 500 ms), in one process (bench/failover_bench.cpp, target
# zklock_failover). Per run: the leader SIGKILLed (and, with --pause S, one follower SIGSTOPped for
# S seconds at the same moment, which makes the election wait for it); reported: the time until a
# new leader serves, the holders told their lock was lost, the holders that kept it with the same
# fencing token, the locks that changed hands (waiters granted), the holder sessions that survived,
# and what the ensemble and the client counted in the 10 s after the fault (the servers'
# zk_packets_received, the sessions' requests, heartbeats and touches), per session.
#   bench/failover.sh [--holders 100] [--waiters 100] [--timeout-ms 4000] [--pause 0] [--runs 1]
#                     [--settle 8] [--build DIR]
# Needs the target built:  ninja -C build zklock_failover
# Prints one line per run and a Markdown table at the end.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
holders=100 waiters=100 timeout_ms=4000 pause=0 runs=1 settle=8 build="$root/build"
while [ $# -gt 0 ]; do
  case "$1" in
    --holders) holders=$2; shift 2;;
    --waiters) waiters=$2; shift 2;;
    --timeout-ms) timeout_ms=$2; shift 2;;
    --pause) pause=$2; shift 2;;
    --runs) runs=$2; shift 2;;
    --settle) settle=$2; shift 2;;
    --build) build=$2; shift 2;;
    *) sed -n '2,14p' "$0" >&2; exit 2;;
  esac
done
prog="$build/bench/zklock_failover"
[ -x "$prog" ] || { echo "failover.sh: $prog not built (ninja -C $build zklock_failover)" >&2; exit 1; }
export ZK_LOG_LEVEL=warn # (no per-touch trace in a benchmark)
out=$("$root/scripts/zk.sh" start --servers 3)
dir=$(echo "$out" | sed -n 's/^ZK_DIR=//p')
connect=$(echo "$out" | sed -n 's/^ZK_CONNECT=//p')
tmp=$(mktemp -d /tmp/zklock-failover.XXXXXX)
pid=""
cleanup() {
  [ -n "$pid" ] && kill -9 "$pid" 2>/dev/null || true
  for i in 1 2 3; do "$root/scripts/zk.sh" resume "$dir" "$i" 2>/dev/null || true; done
  "$root/scripts/zk.sh" stop "$dir" >/dev/null 2>&1 || true
  rm -rf "$tmp"
}
trap cleanup EXIT

# four-letter words with a short timeout (a paused server answers nothing): mode and packets
probe() { # probe DIR -> "i mode packets_received" per server that answered
  /usr/bin/python3 - "$1" <<'PY'
import socket, sys
d = sys.argv[1]
for i in (1, 2, 3):
    port = int(open("%s/port%d" % (d, i)).read())
    def ask(word):
        try:
            s = socket.create_connection(("127.0.0.1", port), timeout=0.3)
            s.settimeout(0.3)
            s.sendall(word)
            data = b""
            while True:
                b = s.recv(4096)
                if not b: break
                data += b
            return data.decode(errors="replace")
        except OSError:
            return ""
    srvr, mntr = ask(b"srvr"), ask(b"mntr")
    mode = next((l.split(": ", 1)[1] for l in srvr.splitlines() if l.startswith("Mode: ")), "-")
    pk = next((l.split()[1] for l in mntr.splitlines() if l.startswith("zk_packets_received")), "-")
    print(i, mode, pk)
PY
}
since() { awk -v a="$1" -v b="$(date +%s.%N)" 'BEGIN { printf "%d", b - a }'; } # whole seconds since $1
leader_of() { probe "$1" | awk '$2 == "leader" { print $1 }' | head -1; }
# zk_packets_received summed over the servers but $2 (the leader to be killed: its count goes with it)
packets() { probe "$1" | awk -v x="$2" '$1 != x && $3 != "-" { s += $3 } END { print s + 0 }'; }

rows="$tmp/rows"
: >"$rows"
for run in $(seq 1 "$runs"); do
  "$prog" --connect "$connect" --holders "$holders" --waiters "$waiters" --session-timeout-ms "$timeout_ms" \
    >"$tmp/out.$run" 2>"$tmp/err.$run" &
  pid=$!
  for _ in $(seq 1 600); do grep -q '^READY' "$tmp/out.$run" && break; kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
  grep -q '^READY' "$tmp/out.$run" || { echo "failover.sh: the holders did not get ready:"; cat "$tmp/err.$run"; exit 1; } >&2
  sleep 3 # (every lease in its steady state)
  leader=$(leader_of "$dir")
  [ -n "$leader" ] || { echo "failover.sh: no leader" >&2; exit 1; }
  follower=$(( leader % 3 + 1 ))
  kill -USR1 "$pid"; sleep 0.2
  p0=$(packets "$dir" "$leader")
  t0=$(date +%s.%N)
  kill -USR2 "$pid"
  "$root/scripts/zk.sh" kill "$dir" "$leader" >/dev/null
  if [ "$pause" != 0 ]; then
    "$root/scripts/zk.sh" pause "$dir" "$follower"
    ( sleep "$pause"; "$root/scripts/zk.sh" resume "$dir" "$follower" ) &
  fi
  new=""
  while [ -z "$new" ]; do
    new=$(leader_of "$dir")
    [ -n "$new" ] || sleep 0.05
    [ "$(since "$t0")" -gt 60 ] && { echo "failover.sh: no new leader within 60 s" >&2; exit 1; }
  done
  elected=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.3f", b - a }')
  while [ "$(since "$t0")" -lt 10 ]; do sleep 0.1; done
  kill -USR1 "$pid"; sleep 0.2
  p1=$(packets "$dir" "$leader")
  sleep "$settle" # (a lost lock's node goes at v + T; a waiter is granted then)
  kill -TERM "$pid"
  wait "$pid" || true
  pid=""
  json=$(grep '^{' "$tmp/out.$run" || echo '{}')
  marks=$(grep '^MARK' "$tmp/out.$run" | tail -2 | tr '\n' ' ')
  line=$(/usr/bin/python3 - "$json" "$marks" "$elected" "$p0" "$p1" "$holders" "$waiters" "$pause" "$timeout_ms" <<'PY'
import json, sys
j = json.loads(sys.argv[1]) if sys.argv[1] else {}
m = sys.argv[2].split()
before, after = [int(x) for x in m[1:5]], [int(x) for x in m[6:10]]
d = [a - b for a, b in zip(after, before)]
sessions = int(sys.argv[6]) + int(sys.argv[7])
j.update({"pause_s": float(sys.argv[8]), "session_timeout_ms": int(sys.argv[9]),
          "new_leader_after_s": round(float(sys.argv[3]), 2),
          "server_packets_10s_per_session": round((int(sys.argv[5]) - int(sys.argv[4])) / sessions, 1),
          "client_requests_10s_per_session": round(d[0] / sessions, 1),
          "client_heartbeats_10s_per_session": round(d[1] / sessions, 1),
          "client_touches_10s_per_session": round(d[2] / sessions, 1),
          "client_renewals_10s_per_session": round(d[3] / sessions, 1)})
print(json.dumps(j))
PY
)
  echo "$line"
  echo "$line" >>"$rows"
  "$root/scripts/zk.sh" restart "$dir" "$leader" >/dev/null
  sleep 2
done
/usr/bin/python3 - "$rows" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
print("\n| T | paused follower | new leader after | holders told lost (suspended) | regained | lost for good | held at the end, same token | locks changed hands | holder sessions survived | packets/session (10 s) | client requests + heartbeats + touches /session (10 s) |")
print("|---|---|---|---|---|---|---|---|---|---|---|")
for r in rows:
    print("| %.0f s | %s | %.2f s | %d of %d | %d | %d | %d | %d of %d | %d of %d | %.1f | %.1f + %.1f + %.1f |" % (
        r["session_timeout_ms"] / 1000, "%g s" % r["pause_s"] if r["pause_s"] else "no", r["new_leader_after_s"],
        r.get("holders_told_lost", -1), r.get("holders", 0), r.get("holders_regained", -1),
        r.get("holders_lost_for_good", -1), r.get("holders_kept_with_same_token", -1),
        r.get("locks_changed_hands", -1), r.get("waiters", 0), r.get("holder_sessions_survived", -1), r.get("holders", 0),
        r["server_packets_10s_per_session"], r["client_requests_10s_per_session"],
        r["client_heartbeats_10s_per_session"], r["client_touches_10s_per_session"]))
PY
