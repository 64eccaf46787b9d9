#!/usr/bin/env bash
# The chaos soak: N zklock worker processes contend on a few lock paths of a 3-server ensemble on
# loopback while faults are injected at random times (seeded, so a run can be repeated); then
# every hold is checked for overlap, fencing-token order, loss margins and liveness, and the
# lock paths for leftover nodes. Bounded in time; stops by itself.
#
#   scripts/chaos.sh [--seconds S] [--seed N] [--workers N] [--paths P] [--policy lease|on_disconnect]
#                    [--faults LIST] [--peers curator|kazoo] [--peer-workers N] [--slow-stop-ms N]
#                    [--tick MS] [--recipe mutex|election|semaphore] [--build DIR] [--out DIR]
#   --recipe: what the zklock workers use on the paths (default mutex). semaphore: each takes a
#            lease of a semaphore of 2 (zklock::semaphore) on the path instead of the mutex; the
#            checker fails a third lease held at once, and checks no token order and no margins
#            (two leases are held at once: the next grant is not the one a lost lease protects).
#            No peers. election: each campaigns
#            (zklock::election) with the value "w<id>-<n>" instead of acquiring the mutex, and while
#            it leads it proclaims a new value and writes its fencing token and name to the path's
#            data node "<path>-data" (a sibling, persistent) through leadership::async_commit, 1-3
#            times per hold; after a loss signal it proclaims and commits once more, which must fail
#            (zklock_chaos_worker's header has the log lines). Holds and loss signals are logged as
#            in the mutex mode, so every check below applies ("never two leaders"), and the checker
#            adds "no stale write": on each data node, the successful commits in the order of the
#            versions they returned never go back in fencing token, and none that landed was sent
#            after its leadership's end (the hold's E line: the loss signal, or the release; one in
#            flight at the loss signal may be acknowledged after it, and is reported). With --peers,
#            see there.
#   --build: take the binaries from this build dir, already built, instead of running scripts/build.sh
#   --tick: the ensemble's tickTime (default 500 ms, a quarter of the workers' T = 2 s); 1000 runs at
#            tickTime = T/2, the shortest T ZooKeeper allows for it, where the leader's pings are
#            T/4 apart (docs/lease.md, premise 1). The checker's margin bound is the same.
#   --faults: a comma-separated subset of leader,follower,kill,drop,partition,delay,quorum,isolate,depose
#             (default: all)
#   --slow-stop-ms: every other zklock worker (the even-numbered ones) goes on acting for a random
#            time up to N ms after its loss signal before it releases (zklock_chaos_worker
#            --slow-stop-ms), so the library's deferred delete of a lost lock is exercised; default:
#            chosen per run from the seed, between 0 and 0.2875 T (what the library leaves a lost
#            holder before it deletes the node: a longer stop would break the holder's side of the
#            contract, not the library's)
#   --peers: N more workers (default 2) of Curator's InterProcessMutex or kazoo's Lock on the same
#            paths (test/chaos/CuratorChaosWorker.java, kazoo_chaos_worker.py), logging the same
#            way; their loss signal is the connection leaving CONNECTED (SUSPENDED or LOST), as
#            their documentation advises. Curator cannot read kazoo's node names: one kind per run.
#            With --recipe election the peers are candidates on the same election paths: Curator's
#            LeaderSelector (id: the worker's name; takeLeadership is one hold) or kazoo's Election
#            (identifier: the worker's name; run(func) is one hold), logging their holds as above, so
#            "never two leaders" is checked across libraries. kazoo's Election sees only kazoo-named
#            nodes (it takes no extra_lock_patterns) and zklock's election refuses a path of mixed
#            namings, so beside kazoo the zklock workers campaign in election_dialect::kazoo
#            (zklock_chaos_worker --dialect kazoo); beside Curator in the default, LeaderSelector's.
#            Peers neither proclaim nor commit: the stale-write check covers the zklock workers.
#
# Faults (one at a time, 1-3 s apart): leader SIGKILL then restart, follower SIGSTOP for 1.5-3 T
# then SIGCONT, a follower's links to the leader frozen for 1.5-3 T (the ensemble's server links go
# through zk.sh's freezable relays: the follower keeps serving its clients until its read from the
# leader times out), the leader isolated from both followers for 2.5-4 T (its clients' links stay
# up; it answers alone until it steps down), the leader deposed for 2.5-4 T (zk.sh depose: cut
# off like that, and its followers SIGKILLed and restarted at once, so they elect a new leader
# among themselves while the old one still answers its clients until its syncLimit runs out),
# holder (worker) SIGKILL then a new worker, and
# through each worker's own proxies:
# connection drops, a partition longer than T (the session expires), 300 ms delays for 3 s. The
# faults of a single client hit a worker that holds a lock 3 times in 4 (drops, partitions and
# delays only zklock workers: they go through the worker's own proxies). Holds last 10-1500 ms.
# Exit 0 only if the checker passes, every worker exits cleanly when told to, and no lock node
# is left. The run's files stay in --out (default: a new /tmp/zklock-chaos.* directory).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
seconds=120 seed=1 workers=5 paths=2 policy=lease out="" faults=leader,follower,kill,drop,partition,delay,quorum,isolate,depose
peers="" peer_workers=2 slow_stop_ms="" tick=500 recipe=mutex build=""
while [ $# -gt 0 ]; do
  case "$1" in
    --seconds) seconds=$2; shift 2;;
    --seed) seed=$2; shift 2;;
    --workers) workers=$2; shift 2;;
    --paths) paths=$2; shift 2;;
    --policy) policy=$2; shift 2;;
    --faults) faults=$2; shift 2;;
    --peers) peers=$2; shift 2;;
    --peer-workers) peer_workers=$2; shift 2;;
    --slow-stop-ms) slow_stop_ms=$2; shift 2;;
    --tick) tick=$2; shift 2;;
    --recipe) recipe=$2; shift 2;;
    --build) build=$2; shift 2;;
    --out) out=$2; shift 2;;
    *) sed -n '2,/^set -euo pipefail/p' "$0" | sed '$d'; exit 2;;
  esac
