# kazoo's Lock under the same workload as zklock_bench: one process (and session) per worker,
# as kazoo is used in practice. Prints one JSON object like zklock_bench.
#   /usr/bin/python3 kazoo_bench.py CONNECT WORKERS LOCKS HOLD_MS SECONDS
import json, multiprocessing as mp, os, resource, socket, sys, time
from kazoo.client import KazooClient

def packets_received(connect):
    """The server's count of packets received (4lw "mntr", zk_packets_received), None if unknown:
    its change over the measured window, per cycle, is the requests per cycle as the server saw them."""
    host, port = connect.split(",")[0].rsplit(":", 1)
    try:
        with socket.create_connection((host, int(port)), timeout=5) as s:
            s.sendall(b"mntr")
            s.shutdown(socket.SHUT_WR)
            out = b""
            while chunk := s.recv(65536):
                out += chunk
        for line in out.decode().splitlines():
            if line.startswith("zk_packets_received"):
                return int(line.split()[1])
    except OSError:
        pass
    return None

def worker(connect, path, hold_ms, start_at, end_at, q):
    zk = KazooClient(hosts=connect, timeout=10.0)
    zk.start(timeout=30)
    lock = zk.Lock(path, "bench")
    lat, holds = [], []
    while True:
        t0 = time.monotonic()
        if t0 >= end_at:
            break
        lock.acquire()
        t1 = time.monotonic()
        if hold_ms:
            time.sleep(hold_ms / 1000.0)
        t2 = time.monotonic()
        lock.release()
        if start_at <= t0 and t2 <= end_at:
            lat.append((t1 - t0) * 1e6)
            holds.append((t1, t2))
    zk.stop()
    ru = resource.getrusage(resource.RUSAGE_SELF)
    q.put((lat, holds, ru.ru_utime + ru.ru_stime, ru.ru_maxrss))

def main():
    connect, workers, locks, hold_ms, seconds = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), float(sys.argv[5])
    base = f"/zklock-bench/kazoo-{os.getpid()}"
    now = time.monotonic()
    start_at, end_at = now + 2.0, now + 2.0 + seconds  # 2 s to start the processes and warm up
    q = mp.Queue()
    ps = [mp.Process(target=worker, args=(connect, f"{base}/lock-{w % locks}", hold_ms, start_at, end_at, q)) for w in range(workers)]
    for p in ps:
        p.start()
    time.sleep(max(0.0, start_at - time.monotonic()))
    p0 = packets_received(connect)
    time.sleep(max(0.0, end_at - time.monotonic()))
    p1 = packets_received(connect)
    results = [q.get() for _ in ps]
    for p in ps:
        p.join()
    lat = sorted(x for r in results for x in r[0])
    n = len(lat)
    overlaps = 0
    by_lock = {}
    for w, r in enumerate(results):
        pass
    # holds are per process; locks are shared by workers w % locks, but result order is arbitrary:
    # check exclusion over all holds when there is a single lock
    if locks == 1:
        hs = sorted(h for r in results for h in r[1])
        overlaps = sum(1 for a, b in zip(hs, hs[1:]) if b[0] < a[1])
    cpu = sum(r[2] for r in results)  # includes start-up: an upper bound
    pct = lambda p: lat[min(n - 1, int(p * n))] if n else 0.0
    print(json.dumps({"impl": "kazoo", "workers": workers, "sessions": workers, "locks": locks, "hold_ms": hold_ms,
                      "cycles": n, "seconds": seconds, "cycles_per_s": n / seconds, "p50_us": pct(0.5), "p99_us": pct(0.99),
                      "max_us": lat[-1] if n else 0.0,
                      "requests_per_cycle": round((p1 - p0) / n, 2) if n and p0 is not None and p1 is not None else None,
                      "requests_counted_by": "server",
                      "cpu_us_per_cycle": cpu * 1e6 / n if n else 0.0, "peak_rss_kb": max(r[3] for r in results),
                      "overlaps": overlaps}))

if __name__ == "__main__":
    main()
