# Interop test peer: kazoo's Lock on the same path as zklock (Curator-style nodes are seen
# thanks to extra_lock_patterns). Same protocol as CuratorContender.java.
#   python3 kazoo_contender.py CONNECT PATH ITERATIONS HOLD_MS MARKER LOG
import os, sys, time
from kazoo.client import KazooClient

connect, path, iterations, hold_ms, marker, logfile = sys.argv[1:7]
overlaps = 0
zk = KazooClient(hosts=connect, timeout=10.0)
zk.start(timeout=30)
lock = zk.Lock(path, "kazoo", extra_lock_patterns=["-lock-"])
with open(logfile, "w") as log:
    for _ in range(int(iterations)):
        lock.acquire()
        start = time.time_ns() // 1000
        try:
            fd = os.open(marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
            os.close(fd)
        except FileExistsError:
            overlaps += 1
        time.sleep(int(hold_ms) / 1000.0)
        try:
            os.unlink(marker)
        except FileNotFoundError:
            overlaps += 1
        end = time.time_ns() // 1000
        log.write(f"kazoo {start} {end}\n")
        lock.release()
zk.stop()
print("kazoo overlaps", overlaps)
sys.exit(0 if overlaps == 0 else 3)
