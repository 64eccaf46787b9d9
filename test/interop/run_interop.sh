#!/usr/bin/env bash
# Curator's InterProcessMutex, kazoo's Lock and zklock contend on one path; every hold is
# checked for overlap (exclusive marker file + interval log), and no node may be left behind.
# The same for leader elections: Curator's LeaderSelector and LeaderLatch, kazoo's Election and
# zklock's election, each with a zklock observer that must see both sides' leaders.
#   run_interop.sh BUILD_DIR SOURCE_DIR      (needs ZK_CONNECT)
set -euo pipefail
build=$1; src=$2
: "${ZK_CONNECT:?ZK_CONNECT must be set}"
work=$(mktemp -d /tmp/zklock-interop.XXXXXX)
trap 'rm -rf "$work"' EXIT
CP=$("$src/../../scripts/curator-classpath.sh")
javac -d "$work" -cp "$CP" "$src/CuratorContender.java"
iters=${INTEROP_ITERATIONS:-15}
election_iters=${INTEROP_ELECTION_ITERATIONS:-8}
fail=0

# run_case NAME MODE CONTENDER... ; MODE mutex|rw|election; each contender: "curator" | "kazoo" |
# "zklock:<coroutines>:<dialect>" (dialect curator|kazoo; with election curator|latch|kazoo) |
# with election: "curator-selector" | "curator-latch" | "kazoo-election".
# Each contender holds CASE_ITERATIONS times (default INTEROP_ITERATIONS) for CASE_HOLD_MS ms (default 2).
# A start gate (CASE_GATE=0 turns it off): every peer connects, then waits until all are
# connected, so that a JVM's start-up does not let the others finish before Curator contends
# (without it the Curator cases saw one hand-over between kinds of peer in 75 holds: zklock's
# holds all came first).
run_case() {
  local name=$1 mode=$2; shift 2
  local path="/zklock-test/interop-$name-$$-$RANDOM" dir="$work/$name" pids=() expected=0 i=0
  local iters=${CASE_ITERATIONS:-$iters} hold=${CASE_HOLD_MS:-2} observer= ok=0
  mkdir -p "$dir"
  local -x INTEROP_GATE=
  [ "${CASE_GATE:-1}" = 0 ] || INTEROP_GATE=$dir/gate
  # kazoo's Lock ensures its path once per Lock object; a container zklock or Curator made would
  # be reaped whenever the path empties, and kazoo's next acquire would fail with NoNodeError
  # (shown by kazoo_reaped_parent.py below). So a path kazoo shares is made persistent first,
  # as the README tells users to.
  local shared_with_kazoo=0
  [[ " $* " == *" kazoo "* || " $* " == *" kazoo-election "* ]] && shared_with_kazoo=1
  [ $shared_with_kazoo -eq 0 ] || "$build/test/zklock_interop_contender" --create-path "$ZK_CONNECT" "$path"
  # an election's observer follows the leader throughout, until the candidates are done (its stop file)
  if [ "$mode" = election ]; then
    timeout 240 "$build/test/zklock_interop_contender" --observe "$ZK_CONNECT" "$path" 200 "$dir/observed" &
    observer=$!
  fi
  for c in "$@"; do
    i=$((i + 1))
    case "$c" in
      curator) timeout 240 java ${CURATOR_OPTS:-} -cp "$work:$CP" CuratorContender "${CASE_CONNECT:-$ZK_CONNECT}" "$path" "$iters" "$hold" "$dir/held" "$dir/c$i.log" "$mode" & expected=$((expected + iters));;
      curator-selector|curator-latch)
         timeout 240 java ${CURATOR_OPTS:-} -cp "$work:$CP" CuratorContender "${CASE_CONNECT:-$ZK_CONNECT}" "$path" "$iters" "$hold" "$dir/held" "$dir/c$i.log" "${c#curator-}" & expected=$((expected + iters));;
      kazoo) timeout 240 /usr/bin/python3 "$src/kazoo_contender.py" "${CASE_CONNECT:-$ZK_CONNECT}" "$path" "$iters" "$hold" "$dir/held" "$dir/c$i.log" "$mode" & expected=$((expected + iters));;
      kazoo-election)
         timeout 240 /usr/bin/python3 "$src/kazoo_contender.py" "${CASE_CONNECT:-$ZK_CONNECT}" "$path" "$iters" "$hold" "$dir/held" "$dir/c$i.log" election & expected=$((expected + iters));;
      zklock:*) IFS=: read -r _ n dialect <<<"$c"
         timeout 240 "$build/test/zklock_interop_contender" "${CASE_CONNECT:-$ZK_CONNECT}" "$path" "$iters" "$hold" "$dir/held" "$dir/c$i.log" "$n" "$dialect" "$mode" &
         expected=$((expected + iters * n));;
      *) echo "run_case: unknown contender $c"; return 1;;
    esac
    pids+=($!)
  done
  if [ -n "$INTEROP_GATE" ]; then # every peer (and the observer) connected: go
    local want=${#pids[@]} waited=0
    [ -z "$observer" ] || want=$((want + 1))
    while [ "$(find "$dir" -maxdepth 1 -name 'gate.ready.*' | wc -l)" -lt "$want" ] && [ $waited -lt 1200 ]; do
      sleep 0.1; waited=$((waited + 1))
    done
    [ $waited -lt 1200 ] || { echo "start gate: not every peer connected within 120 s"; ok=1; }
    touch "$INTEROP_GATE.go"
  fi
  for p in "${pids[@]}"; do wait "$p" || ok=1; done
  echo "== $name ($mode): $*"
  if [ -n "$observer" ]; then
    touch "$dir/observed.stop" # (a file, not a signal: see zklock_contender.cpp)
    wait "$observer" || { echo "observer failed (exit $?: 124 is the timeout, 128+N a signal)"; ok=1; }
    # it must have seen a leader of each kind of candidate: their values ("zklock-<c>" for zklock's)
    local value seen
    for value in $(printf '%s\n' "$@" | sed 's/^zklock:.*/zklock-/' | sort -u); do
      seen=$(grep -c "^$value" "$dir/observed" || true)
      echo "observer saw $seen leaders with a value starting $value"
      [ "$seen" -gt 0 ] || ok=1
    done
  fi
  /usr/bin/python3 - "$dir" <<'PY' || ok=1
import glob, sys, collections
holds = []
for f in glob.glob(sys.argv[1] + "/*.log"):
    for line in open(f):
        who, kind, start, end = line.split()
        holds.append((int(start), int(end), who, kind))
holds.sort()
bad = 0
writes = [h for h in holds if h[3] == "w"]
for w in writes:  # a write hold overlaps nothing; read holds may overlap each other
    for h in holds:
        if h is not w and h[0] < w[1] and w[0] < h[1]:
            print(f"OVERLAP: {h[2]} {h[3]} hold overlaps {w[2]} write hold by {min(w[1], h[1]) - max(w[0], h[0])} us")
            bad += 1
shared = sum(1 for a, b in zip(holds, holds[1:]) if b[0] < a[1])
handovers = sum(1 for a, b in zip(holds, holds[1:]) if a[2] != b[2])
for who, n in sorted(collections.Counter(f"{h[2]} {h[3]}" for h in holds).items()):
    print(f"{who} holds: {n}")
print(f"read holds that overlapped another read hold: {shared}")
print(f"hand-overs from one kind of peer to another: {handovers}")
print(f"holds checked: {len(holds)}, overlaps: {bad}")
sys.exit(1 if bad else 0)
PY
  local got; got=$(cat "$dir"/*.log | wc -l)
  [ "$got" -eq "$expected" ] || { echo "expected $expected holds, got $got"; ok=1; }
  "$build/test/zklock_interop_contender" --check-empty "$ZK_CONNECT" "$path" || { echo "lock nodes left behind"; ok=1; }
  [ $shared_with_kazoo -eq 0 ] || "$build/test/zklock_interop_contender" --remove-path "$ZK_CONNECT" "$path" || ok=1
  [ $ok -eq 0 ] || fail=1
}

# Curator's InterProcessMutex and zklock's default (Curator) dialect
run_case curator mutex curator curator zklock:3:curator zklock:2:curator
# The same over TLS, when the server has a secure port (scripts/test.sh starts it with zk.sh --tls):
# Curator through the ZooKeeper Java client's TLS (Netty, PEM stores, mutual TLS) and zklock
# through its relay, on the server's TLS port. (The checks for leftovers read the plain port.)
if [ -n "${ZK_TLS_CONNECT:-}" ] && [ -n "${ZK_DIR:-}" ] && [ -f "$ZK_DIR/tls/ca.pem" ]; then
  tls=$ZK_DIR/tls
  CASE_CONNECT=$ZK_TLS_CONNECT ZKLOCK_TLS_DIR=$tls \
  CURATOR_OPTS="-Dzookeeper.client.secure=true -Dzookeeper.clientCnxnSocket=org.apache.zookeeper.ClientCnxnSocketNetty \
    -Dzookeeper.ssl.keyStore.location=$tls/client-keystore.pem -Dzookeeper.ssl.keyStore.type=PEM \
    -Dzookeeper.ssl.trustStore.location=$tls/ca.pem -Dzookeeper.ssl.trustStore.type=PEM" \
    run_case curator-tls mutex curator curator zklock:3:curator zklock:2:curator
  # kazoo over TLS (its use_ssl, ca, certfile, keyfile) with zklock's kazoo dialect
  CASE_CONNECT=$ZK_TLS_CONNECT ZKLOCK_TLS_DIR=$tls KAZOO_TLS_DIR=$tls \
    run_case kazoo-tls mutex kazoo kazoo zklock:3:kazoo zklock:2:kazoo
else
  echo "== curator-tls, kazoo-tls: not run (no ZK_TLS_CONNECT: run the suite with scripts/test.sh)"
  fail=1
fi
# kazoo's Lock (extra_lock_patterns=["-lock-"]) and zklock's kazoo dialect
run_case kazoo mutex kazoo kazoo zklock:3:kazoo zklock:2:kazoo
# kazoo's Lock and zklock's default dialect on one path (zklock counts kazoo's __lock__ nodes)
run_case kazoo-default mutex kazoo kazoo zklock:3:curator zklock:2:curator
# read/write locks: Curator's InterProcessReadWriteLock; kazoo's WriteLock (its ReadLock: see kazoo_contender.py)
run_case curator-rw rw curator curator zklock:3:curator zklock:2:curator
run_case kazoo-rw rw kazoo kazoo zklock:3:kazoo zklock:2:kazoo
# leader elections, one dialect a path (zklock's campaign fails on a foreign naming), 50 ms terms:
# Curator's LeaderSelector (an InterProcessMutex underneath) and zklock's curator_selector dialect
CASE_ITERATIONS=$election_iters CASE_HOLD_MS=50 run_case election-selector election curator-selector curator-selector zklock:2:curator
# Curator's LeaderLatch and zklock's curator_latch dialect
CASE_ITERATIONS=$election_iters CASE_HOLD_MS=50 run_case election-latch election curator-latch curator-latch zklock:2:latch
# kazoo's Election (a kazoo Lock underneath) and zklock's kazoo dialect; a persistent path, as above
CASE_ITERATIONS=$election_iters CASE_HOLD_MS=50 run_case election-kazoo election kazoo-election kazoo-election zklock:2:kazoo

# why the kazoo cases above use a persistent path: kazoo's Lock after its container was reaped
echo "== kazoo after a reaped parent"
/usr/bin/python3 "$src/kazoo_reaped_parent.py" "$ZK_CONNECT" "$build/test/zklock_interop_contender" "$work" || fail=1

[ $fail -eq 0 ] && echo "interop: PASS" || echo "interop: FAIL"
exit $fail
