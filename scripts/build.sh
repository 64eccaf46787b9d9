#!/usr/bin/env bash
# Configures and builds; prints the build dir.
#   scripts/build.sh             build/       GCC, RelWithDebInfo, libzklock.so beside libzklock.a, prefix
#                                             /usr (scripts/package.sh makes the .deb packages from it)
#   scripts/build.sh --sanitize  build-asan/  GCC, AddressSanitizer + UBSan, Debug
#   scripts/build.sh --tsan      build-tsan/  clang, ThreadSanitizer, warnings are errors in zklock's code
#   scripts/build.sh --clang     build-clang/ clang, RelWithDebInfo, warnings are errors in zklock's code
# The GCC trees keep their debug information compressed (-gz: zlib, in the objects and in what is
# linked; gdb, addr2line and the sanitizers' symbolizer read it): it makes the release tree
# about 40 % smaller on disk and costs no measurable compile time. A full CI run holds three trees.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
dir="$root/build"; extra=()
gz=(-DCMAKE_CXX_FLAGS=-gz -DCMAKE_C_FLAGS=-gz -DCMAKE_EXE_LINKER_FLAGS=-gz -DCMAKE_SHARED_LINKER_FLAGS=-gz)
case "${1:-}" in
  # (the sanitizer builds leave the benchmarks out: they are measured in the release build only)
  # (and their debug information is line tables only, which is what their reports' stacks
  # need: it saves about a tenth of their compile time; TSan's at -O1, the level clang's
  # ThreadSanitizer documentation suggests, which compiles faster than -O2)
  --sanitize) dir="$root/build-asan"; extra=(-DZKLOCK_SANITIZE=ON -DCMAKE_BUILD_TYPE=Debug -DZKLOCK_BUILD_BENCH=OFF
                                             "-DCMAKE_CXX_FLAGS_DEBUG=-g1" "${gz[@]}");;
  --tsan) dir="$root/build-tsan"
          extra=(-DZKLOCK_TSAN=ON -DZKLOCK_WERROR=ON -DZKLOCK_BUILD_BENCH=OFF -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++
                 "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O1 -gline-tables-only -DNDEBUG");;
  --clang) dir="$root/build-clang"; extra=(-DZKLOCK_WERROR=ON -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++);;
  "") extra=(-DBUILD_SHARED_LIBS=ON -DCMAKE_INSTALL_PREFIX=/usr "${gz[@]}");;
  *) echo "usage: $0 [--sanitize|--tsan|--clang]" >&2; exit 2;;
esac
if [ ! -f "$dir/build.ninja" ]; then
  cmake -S "$root" -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo "${extra[@]+"${extra[@]}"}" >&2
fi
ninja -C "$dir" -j "$(nproc)" >&2
echo "$dir"
