#!/usr/bin/python3
"""examples/4_http_server.cpp under concurrent load from two server processes on one ZooKeeper
($ZK_CONNECT): the final balances equal the sum of the accepted deposits, fencing tokens only
grow, a lock held elsewhere turns into 503 + Retry-After, and no lock node is left.

  ZK_CONNECT=... /usr/bin/python3 http_server_test.py build/examples/zklock_http_server build/zklock
"""
import http.client
import json
import os
import random
import signal
import subprocess
import sys
import threading
import time
import uuid

from kazoo.client import KazooClient
from kazoo.exceptions import NoNodeError

SERVER, CLI = sys.argv[1], sys.argv[2]
ZK = os.environ["ZK_CONNECT"]
ROOT = "/zklock-test/http-%s" % uuid.uuid4().hex[:8]
ACCOUNTS = ["alice", "bob", "carol", "dave"]
REQUESTS_PER_THREAD, THREADS = 40, 12


def children(zk, path):
    """The children of path; none if it does not exist (an empty container may be reaped any time)."""
    try:
        return zk.get_children(path)
    except NoNodeError:
        return []


def fail(msg):
    print("FAIL: " + msg)
    sys.exit(1)


def start_server(wait_ms):
    p = subprocess.Popen([SERVER, "--port", "0", "--connect", ZK, "--root", ROOT, "--wait-ms", str(wait_ms)],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    line = p.stdout.readline()
    if not line.startswith("listening on "):
        p.kill()
        fail("server did not start: %r %s" % (line, p.stderr.read()))
    return p, int(line.rsplit(":", 1)[1])


def call(port, method, path):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    c.request(method, path)
    r = c.getresponse()
    body = r.read().decode()
    headers = dict(r.getheaders())
    c.close()
    return r.status, body, headers


def main():
    zk = KazooClient(hosts=ZK)
    zk.start(timeout=15)
    servers = [start_server(5000), start_server(5000)]
    ports = [port for _, port in servers]
    accepted = {a: 0 for a in ACCOUNTS}
    statuses = {}
    tokens_seen = {a: [] for a in ACCOUNTS}
    lock = threading.Lock()
    errors = []

    def client(seed):
        rnd = random.Random(seed)
        conn = {}
        try:
            for _ in range(REQUESTS_PER_THREAD):
                port = rnd.choice(ports)
                acct = rnd.choice(ACCOUNTS)
                amount = rnd.randint(1, 100)
                c = conn.get(port) or http.client.HTTPConnection("127.0.0.1", port, timeout=30)
                conn[port] = c  # keep-alive: many requests per connection
                c.request("POST", "/accounts/%s/deposit?amount=%d" % (acct, amount))
                r = c.getresponse()
                body = r.read().decode()
                with lock:
                    statuses[r.status] = statuses.get(r.status, 0) + 1
                    if r.status == 200:
                        accepted[acct] += amount
                        tokens_seen[acct].append(json.loads(body)["token"])
                    elif r.status != 503:
                        errors.append("%d %s" % (r.status, body))
        except Exception as e:  # noqa: BLE001 - reported below
            with lock:
                errors.append(repr(e))

    threads = [threading.Thread(target=client, args=(i,)) for i in range(THREADS)]
    t0 = time.time()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    elapsed = time.time() - t0
    if errors:
        fail("unexpected replies: %s" % errors[:5])
    ok = statuses.get(200, 0)
    print("%d requests in %.2f s: %s" % (REQUESTS_PER_THREAD * THREADS, elapsed, statuses))
    if ok < REQUESTS_PER_THREAD * THREADS // 2:
        fail("too few deposits accepted: %s" % statuses)

    # The totals add up, read through either server.
    for acct in ACCOUNTS:
        for port in ports:
            status, body, _ = call(port, "GET", "/accounts/" + acct)
            if accepted[acct] == 0 and status == 404:
                continue
            if status != 200:
                fail("GET %s: %d %s" % (acct, status, body))
            got = json.loads(body)["balance"]
            if got != accepted[acct]:
                fail("%s: balance %d, accepted deposits sum to %d" % (acct, got, accepted[acct]))
        # every accepted write carried a token above all earlier ones of that account
        ts = tokens_seen[acct]
        if len(set(ts)) != len(ts):
            fail("%s: a fencing token was used twice" % acct)

    # A lock held elsewhere: 503 with Retry-After once the bounded wait passes.
    slow, slow_port = start_server(300)
    holder = subprocess.Popen([CLI, "run", "-c", ZK, ROOT + "/locks/alice", "--", "sleep", "3"])
    deadline = time.time() + 10
    while time.time() < deadline and not children(zk, ROOT + "/locks/alice"):
        time.sleep(0.02)
    status, body, headers = call(slow_port, "POST", "/accounts/alice/deposit?amount=5")
    if status != 503 or headers.get("Retry-After") != "1":
        fail("a held lock should give 503 + Retry-After: got %d %s %s" % (status, body, headers))
    if holder.wait(timeout=30) != 0:
        fail("the zklock run holder failed")
    status, body, _ = call(slow_port, "POST", "/accounts/alice/deposit?amount=5")
    if status != 200 or json.loads(body)["balance"] != accepted["alice"] + 5:
        fail("deposit after the holder left: %d %s" % (status, body))

    # Bad input, the contenders view and the metrics.
    for path, want in [("/accounts/al%20ice/deposit?amount=1", 400), ("/accounts/bob/deposit?amount=-3", 400),
                       ("/accounts/bob/deposit?amount=x", 400), ("/nope", 404)]:
        status, body, _ = call(ports[0], "POST", path)
        if status != want:
            fail("POST %s: %d (want %d) %s" % (path, status, want, body))
    status, body, _ = call(ports[0], "GET", "/locks/alice")
    if status != 200 or json.loads(body) != []:
        fail("GET /locks/alice: %d %s" % (status, body))
    status, body, _ = call(ports[0], "GET", "/metrics")
    if status != 200 or "bank_deposits_total" not in body:
        fail("GET /metrics: %d %s" % (status, body))
    # The metrics of both servers add up to the deposits they accepted (each grant is one
    # deposit attempt; 503s are timed-out acquires).
    granted = timed_out = 0
    for port in ports:
        _, body, _ = call(port, "GET", "/metrics")
        for line in body.splitlines():
            if line.startswith("zklock_acquires_total{") and ROOT + "/locks/" in line:
                value = float(line.rsplit(" ", 1)[1])
                if 'outcome="granted"' in line:
                    granted += value
                elif 'outcome="timed_out"' in line:
                    timed_out += value
    if granted != ok or timed_out != statuses.get(503, 0):
        fail("metrics: %d granted, %d timed out; the clients saw %d accepted, %s" % (granted, timed_out, ok, statuses))

    for p, _ in servers + [(slow, slow_port)]:
        p.send_signal(signal.SIGTERM)
    for p, _ in servers + [(slow, slow_port)]:
        if p.wait(timeout=30) != 0:
            fail("a server did not stop cleanly: %s" % p.stderr.read())

    # No lock node is left anywhere under the locks.
    left = []
    for acct in children(zk, ROOT + "/locks"):
        left += children(zk, ROOT + "/locks/" + acct)
    if left:
        fail("lock nodes left: %s" % left)
    try:
        zk.delete(ROOT, recursive=True)
    except NoNodeError:  # (the reaper may take containers away under a recursive delete)
        pass
    zk.stop()
    print("ok: balances add up on both servers, %d deposits, %d answered 503" % (ok, statuses.get(503, 0)))


if __name__ == "__main__":
    main()