done
case "$peers" in ""|none) peers=""; peer_workers=0;; curator|kazoo) ;; *) echo "chaos: --peers curator|kazoo" >&2; exit 2;; esac
case "$recipe" in mutex|election|semaphore) ;; *) echo "chaos: --recipe mutex|election|semaphore" >&2; exit 2;; esac
if [ "$recipe" = semaphore ] && [ -n "$peers" ]; then echo "chaos: --recipe semaphore takes no --peers" >&2; exit 2; fi
# the zklock workers' node naming (zklock_chaos_worker --dialect): kazoo's only beside kazoo's
# Election, which sees nothing else (the mutex workers keep Curator's, which kazoo's Lock sees
# through extra_lock_patterns)
dialect=curator
if [ "$recipe" = election ] && [ "$peers" = kazoo ]; then dialect=kazoo; fi
total=$((workers + peer_workers))
# The workers append to their logs and the checker reads every log in the directory: an old
# run's logs would be checked as part of this one. (Seen: a reused --out gave "token order"
# failures between two runs' holds.)
if [ -n "$out" ] && [ -n "$(ls -A "$out" 2>/dev/null)" ]; then
  echo "chaos: --out $out is not empty; give a new or empty directory" >&2; exit 2
fi
T=2000 # session timeout, ms (the ensemble's tickTime: --tick, 500 ms unless given)
if [ "$tick" -lt 50 ] || [ $((tick * 2)) -gt "$T" ]; then echo "chaos: --tick must be in [50, T/2 = $((T / 2))] ms" >&2; exit 2; fi
# the slow stop of every other zklock worker: from the seed (the fault loop below seeds RANDOM again)
# (at most 0.2875 T: the time the library leaves a lost holder before it deletes the node)
if [ -z "$slow_stop_ms" ]; then RANDOM=$seed; slow_stop_ms=$(( RANDOM % (T * 2875 / 10000 + 1) )); fi
"$root/scripts/setup.sh"
if [ -z "$build" ]; then build=$("$root/scripts/build.sh"); fi
[ -n "$out" ] || out=$(mktemp -d /tmp/zklock-chaos.XXXXXX)
mkdir -p "$out"
# private copies: a rebuild during a long soak must not swap the binaries under it (nor the
# shared library of a BUILD_SHARED_LIBS build: the binaries' RUNPATH yields to LD_LIBRARY_PATH)
cp "$build/test/zklock_chaos_worker" "$build/test/zklock_interop_contender" "$out/"
if [ -e "$build/libzklock.so.0" ]; then
  cp -L "$build/libzklock.so.0" "$out/"; export LD_LIBRARY_PATH="$out${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
