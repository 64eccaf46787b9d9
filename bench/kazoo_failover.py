"""kazoo's side of bench/failover.sh: the same holders and waiters as zklock_failover, with kazoo's
Lock (Debian's python3-kazoo, its defaults). One KazooClient (session) per holder and per waiter.
Prints READY when every holder holds its lock and every waiter waits; then watches for the files
DIR/mark (the fault's moment) and DIR/stop (prints one JSON line with the same keys as
zklock_failover, and exits).
    /usr/bin/python3 kazoo_failover.py CONNECT HOLDERS WAITERS SESSION_TIMEOUT_MS DIR
"Told lost": the holder's client reported KazooState.LOST (its session expired); SUSPENDED is
counted apart. "Kept": the holder's lock node still exists, owned by the holder's original
session. kazoo has no leader latch of its own beside the Lock: no leader columns (-1)."""
import json
import os
import sys
import threading
import time

from kazoo.client import KazooClient, KazooState


def main():
    connect, holders, waiters, timeout_ms, d = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
    base = "/kazoo-bench/failover/%d/" % os.getpid()
    hs, ws = [], []
    for i in range(holders):
        h = dict(lost_at=0.0, suspended_at=0.0)
        zk = KazooClient(hosts=connect, timeout=timeout_ms / 1000.0)
        zk.start(timeout=60)
        h["zk"], h["sid"] = zk, zk.client_id[0]

        def listener(state, h=h):
            now = time.monotonic()
            if state == KazooState.LOST and not h["lost_at"]:
                h["lost_at"] = now
            elif state == KazooState.SUSPENDED and not h["suspended_at"]:
                h["suspended_at"] = now
        zk.add_listener(listener)
        lock = zk.Lock(base + "p%d" % i, "h%d" % i)
        lock.acquire()
        h["lock"] = lock
        hs.append(h)
    for i in range(waiters):
        w = dict(granted_at=0.0)
        zk = KazooClient(hosts=connect, timeout=timeout_ms / 1000.0)
        zk.start(timeout=60)
        w["zk"] = zk

        def wait(w=w, zk=zk, path=base + "p%d" % i):
            try:
                zk.Lock(path, "w").acquire()
                w["granted_at"] = time.monotonic()
            except Exception:
                pass
        threading.Thread(target=wait, daemon=True).start()
        ws.append(w)
    for i in range(waiters):
        while len(hs[0]["zk"].get_children(base + "p%d" % i)) < 2:
            time.sleep(0.02)
    print("READY %d %d %d" % (holders, waiters, timeout_ms), flush=True)
    fault_at, marked = time.monotonic(), False
    while not os.path.exists(os.path.join(d, "stop")):
        if not marked and os.path.exists(os.path.join(d, "mark")):
            fault_at, marked = time.monotonic(), True
        time.sleep(0.02)
    lost = suspended = kept = survived = granted = 0
    losses, grants = [], []
    for i, h in enumerate(hs):
        zk = h["zk"]
        if h["lost_at"]:
            lost += 1
            losses.append(h["lost_at"] - fault_at)
        if h["suspended_at"]:
            suspended += 1
        if zk.connected and zk.client_id and zk.client_id[0] == h["sid"]:
            survived += 1
        try:
            node = h["lock"].node
            st = zk.exists(base + "p%d/%s" % (i, node)) if node else None
            if st is not None and st.ephemeralOwner == h["sid"]:
                kept += 1
        except Exception:
            pass
    for w in ws:
        if w["granted_at"]:
            granted += 1
            grants.append(w["granted_at"] - fault_at)
    print(json.dumps({
        "holders": holders, "waiters": waiters, "holders_told_lost": lost, "holders_suspended": suspended,
        "holders_regained": -1, "holders_lost_for_good": lost, "holders_kept_with_same_token": kept,
        "locks_changed_hands": granted, "holder_sessions_survived": survived,
        "first_loss_s": round(min(losses), 3) if losses else -1.0, "last_loss_s": round(max(losses), 3) if losses else -1.0,
        "first_grant_s": round(min(grants), 3) if grants else -1.0, "last_grant_s": round(max(grants), 3) if grants else -1.0,
        "leaders": -1, "leaders_told_lost": -1, "leaders_kept_with_same_token": -1, "leaders_changed": -1}), flush=True)
    for c in [w["zk"] for w in ws] + [h["zk"] for h in hs]:
        try:
            c.stop()
            c.close()
        except Exception:
            pass
    os._exit(0)


if __name__ == "__main__":
    main()
