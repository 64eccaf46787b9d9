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


def reaped_within(path, seconds):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if zk.exists(path) is None:
            return True
        time.sleep(0.1)
    return False


for persistent in (False, True):
    what = "persistent path" if persistent else "container made by zklock"
    path = f"/zklock-test/interop-reaped-{'p' if persistent else 'c'}-{os.getpid()}"
    if persistent:
        subprocess.run([contender, "--create-path", connect, path], check=True)
    # one zklock hold: creates the missing parent, as a container
    subprocess.run([contender, connect, path, "1", "1", f"{work}/held", f"{work}/reaped.log", "1"],
                   check=True, stdout=subprocess.DEVNULL)
    lock = zk.Lock(path, "kazoo", extra_lock_patterns=["-lock-"])
    lock.acquire()
    lock.release()
    reaped = reaped_within(path, 3.0 if persistent else 10.0)  # the reaper runs every second
    try:
        lock.acquire()
        lock.release()
        outcome = "acquired"
    except NoNodeError:
        outcome = "NoNodeError"
    print(f"{what}: reaped={reaped}, kazoo's next acquire: {outcome}")
    expected = ("acquired", False) if persistent else ("NoNodeError", True)
    if (outcome, reaped) != expected:
        print(f"  expected reaped={expected[1]} and {expected[0]}")
        failures += 1
    if persistent:
        subprocess.run([contender, "--remove-path", connect, path], check=True)
zk.stop()
sys.exit(1 if failures else 0)
