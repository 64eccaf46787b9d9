#!/usr/bin/env bash
# Locks and leaders through a ZooKeeper leader failover (issue 61), zklock beside Curator and
# kazoo on the same failover: per implementation, N holders (a session each, holding a lock on a
# path of its own and, where the library has one, leading an election of its own) and M waiters
# (a session each, waiting behind the first M locks and campaigns), on a throwaway 3-server
# ensemble (scripts/zk.sh, tickTime 500 ms). Per run and implementation, in turn:
#   --fault kill    the leader SIGKILLed (and, with --pause S, one follower SIGSTOPped for S
#                   seconds at the same moment, which makes the election wait for it);
#   --fault depose  zk.sh depose: the leader's quorum links frozen and the followers restarted at
#                   once, so they elect a new leader while the old one leads alone until its
#                   syncLimit passes (an ensemble with quorum relays).
# Reported: the time until a new leader serves; the holders told their lock was lost, regained
# (zklock), lost for good, and held at the end with the same node (fencing token); the locks that
# changed hands (waiters granted); the leaders told, kept and changed; the holder sessions that
# survived; and what the ensemble received: zk_packets_received of the servers that serve after
# the failover, whose counters restart with their new roles (so: in the first 10 s after the new
# leader served), per session; for zklock also its own requests by kind, heartbeats and touches
# from the fault to then.
#   bench/failover.sh [--holders 100] [--waiters 100] [--timeout-ms 4000] [--pause 0] [--runs 1]
#                     [--fault kill|depose] [--impl zklock,curator,kazoo] [--settle 8] [--build DIR]
# Needs the target built:  ninja -C build zklock_failover (and, for the peers, scripts/setup.sh's
# Curator and kazoo packages). Prints one JSON line per run and implementation and a Markdown
# table at the end.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
holders=100 waiters=100 timeout_ms=4000 pause=0 runs=1 settle=8 build="$root/build" fault=kill
impls=zklock,curator,kazoo
while [ $# -gt 0 ]; do
  case "$1" in
    --holders) holders=$2; shift 2;;
    --waiters) waiters=$2; shift 2;;
    --timeout-ms) timeout_ms=$2; shift 2;;
    --pause) pause=$2; shift 2;;
    --runs) runs=$2; shift 2;;
    --settle) settle=$2; shift 2;;
    --build) build=$2; shift 2;;
    --fault) fault=$2; shift 2;;
    --impl) impls=$2; shift 2;;
    *) sed -n '2,26p' "$0" >&2; exit 2;;
  esac
done
case "$fault" in kill|depose) ;; *) echo "failover.sh: --fault kill or depose" >&2; exit 2;; esac
[ "$waiters" -le "$holders" ] || { echo "failover.sh: at most one waiter per holder" >&2; exit 2; }
prog="$build/bench/zklock_failover"
[ -x "$prog" ] || { echo "failover.sh: $prog not built (ninja -C $build zklock_failover)" >&2; exit 1; }
export ZK_LOG_LEVEL=warn # (no per-touch trace in a benchmark)
tmp=$(mktemp -d /tmp/zklock-failover.XXXXXX)
if [[ ",$impls," == *,curator,* ]]; then
  CP=$("$root/scripts/curator-classpath.sh")
  javac -d "$tmp" -cp "$CP" "$root/bench/CuratorFailover.java"
fi
if [ "$fault" = depose ]; then out=$("$root/scripts/zk.sh" start --servers 3 --relay); else out=$("$root/scripts/zk.sh" start --servers 3); fi
dir=$(echo "$out" | sed -n 's/^ZK_DIR=//p')
connect=$(echo "$out" | sed -n 's/^ZK_CONNECT=//p')
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
# zk_packets_received summed over the servers but $2 (a killed leader: its count goes with it)
packets() { probe "$1" | awk -v x="$2" '$1 != x && $3 != "-" { s += $3 } END { print s + 0 }'; }
settled() { [ "$(probe "$1" | awk '$2 == "leader" { l++ } $2 == "follower" { f++ } END { print l + 0, f + 0 }')" = "1 2" ]; }

start_impl() { # start_impl IMPL OUT ERR CTL: the implementation's program, in the background; sets pid
  case "$1" in
    zklock) "$prog" --connect "$connect" --holders "$holders" --waiters "$waiters" \
              --session-timeout-ms "$timeout_ms" >"$2" 2>"$3" & ;;
    curator) java -cp "$tmp:$CP" CuratorFailover "$connect" "$holders" "$waiters" "$timeout_ms" "$4" >"$2" 2>"$3" & ;;
    kazoo) /usr/bin/python3 "$root/bench/kazoo_failover.py" "$connect" "$holders" "$waiters" "$timeout_ms" "$4" \
             >"$2" 2>"$3" & ;;
    *) echo "failover.sh: unknown implementation $1" >&2; exit 2;;
  esac
  pid=$!
}
signal_impl() { # signal_impl IMPL CTL mark|stop|count
  case "$1:$3" in
    zklock:mark) kill -USR2 "$pid";;
    zklock:stop) kill -TERM "$pid";;
    zklock:count) kill -USR1 "$pid"; sleep 0.2;;
    *:count) ;;
    *) touch "$2/$3";;
  esac
}

