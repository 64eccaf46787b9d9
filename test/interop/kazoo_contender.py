# Interop test peer: kazoo's Lock on the same path as zklock (Curator-style nodes are seen
# thanks to extra_lock_patterns). Same protocol as CuratorContender.java.
#   python3 kazoo_contender.py CONNECT PATH ITERATIONS HOLD_MS MARKER LOG [rw]   (TLS: KAZOO_TLS_DIR)
# With rw: kazoo's WriteLock only. kazoo 2.8's ReadLock (Debian's version) has bug #649: a reader
# counts writers queued *after* it as predecessors, so it deadlocks against any later writer, with
# zklock or with kazoo itself. zklock's readers are exercised against kazoo's writers instead.
import os, sys, time
from kazoo.client import KazooClient

connect, path, iterations, hold_ms, marker, logfile = sys.argv[1:7]
rw = len(sys.argv) > 7 and sys.argv[7] == "rw"
overlaps = 0
# KAZOO_TLS_DIR (zk.sh start --tls's PKI): TLS with its CA and client certificate (kazoo's use_ssl)
tls = os.environ.get("KAZOO_TLS_DIR", "")
if tls:
    zk = KazooClient(hosts=connect, timeout=10.0, use_ssl=True, ca=tls + "/ca.pem",
                     certfile=tls + "/client.pem", keyfile=tls + "/client.key")
else:
    zk = KazooClient(hosts=connect, timeout=10.0)
zk.start(timeout=30)
mutex = zk.Lock(path, "kazoo", extra_lock_patterns=["-lock-"])
with open(logfile, "w") as log:
    for i in range(int(iterations)):
        writer = True  # see kazoo #649 above
        lock = (zk.WriteLock(path, "kazoo") if writer else zk.ReadLock(path, "kazoo")) if rw else mutex
        lock.acquire()
        start = time.time_ns() // 1000
        if writer:
            try:
                fd = os.open(marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
                os.close(fd)
            except FileExistsError:
                overlaps += 1
        elif os.path.exists(marker):
            overlaps += 1
        time.sleep(int(hold_ms) / 1000.0)
        if writer:
            try:
                os.unlink(marker)
            except FileNotFoundError:
                overlaps += 1
        elif os.path.exists(marker):
            overlaps += 1
        end = time.time_ns() // 1000
        log.write(f"kazoo {'w' if writer else 'r'} {start} {end}\n")
        lock.release()
zk.stop()
print("kazoo overlaps", overlaps)
sys.exit(0 if overlaps == 0 else 3)
