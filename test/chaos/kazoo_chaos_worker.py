#!/usr/bin/python3
"""A chaos-soak peer (scripts/chaos.sh --peers kazoo): kazoo's Lock on the same paths as the zklock
workers, logging every hold in their format (see chaos_worker.cpp):

    G <path> <start_ns> <fencing_token> <session_id_hex>
    E <path> <end_ns> released | E <path> <end_ns> lost suspended

The fencing token is the lock node's czxid x 4096, the way zklock makes its own, so the checker
can order grants across implementations. The loss signal is kazoo's own advice: the connection
state leaving CONNECTED (SUSPENDED, or LOST on expiry). SIGTERM: finish the hold, release, exit 0.

With RECIPE election (chaos.sh --recipe election --peers kazoo): kazoo's Election on the same
election paths as the zklock candidates (zklock_chaos_worker --dialect kazoo: kazoo's Election sees
only kazoo-named nodes, "<hex>__lock__<seq>"), identifier NAME (its node's data). One campaign, one
Election: run(func) is one hold, logged as above (its token: the czxid of its lock's node), ended by
func's return (released) or by the loss signal. A campaign not won within 10 s is cancelled
(Election.cancel); one that saw the loss signal before it was won is not a hold (func returns at
once). No proclaims, no commits (kazoo's Election has neither).

    kazoo_chaos_worker.py CONNECT PATHS LOG SEED SESSION_TIMEOUT_MS HOLD_MIN_MS HOLD_MAX_MS [RECIPE [NAME]]

RECIPE: mutex (default) or election; NAME: default, the log file's name without ".log".
"""
import os
import random
import signal
import sys
import threading
import time

from kazoo.client import KazooClient
from kazoo.protocol.states import KazooState

connect, paths, log_path, seed, timeout_ms, hold_min, hold_max = sys.argv[1:8]
paths, timeout_ms, hold_min, hold_max = int(paths), int(timeout_ms), int(hold_min), int(hold_max)
recipe = sys.argv[8] if len(sys.argv) > 8 else "mutex"
name = sys.argv[9] if len(sys.argv) > 9 else os.path.basename(log_path).rsplit(".log", 1)[0]
if recipe not in ("mutex", "election"):
    sys.exit("kazoo_chaos_worker.py: RECIPE is mutex or election")
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


def release(lock):
    """The delete needs a connection; a lost session's node is gone anyway."""
    for _ in range(100):
        try:
            lock.release()
            break
        except Exception:
            if zk.state == KazooState.LOST or stop.is_set() and zk.state != KazooState.CONNECTED:
                break
            time.sleep(0.1)


def mutex_hold(path):
    """One acquire of kazoo's Lock and, if granted, one hold."""
    global holds, failed
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
        return
    log.write(f"G {path} {start} {czxid * 4096} {session:x}\n")
    # hold, unless the loss signal comes first
    if lost.wait(rng.randint(hold_min, hold_max) / 1000.0):
        log.write(f"E {path} {lost_at[0]} lost suspended\n")
    else:
        log.write(f"E {path} {time.time_ns()} released\n")
    holds += 1
    release(lock)


def campaign(path):
    """One campaign of kazoo's Election and, if it wins, one leadership (run's func)."""
    global holds, failed
    lost.clear()
    if zk.state != KazooState.CONNECTED:
        failed += 1
        time.sleep(0.05)
        return
    election = zk.Election(path, name)
    state = ["campaigning"]  # then "leading", or "given up"
    guard = threading.Lock()
    held = [False]

    def give_up():  # not won within 10 s: cancel the campaign (run returns; the node is deleted)
        with guard:
            if state[0] != "campaigning":
                return
            state[0] = "given up"
        election.cancel()

    def lead():
        with guard:
            if state[0] != "campaigning":
                return  # given up: relinquish at once, not a hold
            state[0] = "leading"
        if lost.is_set():  # lost between the grant and now: not a hold
            return
        start = time.time_ns()
        czxid = zk.exists(f"{path}/{election.lock.node}").czxid
        session = zk.client_id[0]
        log.write(f"G {path} {start} {czxid * 4096} {session:x}\n")
        held[0] = True
        # hold, unless the loss signal comes first
        if lost.wait(rng.randint(hold_min, hold_max) / 1000.0):
            log.write(f"E {path} {lost_at[0]} lost suspended\n")
        else:
            log.write(f"E {path} {time.time_ns()} released\n")

    timer = threading.Timer(10, give_up)
    timer.daemon = True
    timer.start()
    try:
        election.run(lead)  # the release on func's return may fail without a connection: retried below
    except Exception:
        pass
    finally:
        timer.cancel()
    if held[0]:
        holds += 1
    else:
        failed += 1
    if election.lock.is_acquired:
        release(election.lock)
    if not held[0]:
        time.sleep(0.05)


while not stop.is_set():
    path = f"/zklock-chaos/lock{rng.randrange(paths)}"
    if recipe == "election":
        campaign(path)
    else:
        mutex_hold(path)
zk.stop()
zk.close()
print(f"kazoo worker: {holds} {'leaderships' if recipe == 'election' else 'holds'}, {failed} failed "
      f"{'campaigns' if recipe == 'election' else 'acquires'}", file=sys.stderr)
