#!/usr/bin/python3
"""examples/6_leader_service.cpp: three replicas on one ZooKeeper ($ZK_CONNECT) elect one leader,
which alone serves the increments; followers send clients to it. The leader is killed (kill -9),
then the next one paused (SIGSTOP) past its session: another leads within a bound each time, the
paused one answers no write as leader once resumed, and the counter ends equal to the number of
increments answered 200, written with fencing tokens that never decrease. Throughout, every
replica is asked GET /leader: the longest time two said they lead at once is reported. At the
end no candidate node is left under <root>/leader.

  ZK_CONNECT=... /usr/bin/python3 leader_service_test.py build/examples/zklock_leader_service build/zklock
"""
import http.client
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid

from kazoo.client import KazooClient
from kazoo.exceptions import NoNodeError

SERVER, CLI = sys.argv[1], sys.argv[2]
ZK = os.environ["ZK_CONNECT"]
ROOT = "/zklock-test/leader-svc-%s" % uuid.uuid4().hex[:8]
T = 2.0  # the replicas' session timeout (s)
FAILOVER_BOUND = 3 * T + 2.0  # a new leader within this, after the old one died or froze
OVERLAP_BOUND = 0.5  # two replicas may both say they lead for at most this long (a transition)
INCREMENTS, CLIENTS = 45, 3  # per phase


class Replica:
    def __init__(self, proc, port, log):
        self.proc, self.port, self.log = proc, port, log
        self.frozen = False  # SIGSTOPped
        self.dead = False  # kill -9


def fail(msg):
    raise AssertionError(msg)


def call(port, method, path, timeout=10.0):
    """(status, JSON body or text, headers); raises OSError on a timeout or a refused connection."""
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        c.request(method, path)
        r = c.getresponse()
        text = r.read().decode()
        headers = dict(r.getheaders())
    finally:
        c.close()
    try:
        return r.status, json.loads(text), headers
    except ValueError:
        return r.status, text, headers


def start_replica(tmp, i):
    log = os.path.join(tmp, "replica%d.log" % i)
    p = subprocess.Popen([SERVER, "--port", "0", "--connect", ZK, "--root", ROOT,
                          "--session-timeout-ms", str(int(T * 1000))],
                         stdout=subprocess.PIPE, stderr=open(log, "w"), text=True)
    line = p.stdout.readline()
    if not line.startswith("listening on "):
        p.kill()
        fail("replica did not start: %r %s" % (line, open(log).read()))
    return Replica(p, int(line.rsplit(":", 1)[1]), log)


class Watcher:
    """Asks every replica GET /leader, one thread each, and GET /counter in a thread of its own,
    all the time, and records the answers."""

    def __init__(self, replicas):
        self.replicas = replicas
        self.stop = threading.Event()
        self.answers = {r.port: [] for r in replicas}  # port -> [(sent, received, leading, token)]
        self.counter_reads = []  # [(value, token)], in the order read (one read after the other)
        self.threads = [threading.Thread(target=self.poll_leader, args=(r,)) for r in replicas]
        self.threads.append(threading.Thread(target=self.poll_counter))
        for t in self.threads:
            t.start()

    def poll_leader(self, r):
        while not self.stop.is_set():
            if r.dead or r.frozen:
                time.sleep(0.02)
                continue
            sent = time.monotonic()
            try:
                status, body, _ = call(r.port, "GET", "/leader", timeout=0.5)
            except OSError:
                continue  # frozen or killed meanwhile
            if status == 200:
                self.answers[r.port].append((sent, time.monotonic(), body["leading"], body["token"]))
            time.sleep(0.01)

    def poll_counter(self):
        while not self.stop.is_set():
            live = [r for r in self.replicas if not r.dead and not r.frozen]
            try:
                status, body, _ = call(random.choice(live).port, "GET", "/counter", timeout=0.5)
            except OSError:
                continue
            if status == 200:
                self.counter_reads.append((body["value"], body["token"]))
            time.sleep(0.02)

    def finish(self):
        self.stop.set()
        for t in self.threads:
            t.join()

    def overlap(self):
        """(longest overlap, shortest gap): the longest time two replicas said, both, that they
        lead, and the shortest time between one's last 'leading: true' and another's first. Each
        replica's run of 'leading: true' answers spans from the first one's sending to the last
        one's reply (so an overlap is over-estimated, a gap under-estimated), and the runs of
        different replicas are compared."""
        runs = {}
        for port, answers in self.answers.items():
            runs[port], start, end = [], None, None
            for sent, received, leading, _ in answers:
                if leading:
                    start = sent if start is None else start
                    end = received
                elif start is not None:
                    runs[port].append((start, end))
                    start = None
            if start is not None:
                runs[port].append((start, end))
        longest, shortest_gap = 0.0, None
        ports = list(runs)
        for i, a in enumerate(ports):
            for b in ports[i + 1:]:
                for s1, e1 in runs[a]:
                    for s2, e2 in runs[b]:
                        both = min(e1, e2) - max(s1, s2)
                        longest = max(longest, both)
                        if both < 0 and (shortest_gap is None or -both < shortest_gap):
                            shortest_gap = -both
        return longest, shortest_gap


