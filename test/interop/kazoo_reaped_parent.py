# Why run_interop.sh creates a kazoo-shared lock path as a persistent node, checked on a real
# server: zklock (like Curator) creates a lock's parent as a CONTAINER node, which the server
# deletes once it has had children and is empty again. kazoo's Lock ensures its path once per
# Lock object and never again, so its next acquire fails with NoNodeError after that. A path
# created persistently first (zklock::async_create_node) is never reaped, and kazoo keeps working.
#   python3 kazoo_reaped_parent.py CONNECT CONTENDER WORKDIR
#   CONTENDER: zklock_interop_contender. Needs a server whose container reaper runs within a few
#   seconds (scripts/zk.sh sets znode.container.checkIntervalMs=1000).
import os, subprocess, sys, time
from kazoo.client import KazooClient
from kazoo.exceptions import NoNodeError

connect, contender, work = sys.argv[1:4]
zk = KazooClient(hosts=connect, timeout=10.0)
zk.start(timeout=30)
failures = 0


def wait_for(what, seconds):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if what():
            return True
        time.sleep(0.05)
    return False


for persistent in (False, True):
    what = "persistent path" if persistent else "container made by zklock"
    path = f"/zklock-test/interop-reaped-{'p' if persistent else 'c'}-{os.getpid()}"
    if persistent:
        subprocess.run([contender, "--create-path", connect, path], check=True)
    # A zklock hold of 1.5 s (it creates the path as a container if missing); kazoo's first acquire
    # comes while it holds, so kazoo finds the path as zklock left it: an empty path could be
    # reaped before kazoo's first acquire, which would then make it persistent itself.
    holder = subprocess.Popen([contender, connect, path, "1", "1500", f"{work}/held", f"{work}/reaped.log", "1"],
                              stdout=subprocess.DEVNULL)
    if not wait_for(lambda: zk.exists(path) is not None and zk.get_children(path), 10.0):
        print(f"{what}: zklock's hold never appeared")
        sys.exit(1)
    lock = zk.Lock(path, "kazoo", extra_lock_patterns=["-lock-"])
    lock.acquire()  # queued behind zklock's hold; the path is never empty until this release
    lock.release()
    if holder.wait(timeout=30) != 0:
        print(f"{what}: the zklock contender failed")
        sys.exit(1)
    # the reaper runs every second on the suite's servers
    reaped = wait_for(lambda: zk.exists(path) is None, 3.0 if persistent else 10.0)
    try:
        lock.acquire()
        lock.release()
        outcome = "acquired"
    except NoNodeError:
        outcome = "NoNodeError"
    # (a client cannot see whether a node is a container: its stat shows ephemeralOwner 0; that
    # the server reaps it is the evidence)
    print(f"{what}: reaped={reaped}, kazoo's next acquire: {outcome}")
    expected = (False, "acquired") if persistent else (True, "NoNodeError")
    if (reaped, outcome) != expected:
        print(f"  expected reaped={expected[0]} and {expected[1]}")
        failures += 1
    if persistent:
        subprocess.run([contender, "--remove-path", connect, path], check=True)
zk.stop()
sys.exit(1 if failures else 0)
