#!/usr/bin/python3
"""The layers of src/ include only what their README.md says they may call (src/<layer>/README.md,
"May call"), and the pure protocol layer makes no system call. The crossings that exist today and
are to go (issue 62: a platform seam under the session) are listed below by file: a new crossing
fails, and so does a listed one that is gone (the list only shrinks).
Usage: check_layers.py REPO_ROOT"""
import glob
import os
import re
import sys

root = sys.argv[1]

# layer -> the layers of src/ it may include (its own always); from each README's "May call"
ALLOWED = {
    "common": set(),
    "protocol": set(),
    "session": {"bridge", "protocol", "common"},
    "bridge": {"common", "session"},
    "recipes": {"session", "protocol", "common"},
    "cli": set(),
}
# bridge/ may reach the session only through the seam it implements (its README): the link, the
# platform, and the lease's bookkeeping that the link keeps
BRIDGE_SESSION_HEADERS = {"session/zk_link.hpp", "session/lease.hpp", "session/platform.hpp"}

# today's crossings against the rules above, to be removed (issue 62); each one is a
# (file, included header) pair
KNOWN = {
    ("src/bridge/zk_handle.cpp", "protocol/protocol.hpp"),
}
# the pure layer's system calls today (issue 62: they go behind the platform seam)
KNOWN_CALLS = set()
# Above the platform seam (session/platform.hpp) time, timers, randomness and the process's
# identity come from the session's platform, never from the machine: a simulation or a moved
# clock must reach every wait.
SEAM_LAYERS = ("session", "recipes")
SEAM_FORBIDDEN = ["steady_clock::now", "steady_timer", "system_clock::now", "clock_gettime", "boot_timer",
                  "random_device", "gethostname", "getpid"]
KNOWN_SEAM = set()
PURE_FORBIDDEN = ["gethostname", "getpid", "random_device", "clock_gettime", "boost/asio", "::now()", "getenv"]

include_re = re.compile(r'^\s*#\s*include\s+"([a-z_]+)/([^"]+)"', re.M)
problems, seen, seen_calls, seen_seam = [], set(), set(), set()
for layer, allowed in ALLOWED.items():
    for path in sorted(glob.glob(os.path.join(root, "src", layer, "*.[ch]pp"))):
        rel = os.path.relpath(path, root)
        text = open(path).read()
        for target, header in include_re.findall(text):
            if target == layer or target not in ALLOWED:
                continue
            inc = target + "/" + header
            ok = target in allowed
            if layer == "bridge" and target == "session":
                ok = inc in BRIDGE_SESSION_HEADERS
            if ok:
                continue
            if (rel, inc) in KNOWN:
                seen.add((rel, inc))
                continue
            problems.append("%s includes %s: src/%s/README.md does not let it call %s/" % (rel, inc, layer, target))
        if layer in SEAM_LAYERS and rel != "src/session/platform.hpp":
            code = re.sub(r"//[^\n]*", "", text)
            for word in SEAM_FORBIDDEN:
                if word in code:
                    if (rel, word) in KNOWN_SEAM:
                        seen_seam.add((rel, word))
                    else:
                        problems.append("%s uses %s: above the platform seam, time, timers and randomness come "
                                        "from the session's platform (src/session/platform.hpp)" % (rel, word))
        if layer == "protocol":
            code = re.sub(r"//[^\n]*", "", text)
            for word in PURE_FORBIDDEN:
                if word in code:
                    if (rel, word) in KNOWN_CALLS:
                        seen_calls.add((rel, word))
                    else:
                        problems.append("%s uses %s: the protocol layer is pure (no I/O, no clock)" % (rel, word))
for gone in sorted(KNOWN - seen):
    problems.append("%s no longer includes %s: remove it from KNOWN in %s" % (gone[0], gone[1], __file__))
for gone in sorted(KNOWN_CALLS - seen_calls):
    problems.append("%s no longer uses %s: remove it from KNOWN_CALLS in %s" % (gone[0], gone[1], __file__))
for gone in sorted(KNOWN_SEAM - seen_seam):
    problems.append("%s no longer uses %s: remove it from KNOWN_SEAM in %s" % (gone[0], gone[1], __file__))
for p in problems:
    print(p)
if problems:
    sys.exit(1)
print("layers: every include of src/ follows its layer's README (%d known crossings, %d known calls left)" %
      (len(KNOWN), len(KNOWN_CALLS)))