fi
CURATOR_CP=$("$root/scripts/curator-classpath.sh")
if [ "$peers" = curator ]; then
  javac -nowarn -d "$out" -cp "$CURATOR_CP" "$root/test/chaos/CuratorChaosWorker.java" 2>/dev/null
fi
worker_bin="$out/zklock_chaos_worker"
contender_bin="$out/zklock_interop_contender"
events="$out/events"; : >"$events"
now_ns() { date +%s%N; }
event() { echo "$(now_ns) $*" >>"$events"; }

zkdir=""
declare -a pid name gen kind
for i in $(seq 1 "$total"); do kind[$i]=$([ "$i" -le "$workers" ] && echo zklock || echo "$peers"); done
cleanup() {
  for i in $(seq 1 "$total"); do [ -n "${pid[$i]:-}" ] && kill -9 "${pid[$i]}" 2>/dev/null || true; done
  if [ -n "$zkdir" ]; then "$root/scripts/zk.sh" stop "$zkdir" || true; fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM # (cleanup runs on exit)
zkout=$("$root/scripts/zk.sh" start --servers 3 --relay --tick "$tick")
ZK_CONNECT=$(echo "$zkout" | sed -n 's/^ZK_CONNECT=//p'); zkdir=$(echo "$zkout" | sed -n 's/^ZK_DIR=//p')
echo "chaos: ensemble at $ZK_CONNECT; $workers workers${peers:+ and $peer_workers $peers workers} (dialect $dialect) on $paths path(s); recipe $recipe; policy $policy; seed $seed; tickTime ${tick} ms; ${seconds}s; slow stop ${slow_stop_ms} ms (even workers); files in $out" >&2

start_worker() { # start_worker I
  local i=$1 s slow=0
  gen[$i]=$(( ${gen[$i]:-0} + 1 ))
  s=$((seed * 1000 + i * 10 + gen[$i]))
  [ $((i % 2)) -eq 0 ] && slow=$slow_stop_ms # every other zklock worker stops slowly after a loss
  case "${kind[$i]}" in
    zklock)
      name[$i]="w${i}g${gen[$i]}"
      "$worker_bin" --connect "$ZK_CONNECT" --paths "$paths" --log "$out/${name[$i]}.log" --name "${name[$i]}" \
        --seed "$s" --session-timeout "$T" --policy "$policy" --partition-ms $((T * 2)) \
        --hold-ms 10:1500 --slow-stop-ms "$slow" --recipe "$recipe" --dialect "$dialect" \
        2>>"$out/workers.stderr" &;;
    curator)
      name[$i]="c${i}g${gen[$i]}"
      java -Xmx256m -XX:+UseSerialGC -cp "$out:$CURATOR_CP" CuratorChaosWorker "$ZK_CONNECT" "$paths" \
        "$out/${name[$i]}.log" "$s" "$T" 10 1500 "$recipe" "${name[$i]}" 2>>"$out/workers.stderr" &;;
    kazoo)
      name[$i]="k${i}g${gen[$i]}"
      /usr/bin/python3 "$root/test/chaos/kazoo_chaos_worker.py" "$ZK_CONNECT" "$paths" "$out/${name[$i]}.log" "$s" "$T" \
        10 1500 "$recipe" "${name[$i]}" 2>>"$out/workers.stderr" &;;
  esac
  pid[$i]=$!
}
holder_or_any() { # holder_or_any N: a worker among the first N that holds a lock right now (3 times in 4), else any of them
  local n=$1 holders=()
  if [ $((RANDOM % 4)) -ne 0 ]; then
    for i in $(seq 1 "$n"); do
      # (the last G or E line: an election worker logs its proclaims and commits in between)
      [ "$(grep '^[GE] ' "$out/${name[$i]}.log" 2>/dev/null | tail -n 1 | cut -c1)" = G ] && holders+=("$i")
    done
  fi
  if [ ${#holders[@]} -gt 0 ]; then echo "${holders[$((RANDOM % ${#holders[@]}))]}"; else echo $((1 + RANDOM % n)); fi
}
server_mode() { "$root/scripts/zk.sh" srvr "$zkdir" "$1" 2>/dev/null | sed -n 's/^Mode: //p'; }
pick_server() { # pick_server leader|follower -> index
  local want=$1 found=()
  for s in 1 2 3; do [ "$(server_mode "$s")" = "$want" ] && found+=("$s"); done
  [ ${#found[@]} -gt 0 ] && echo "${found[$((RANDOM % ${#found[@]}))]}"
}

event start
for i in $(seq 1 "$total"); do start_worker "$i"; done
RANDOM=$seed
end=$(( $(date +%s) + seconds ))
while [ "$(date +%s)" -lt "$end" ]; do
  sleep "$((1 + RANDOM % 3)).$((RANDOM % 10))"
  w=$(holder_or_any "$total")   # any worker may be SIGKILLed
  z=$(holder_or_any "$workers") # drops, partitions and delays: zklock workers (their own proxies)
  kinds=(leader follower kill drop partition delay quorum isolate depose)
  k=$((RANDOM % 9))
  case ",$faults," in *",${kinds[$k]},"*) ;; *) continue;; esac
  case $k in
    0) if s=$(pick_server leader); then
         event leader_kill "server$s"; "$root/scripts/zk.sh" kill "$zkdir" "$s"
         sleep "1.$((RANDOM % 10))"; "$root/scripts/zk.sh" restart "$zkdir" "$s" >/dev/null; event leader_restart "server$s"
       fi;;
    1) if s=$(pick_server follower); then
         ms=$(( T * 3 / 2 + RANDOM % (T * 3 / 2) ))
         event follower_stop "server$s" "${ms}ms"; "$root/scripts/zk.sh" pause "$zkdir" "$s"
         sleep "$((ms / 1000)).$(printf %03d $((ms % 1000)))"; "$root/scripts/zk.sh" resume "$zkdir" "$s"
         "$root/scripts/zk.sh" wait "$zkdir" "$s" || true; event follower_resume "server$s"
       fi;;
    2) event worker_kill "${name[$w]}"; kill -9 "${pid[$w]}" 2>/dev/null || true; wait "${pid[$w]}" 2>/dev/null || true
       start_worker "$w";;
    3) event drop "${name[$z]}"; kill -USR1 "${pid[$z]}" 2>/dev/null || true;;
    4) event partition "${name[$z]}"; kill -USR2 "${pid[$z]}" 2>/dev/null || true;;
    5) event delay "${name[$z]}"; kill -HUP "${pid[$z]}" 2>/dev/null || true;;
    6) if s=$(pick_server follower) && l=$(pick_server leader); then
         ms=$(( T * 3 / 2 + RANDOM % (T * 3 / 2) ))
         event quorum_cut "server$s" "server$l" "${ms}ms"; "$root/scripts/zk.sh" freeze "$zkdir" "$s" "$l"
         sleep "$((ms / 1000)).$(printf %03d $((ms % 1000)))"; "$root/scripts/zk.sh" thaw "$zkdir"
         "$root/scripts/zk.sh" wait "$zkdir" "$s" || true; event quorum_heal "server$s"
       fi;;
    7) if l=$(pick_server leader); then
         ms=$(( T * 5 / 2 + RANDOM % (T * 3 / 2) ))
         cut=(); for s in 1 2 3; do [ "$s" = "$l" ] || cut+=("$s" "$l" "$l" "$s"); done
         event leader_isolate "server$l" "${ms}ms"; "$root/scripts/zk.sh" freeze "$zkdir" "${cut[@]}"
         sleep "$((ms / 1000)).$(printf %03d $((ms % 1000)))"; "$root/scripts/zk.sh" thaw "$zkdir"
         for s in 1 2 3; do "$root/scripts/zk.sh" wait "$zkdir" "$s" || true; done; event leader_rejoin "server$l"
       fi;;
    8) if l=$(pick_server leader); then
         ms=$(( T * 5 / 2 + RANDOM % (T * 3 / 2) ))
         t0=$(now_ns)
         event leader_depose "server$l" "${ms}ms"
         # zk.sh depose: NEW_LEADER=<id> on stdout once the restarted followers serve (its progress: stderr)
         if dout=$("$root/scripts/zk.sh" depose "$zkdir" "$l" 2>>"$out/depose.stderr"); then
           new="server$(echo "$dout" | sed -n 's/^NEW_LEADER=//p') after $(( ($(now_ns) - t0) / 1000000 ))ms"
         else
           new="none"; echo "chaos: zk.sh depose $l failed (see $out/depose.stderr)" >&2
         fi
         left=$(( ms - ($(now_ns) - t0) / 1000000 )) # the cut lasts ms from its start, as in isolate
         [ "$left" -le 0 ] || sleep "$((left / 1000)).$(printf %03d $((left % 1000)))"
         "$root/scripts/zk.sh" thaw "$zkdir"
         for s in 1 2 3; do "$root/scripts/zk.sh" wait "$zkdir" "$s" || true; done
         event leader_depose_rejoin "server$l" "new=${new// /_}"
       fi;;
  esac
