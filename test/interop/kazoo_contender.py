# Interop test peer: kazoo's Lock on the same path as zklock (Curator-style nodes are seen
# thanks to extra_lock_patterns). Same protocol as CuratorContender.java.
#   python3 kazoo_contender.py CONNECT PATH ITERATIONS HOLD_MS MARKER LOG [rw|election]   (TLS: KAZOO_TLS_DIR)
# With election: kazoo's Election (identifier "kazoo-election", a kazoo Lock without
# extra_lock_patterns underneath): ITERATIONS times election.run() with one hold as leader.
# With INTEROP_GATE set (run_interop.sh): once connected, creates $INTEROP_GATE.ready.<pid> and
# waits for $INTEROP_GATE.go, so that every peer contends from the first hold.
# With rw: kazoo's WriteLock only. kazoo 2.8's ReadLock (Debian's version) has bug #649: a reader
# counts writers queued *after* it as predecessors, so it deadlocks against any later writer, with
# zklock or with kazoo itself. zklock's readers are exercised against kazoo's writers instead.
import os, sys, time
from kazoo.client import KazooClient

connect, path, iterations, hold_ms, marker, logfile = sys.argv[1:7]
mode = sys.argv[7] if len(sys.argv) > 7 else "mutex"
rw = mode == "rw"
overlaps = 0
# KAZOO_TLS_DIR (zk.sh start --tls's PKI): TLS with its CA and client certificate (kazoo's use_ssl)
tls = os.environ.get("KAZOO_TLS_DIR", "")
if tls:
    zk = KazooClient(hosts=connect, timeout=10.0, use_ssl=True, ca=tls + "/ca.pem",
                     certfile=tls + "/client.pem", keyfile=tls + "/client.key")
else:
    zk = KazooClient(hosts=connect, timeout=10.0)
zk.start(timeout=30)
gate = os.environ.get("INTEROP_GATE", "")
if gate:
    open(f"{gate}.ready.{os.getpid()}", "x").close()
    while not os.path.exists(gate + ".go"):
        time.sleep(0.005)


def hold(log, who, writer):
    """One hold: a writer owns the marker file exclusively, a reader checks no writer is in."""
    global overlaps
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
    log.write(f"{who} {'w' if writer else 'r'} {start} {end}\n")
    log.flush()


with open(logfile, "w") as log:
    if mode == "election":
        election = zk.Election(path, "kazoo-election")
        for i in range(int(iterations)):
            election.run(hold, log, "kazoo-election", True)
    else:
        mutex = zk.Lock(path, "kazoo", extra_lock_patterns=["-lock-"])
        for i in range(int(iterations)):
            writer = True  # see kazoo #649 above
            lock = (zk.WriteLock(path, "kazoo") if writer else zk.ReadLock(path, "kazoo")) if rw else mutex
            lock.acquire()
            hold(log, "kazoo", writer)
            lock.release()
zk.stop()
print("kazoo overlaps", overlaps)
sys.exit(0 if overlaps == 0 else 3)
