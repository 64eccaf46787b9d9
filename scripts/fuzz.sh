#!/usr/bin/env bash
# Fuzzes the pure protocol logic with libFuzzer (clang, with ASan/UBSan): contender parsing,
# ordering and the lock decision (never two holders), path and connect-string validation, guid
# lookup, the acquire's state machine (any sequence of results: a grant only after the lease's
# check, never on a node it did not make, a stop that ends it), and the semaphore's (a grant only
# after the lease's check on its own lease counted among at most N, a restart only after the
# internal lock's loss, a sweep whenever a create's fate is unknown), the in-process hand-off's
# queue (each waiter told once, one grant out, only under a kept node) and the unique_node
# strategy's machine (a grant only after the lease's check, on a node it created or read as
# ours). Each target starts from its seed corpus in test/fuzz/corpus/<target>/ (new inputs go to
# a temp dir, not into the repository). A crash leaves its input in build-fuzz/: add it to the
# corpus once fixed.
#   scripts/fuzz.sh [--seconds N]     N seconds per target (default 30)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
seconds=30
[ "${1:-}" = "--seconds" ] && seconds=$2
"$root/scripts/setup.sh"
dir="$root/build-fuzz"
if [ ! -f "$dir/build.ninja" ]; then
  cmake -S "$root" -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_COMPILER=clang++ \
    -DZKLOCK_FUZZ=ON -DZKLOCK_BUILD_TESTS=OFF -DZKLOCK_BUILD_EXAMPLES=OFF -DZKLOCK_BUILD_BENCH=OFF >&2
fi
targets=(contenders paths guid acquire_fsm semaphore_fsm handoff_fsm unique_fsm)
ninja -C "$dir" "${targets[@]/#/zklock_fuzz_}" >&2
fail=0
for t in "${targets[@]}"; do
  work=$(mktemp -d /tmp/zklock-fuzz.XXXXXX)
  cp "$root/test/fuzz/corpus/$t/"* "$work/"
  echo "fuzz: $t for ${seconds}s" >&2
  if (cd "$dir" && "$dir/test/fuzz/zklock_fuzz_$t" -max_total_time="$seconds" -max_len=4096 -print_final_stats=1 "$work" \
        >"$dir/fuzz_$t.log" 2>&1); then
    echo "fuzz: $t: $(grep -h 'stat::number_of_executed_units' "$dir/fuzz_$t.log" | awk '{print $2}') runs, no failure"
  else
    echo "fuzz: $t FAILED (see $dir/fuzz_$t.log; the crashing input is in $dir)"; tail -30 "$dir/fuzz_$t.log"; fail=1
  fi
  rm -rf "$work"
done
exit $fail