done
event stop
# every server up again, then every worker must finish its hold and exit cleanly
"$root/scripts/zk.sh" thaw "$zkdir" 2>/dev/null || true
for s in 1 2 3; do
  "$root/scripts/zk.sh" resume "$zkdir" "$s" 2>/dev/null || true
  if ! "$root/scripts/zk.sh" srvr "$zkdir" "$s" 2>/dev/null | grep -q '^Mode: '; then
    kill -0 "$(cat "$zkdir/server$s.pid")" 2>/dev/null || "$root/scripts/zk.sh" restart "$zkdir" "$s" >/dev/null || true
  fi
done
fail=0
# a worker started just now (after a kill near the end) gets its TERM only once it is up: a JVM told
# to stop before its main() has handled nothing yet, and exits 143 (seen with a Curator peer)
for i in $(seq 1 "$total"); do
  for _ in $(seq 1 150); do [ -e "$out/${name[$i]}.log" ] && break; sleep 0.1; done
done
for i in $(seq 1 "$total"); do kill -TERM "${pid[$i]}" 2>/dev/null || true; done
for i in $(seq 1 "$total"); do
  for _ in $(seq 1 300); do kill -0 "${pid[$i]}" 2>/dev/null || break; sleep 0.1; done
  if kill -0 "${pid[$i]}" 2>/dev/null; then
    echo "LIVENESS: worker ${name[$i]} did not finish within 30 s of being told to" ; fail=1; kill -9 "${pid[$i]}"
  fi
  rc=0; wait "${pid[$i]}" || rc=$?
  [ "$rc" -eq 0 ] || { echo "LIVENESS: worker ${name[$i]} exited with $rc"; fail=1; }
  pid[$i]=""
