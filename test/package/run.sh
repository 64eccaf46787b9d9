#!/usr/bin/env bash
# Installs the .deb packages of DEBS_DIR on this machine with dpkg, uses them as a user would,
# then removes them and checks that nothing of theirs is left. Needs root; refuses to run if
# any of them is installed already (it would remove the user's own).   run.sh DEBS_DIR SOURCE_DIR
#   - zklock --version from the PATH, and zklock(1) in the man path
#   - a program built against /usr with find_package(zklock) (libzklock.so.0) and with
#     pkg-config (shared, then static), run against ZooKeeper
#   - zklock run from the PATH, holding a lock while a command runs
# ZooKeeper: $ZK_CONNECT, else a throwaway server started with scripts/zk.sh.
set -euo pipefail
debs=$1; root=$2
pkgs=(libzklock0 libzklock-dev zklock)
fail() { echo "package test: $*" >&2; exit 1; }
# out_has PATTERN CMD...: whether CMD's output matches the grep pattern. The output is read whole
# first: "CMD | grep -q" under pipefail fails when grep exits at its match and CMD, still writing,
# dies of SIGPIPE (it did, in CI, on objdump -p).
out_has() { local pat=$1 out; shift; out=$("$@" 2>/dev/null) || true; grep -qE -- "$pat" <<<"$out"; }
[ "$(id -u)" -eq 0 ] || fail "needs root (dpkg -i)"
for p in "${pkgs[@]}"; do
  if out_has "ok installed" dpkg-query -W -f='${Status}' "$p"; then
    fail "$p is installed already: remove it first (dpkg -r ${pkgs[*]})"
  fi
done
files=()
for p in "${pkgs[@]}"; do
  found=("$debs/${p}_"*.deb)
  f=${found[0]}
  [ -e "$f" ] || fail "no ${p}_*.deb in $debs"
  files+=("$f")
done
tmp=$(mktemp -d /tmp/zklock-package.XXXXXX)
zkdir=""
installed=0
cleanup() {
  [ $installed = 1 ] && dpkg --purge "${pkgs[@]}" >/dev/null 2>&1 || true
  [ -n "$zkdir" ] && "$root/scripts/zk.sh" stop "$zkdir" >/dev/null 2>&1 || true
  rm -rf "$tmp"
}
trap cleanup EXIT

# the packages' metadata: names, dependencies on Debian's package names, sections
for f in "${files[@]}"; do dpkg-deb --field "$f" Package Version Depends Section | sed 's/^/  /'; echo; done
out_has "libzookeeper-st2" dpkg-deb --field "${files[0]}" Depends || fail "libzklock0 does not depend on libzookeeper-st2"
out_has "libboost1.81-dev" dpkg-deb --field "${files[1]}" Depends || fail "libzklock-dev does not depend on libboost1.81-dev"
out_has "libzklock0" dpkg-deb --field "${files[2]}" Depends || fail "zklock does not depend on libzklock0"

installed=1
dpkg -i "${files[@]}" >/dev/null || fail "dpkg -i failed"
# what they installed (to check its removal)
dpkg -L "${pkgs[@]}" | sort -u > "$tmp/files"
grep -q "/libzklock.so.0$" "$tmp/files" || fail "no libzklock.so.0 installed"
so=$(readlink -f "$(grep '/libzklock.so.0$' "$tmp/files")")
out_has "SONAME +libzklock\.so\.0" objdump -p "$so" || fail "libzklock.so has no SONAME libzklock.so.0"
# only the public API is exported: no implementation class (session_impl, tls_relay...) in it
n=$(nm -D --defined-only -C "$so" | grep -c "zklock::" || true)
leaks=$(nm -D --defined-only -C "$so" | grep -E "session_impl::|tls_relay|acquire_op|handoff_queue" || true)
[ -z "$leaks" ] || { echo "$leaks" | head -5; fail "libzklock.so exports implementation symbols"; }
echo "libzklock.so.0: SONAME set, $n zklock symbols exported, no implementation class among them"
out_has "stripped" file -L "$(command -v zklock)" && ! out_has "not stripped" file -L "$(command -v zklock)" \
  || fail "the installed zklock is not stripped"
echo "zklock: $(du -h "$(command -v zklock)" | cut -f1) stripped"

v=$(zklock --version)
want=$(sed -n 's/^#define ZKLOCK_VERSION_\(MAJOR\|MINOR\|PATCH\) \([0-9]*\).*/\2/p' "$root/include/zklock/version.hpp" | paste -sd.)
[ "$v" = "zklock $want" ] || fail "zklock --version printed '$v', not 'zklock $want'"
echo "$v"
man_page=$(grep -m1 "/man1/zklock.1" "$tmp/files" || true)
[ -n "$man_page" ] || fail "no zklock(1) man page"
out_has "^\.TH ZKLOCK 1" zcat -f "$man_page" || fail "$man_page is not a man page"
out_has "session\\\\-timeout" zcat -f "$man_page" || fail "zklock(1) does not describe zklock run's options"

if [ -z "${ZK_CONNECT:-}" ]; then
  out=$("$root/scripts/zk.sh" start)
  zkdir=$(echo "$out" | sed -n 's/^ZK_DIR=//p')
  export ZK_CONNECT=$(echo "$out" | sed -n 's/^ZK_CONNECT=//p')
fi
# a consumer of the installed packages: CMake (find_package from /usr) ...
cmake -S "$root/test/consume" -B "$tmp/cmake" -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
ninja -C "$tmp/cmake" >/dev/null
out_has "libzklock\.so\.0 => (/usr)?/lib/" ldd "$tmp/cmake/consumer" || fail "the CMake consumer does not use the installed libzklock.so.0"
"$tmp/cmake/consumer"
# ... and pkg-config
g++ -std=c++20 $(pkg-config --cflags zklock) "$root/test/consume/main.cpp" -o "$tmp/pc" $(pkg-config --libs zklock)
"$tmp/pc"
g++ -std=c++20 $(pkg-config --cflags zklock) "$root/test/consume/main.cpp" -o "$tmp/pc-static" \
  -Wl,-Bstatic -lzklock -Wl,-Bdynamic $(pkg-config --libs --static zklock | sed 's/-lzklock\b//')
out_has libzklock ldd "$tmp/pc-static" && fail "the static pkg-config consumer links libzklock.so"
"$tmp/pc-static"
# zklock run, from the PATH
path=/zklock-test/package-$$
out=$(zklock run "$path" -- sh -c 'echo "token $ZKLOCK_FENCING_TOKEN"')
grep -q "^token [0-9]" <<<"$out" || fail "zklock run did not run its command: $out"
left=$(zklock list --json "$path")
[ "$left" = "[]" ] || fail "zklock run left a lock node: $left"
echo "zklock run: $out"

# removal leaves nothing of theirs behind
dpkg --purge "${pkgs[@]}" >/dev/null || fail "dpkg --purge failed"
installed=0
remaining=()
while read -r f; do
  [ -e "$f" ] || [ -L "$f" ] || continue
  if [ -d "$f" ]; then
    case "$(basename "$f")" in *zklock*) remaining+=("$f");; esac # (the others are shared: /usr, /usr/lib...)
  else
    remaining+=("$f")
  fi
done < "$tmp/files"
[ ${#remaining[@]} -eq 0 ] || fail "left behind after removal: ${remaining[*]}"
command -v zklock >/dev/null && fail "zklock is still on the PATH after removal"
echo "package test: installed, used and removed: OK"
