#!/usr/bin/python3
"""Checks the vcpkg overlay port (ports/zklock/) against the tree, since vcpkg itself cannot be
installed here (neither Debian nor npm has it, and its registry is out of reach).

  check_port.py            the port's files: its manifest (version, dependencies) and
                           portfile (the options it passes exist, the paths it fixes up are the
                           ones the tree installs)
  check_port.py --build    also builds and installs the tree as the portfile would (static, the
                           options above, LIBDIR=lib) into a temp prefix and checks what vcpkg's
                           fix-up steps expect to find there (a few minutes)
"""
import json
import os
import re
import subprocess
import sys
import tempfile

root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
port = os.path.join(root, "ports", "zklock")
errors = []


def check(cond, what):
    if not cond:
        errors.append(what)


def read(*p):
    with open(os.path.join(root, *p)) as f:
        return f.read()


manifest = json.loads(read("ports", "zklock", "vcpkg.json"))
portfile = read("ports", "zklock", "portfile.cmake")
cmakelists = read("CMakeLists.txt")
version_hpp = read("include", "zklock", "version.hpp")

# the version: the one of include/zklock/version.hpp
v = ".".join(re.search(r"^#define ZKLOCK_VERSION_%s (\d+)" % k, version_hpp, re.M).group(1)
             for k in ("MAJOR", "MINOR", "PATCH"))
check(manifest.get("name") == "zklock", "vcpkg.json: name is not zklock")
check(manifest.get("version") == v, "vcpkg.json: version %r, the tree's is %s" % (manifest.get("version"), v))

# dependencies: what CMakeLists.txt finds, in vcpkg's names
deps = {d if isinstance(d, str) else d["name"] for d in manifest.get("dependencies", [])}
finds = set(re.findall(r"^find_package\((\w+)", cmakelists, re.M))
needed = {"Boost": {"boost-asio", "boost-system"}, "OpenSSL": {"openssl"}}
for pkg, names in needed.items():
    check(pkg in finds, "CMakeLists.txt no longer finds %s: update this check" % pkg)
    for n in names:
        check(n in deps, "vcpkg.json: no dependency %s (CMakeLists.txt finds %s)" % (n, pkg))
check("ZooKeeper" in finds and "FindZooKeeper.cmake" in cmakelists,
      "the ZooKeeper C client is no longer found by FindZooKeeper.cmake, as portfile.cmake says")
for host in ("vcpkg-cmake", "vcpkg-cmake-config"):
    check(any(isinstance(d, dict) and d.get("name") == host and d.get("host") for d in manifest["dependencies"]),
          "vcpkg.json: %s is not a host dependency" % host)
cli = manifest.get("features", {}).get("cli", {})
check("cli11" in cli.get("dependencies", []), "vcpkg.json: the cli feature does not depend on cli11")
check("CLI11" in cmakelists, "CMakeLists.txt no longer finds CLI11: update the cli feature")

# every option the portfile passes or maps a feature to is one of the tree's
options = set(re.findall(r"^option\((\w+)", cmakelists, re.M))
passed = set(re.findall(r"-D(\w+)=", portfile))
passed |= set(re.findall(r"^\s+\w+ (ZKLOCK_\w+)\)?$", portfile, re.M))
check(passed, "portfile.cmake passes no option (parse error?)")
for o in sorted(passed):
    check(o in options, "portfile.cmake passes %s, which CMakeLists.txt does not define" % o)
for o in ("ZKLOCK_BUILD_TESTS", "ZKLOCK_BUILD_EXAMPLES", "ZKLOCK_BUILD_BENCH"):
    check(("-D%s=OFF" % o) in portfile, "portfile.cmake builds %s" % o)

# the paths it fixes up are where the tree installs
check("CONFIG_PATH lib/cmake/zklock" in portfile, "portfile.cmake: config fix-up path changed")
check("${CMAKE_INSTALL_LIBDIR}/cmake/zklock" in cmakelists, "CMakeLists.txt no longer installs to LIBDIR/cmake/zklock")
check("pkgconfig" in cmakelists and "vcpkg_fixup_pkgconfig" in portfile, "zklock.pc and its fix-up do not match")
check("TOOL_NAMES zklock" in portfile and "OUTPUT_NAME zklock" in cmakelists, "the tool's name does not match")

if "--build" in sys.argv and not errors:
    with tempfile.TemporaryDirectory() as tmp:
        opts = [o for o in re.findall(r"(-D\w+=\w+)", portfile)]
        cfg = ["cmake", "-S", root, "-B", tmp + "/b", "-G", "Ninja", "-DCMAKE_BUILD_TYPE=Release",
               "-DBUILD_SHARED_LIBS=OFF", "-DCMAKE_INSTALL_LIBDIR=lib", "-DZKLOCK_BUILD_CLI=ON",
               "-DCMAKE_INSTALL_PREFIX=" + tmp + "/p"] + opts
        subprocess.run(cfg, check=True, stdout=subprocess.DEVNULL)
        subprocess.run(["ninja", "-C", tmp + "/b", "install"], check=True, stdout=subprocess.DEVNULL)
        for f in ("lib/cmake/zklock/zklockConfig.cmake", "lib/cmake/zklock/zklock-static-targets.cmake",
                  "lib/cmake/zklock/FindZooKeeper.cmake", "lib/pkgconfig/zklock.pc", "lib/libzklock.a",
                  "include/zklock.hpp", "include/zklock/version.hpp", "bin/zklock"):
            check(os.path.exists(os.path.join(tmp, "p", f)), "the port's build did not install %s" % f)
        check(not os.path.exists(os.path.join(tmp, "p", "lib", "libzklock.so")), "a static triplet got a .so")

if errors:
    for e in errors:
        print("check_port: " + e, file=sys.stderr)
    sys.exit(1)
print("check_port: ports/zklock matches the tree (version %s)%s" % (v, ", built as the port would" if "--build" in sys.argv else ""))
