#!/usr/bin/env bash
# The whole test suite: set-up, build, start a throwaway ZooKeeper (standalone + a 3-server
# ensemble), run ctest, stop the servers. Exits non-zero on any failure.
#   scripts/test.sh              the suite
#   scripts/test.sh --sanitize   the same, built with AddressSanitizer + UBSan (GCC)
#   scripts/test.sh --tsan       the same, built with ThreadSanitizer (clang, warnings as errors)
#   scripts/test.sh --clang      the same, built with clang (warnings as errors)
#   extra arguments after -- go to ctest (e.g. -- -R Mutex)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
mode=""; ctest_args=()
while [ $# -gt 0 ]; do
  case "$1" in
    --sanitize|--tsan|--clang) mode=$1; shift;;
    --) shift; ctest_args=("$@"); break;;
    *) echo "usage: $0 [--sanitize|--tsan|--clang] [-- ctest args]" >&2; exit 2;;
  esac
done
"$root/scripts/setup.sh"
build=$("$root/scripts/build.sh" $mode)

zk1=""; zk3=""; zk3r=""
cleanup() {
  [ -n "$zk1" ] && "$root/scripts/zk.sh" stop "$zk1" || true
  [ -n "$zk3" ] && "$root/scripts/zk.sh" stop "$zk3" || true
  [ -n "$zk3r" ] && "$root/scripts/zk.sh" stop "$zk3r" || true
}
trap cleanup EXIT
trap 'exit 130' INT TERM # (cleanup runs on exit)
# (the standalone server also serves TLS: tls_test.cpp; its PKI is in $ZK_DIR/tls)
eval "$("$root/scripts/zk.sh" start --tls)"; zk1=$ZK_DIR
export ZK_CONNECT ZK_TLS_CONNECT ZK_DIR
out=$("$root/scripts/zk.sh" start --servers 3)
zk3=$(echo "$out" | sed -n 's/^ZK_DIR=//p')
export ZK_ENSEMBLE_CONNECT=$(echo "$out" | sed -n 's/^ZK_CONNECT=//p') ZK_ENSEMBLE_DIR=$zk3
# a second ensemble whose server-to-server links go through freezable relays (partition_test.cpp)
out=$("$root/scripts/zk.sh" start --servers 3 --relay --tls)
zk3r=$(echo "$out" | sed -n 's/^ZK_DIR=//p')
export ZK_RELAY_ENSEMBLE_DIR=$zk3r
export ZKLOCK_SCRIPTS="$root/scripts"
echo "test: ZooKeeper at $ZK_CONNECT, ensemble at $ZK_ENSEMBLE_CONNECT" >&2
if [ "$mode" = --sanitize ]; then
  # stack-use-after-return: a coroutine that reads a dead closure (see src/recipes/inspect.cpp) is caught every time
  export ASAN_OPTIONS=detect_leaks=1:abort_on_error=0:detect_stack_use_after_return=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
  # the C client's own leaks on a close mid-partition (see the file); zklock's are still reported
  export LSAN_OPTIONS="suppressions=$root/test/lsan.supp"
fi
if [ "$mode" = --tsan ]; then
  # a report fails the test (exit code 66); the suppressions are for the C client only
  export TSAN_OPTIONS="halt_on_error=0 exitcode=66 second_deadlock_stack=1 suppressions=$root/test/tsan.supp"
fi
cd "$build"
# In parallel: most tests wait on servers and timers, not on the CPU (the release suite takes
# 333 s one at a time, 31 s of it CPU). ZKLOCK_TEST_JOBS=1 runs them one at a time.
ctest --output-on-failure --timeout 300 -j "${ZKLOCK_TEST_JOBS:-4}" "${ctest_args[@]+"${ctest_args[@]}"}"
