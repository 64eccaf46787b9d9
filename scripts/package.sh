#!/usr/bin/env bash
# The .deb packages, from the release build (scripts/build.sh: libzklock.so, prefix /usr):
#   libzklock0     the shared library (SONAME libzklock.so.0)
#   libzklock-dev  headers, libzklock.a, the .so link, find_package(zklock) and zklock.pc
#   zklock         the zklock program and zklock(1)
# and a -dbgsym package (.ddeb) for each of the first and last (the binaries are stripped).
#   scripts/package.sh          build them into build/packages/ and print their paths
#   scripts/package.sh --test   then install them with dpkg, use them as a user would and remove
#                               them again (test/package/run.sh; needs root)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
test=0
case "${1:-}" in
  --test) test=1;;
  "") ;;
  *) echo "usage: $0 [--test]" >&2; exit 2;;
esac
"$root/scripts/setup.sh"
build=$("$root/scripts/build.sh")
out="$build/packages"
rm -rf "$out"
# (cpack installs the components into a staging tree, strips them and splits the debug info)
(cd "$build" && ZKLOCK_STRIP_STATIC=1 cpack -G DEB -B "$out" >/dev/null) || { echo "package: cpack failed" >&2; exit 1; }
rm -rf "$out/_CPack_Packages"
ls "$out"/*.deb "$out"/*.ddeb
if [ $test = 1 ]; then
  "$root/test/package/run.sh" "$out" "$root"
fi
