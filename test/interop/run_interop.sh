#!/usr/bin/env bash
# Curator's InterProcessMutex, kazoo's Lock and zklock contend on one path; every hold is
# checked for overlap (exclusive marker file + interval log), and no node may be left behind.
#   run_interop.sh BUILD_DIR SOURCE_DIR      (needs ZK_CONNECT)
set -euo pipefail
build=$1; src=$2
: "${ZK_CONNECT:?ZK_CONNECT must be set}"
work=$(mktemp -d /tmp/zklock-interop.XXXXXX)
trap 'rm -rf "$work"' EXIT
J=/usr/share/java
CP="$J/curator-recipes.jar:$J/curator-framework.jar:$J/curator-client.jar:$J/zookeeper.jar:$J/zookeeper-jute.jar:$J/guava.jar:$J/slf4j-api.jar:$J/slf4j-nop.jar:$J/netty-handler.jar:$J/netty-transport.jar:$J/netty-common.jar:$J/netty-buffer.jar:$J/netty-codec.jar:$J/netty-resolver.jar:$J/netty-transport-native-epoll.jar:$J/netty-transport-native-unix-common.jar"
javac -d "$work" -cp "$CP" "$src/CuratorContender.java"
iters=${INTEROP_ITERATIONS:-15}
fail=0

# run_case NAME CONTENDER... ; each contender: "curator" | "kazoo" | "zklock:<coroutines>:<dialect>"
run_case() {
  local name=$1; shift
  local path="/zklock-test/interop-$name-$$-$RANDOM" dir="$work/$name" pids=() expected=0 i=0
  mkdir -p "$dir"
  for c in "$@"; do
    i=$((i + 1))
    case "$c" in
      curator) java -cp "$work:$CP" CuratorContender "$ZK_CONNECT" "$path" "$iters" 2 "$dir/held" "$dir/c$i.log" & expected=$((expected + iters));;
      kazoo) /usr/bin/python3 "$src/kazoo_contender.py" "$ZK_CONNECT" "$path" "$iters" 2 "$dir/held" "$dir/c$i.log" & expected=$((expected + iters));;
      zklock:*) IFS=: read -r _ n dialect <<<"$c"
         "$build/test/zklock_interop_contender" "$ZK_CONNECT" "$path" "$iters" 2 "$dir/held" "$dir/c$i.log" "$n" "$dialect" &
         expected=$((expected + iters * n));;
    esac
    pids+=($!)
  done
  local ok=0
  for p in "${pids[@]}"; do wait "$p" || ok=1; done
  echo "== $name: $*"
  /usr/bin/python3 - "$dir" <<'PY' || ok=1
import glob, sys, collections
holds = []
for f in glob.glob(sys.argv[1] + "/*.log"):
    for line in open(f):
        who, start, end = line.split()
        holds.append((int(start), int(end), who))
holds.sort()
bad = 0
for (s1, e1, w1), (s2, e2, w2) in zip(holds, holds[1:]):
    if s2 < e1:
        print(f"OVERLAP: {w2} started {e1 - s2} us before {w1} released")
        bad += 1
for who, n in sorted(collections.Counter(w for _, _, w in holds).items()):
    print(f"{who} holds: {n}")
print(f"holds checked: {len(holds)}, overlaps: {bad}")
sys.exit(1 if bad else 0)
PY
  local got; got=$(cat "$dir"/*.log | wc -l)
  [ "$got" -eq "$expected" ] || { echo "expected $expected holds, got $got"; ok=1; }
  "$build/test/zklock_interop_contender" --check-empty "$ZK_CONNECT" "$path" || { echo "lock nodes left behind"; ok=1; }
  [ $ok -eq 0 ] || fail=1
}

# Curator's InterProcessMutex and zklock's default (Curator) dialect
run_case curator curator curator zklock:3:curator zklock:2:curator
# kazoo's Lock (extra_lock_patterns=["-lock-"]) and zklock's kazoo dialect
run_case kazoo kazoo kazoo zklock:3:kazoo zklock:2:kazoo

[ $fail -eq 0 ] && echo "interop: PASS" || echo "interop: FAIL"
exit $fail
