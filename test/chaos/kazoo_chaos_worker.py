#!/usr/bin/python3
"""A chaos-soak peer (scripts/chaos.sh --peers kazoo): kazoo's Lock on the same paths as the zklock
workers, logging every hold in their format (see chaos_worker.cpp):

    G <path> <start_ns> <fencing_token> <session_id_hex>
    E <path> <end_ns> released | E <path> <end_ns> lost suspended

The fencing token is the lock node's czxid x 4096, the way zklock makes its own, so the checker
can order grants across implementations. The loss signal is kazoo's own advice: the connection
state leaving CONNECTED (SUSPENDED, or LOST on expiry). SIGTERM: finish the hold, release, exit 0.

    kazoo_chaos_worker.py CONNECT PATHS LOG SEED SESSION_TIMEOUT_MS HOLD_MIN_MS HOLD_MAX_MS
"""
import random
import signal
import sys
import threading
import time

from kazoo.client import KazooClient
from kazoo.protocol.states import KazooState

connect, paths, log_path, seed, timeout_ms, hold_min, hold_max = sys.argv[1:8]
paths, timeout_ms, hold_min, hold_max = int(paths), int(timeout_ms), int(hold_min), int(hold_max)
rng = random.Random(int(seed))
stop = threading.Event()
signal.signal(signal.SIGTERM, lambda *_: stop.set())
signal.signal(signal.SIGINT, lambda *_: stop.set())

lost = threading.Event()
lost_at = [0]


def on_state(state):
    if state != KazooState.CONNECTED and not lost.is_set():
        lost_at[0] = time.time_ns()
        lost.set()


zk = KazooClient(hosts=connect, timeout=timeout_ms / 1000.0)
zk.start(timeout=60)
zk.add_listener(on_state)
log = open(log_path, "w", buffering=1)
holds = failed = 0
while not stop.is_set():
    path = f"/zklock-chaos/lock{rng.randrange(paths)}"
    lock = zk.Lock(path, "kazoo-chaos", extra_lock_patterns=["-lock-"])
    try:
        lost.clear()
        if zk.state != KazooState.CONNECTED or not lock.acquire(timeout=10):
            raise TimeoutError()
        if lost.is_set():  # lost between the grant and now: not a hold
            raise ConnectionError()
        start = time.time_ns()
        czxid = zk.exists(f"{path}/{lock.node}").czxid
        session = zk.client_id[0]
    except Exception:
        failed += 1
        try:
            lock.release()
        except Exception:
            pass
        time.sleep(0.05)
        continue
    log.write(f"G {path} {start} {czxid * 4096} {session:x}\n")
    # hold, unless the loss signal comes first
    if lost.wait(rng.randint(hold_min, hold_max) / 1000.0):
        log.write(f"E {path} {lost_at[0]} lost suspended\n")
    else:
        log.write(f"E {path} {time.time_ns()} released\n")
    holds += 1
    for _ in range(100):  # the delete needs a connection; a lost session's node is gone anyway
        try:
            lock.release()
            break
        except Exception:
            if zk.state == KazooState.LOST or stop.is_set() and zk.state != KazooState.CONNECTED:
                break
            time.sleep(0.1)
zk.stop()
zk.close()
print(f"kazoo worker: {holds} holds, {failed} failed acquires", file=sys.stderr)
