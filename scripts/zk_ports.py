#!/usr/bin/python3
"""Loopback ports for throwaway ZooKeeper servers, outside the kernel's ephemeral range.

    zk_ports.py pick N DIR     prints N free ports, one per line, reserved for the state dir DIR
    zk_ports.py release DIR    drops DIR's reservations

Why not bind(0): a ZooKeeper server binds its quorum port (the port followers connect to) only
when it becomes leader, so a port picked at start stays unbound until then. A port from the
ephemeral range can meanwhile be taken by any bind(0) on the machine (a test proxy, another
throwaway server) or be the local end of an outgoing connection. The server that wins the next
election then cannot bind it, steps down and wins again, and the ensemble serves nobody for as
long as the port is taken (reproduced: 18 s of a held port, no leader, then 5 s more of election
back-off). Ports below (or above) the ephemeral range are never handed out by the kernel, and
the reservations below keep two runs of this script from picking the same one.

A reservation is a file named after the port in the registry directory, holding the state dir
it belongs to; one whose state dir is gone is stale and taken over (so servers still running
from a dir that was deleted by hand lose their reservation, and a dir left behind by a run that
died keeps its ports until it is removed). The registry is locked while a pick runs. Environment (for tests): ZK_PORT_REGISTRY (default /tmp/zklock-ports),
ZK_PORT_RANGE=LO-HI (default: 10000 up to the ephemeral range, and above it).
"""
import fcntl
import os
import random
import socket
import sys

REGISTRY = os.environ.get("ZK_PORT_REGISTRY", "/tmp/zklock-ports")


def fail(msg):
    print("zk_ports.py: " + msg, file=sys.stderr)
    sys.exit(1)


def candidate_ranges():
    env = os.environ.get("ZK_PORT_RANGE")
    if env:
        lo, _, hi = env.partition("-")
        if not (lo.isdigit() and hi.isdigit() and 1 <= int(lo) <= int(hi) <= 65535):
            fail(f"ZK_PORT_RANGE={env!r} is not LO-HI with 1 <= LO <= HI <= 65535")
        return [(int(lo), int(hi))]
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            eph_lo, eph_hi = (int(x) for x in f.read().split())
    except OSError:
        eph_lo, eph_hi = 32768, 60999  # Linux's default
    ranges = [(10000, eph_lo - 1), (eph_hi + 1, 65535)]
    return [(lo, hi) for lo, hi in ranges if lo <= hi]


def bindable(port):
    """True if nothing is bound to 127.0.0.1:port (a listener, a connection's local end)."""
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        s.bind(("127.0.0.1", port))  # no SO_REUSEADDR: a port in TIME_WAIT counts as taken too
        return True
    except OSError:
        return False
    finally:
        s.close()


def owner(port):
    try:
        with open(os.path.join(REGISTRY, str(port))) as f:
            return f.read().strip()
    except OSError:
        return None


def pick(n, state_dir):
    state_dir = os.path.abspath(state_dir)
    ranges = candidate_ranges()
    total = sum(hi - lo + 1 for lo, hi in ranges)
    if n > total:
        fail(f"{n} ports asked, the candidate ranges {ranges} hold {total}")
    # One registry for every user of the machine (ports are shared): world-writable and sticky,
    # like /tmp itself, and a lock file anyone may lock.
    try:
        os.makedirs(REGISTRY, exist_ok=True)
        if os.stat(REGISTRY).st_uid == os.getuid():
            os.chmod(REGISTRY, 0o1777)
        lock_path = os.path.join(REGISTRY, ".lock")
        fd = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o666)
        if os.fstat(fd).st_uid == os.getuid():
            os.fchmod(fd, 0o666)
    except OSError as e:
        fail(f"cannot use the port registry {REGISTRY}: {e}")
    with os.fdopen(fd, "r+") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        # every candidate, in random order: a full range ends the search instead of looping
        order = [p for lo, hi in ranges for p in range(lo, hi + 1)]
        random.shuffle(order)
        got = []
        for port in order:
            if len(got) == n:
                break
            o = owner(port)
            if o is not None and os.path.isdir(o):
                continue  # reserved by a live state dir
            if not bindable(port):
                continue
            entry = os.path.join(REGISTRY, str(port))
            try:
                if o is not None:
                    os.unlink(entry)  # stale: its state dir is gone (a run killed before its stop)
                with open(entry, "w") as f:
                    f.write(state_dir + "\n")
            except OSError:
                continue  # another user's stale entry in the sticky dir: leave that port alone
            got.append(port)
        if len(got) < n:
            release(state_dir, got)
            fail(f"only {len(got)} of {n} free ports in {ranges}")
    for port in got:
        print(port)


def release(state_dir, only=None):
    state_dir = os.path.abspath(state_dir)
    if not os.path.isdir(REGISTRY):
        return
    for name in os.listdir(REGISTRY):
        if not name.isdigit() or (only is not None and int(name) not in only):
            continue
        if owner(int(name)) == state_dir:
            try:
                os.unlink(os.path.join(REGISTRY, name))
            except OSError:
                pass


def main(argv):
    if len(argv) == 3 and argv[0] == "pick" and argv[1].isdigit():
        pick(int(argv[1]), argv[2])
    elif len(argv) == 2 and argv[0] == "release":
        release(argv[1])
    else:
        fail("usage: zk_ports.py pick N DIR | release DIR")


if __name__ == "__main__":
    main(sys.argv[1:])