done
# no lock node may be left (killed workers' sessions expire within T; lost locks are deleted in the background)
# (a semaphore's nodes are in the path's containers "leases" and "locks")
checked=""
for p in $(seq 0 $((paths - 1))); do
  if [ "$recipe" = semaphore ]; then checked="$checked /zklock-chaos/lock$p/leases /zklock-chaos/lock$p/locks"
  else checked="$checked /zklock-chaos/lock$p"; fi
done
for c in $checked; do
  left=1
  for _ in $(seq 1 30); do
    if "$contender_bin" --check-empty "$ZK_CONNECT" "$c" >"$out/leftovers" 2>&1; then left=0; break; fi
    sleep 0.5
  done
  [ $left -eq 0 ] || { echo "LEFTOVER nodes on $c:"; cat "$out/leftovers"; fail=1; }
done
# the servers' logs: the checker reads from the leaders' "Expiring session" lines whether a lost
# lock was freed by the server (the margin bound applies) or by its holder's own delete
mkdir -p "$out/servers" && cp "$zkdir"/server*.log "$out/servers/" 2>/dev/null || true
/usr/bin/python3 "$root/scripts/chaos_check.py" "$out" --timeout-ms "$T" --recipe "$recipe" || fail=1
[ $fail -eq 0 ] && echo "chaos: PASS (seed $seed, ${seconds}s)" || echo "chaos: FAIL (seed $seed; files in $out)"
exit $fail