rows="$tmp/rows"
: >"$rows"
for run in $(seq 1 "$runs"); do
  for impl in ${impls//,/ }; do
    o="$tmp/out.$impl.$run" e="$tmp/err.$impl.$run" ctl="$tmp/ctl.$impl.$run"
    mkdir -p "$ctl"
    for _ in $(seq 1 300); do settled "$dir" && break; sleep 0.1; done
    settled "$dir" || { echo "failover.sh: the ensemble did not settle" >&2; exit 1; }
    start_impl "$impl" "$o" "$e" "$ctl"
    for _ in $(seq 1 1800); do grep -q '^READY' "$o" && break; kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    grep -q '^READY' "$o" || { echo "failover.sh: $impl's holders did not get ready:"; tail -20 "$e"; exit 1; } >&2
    sleep 3 # (every lease in its steady state)
    leader=$(leader_of "$dir")
    [ -n "$leader" ] || { echo "failover.sh: no leader" >&2; exit 1; }
    follower=$(( leader % 3 + 1 ))
    signal_impl "$impl" "$ctl" count
    p0=$(packets "$dir" 0)
    t0=$(date +%s.%N)
    signal_impl "$impl" "$ctl" mark
    if [ "$fault" = kill ]; then
      "$root/scripts/zk.sh" kill "$dir" "$leader" >/dev/null
      if [ "$pause" != 0 ]; then
        "$root/scripts/zk.sh" pause "$dir" "$follower"
        ( sleep "$pause"; "$root/scripts/zk.sh" resume "$dir" "$follower" ) &
      fi
      gone=$leader
    else
      "$root/scripts/zk.sh" depose "$dir" "$leader" >/dev/null 2>&1 || { echo "failover.sh: depose failed" >&2; exit 1; }
      gone=0
    fi
    new=""
    while [ -z "$new" ] || [ "$new" = "$leader" ]; do
      new=$(leader_of "$dir")
      [ -n "$new" ] && [ "$new" != "$leader" ] || sleep 0.05
      [ "$(since "$t0")" -gt 60 ] && { echo "failover.sh: no new leader within 60 s" >&2; exit 1; }
    done
    elected=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.3f", b - a }')
    [ "$fault" = depose ] && "$root/scripts/zk.sh" thaw "$dir"
    # (the servers' counters restart with their new roles, at about the moment the new leader
    # serves: what they count from then to 10 s later)
    t1=$(awk -v a="$t0" -v e="$elected" 'BEGIN { printf "%.3f", a + e }')
    while [ "$(since "$t1")" -lt 10 ]; do sleep 0.1; done
    signal_impl "$impl" "$ctl" count
    p1=$(packets "$dir" "$gone")
    sleep "$settle" # (a lost lock's node goes at v + T; a waiter is granted then)
    signal_impl "$impl" "$ctl" stop
    wait "$pid" || true
    pid=""
    json=$(grep '^{' "$o" || echo '{}')
    marks=$(grep '^MARK' "$o" | tail -2 | tr '\n' '|' || true)
    line=$(/usr/bin/python3 - "$json" "$marks" "$elected" "$p0" "$p1" "$holders" "$waiters" "$pause" "$timeout_ms" "$impl" "$fault" <<'PY'
import json, sys
j = json.loads(sys.argv[1]) if sys.argv[1] else {}
m = [l.split()[1:] for l in sys.argv[2].split("|") if l.startswith("MARK")]
sessions = int(sys.argv[6]) + int(sys.argv[7])
j.update({"impl": sys.argv[10], "fault": sys.argv[11], "pause_s": float(sys.argv[8]),
          "session_timeout_ms": int(sys.argv[9]), "new_leader_after_s": round(float(sys.argv[3]), 2),
          "server_packets_before": int(sys.argv[4]), "server_packets_after": int(sys.argv[5]),
          "server_packets_10s_per_session": round(int(sys.argv[5]) / sessions, 1)})
if len(m) == 2:
    d = [int(a) - int(b) for a, b in zip(m[1], m[0])]
    keys = ["requests", "heartbeats", "touches", "renewals", "listings", "exists", "get_data", "creates", "deletes"]
    j.update({"client_%s_10s_per_session" % k: round(v / sessions, 2) for k, v in zip(keys, d)})
print(json.dumps(j))
PY
)
    echo "$line"
    echo "$line" >>"$rows"
    if [ "$fault" = kill ]; then
      "$root/scripts/zk.sh" resume "$dir" "$follower" 2>/dev/null || true
      "$root/scripts/zk.sh" restart "$dir" "$leader" >/dev/null
    fi
  done
done
/usr/bin/python3 - "$rows" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
def n(r, k):
    v = r.get(k, -1)
    return "-" if v is None or v < 0 else str(v)
print("\n| library | fault | T | paused follower | new leader after | holders told lost | regained | lost for good | held at the end, same node | locks changed hands | leaders told / kept / changed | holder sessions survived | server packets /session (first 10 s of the new leader) | zklock: requests + heartbeats + touches /session |")
print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
for r in rows:
    client = ("%.1f + %.1f + %.1f" % (r["client_requests_10s_per_session"], r["client_heartbeats_10s_per_session"],
                                      r["client_touches_10s_per_session"])) if "client_requests_10s_per_session" in r else "-"
    print("| %s | %s | %.0f s | %s | %.2f s | %s of %d | %s | %s | %s | %s of %d | %s / %s / %s | %s of %d | %.1f | %s |" % (
        r["impl"], r["fault"], r["session_timeout_ms"] / 1000, "%g s" % r["pause_s"] if r["pause_s"] else "no",
        r["new_leader_after_s"], n(r, "holders_told_lost"), r.get("holders", 0), n(r, "holders_regained"),
        n(r, "holders_lost_for_good"), n(r, "holders_kept_with_same_token"), n(r, "locks_changed_hands"),
        r.get("waiters", 0), n(r, "leaders_told_lost"), n(r, "leaders_kept_with_same_token"), n(r, "leaders_changed"),
        n(r, "holder_sessions_survived"), r.get("holders", 0), r["server_packets_10s_per_session"], client))
PY
