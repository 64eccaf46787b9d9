#!/usr/bin/env bash
# Configures and builds into build/ (or build-asan/ with --sanitize). Prints the build dir.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
dir="$root/build"; extra=()
if [ "${1:-}" = "--sanitize" ]; then dir="$root/build-asan"; extra=(-DZKLOCK_SANITIZE=ON -DCMAKE_BUILD_TYPE=Debug); fi
if [ ! -f "$dir/build.ninja" ]; then
  cmake -S "$root" -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo "${extra[@]+"${extra[@]}"}" >&2
fi
ninja -C "$dir" -j "$(nproc)" >&2
echo "$dir"
