#!/usr/bin/env bash
# Builds the API reference from include/zklock with Doxygen, and fails on any warning
# (an undocumented public name, a broken doc command).
#   scripts/reference.sh              HTML in build/reference/html
#   scripts/reference.sh --out DIR    HTML in DIR/html
#   --self-test                       first checks that an undocumented function fails the build
set -euo pipefail
cd "$(dirname "$0")/.."
out=build/reference
self_test=0
while [ $# -gt 0 ]; do
  case "$1" in
    --out) out="$2"; shift 2 ;;
    --self-test) self_test=1; shift ;;
    -h|--help) sed -n '2,6p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "reference.sh: unknown option '$1' (see --help)" >&2; exit 2 ;;
  esac
done
command -v doxygen >/dev/null 2>&1 || scripts/setup.sh
out=$(mkdir -p "$out" && cd "$out" && pwd)

# run_doxygen SOURCE_ROOT OUT: 0 when the reference built with no warning; the warnings in OUT/warnings.log
run_doxygen() {
  local root=$1 dir=$2
  rm -f "$dir/warnings.log"
  ( cd "$root" && { cat docs/reference/Doxyfile; echo "OUTPUT_DIRECTORY = $dir"; echo "WARN_LOGFILE = $dir/warnings.log"; } \
      | doxygen - ) || return 1
  [ ! -s "$dir/warnings.log" ]
}

if [ $self_test = 1 ]; then
  tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
  mkdir -p "$tmp/src/docs" "$tmp/out"
  cp -r include "$tmp/src/"; cp -r docs/reference "$tmp/src/docs/"
  printf '\nnamespace zklock {\nvoid zklock_undocumented_probe();\n}\n' >> "$tmp/src/include/zklock/version.hpp"
  if run_doxygen "$tmp/src" "$tmp/out" >/dev/null 2>&1 || ! grep -q zklock_undocumented_probe "$tmp/out/warnings.log"; then
    echo "reference.sh: self-test failed: an undocumented function did not fail the reference" >&2; exit 1
  fi
  echo "reference: self-test: an undocumented function fails it"
fi

if ! run_doxygen "$PWD" "$out"; then
  cat "$out/warnings.log" >&2 || true
  echo "reference.sh: $(grep -c . "$out/warnings.log" 2>/dev/null || echo 0) warning(s): every public name must be documented" >&2
  exit 1
fi
echo "reference: $out/html/index.html"
