#!/usr/bin/env bash
# Installs the built zklock into a temp prefix, builds test/consume against it with
# find_package(zklock), and runs it.   run.sh BUILD_DIR SOURCE_DIR
set -euo pipefail
build=$1; src=$2
tmp=$(mktemp -d /tmp/zklock-consume.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
cmake --install "$build" --prefix "$tmp/prefix" >/dev/null
cmake -S "$src" -B "$tmp/build" -G Ninja -DCMAKE_PREFIX_PATH="$tmp/prefix" -DCMAKE_BUILD_TYPE=Release >/dev/null
ninja -C "$tmp/build" >/dev/null
"$tmp/build/consumer"