def views(replicas):
    """GET /leader of every live replica: port -> body."""
    out = {}
    for r in replicas:
        if r.dead or r.frozen:
            continue
        try:
            status, body, _ = call(r.port, "GET", "/leader", timeout=2)
        except OSError:
            continue
        if status == 200:
            out[r.port] = body
    return out


def wait_for_leader(replicas, within, exclude=()):
    """Waits until exactly one live replica leads, and every other live one names it; returns it
    and how long that took."""
    t0 = time.monotonic()
    last = None
    while time.monotonic() - t0 < within:
        v = views(replicas)
        leaders = [p for p, b in v.items() if b["leading"]]
        if len(leaders) == 1 and leaders[0] not in exclude:
            name = "127.0.0.1:%d" % leaders[0]
            if all(b["leader"] == name and b["token"] == v[leaders[0]]["token"] for b in v.values()):
                return next(r for r in replicas if r.port == leaders[0]), time.monotonic() - t0
        last = v
        time.sleep(0.05)
    fail("no single leader named by all within %.1f s: %s" % (within, last))


class Clients:
    """Sends increments, each to a replica at random, following 307s and 503s to the named
    leader, until it is answered 200; records every 200 (value, token)."""

    def __init__(self, replicas):
        self.replicas = replicas
        self.lock = threading.Lock()
        self.ok = []  # [(value, token, port)]
        self.statuses = {}
        self.errors = []

    def increment(self, rnd):
        deadline = time.monotonic() + FAILOVER_BOUND + 10
        target = None
        while time.monotonic() < deadline:
            live = [r.port for r in self.replicas if not r.dead and not r.frozen]
            if target not in live:  # (never wait on a frozen replica: its answer would take 3T)
                if target is not None:
                    time.sleep(0.05)  # (named by a follower that has not seen its loss yet)
                target = rnd.choice(live)
            try:
                status, body, headers = call(target, "POST", "/counter/increment")
            except OSError as e:
                with self.lock:
                    self.errors.append("POST to %d: %r" % (target, e))
                return
            with self.lock:
                self.statuses[status] = self.statuses.get(status, 0) + 1
                if status == 200:
                    self.ok.append((body["value"], body["token"], target))
                    return
            if status == 307:
                target = int(headers["Location"].split("/")[2].rsplit(":", 1)[1])
            elif status == 503:
                named = body.get("leader") if isinstance(body, dict) else None
                target = int(named.rsplit(":", 1)[1]) if named else None
                time.sleep(0.05)
            else:
                with self.lock:
                    self.errors.append("%d %s" % (status, body))
                return
        with self.lock:
            self.errors.append("an increment not served within %.0f s" % (FAILOVER_BOUND + 10))

    def run(self, count):
        """count increments from CLIENTS threads; returns once all are answered."""
        before = len(self.ok)

        def client(seed):
            rnd = random.Random(seed)
            for _ in range(count // CLIENTS):
                self.increment(rnd)

        threads = [threading.Thread(target=client, args=(random.random(),)) for _ in range(CLIENTS)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        if self.errors:
            fail("increments failed: %s" % self.errors[:5])
        if len(self.ok) - before != count // CLIENTS * CLIENTS:
            fail("%d of %d increments served" % (len(self.ok) - before, count))


def main():
    t_start = time.monotonic()
    tmp = tempfile.mkdtemp(prefix="zklock-leader-svc-")
    zk = KazooClient(hosts=ZK)
    zk.start(timeout=15)
    replicas = []
    try:
        replicas = [start_replica(tmp, i) for i in range(3)]
        watcher = Watcher(replicas)
        clients = Clients(replicas)
        try:
            run(replicas, watcher, clients)
        finally:
            watcher.finish()
        check(replicas, watcher, clients, zk)
        print("ok in %.1f s" % (time.monotonic() - t_start))
    except AssertionError as e:
        print("FAIL: %s" % e)
        for i, r in enumerate(replicas):
            print("--- replica %d (port %d) ---\n%s" % (i, r.port, open(r.log).read()[-3000:]))
        sys.exit(1)
    finally:
        for r in replicas:
            if r.proc.poll() is None:
                r.proc.send_signal(signal.SIGCONT)
                r.proc.kill()
                r.proc.wait()
        try:
            zk.delete(ROOT, recursive=True)
        except NoNodeError:  # (the reaper may take containers away under a recursive delete)
            pass
        zk.stop()
        shutil.rmtree(tmp, ignore_errors=True)


def run(replicas, watcher, clients):
    leader, took = wait_for_leader(replicas, 15)
    print("leader %d elected in %.2f s" % (leader.port, took))
    clients.run(INCREMENTS)

    # kill -9: its session ends on the server one session timeout later, and its node with it.
    leader.proc.kill()
    leader.proc.wait()
    leader.dead = True
    second, took = wait_for_leader(replicas, FAILOVER_BOUND)
    print("killed %d: %d leads after %.2f s (bound %.1f s)" % (leader.port, second.port, took, FAILOVER_BOUND))
    clients.run(INCREMENTS)

    # SIGSTOP for 3T: its session expires meanwhile, and the other replica takes over.
    second.proc.send_signal(signal.SIGSTOP)
    second.frozen = True
    frozen_at = time.monotonic()
    in_flight = []  # a POST it receives while frozen, answered once it runs again

    def post_to_frozen():
        try:
            in_flight.append(call(second.port, "POST", "/counter/increment", timeout=30))
        except OSError as e:
            in_flight.append(e)

    poster = threading.Thread(target=post_to_frozen)
    poster.start()
    # Increments meanwhile: sent to the frozen one by the follower until it learns of the loss,
    # then served by the new leader. (Not across the kill: a write in flight there may land
    # unanswered, and the count would not be exact.)
    failed = []

    def increments_meanwhile():
        try:
            clients.run(INCREMENTS)
        except AssertionError as e:
            failed.append(e)

    meanwhile = threading.Thread(target=increments_meanwhile)
    meanwhile.start()
    third, took = wait_for_leader(replicas, FAILOVER_BOUND)
    print("froze %d: %d leads after %.2f s (bound %.1f s)" % (second.port, third.port, took, FAILOVER_BOUND))
    meanwhile.join()
    if failed:
        raise failed[0]
    time.sleep(max(0.0, frozen_at + 3 * T - time.monotonic()))
    second.proc.send_signal(signal.SIGCONT)
    second.frozen = False
    poster.join()
    if isinstance(in_flight[0], Exception):
        fail("the POST sent to the frozen replica: %r" % in_flight[0])
    status, body, _ = in_flight[0]
    print("the POST in flight to the frozen replica, answered once it ran again: %d %s" % (status, body))
    if status == 200:
        fail("the deposed leader served a write once it ran again: %s" % body)
    # It writes nothing as leader any more, unless it wins again (then with a newer token).
    third_token = views([third])[third.port]["token"]
    for _ in range(5):
        status, body, _ = call(second.port, "POST", "/counter/increment")
        if status == 200:
            clients.ok.append((body["value"], body["token"], second.port))
            if body["token"] <= third_token:
                fail("the deposed leader served a write with its old token: %s" % body)
            print("note: the resumed replica leads again (the third's lease lapsed?): %s" % body)
    now, _ = wait_for_leader(replicas, FAILOVER_BOUND)
    if now is not third:
        print("note: the leader moved from %d to %d with no fault" % (third.port, now.port))
    clients.run(INCREMENTS)


def check(replicas, watcher, clients, zk):
    ok = sorted(clients.ok)
    n = len(ok)
    # Every 200 is one write: the values answered are 1..n, each once, and the counter is n on
    # every replica (no lost update, no stale write that landed unanswered).
    if [v for v, _, _ in ok] != list(range(1, n + 1)):
        fail("the values answered 200 are not 1..%d: %s" % (n, [v for v, _, _ in ok]))
    for r in replicas:
        if r.dead:
            continue
        status, body, _ = call(r.port, "GET", "/counter")
        if status != 200 or body["value"] != n:
            fail("GET /counter on %d: %d %s, %d increments answered 200" % (r.port, status, body, n))
    # The tokens, in the order of the writes, never decrease: a deposed leader never wrote after
    # its successor; and the reads of the counter, one after the other, never go back.
    tokens = [t for _, t, _ in ok]
    if tokens != sorted(tokens):
        fail("a write with an older token landed after a newer one: %s" % tokens)
    if watcher.counter_reads != sorted(watcher.counter_reads):
        fail("the counter went back: %s" % watcher.counter_reads)
    leaders = sorted(set(tokens))
    overlap, gap = watcher.overlap()
    polls = sum(len(a) for a in watcher.answers.values())
    print("%d increments answered 200 (statuses %s) under %d leaders; %d counter reads; %d GET /leader: "
          "longest overlap of two 'leading: true' %.3f s, shortest hand-over gap %.3f s"
          % (n, clients.statuses, len(leaders), len(watcher.counter_reads), polls, overlap, gap or 0.0))
    if len(leaders) < 3:
        fail("the writes came from %d leaders, not 3 or more: %s" % (len(leaders), leaders))
    if overlap > OVERLAP_BOUND:
        fail("two replicas said they lead at once for %.3f s (bound %.1f s)" % (overlap, OVERLAP_BOUND))
    for r in replicas:
        if r.dead:
            continue
        _, body, _ = call(r.port, "GET", "/leader")
        if body["stale_refused"]:
            print("replica %d refused %d writes for a stale token" % (r.port, body["stale_refused"]))

    # SIGTERM: each resigns and closes its session, and exits 0.
    for r in replicas:
        if not r.dead:
            r.proc.send_signal(signal.SIGTERM)
    for r in replicas:
        if not r.dead and r.proc.wait(timeout=30) != 0:
            fail("replica %d did not stop cleanly: exit %d" % (r.port, r.proc.returncode))
    # No candidate is left (the killed one's session has long expired): zklock list shows none.
    out = subprocess.run([CLI, "list", "--json", "-c", ZK, ROOT + "/leader"], capture_output=True, text=True,
                         timeout=30)
    if out.returncode != 0 or json.loads(out.stdout) != []:
        fail("zklock list %s/leader: exit %d, %s %s" % (ROOT, out.returncode, out.stdout, out.stderr))
    try:
        left = zk.get_children(ROOT + "/leader")
    except NoNodeError:
        left = []
    if left:
        fail("candidate nodes left: %s" % left)


if __name__ == "__main__":
    main()
