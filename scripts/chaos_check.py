#!/usr/bin/python3
"""The overlap checker of scripts/chaos.sh.

    chaos_check.py DIR [--timeout-ms T]   check the worker logs (DIR/*.log), DIR/events and the
                                          servers' logs (DIR/servers/*.log)
    chaos_check.py --self-test            fabricated logs: a clean one must pass, bad ones must fail

Worker logs (zklock_chaos_worker): "G path start_ns token session", then "E path end_ns released"
or "E path end_ns lost reason". DIR/events: "ns kind detail..." written by chaos.sh; a
"worker_kill NAME" event ends the open hold of that worker (its log is NAME.log).

Fails (exit 1) on: two holds of one path that overlap; fencing tokens not strictly increasing in
grant order; a log line that cannot be read. Reports the margin between each loss signal and the
next grant of the same path, and the hand-over time after a holder was killed.

The stated margin bound applies to a lease loss after which the server expired the session and so
freed the lock; when the holder's own delete freed it (the session still alive), the next grant may
follow the loss signal at once. Which of the two happened is read from the servers' logs: the
leader's "Expiring session 0x..." line, at or before the next grant. Without server logs, a loss
counts as expired if the worker's next hold is on another session (which also counts a session
that a later fault expired after the hand-over).

Peers (chaos.sh --peers): logs named c* (Curator) and k* (kazoo) are theirs, the others zklock's.
A peer hold whose loss signal (SUSPENDED) came after the next grant of its path is that library's
known exposure (it learns of a silent server only 2/3 T after the last reply, which can be after
the expiry): it is reported as a peer overlap and does not fail the check. Every other overlap
does, whoever holds.
"""
import collections
import datetime
import glob
import os
import re
import statistics
import sys
import tempfile


def kind_of(who):
    return {"c": "curator", "k": "kazoo"}.get(who[:1], "zklock")


def read_events(d):
    events = []
    path = os.path.join(d, "events")
    if os.path.exists(path):
        for line in open(path):
            parts = line.split()
            if len(parts) >= 2:
                events.append((int(parts[0]), parts[1], parts[2:]))
    return events


EXPIRING = re.compile(r"^(\d\d):(\d\d):(\d\d)\.(\d{3}) .*Expiring session 0x([0-9a-f]+),")


def local_midnight_ns(ns):
    day = datetime.datetime.fromtimestamp(ns / 1e9).replace(hour=0, minute=0, second=0, microsecond=0)
    return int(day.timestamp()) * 1_000_000_000


def clock_of(ns):
    """The servers' log time (local HH:MM:SS.mmm) of a CLOCK_REALTIME ns (for the self-test)."""
    return datetime.datetime.fromtimestamp(ns / 1e9).strftime("%H:%M:%S.%f")[:-3]


def read_expiries(d, events):
    """{session hex: sorted ns of the servers' "Expiring session" lines}, or None if DIR/servers has
    no logs. A session can have more than one: a leader cut off from its quorum logs expiries that it
    cannot commit, and the session lives on (then a later server may expire it for real).
    The servers log local wall-clock times of day; the run's first event gives the date."""
    files = sorted(glob.glob(os.path.join(d, "servers", "*.log")))
    if not files:
        return None
    start = min((ns for ns, _, _ in events), default=0)
    midnight = local_midnight_ns(start)
    expiries = {}
    for f in files:
        for line in open(f, errors="replace"):
            m = EXPIRING.match(line)
            if not m:
                continue
            h, mi, s, ms, sid = m.groups()
            ns = midnight + ((int(h) * 60 + int(mi)) * 60 + int(s)) * 1_000_000_000 + int(ms) * 1_000_000
            if ns < start - 43_200 * 1_000_000_000:
                ns += 86_400 * 1_000_000_000  # the run went past midnight
            expiries.setdefault(sid, []).append(ns)
    for v in expiries.values():
        v.sort()
    return expiries


