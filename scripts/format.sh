#!/usr/bin/env bash
# Formats the C++ sources with clang-format (.clang-format; examples/ excluded, see
# examples/.clang-format).
#   scripts/format.sh            formats them in place
#   scripts/format.sh --check    changes nothing; fails, naming the files, if one is not formatted
set -euo pipefail
cd "$(dirname "$0")/.."
check=0
case "${1:-}" in
  --check) check=1 ;;
  "") ;;
  -h|--help) sed -n '2,5p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
  *) echo "format.sh: unknown option '$1' (see --help)" >&2; exit 2 ;;
esac
cf=$(command -v clang-format || command -v clang-format-14 || true)
[ -n "$cf" ] || { echo "format.sh: clang-format not found (Debian: clang-format)" >&2; exit 1; }
mapfile -t files < <(find src include test bench -type f \( -name '*.cpp' -o -name '*.hpp' \) | sort)
if [ $check = 1 ]; then
  bad=()
  for f in "${files[@]}"; do
    "$cf" --dry-run -Werror "$f" >/dev/null 2>&1 || bad+=("$f")
  done
  if [ ${#bad[@]} -gt 0 ]; then
    printf 'format.sh: not formatted (run scripts/format.sh): %s\n' "${bad[@]}" >&2
    exit 1
  fi
  echo "format: ${#files[@]} files formatted"
else
  "$cf" -i "${files[@]}"
fi
