#!/usr/bin/env bash
# Installs the built zklock into a temp prefix, then builds and runs test/consume against it:
# with find_package(zklock): the shared library when the build made one, then the static one.
# (pkg-config: test/package/run.sh, on the installed .deb packages.)   run.sh BUILD_DIR SOURCE_DIR
set -euo pipefail
build=$1; src=$2
tmp=$(mktemp -d /tmp/zklock-consume.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
cmake --install "$build" --prefix "$tmp/prefix" >/dev/null
# the installed program starts from a prefix that is not the system's (its RUNPATH names its
# prefix's library directory: it failed with "libzklock.so.0: cannot open shared object file")
if [ -e "$tmp/prefix/bin/zklock" ]; then
  v=$(env -u LD_LIBRARY_PATH "$tmp/prefix/bin/zklock" --version) || {
    echo "the installed zklock does not start:"; ldd "$tmp/prefix/bin/zklock"; exit 1; }
  grep -q "$tmp/prefix/.*libzklock.so.0" <<<"$(ldd "$tmp/prefix/bin/zklock")" || {
    echo "the installed zklock does not use its prefix's libzklock.so.0:"; ldd "$tmp/prefix/bin/zklock"; exit 1; }
  echo "installed zklock starts: $v"
fi
cmake -S "$src" -B "$tmp/build" -G Ninja -DCMAKE_PREFIX_PATH="$tmp/prefix" -DCMAKE_BUILD_TYPE=Release >/dev/null
ninja -C "$tmp/build" >/dev/null
"$tmp/build/consumer"
# (no "CMD | grep -q" or "| head" here: under pipefail, CMD dies of SIGPIPE when the reader exits early)
if [ -n "$(find "$tmp/prefix" -name 'libzklock.so*')" ]; then
  # it runs against the installed libzklock.so.0 (not the build tree's)
  grep -q "$tmp/prefix/.*libzklock.so.0" <<<"$(ldd "$tmp/build/consumer")" || {
    echo "consumer does not use the installed libzklock.so.0:"; ldd "$tmp/build/consumer"; exit 1; }
  echo "find_package: shared library"
  cmake -S "$src" -B "$tmp/build-static" -G Ninja -DCMAKE_PREFIX_PATH="$tmp/prefix" -DCMAKE_BUILD_TYPE=Release \
    -DZKLOCK_USE_STATIC_LIBS=ON >/dev/null
  ninja -C "$tmp/build-static" >/dev/null
  if grep -q libzklock <<<"$(ldd "$tmp/build-static/consumer")"; then echo "static consumer links libzklock.so"; exit 1; fi
  "$tmp/build-static/consumer"
  echo "find_package: static library"
  # pkg-config's shared line, with the run-time path docs/tutorial.md gives for a prefix that
  # is not the system's (the linker does not record -L directories)
  pc="$tmp/prefix/$(cd "$tmp/prefix" && dirname "$(find . -name zklock.pc | head -n1)")"
  libdir=$(PKG_CONFIG_PATH=$pc pkg-config --variable=libdir zklock)
  # shellcheck disable=SC2046
  c++ -std=c++20 -O1 "$src/main.cpp" -o "$tmp/pc-consumer" $(PKG_CONFIG_PATH=$pc pkg-config --cflags --libs zklock) \
    -Wl,-rpath,"$libdir"
  env -u LD_LIBRARY_PATH "$tmp/pc-consumer"
  echo "pkg-config: shared library, run from the prefix"
fi