def read_holds(d, events):
    """Returns (holds, problems): hold = dict(path, start, end, token, who, reason)."""
    kills = collections.defaultdict(list)
    for ns, kind, rest in events:
        if kind == "worker_kill" and rest:
            kills[rest[0]].append(ns)
    holds, problems = [], []
    for f in sorted(glob.glob(os.path.join(d, "*.log"))):
        who = os.path.basename(f)[:-4]
        open_hold = None
        for n, line in enumerate(open(f), 1):
            p = line.split()
            try:
                if p[0] == "G":
                    if open_hold:
                        problems.append(f"{f}:{n}: a grant while a hold is open")
                    open_hold = dict(path=p[1], start=int(p[2]), token=int(p[3]), who=who, end=None, reason=None,
                                     session=p[4] if len(p) > 4 else "?")
                elif p[0] == "E":
                    if not open_hold or open_hold["path"] != p[1]:
                        problems.append(f"{f}:{n}: an end without its grant")
                        continue
                    open_hold["end"] = int(p[2])
                    open_hold["reason"] = p[3] if p[3] == "released" else "lost:" + (p[4] if len(p) > 4 else "?")
                    holds.append(open_hold)
                    open_hold = None
                else:
                    problems.append(f"{f}:{n}: unreadable line {line.strip()!r}")
            except (IndexError, ValueError):
                problems.append(f"{f}:{n}: unreadable line {line.strip()!r}")
        # a loss whose worker's next hold is on another session: that session expired (so the
        # server, not our own delete, freed the lock: the lease's margin bound applies)
        mine = [h for h in holds if h["who"] == who]
        for a, b in zip(mine, mine[1:]):
            a["expired"] = a["session"] != b["session"]
        if open_hold:  # a killed holder: its hold ends when it was killed
            after = [k for k in kills[who] if k >= open_hold["start"]]
            open_hold["end"] = min(after) if after else float("inf")
            open_hold["reason"] = "killed" if after else "never ended"
            holds.append(open_hold)
    return holds, problems


def check(d, timeout_ms=None, quiet=False):
    out = [] if quiet else None
    say = (lambda s: out.append(s)) if quiet else print
    events = read_events(d)
    holds, problems = read_holds(d, events)
    expiries = read_expiries(d, events)
    if expiries is None:
        say("(no server logs: a lease loss counts as expired if its worker's next hold is on another session)")
    by_path = collections.defaultdict(list)
    for h in holds:
        by_path[h["path"]].append(h)
    overlaps, token_errors, margins, handovers, below_bound, peer_overlaps = 0, 0, [], [], 0, 0
    to_expiry = []  # a lease loss whose session the server then expired: loss signal -> the server's expiry
    bound = 0.35 * timeout_ms / 1000 if timeout_ms else None  # (0.65 - f) T, f = 0.3: README, "The lease"
    margins_by = []  # (margin entry, who): per implementation
    allowance = 0.15  # one-way delay and scheduling on a loaded 2-core machine
    for path, hs in by_path.items():
        hs.sort(key=lambda h: h["start"])
        latest = None  # the hold with the latest end so far
        for i, h in enumerate(hs):
            if latest and h["start"] < latest["end"]:
                what = "OVERLAP"
                if kind_of(latest["who"]) != "zklock" and latest["reason"].startswith("lost:"):
                    what = f"peer overlap ({kind_of(latest['who'])}'s loss signal came after the next grant)"
                    peer_overlaps += 1
                else:
                    overlaps += 1
                say(f"{what} on {path}: {h['who']} granted at {h['start']} while {latest['who']} held until "
                    f"{latest['end']} ({latest['reason']}), by {(latest['end'] - h['start']) / 1e6:.3f} ms")
            if i > 0 and h["token"] <= hs[i - 1]["token"]:
                token_errors += 1
                say(f"TOKEN ORDER on {path}: {h['who']} got {h['token']} after {hs[i - 1]['who']}'s {hs[i - 1]['token']}")
            if latest is None or h["end"] > latest["end"]:
                latest = h
            if i + 1 < len(hs):
                gap = (hs[i + 1]["start"] - h["end"]) / 1e9
                if expiries is not None and h["reason"].startswith("lost:"):
                    # freed by the server (the session expired by the next grant; the log has ms)
                    # or by the holder's own delete (expired later, or never)
                    # (an expiry logged before this hold began did not end it: the session went on)
                    at = next((ns for ns in expiries.get(h["session"], []) if ns >= h["start"]), None)
                    h["expired"] = at is not None and at <= hs[i + 1]["start"] + 1_000_000
                    if at is not None:
                        h["expiry_margin"] = (at - h["end"]) / 1e9
                if h["reason"] == "lost:lease_expired" and h.get("expired") and "expiry_margin" in h:
                    to_expiry.append(h["expiry_margin"])
                if h["reason"].startswith("lost:"):
                    margins.append((gap, h["reason"], h.get("expired")))
                    margins_by.append(((gap, h["reason"], h.get("expired")), h["who"]))
                    if bound and h["reason"] == "lost:lease_expired" and h.get("expired") and gap < bound - allowance:
                        below_bound += 1
                        say(f"MARGIN on {path}: {h['who']}'s lease loss came {gap:.3f} s before the next grant, "
                            f"below the stated bound {bound:.3f} s less {allowance} s, and its session expired")
                elif h["reason"] == "killed":
                    handovers.append(gap)
    faults = collections.Counter(kind for _, kind, _ in events if kind not in ("start", "stop"))
    reasons = collections.Counter(h["reason"] for h in holds)
    say(f"holds: {len(holds)} on {len(by_path)} path(s); ended: " +
        ", ".join(f"{k} {v}" for k, v in sorted(reasons.items())))
    kinds = collections.Counter(kind_of(h["who"]) for h in holds)
    if set(kinds) != {"zklock"}:
        say("holds by implementation: " + ", ".join(f"{k} {v}" for k, v in sorted(kinds.items())))
        for k in sorted(set(kinds) - {"zklock"}):
            km = sorted(m for (m, _, _), who in margins_by if kind_of(who) == k)
            if km:
                say(f"  {k}'s loss signal -> next grant: {len(km)} losses, smallest {km[0]:.3f} s")
        say(f"peer overlaps (a peer's loss signal after the next grant; not zklock's): {peer_overlaps}")
    say("faults: " + (", ".join(f"{k} {v}" for k, v in sorted(faults.items())) or "none"))
    say(f"overlaps: {overlaps}; fencing-token order violations: {token_errors}; unreadable lines: {len(problems)}")
    for p in problems[:10]:
        say("  " + p)
    if margins:
        ms = sorted(m for m, _, _ in margins)
        say(f"loss signal -> next grant of the path: {len(ms)} losses, smallest {ms[0]:.3f} s, "
            f"median {statistics.median(ms):.3f} s")
        exp = sorted(m for m, r, e in margins if r == "lost:lease_expired" and e)
        surv = sorted(m for m, r, e in margins if r == "lost:lease_expired" and e is False)
        if exp:
            say(f"  lease losses whose session then expired: {len(exp)}, margin smallest {exp[0]:.3f} s, median "
                f"{statistics.median(exp):.3f} s (stated bound {bound:.3f} s)" if bound else "")
        if to_expiry:
            say(f"  the same, loss signal -> the server's expiry (its log): smallest {min(to_expiry):.3f} s, "
                f"median {statistics.median(to_expiry):.3f} s")
        if surv:
            say(f"  lease losses whose session survived (the node was deleted by its holder, so a small margin "
                f"is no overlap): {len(surv)}, margin smallest {surv[0]:.3f} s")
    else:
        say("loss signal -> next grant: no losses")
    if handovers:
        hv = sorted(handovers)
        say(f"hand-over after a holder was killed: {len(hv)}, median {statistics.median(hv):.3f} s, "
            f"longest {hv[-1]:.3f} s")
    say(f"lease margins below the stated bound: {below_bound}")
    ok = overlaps == 0 and token_errors == 0 and not problems and below_bound == 0
    say("chaos check: " + ("PASS" if ok else "FAIL"))
    return ok


