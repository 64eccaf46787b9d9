#!/usr/bin/env bash
# Installs what zklock needs to build, test and benchmark, with apt-get; does nothing when all is present.
#   scripts/setup.sh            build + test dependencies (the suite's interop tests need Curator and kazoo)
#   scripts/setup.sh --bench    also what the benchmarks use (gnuplot)
set -euo pipefail
want=(cmake ninja-build g++ libboost1.81-dev libzookeeper-mt-dev libzookeeper-st2 zookeeper default-jre-headless libgtest-dev
      python3 default-jdk-headless libcurator-recipes-java libcurator-framework-java python3-kazoo libcli11-dev
      openssl libssl-dev pkg-config dpkg-dev file doxygen clang-format python3-prometheus-client)
if [ "${1:-}" = "--bench" ]; then
  want+=(gnuplot-nox)
fi
missing=()
for p in "${want[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
# default-jre-headless may be satisfied by another JRE already on the machine
if command -v java >/dev/null 2>&1; then
  tmp=(); for p in "${missing[@]}"; do [ "$p" = default-jre-headless ] || tmp+=("$p"); done; missing=("${tmp[@]+"${tmp[@]}"}")
fi
if command -v javac >/dev/null 2>&1; then
  tmp=(); for p in "${missing[@]+"${missing[@]}"}"; do [ "$p" = default-jdk-headless ] || tmp+=("$p"); done; missing=("${tmp[@]+"${tmp[@]}"}")
fi
[ ${#missing[@]} -eq 0 ] && exit 0
echo "setup: installing ${missing[*]}" >&2
SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO=sudo
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -q >/dev/null
$SUDO apt-get install -y -q --no-install-recommends "${missing[@]}" >/dev/null
# Debian's zookeeper package may start a system service on 2181; our tests use their own servers.
if command -v systemctl >/dev/null 2>&1; then $SUDO systemctl disable --now zookeeper >/dev/null 2>&1 || true; fi