def self_test():
    """Fabricated logs: the checker must pass a clean one and fail each broken one."""
    def expiring(ns, session):
        return (f"{clock_of(ns)} [SessionTracker] INFO org.apache.zookeeper.server.ZooKeeperServer - "
                f"Expiring session 0x{session}, timeout of 2000ms exceeded\n")

    def run(files, events=""):
        with tempfile.TemporaryDirectory() as d:
            for name, text in files.items():
                os.makedirs(os.path.dirname(os.path.join(d, name)), exist_ok=True)
                with open(os.path.join(d, name), "w") as f:
                    f.write(text)
            with open(os.path.join(d, "events"), "w") as f:
                f.write(events)
            return check(d, 2000, quiet=True)

    clean = {"a.log": "G /p 100 4096 1\nE /p 200 released\nG /p 500 12288 1\nE /p 600 lost lease_expired\n",
             "b.log": "G /p 300 8192 2\nE /p 400 released\nG /p 2000000000 16384 2\nE /p 2000000100 released\n"}
    cases = {
        "clean": (clean, "", True),
        "overlap": ({"a.log": "G /p 100 4096 1\nE /p 300 released\n",
                     "b.log": "G /p 250 8192 2\nE /p 400 released\n"}, "", False),
        "token order": ({"a.log": "G /p 100 8192 1\nE /p 200 released\n",
                         "b.log": "G /p 300 4096 2\nE /p 400 released\n"}, "", False),
        "killed holder overlapped": ({"a.log": "G /p 100 4096 1\n",
                                      "b.log": "G /p 300 8192 2\nE /p 400 released\n"}, "500 worker_kill a\n", False),
        "killed holder handed over": ({"a.log": "G /p 100 4096 1\n",
                                       "b.log": "G /p 900 8192 2\nE /p 950 released\n"}, "500 worker_kill a\n", True),
        "hold never ended": ({"a.log": "G /p 100 4096 1\n",
                              "b.log": "G /p 900 8192 2\nE /p 950 released\n"}, "", False),
        "unreadable": ({"a.log": "G /p x 4096 1\n"}, "", False),
        "lease loss, session expired, margin too small": (
            {"a.log": "G /p 100 4096 1\nE /p 1000000000 lost lease_expired\nG /p 5000000000 16384 2\nE /p 5000000100 released\n",
             "b.log": "G /p 1100000000 8192 3\nE /p 1200000000 released\n"}, "", False),
        "lease loss, session survived, small margin": (
            {"a.log": "G /p 100 4096 1\nE /p 1000000000 lost lease_expired\nG /p 5000000000 16384 1\nE /p 5000000100 released\n",
             "b.log": "G /p 1100000000 8192 3\nE /p 1200000000 released\n"}, "", True),
        # with the servers' logs: who freed the lock is read from the leader's "Expiring session"
        "server log: expired before the next grant, margin too small": (
            {"a.log": "G /p 100 4096 1a\nE /p 1000000000 lost lease_expired\nG /p 5000000000 16384 2b\nE /p 5000000100 released\n",
             "b.log": "G /p 1100000000 8192 3c\nE /p 1200000000 released\n",
             "servers/server1.log": expiring(1_050_000_000, "1a")}, "0 start\n", False),
        "server log: expired after the hand-over (the holder's own delete freed it)": (
            {"a.log": "G /p 100 4096 1a\nE /p 1000000000 lost lease_expired\nG /p 5000000000 16384 2b\nE /p 5000000100 released\n",
             "b.log": "G /p 1100000000 8192 3c\nE /p 1200000000 released\n",
             "servers/server1.log": expiring(3_000_000_000, "1a")}, "0 start\n", True),
        "server log: an expiry logged before the grant (an isolated leader's) did not end the hold": (
            {"a.log": "G /p 3000000000 4096 1a\nE /p 4000000000 lost lease_expired\nG /p 9000000000 16384 1a\nE /p 9000000100 released\n",
             "b.log": "G /p 4100000000 8192 3c\nE /p 4200000000 released\n",
             "servers/server1.log": expiring(1_000_000_000, "1a")}, "0 start\n", True),
        "server log: never expired, small margin": (
            {"a.log": "G /p 100 4096 1a\nE /p 1000000000 lost lease_expired\nG /p 5000000000 16384 2b\nE /p 5000000100 released\n",
             "b.log": "G /p 1100000000 8192 3c\nE /p 1200000000 released\n",
             "servers/server1.log": "00:00:00.000 [main] INFO x - started\n"}, "0 start\n", True),
        "server log: expired before the next grant, margin above the bound": (
            {"a.log": "G /p 100 4096 1a\nE /p 1000000000 lost lease_expired\nG /p 5000000000 16384 2b\nE /p 5000000100 released\n",
             "b.log": "G /p 2000000000 8192 3c\nE /p 2100000000 released\n",
             "servers/server1.log": expiring(1_900_000_000, "1a")}, "0 start\n", True),
        "peer's late loss signal: reported, not failed": (
            {"c1g1.log": "G /p 100 4096 1\nE /p 300 lost suspended\n",
             "w1g1.log": "G /p 250 8192 2\nE /p 400 released\n"}, "", True),
        "peer released while another holds": ({"k1g1.log": "G /p 100 4096 1\nE /p 300 released\n",
                                               "w1g1.log": "G /p 250 8192 2\nE /p 400 released\n"}, "", False),
        "zklock's late loss signal against a peer": ({"w1g1.log": "G /p 100 4096 1\nE /p 300 lost lease_expired\n",
                                                      "c1g1.log": "G /p 250 8192 2\nE /p 400 released\n"}, "", False),
        "other paths do not interfere": ({"a.log": "G /p 100 4096 1\nE /p 300 released\n",
                                          "b.log": "G /q 200 8192 2\nE /q 400 released\n"}, "", True),
    }
    bad = 0
    for name, (files, events, want) in cases.items():
        got = run(files, events)
        print(f"self-test {name}: {'pass' if got else 'fail'} (expected {'pass' if want else 'fail'})")
        bad += got != want
    print("chaos check self-test: " + ("PASS" if bad == 0 else "FAIL"))
    return bad == 0


if __name__ == "__main__":
    if sys.argv[1:] == ["--self-test"]:
        sys.exit(0 if self_test() else 1)
    if len(sys.argv) < 2:
        print(__doc__)
        sys.exit(2)
    t = None
    if "--timeout-ms" in sys.argv:
        t = int(sys.argv[sys.argv.index("--timeout-ms") + 1])
    sys.exit(0 if check(sys.argv[1], t) else 1)
