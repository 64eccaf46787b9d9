#!/usr/bin/python3
"""The overlap checker of scripts/chaos.sh.

    chaos_check.py DIR [--timeout-ms T] [--recipe mutex|election|semaphore]
                                          check the worker logs (DIR/*.log), DIR/events and the
                                          servers' logs (DIR/servers/*.log)
    chaos_check.py --self-test            fabricated logs: a clean one must pass, bad ones must fail

Worker logs (zklock_chaos_worker): "G path start_ns token session", then "E path end_ns released"
or "E path signal_ns lost reason". A worker that stops slowly after a loss (zklock_chaos_worker
--slow-stop-ms; its log begins "# slow-stop-ms N") adds "S path stop_ns" when it actually stopped,
just before its release. DIR/events: "ns kind detail..." written by chaos.sh; a "worker_kill NAME"
event ends the open hold of that worker (its log is NAME.log), and a slow stop it cut short.

Fails (exit 1) on: two holds of one path that overlap (a hold ends when its worker stopped: the S
line if there is one, else the E line); fencing tokens not strictly increasing in grant order; a
log line that cannot be read. Reports the margin between each loss signal (E) and the next grant of
the same path, and the hand-over time after a holder was killed.

Each loss is classified by the fault it follows (from DIR/events: the latest fault that started at
or before its loss signal, among the ensemble-wide ones and those aimed at its own worker; "none"
before any), and its margin bound is looked up per fault in BOUND_BY_CASE; the summary gives the
smallest margin per fault.

The stated margin bound applies to a lease loss after which the server expired the session and so
freed the lock; when the holder's own delete freed it (the session still alive), the next grant may
follow the loss signal at once. Which of the two happened is read from the servers' logs: the
leader's "Expiring session 0x..." line, at or before the next grant. Without server logs, a loss
counts as expired if the worker's next hold is on another session (which also counts a session
that a later fault expired after the hand-over).

Election runs (chaos.sh --recipe election; the worker logs begin "# recipe election"): the holds
are leaderships, logged and checked as above ("never two leaders"). Their proclaims and guarded
commits are logged too: "P path token sent_ns done_ns ok value", "C path token sent_ns done_ns ok
data_path version", or "P|C path token sent_ns done_ns fail name category:code message"; each belongs
to the hold of its worker, path and token. Fails (the "no stale write" check) on: two successful
commits on one data node whose fencing tokens go down as their versions go up, or that returned the
same version; a proclaim or commit that landed but was sent after its hold's E line (its loss
signal or release: nothing may be sent once the loss is told); a P or C line without
its hold; a leadership, not killed, without a proclaim and a commit; a lost one, not killed
after the loss, without a commit sent after its loss signal (the worker's test that it fails);
and, with --recipe election, a run without a single successful commit. A commit sent before the
loss signal and acknowledged after it is reported, not failed: it was in flight when the lease ran
out (a delay fault, say), and the server applied it while the leader's node existed, so before any
later leader's grant and before its writes (which the token order checks).

Semaphore runs (chaos.sh --recipe semaphore; the worker logs begin "# recipe semaphore N"): the
holds are leases of a semaphore of N on each path. Fails on a grant while N holds of the path are
still running (the overlap check counts, instead of failing at one); the fencing-token order and
the margins (loss signal -> next grant) are not checked: up to N leases are held at once, so the
next grant of the path is not the one a lost lease's margin protects.

Peers (chaos.sh --peers): logs named c<i>g<gen> (Curator) and k<i>g<gen> (kazoo) are theirs, the
others zklock's. A peer hold whose loss signal (SUSPENDED) came after the next grant of its path is
that library's known exposure (it learns of a silent server only 2/3 T after the last reply, which
can be after the expiry): it is reported as a peer overlap and does not fail the check. Every other
overlap does, whoever holds: each grant is checked against every hold still running, so a peer's
late hold does not hide another overlap under it. The same in an election run with peers (Curator's
LeaderSelector, kazoo's Election): their leaderships are holds, logged alike, so "never two
leaders" spans the libraries; peers neither proclaim nor commit, and the checks of the writes
("no stale write", a leadership's proclaim and commit) ask them of the zklock workers only.
"""
import collections
import datetime
import glob
import os
import re
import statistics
import sys
import tempfile


# The lease margin bound per fault case, as a fraction of T: (0.5875 - f) with f = 0.3, the default
# lease fraction, at any tickTime up to T/2 (chaos.sh --tick). The values come from the
# derivation in docs/lease.md,
# which gives this same bound for every case: the holder's follower frozen or cut off from the
# leader either way, the leader isolated from its quorum, the leader deposed with its followers
# restarted (a new leader gives every session a full T from its own start), a grant after a long
# wait (the lease is renewed before the grant), a delayed heartbeat. A case whose derivation
# changes gets its own value here. Keys: the fault events of chaos.sh that start a fault.
BOUND_BY_CASE = {
    "follower_stop": 0.2875,   # the holder's follower SIGSTOPped (frozen)
    "quorum_cut": 0.2875,      # a follower's links to the leader frozen (cut off)
    "leader_isolate": 0.2875,  # the leader cut off from both followers, its clients' links up
    "leader_depose": 0.2875,   # the same, and its followers restarted at once: a new leader at once
    "leader_kill": 0.2875,     # the leader SIGKILLed: a new leader
    "partition": 0.2875,       # the holder's own connections swallowed for 2 T (a grant after a long wait)
    "delay": 0.2875,           # the holder's traffic delayed 300 ms for 3 s (a delayed heartbeat)
    "drop": 0.2875,            # the holder's connections dropped
    "worker_kill": 0.2875,     # (aims at a worker; its own hold ends as "killed", not by a loss)
    "none": 0.2875,            # no fault before the loss
}
DEFAULT_BOUND = 0.2875  # a fault name missing from the table (reported as such)
# chaos.sh's events that end a fault, or frame the run: not a fault of their own
NOT_A_FAULT = {"start", "stop", "leader_restart", "follower_resume", "quorum_heal", "leader_rejoin",
               "leader_depose_rejoin"}
# faults aimed at one worker (detail: its name): they classify only that worker's losses
AIMED = {"drop", "partition", "delay", "worker_kill"}


def fault_at(events, who, ns):
    """The fault a loss of worker `who` at `ns` follows: the latest one started at or before it."""
    case = "none"
    for at, kind, rest in events:  # sorted by time (read_events)
        if at > ns:
            break
        if kind in NOT_A_FAULT or (kind in AIMED and (not rest or rest[0] != who)):
            continue
        case = kind
    return case


PEER_NAME = re.compile(r"([ck])\d+g\d+$")  # chaos.sh's peers: c<i>g<gen> (Curator), k<i>g<gen> (kazoo)


def kind_of(who):
    m = PEER_NAME.match(who)
    return {"c": "curator", "k": "kazoo"}[m.group(1)] if m else "zklock"


def read_events(d):
    events = []
    path = os.path.join(d, "events")
    if os.path.exists(path):
        for line in open(path):
            parts = line.split()
            if len(parts) >= 2:
                events.append((int(parts[0]), parts[1], parts[2:]))
    events.sort(key=lambda e: e[0])
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


def kills_of(events):
    """{worker name: [ns of its worker_kill events]}"""
    kills = collections.defaultdict(list)
    for ns, kind, rest in events:
        if kind == "worker_kill" and rest:
            kills[rest[0]].append(ns)
    return kills


def read_holds(d, events, ops=None, recipes=None):
    """Returns (holds, problems): hold = dict(path, start, end, signal, token, who, reason, ...).
    `end` is when the holder stopped (the S line if any, else the E line, or its kill); `signal`
    when it was told (the E line; its kill for a killed holder). An election worker's proclaims
    and commits (P and C lines) go to `ops` (dicts: kind, who, path, token, sent, done, ok,
    data, version, value, error, where), the recipes its "# recipe" lines name to `recipes`."""
    kills = kills_of(events)
    ops = [] if ops is None else ops
    recipes = set() if recipes is None else recipes
    holds, problems = [], []
    for f in sorted(glob.glob(os.path.join(d, "*.log"))):
        who = os.path.basename(f)[:-4]
        open_hold = None
        slow = False      # the worker logs an S line after every loss ("# slow-stop-ms N")
        stopping = None   # a lost hold of a slow worker whose S line is due
        for n, line in enumerate(open(f), 1):
            p = line.split()
            try:
                if p[0] == "#":
                    if p[1:2] == ["slow-stop-ms"] and int(p[2]) > 0:
                        slow = True
                    if p[1:2] == ["recipe"]:
                        recipes.add(p[2])
                        if p[2] == "semaphore":
                            recipes.add(f"semaphore-{int(p[3])}")  # (its N)
                    continue
                if p[0] in ("P", "C"):  # (they may come between a loss and its S line)
                    op = dict(kind=p[0], who=who, path=p[1], token=int(p[2]), sent=int(p[3]), done=int(p[4]),
                              ok=p[5] == "ok", data=None, version=None, value=None, error=None, where=f"{f}:{n}")
                    if p[5] not in ("ok", "fail") or op["done"] < op["sent"]:
                        raise ValueError
                    if op["ok"] and p[0] == "C":
                        op["data"], op["version"] = p[6], int(p[7])
                    elif op["ok"]:
                        op["value"] = p[6]
                    else:
                        op["error"] = p[6]
                    ops.append(op)
                    continue
                if stopping and p[0] != "S":
                    problems.append(f"{f}:{n}: a loss without its stop line (S) before this line")
                    stopping = None
                if p[0] == "G":
                    if open_hold:
                        problems.append(f"{f}:{n}: a grant while a hold is open")
                    open_hold = dict(path=p[1], start=int(p[2]), token=int(p[3]), who=who, end=None, reason=None,
                                     session=p[4] if len(p) > 4 else "?")
                elif p[0] == "R":  # a regain: a hold again, after this worker's lease loss of the same token
                    prev = next((h for h in reversed(holds) if h["who"] == who), None)
                    if open_hold or not prev or prev["path"] != p[1] or prev["token"] != int(p[3]) or \
                            prev["reason"] != "lost:lease_expired":
                        problems.append(f"{f}:{n}: a regain (R) that does not follow its lease loss")
                    open_hold = dict(path=p[1], start=int(p[2]), token=int(p[3]), who=who, end=None, reason=None,
                                     session=p[4] if len(p) > 4 else "?", regained=True)
                elif p[0] == "E":
                    if not open_hold or open_hold["path"] != p[1]:
                        problems.append(f"{f}:{n}: an end without its grant")
                        continue
                    open_hold["end"] = open_hold["signal"] = int(p[2])
                    open_hold["reason"] = p[3] if p[3] == "released" else "lost:" + (p[4] if len(p) > 4 else "?")
                    holds.append(open_hold)
                    if slow and open_hold["reason"].startswith("lost:"):
                        stopping = open_hold
                    open_hold = None
                elif p[0] == "S":
                    if not stopping or stopping["path"] != p[1] or int(p[2]) < stopping["signal"]:
                        problems.append(f"{f}:{n}: a stop line (S) without its loss")
                        continue
                    stopping["end"] = int(p[2])
                    stopping["stop"] = "slow"
                    stopping = None
                else:
                    problems.append(f"{f}:{n}: unreadable line {line.strip()!r}")
            except (IndexError, ValueError):
                problems.append(f"{f}:{n}: unreadable line {line.strip()!r}")
        if stopping:  # the log ends in a slow stop: cut short by a kill, or never finished
            after = [k for k in kills[who] if k >= stopping["signal"]]
            stopping["end"] = min(after) if after else float("inf")
            stopping["stop"] = "killed" if after else "never"
            if not after:
                problems.append(f"{f}: a loss without its stop line (S), and the worker was not killed")
        # a loss whose worker's next hold is on another session: that session expired (so the
        # server, not our own delete, freed the lock: the lease's margin bound applies)
        mine = [h for h in holds if h["who"] == who]
        for a, b in zip(mine, mine[1:]):
            a["expired"] = a["session"] != b["session"]
        if open_hold:  # a killed holder: its hold ends when it was killed
            after = [k for k in kills[who] if k >= open_hold["start"]]
            open_hold["end"] = open_hold["signal"] = min(after) if after else float("inf")
            open_hold["reason"] = "killed" if after else "never ended"
            holds.append(open_hold)
    return holds, problems


def check_election(holds, ops, events, recipes, recipe, say, problems):
    """The "no stale write" check of an election run (see the module's doc); returns the count of
    failures. Reports the counts of commits and proclaims."""
    kills = kills_of(events)
    by_key = {(h["who"], h["path"], h["token"]): h for h in holds}
    outside, late = 0, []
    landed = collections.defaultdict(list)  # data node -> [commit]
    counts = collections.Counter()
    errors = collections.defaultdict(collections.Counter)  # (kind, when) -> error -> count
    after_loss = collections.defaultdict(list)  # hold key -> [commit sent after its loss signal]
    seen = collections.defaultdict(set)  # hold key -> {"P", "C"}
    for op in ops:
        key = (op["who"], op["path"], op["token"])
        h = by_key.get(key)
        if h is None:
            problems.append(f"{op['where']}: a {'proclaim' if op['kind'] == 'P' else 'commit'} without its hold "
                            f"(no grant of {op['path']} with token {op['token']} in this log)")
            continue
        seen[key].add(op["kind"])
        lost = h["reason"].startswith("lost:")
        when = "after the loss signal" if lost and op["sent"] >= h["signal"] else "while leading"
        if op["kind"] == "C" and when != "while leading":
            after_loss[key].append(op)
        name = {"P": "proclaim", "C": "commit"}[op["kind"]]
        if op["ok"]:
            counts[op["kind"], "ok"] += 1
            if op["kind"] == "C":
                landed[op["data"]].append(dict(op, hold=h))
            if op["sent"] >= h["signal"]:
                outside += 1
                say(f"OUTSIDE ITS HOLD: {op['who']}'s {name} on {op['path']} (token {op['token']}) was sent "
                    f"{(op['sent'] - h['signal']) / 1e6:.3f} ms after the hold's end ({h['reason']}) and landed "
                    f"({op['where']})")
            elif op["done"] > h["signal"]:
                # in flight at the loss signal: the server applied it while the node existed (the
                # multi's check), so before the next leader's grant; the token order above holds it
                late.append(op)
                if len(late) <= 5:
                    say(f"late acknowledgement: {op['who']}'s {name} on {op['path']} (token {op['token']}) was sent "
                        f"{(h['signal'] - op['sent']) / 1e6:.3f} ms before the hold's end ({h['reason']}) and "
                        f"acknowledged {(op['done'] - h['signal']) / 1e6:.3f} ms after it ({op['where']})")
        else:
            counts[op["kind"], when] += 1
            errors[op["kind"], when][op["error"]] += 1
    stale, dup = 0, 0
    for data, cs in sorted(landed.items()):
        cs.sort(key=lambda c: c["version"])
        for a, b in zip(cs, cs[1:]):
            if a["version"] == b["version"]:
                dup += 1
                say(f"DUPLICATE VERSION on {data}: {a['who']}'s and {b['who']}'s commits both returned version "
                    f"{a['version']} ({a['where']}, {b['where']})")
            if b["token"] < a["token"]:
                stale += 1
                say(f"STALE WRITE on {data}: version {b['version']} by {b['who']} with token {b['token']} after "
                    f"version {a['version']} by {a['who']} with token {a['token']} ({b['where']}, {a['where']})")
    # what the worker does in every leadership: a proclaim and a commit; after a loss, a commit
    missing = 0
    for h in holds:
        key = (h["who"], h["path"], h["token"])
        if kind_of(h["who"]) != "zklock" or h["reason"] == "killed":
            continue
        killed_after = any(k >= h["signal"] for k in kills[h["who"]])
        lacks = [what for k, what in (("P", "proclaim"), ("C", "commit")) if k not in seen[key]]
        if lacks and not killed_after:
            missing += 1
            problems.append(f"{h['who']}.log: the leadership of {h['path']} with token {h['token']} has no "
                            f"{' and no '.join(lacks)}")
        elif h["reason"].startswith("lost:") and not after_loss[key] and not killed_after:
            missing += 1
            problems.append(f"{h['who']}.log: the lost leadership of {h['path']} with token {h['token']} has no "
                            f"commit sent after its loss signal")
    no_commit = (recipe == "election" or "election" in recipes) and not counts["C", "ok"]
    if no_commit:
        say("NO COMMIT: an election run without a single successful commit")

    def errs(kind, when):
        e = errors[kind, when]
        return f" ({', '.join(f'{k} {v}' for k, v in e.most_common())})" if e else ""
    say(f"election: commits {counts['C', 'ok']} landed on {len(landed)} data node(s), "
        f"{counts['C', 'while leading']} failed while leading{errs('C', 'while leading')}, "
        f"{counts['C', 'after the loss signal']} failed after the loss signal{errs('C', 'after the loss signal')}; "
        f"proclaims {counts['P', 'ok']} landed, {counts['P', 'while leading']} failed while leading"
        f"{errs('P', 'while leading')}, {counts['P', 'after the loss signal']} failed after the loss signal"
        f"{errs('P', 'after the loss signal')}")
    say(f"no stale write: token order violations {stale}; duplicate versions {dup}; sent after their hold's "
        f"end and landed {outside}; leaderships missing their writes {missing}")
    if late:
        latest = max(op["done"] - by_key[op["who"], op["path"], op["token"]]["signal"] for op in late)
        say(f"  in flight at the loss signal and acknowledged after it (landed while the node existed; not a "
            f"failure): {len(late)}, latest {latest / 1e6:.3f} ms after the signal")
    return outside + stale + dup + no_commit


def check(d, timeout_ms=None, quiet=False, bounds=None, output=None, recipe=None):
    """True if the run in d passes. bounds: the table of margin bounds per fault case (fractions
    of T; default BOUND_BY_CASE). quiet: nothing printed; output: a list that gets the lines.
    recipe: "election" requires the election's writes (see the module's doc)."""
    out = output if output is not None else []
    say = (lambda s: out.append(s)) if quiet else print
    bounds = BOUND_BY_CASE if bounds is None else bounds
    events = read_events(d)
    ops, recipes = [], set()
    holds, problems = read_holds(d, events, ops, recipes)
    expiries = read_expiries(d, events)
    if expiries is None:
        say("(no server logs: a lease loss counts as expired if its worker's next hold is on another session)")
    by_path = collections.defaultdict(list)
    for h in holds:
        by_path[h["path"]].append(h)
    overlaps, token_errors, margins, handovers, below_bound, peer_overlaps = 0, 0, [], [], 0, 0
    regained = 0  # lease losses whose next hold of the path is the same worker's regain
    # a semaphore's N (its workers' "# recipe semaphore N"; 1 for a lock): a grant overlaps only
    # when N earlier holds are still running
    sizes = {int(r.split("-")[1]) for r in recipes if r.startswith("semaphore-")}
    if len(sizes) > 1:
        problems.append(f"semaphore workers of different N: {sorted(sizes)}")
    capacity = max(sizes) if sizes else 1
    if capacity > 1 or recipe == "semaphore":
        say(f"(a semaphore of {capacity}: at most {capacity} holds of a path at once; no token order, no margins)")
    to_expiry = []  # a lease loss whose session the server then expired: loss signal -> the server's expiry
    unlisted = set()  # fault cases missing from the bounds table

    def bound_of(case):  # s, or None without T: (0.5875 - f) T, f = 0.3 (docs/lease.md), per case
        if case not in bounds:
            unlisted.add(case)
        return bounds.get(case, DEFAULT_BOUND) * timeout_ms / 1000 if timeout_ms else None
    margins_by = []  # (margin entry, who): per implementation
    by_case = collections.defaultdict(list)  # fault case -> [(margin, expired)] of lease losses
    slow_stops = []  # (stop - signal, next grant - stop) of slow stops
    allowance = 0.15  # one-way delay and scheduling on a loaded 2-core machine
    for path, hs in by_path.items():
        hs.sort(key=lambda h: h["start"])
        running = []  # the earlier holds that had not ended by the latest grant
        for i, h in enumerate(hs):
            # every earlier hold still running at this grant overlaps it; a peer's whose own loss
            # signal came late is excused (a peer overlap), any other fails (checked against each of
            # them, not only the one that ends last: a peer's late hold must not hide another)
            running = [o for o in running if o["end"] > h["start"]]
            excused = [o for o in running if kind_of(o["who"]) != "zklock" and o["reason"].startswith("lost:")]
            blamed = [o for o in running if o not in excused]
            if len(running) >= capacity:
                latest = max(blamed or excused, key=lambda o: o["end"])
                if blamed:
                    what = "OVERLAP"
                    overlaps += 1
                    if latest.get("stop") and latest["signal"] <= h["start"]:
                        what = f"OVERLAP (a {latest['stop']} stop: the loss signal came before the grant, the stop after)"
                else:
                    what = f"peer overlap ({kind_of(latest['who'])}'s loss signal came after the next grant)"
                    peer_overlaps += 1
                if capacity > 1:
                    what += f" ({len(running) + 1} holds of a semaphore of {capacity})"
                say(f"{what} on {path}: {h['who']} granted at {h['start']} while {latest['who']} held until "
                    f"{latest['end']} ({latest['reason']}), by {(latest['end'] - h['start']) / 1e6:.3f} ms")
            running.append(h)
            if capacity > 1:
                continue
            # a regain continues its own lost hold: nobody may have been granted in between (the
            # hold before it in grant order must be that one, with the same token)
            regain_ok = h.get("regained") and i > 0 and hs[i - 1]["who"] == h["who"] and \
                hs[i - 1]["token"] == h["token"]
            if h.get("regained") and not regain_ok:
                token_errors += 1
                say(f"REGAIN AFTER ANOTHER GRANT on {path}: {h['who']} regained token {h['token']} after "
                    f"{hs[i - 1]['who'] if i > 0 else 'nobody'}'s {hs[i - 1]['token'] if i > 0 else '-'}")
            elif i > 0 and h["token"] <= hs[i - 1]["token"] and not regain_ok:
                token_errors += 1
                say(f"TOKEN ORDER on {path}: {h['who']} got {h['token']} after {hs[i - 1]['who']}'s {hs[i - 1]['token']}")
            if i + 1 < len(hs) and hs[i + 1].get("regained") and hs[i + 1]["who"] == h["who"]:
                regained += 1  # (not a handover: no margin to measure)
            elif i + 1 < len(hs):
                gap = (hs[i + 1]["start"] - h["signal"]) / 1e9  # the margin: from the loss signal
                if expiries is not None and h["reason"].startswith("lost:"):
                    # freed by the server (the session expired by the next grant; the log has ms)
                    # or by the holder's own delete (expired later, or never)
                    # (an expiry logged before this hold began did not end it: the session went on)
                    at = next((ns for ns in expiries.get(h["session"], []) if ns >= h["start"]), None)
                    h["expired"] = at is not None and at <= hs[i + 1]["start"] + 1_000_000
                    if at is not None:
                        h["expiry_margin"] = (at - h["signal"]) / 1e9
                if h["reason"] == "lost:lease_expired" and h.get("expired") and "expiry_margin" in h:
                    to_expiry.append(h["expiry_margin"])
                if h.get("stop") == "slow":
                    slow_stops.append(((h["end"] - h["signal"]) / 1e9, (hs[i + 1]["start"] - h["end"]) / 1e9))
                if h["reason"].startswith("lost:"):
                    margins.append((gap, h["reason"], h.get("expired")))
                    margins_by.append(((gap, h["reason"], h.get("expired")), h["who"]))
                    if h["reason"] == "lost:lease_expired":
                        case = fault_at(events, h["who"], h["signal"])
                        by_case[case].append((gap, h.get("expired")))
                        bound = bound_of(case)
                        if bound and h.get("expired") and gap < bound - allowance:
                            below_bound += 1
                            say(f"MARGIN on {path}: {h['who']}'s lease loss (fault: {case}) came {gap:.3f} s before "
                                f"the next grant, below the stated bound {bound:.3f} s less {allowance} s, and its "
                                f"session expired")
                elif h["reason"] == "killed":
                    handovers.append(gap)
    faults = collections.Counter(kind for _, kind, _ in events if kind not in NOT_A_FAULT)
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
    election_lines, election_failures = [], 0
    if ops or recipe == "election" or "election" in recipes:  # (its problems are counted below)
        election_failures = check_election(holds, ops, events, recipes, recipe, election_lines.append, problems)
    say("faults: " + (", ".join(f"{k} {v}" for k, v in sorted(faults.items())) or "none"))
    say(f"suspended locks regained (R lines, same token, nobody granted in between): {regained}")
    say(f"overlaps: {overlaps}; fencing-token order violations: {token_errors}; unreadable lines: {len(problems)}")
    for p in problems[:10]:
        say("  " + p)
    for line in election_lines:
        say(line)
    if margins:
        ms = sorted(m for m, _, _ in margins)
        say(f"loss signal -> next grant of the path: {len(ms)} losses, smallest {ms[0]:.3f} s, "
            f"median {statistics.median(ms):.3f} s")
        exp = sorted(m for m, r, e in margins if r == "lost:lease_expired" and e)
        surv = sorted(m for m, r, e in margins if r == "lost:lease_expired" and e is False)
        if exp:
            say(f"  lease losses whose session then expired: {len(exp)}, margin smallest {exp[0]:.3f} s, median "
                f"{statistics.median(exp):.3f} s")
        if to_expiry:
            say(f"  the same, loss signal -> the server's expiry (its log): smallest {min(to_expiry):.3f} s, "
                f"median {statistics.median(to_expiry):.3f} s")
        if surv:
            say(f"  lease losses whose session survived (the node was deleted by its holder, so a small margin "
                f"is no overlap): {len(surv)}, margin smallest {surv[0]:.3f} s")
    else:
        say("loss signal -> next grant: no losses")
    if by_case:
        say("lease losses by the fault they followed (margin: loss signal -> next grant; the bound applies "
            "where the session expired):")
        for case in sorted(by_case):
            ms = sorted(m for m, _ in by_case[case])
            ex = sorted(m for m, e in by_case[case] if e)
            b = bound_of(case)
            say(f"  {case}: {len(ms)} losses, smallest {ms[0]:.3f} s; session expired: {len(ex)}"
                + (f", smallest {ex[0]:.3f} s" if ex else "")
                + (f"; bound {b:.3f} s" if b else "")
                + (" (not in the table: default)" if case in unlisted else ""))
    if slow_stops:
        say(f"slow stops (the holder acted on after its loss signal): {len(slow_stops)}, longest "
            f"{max(a for a, _ in slow_stops):.3f} s after the signal; stop -> next grant smallest "
            f"{min(b for _, b in slow_stops):.3f} s")
    if handovers:
        hv = sorted(handovers)
        say(f"hand-over after a holder was killed: {len(hv)}, median {statistics.median(hv):.3f} s, "
            f"longest {hv[-1]:.3f} s")
    say(f"lease margins below the stated bound: {below_bound}")
    ok = overlaps == 0 and token_errors == 0 and not problems and below_bound == 0 and election_failures == 0
    say("chaos check: " + ("PASS" if ok else "FAIL"))
    return ok


def self_test():
    """Fabricated logs: the checker must pass a clean one and fail each broken one."""
    def expiring(ns, session):
        return (f"{clock_of(ns)} [SessionTracker] INFO org.apache.zookeeper.server.ZooKeeperServer - "
                f"Expiring session 0x{session}, timeout of 2000ms exceeded\n")

    def run(files, events="", bounds=None, output=None, recipe=None):
        with tempfile.TemporaryDirectory() as d:
            for name, text in files.items():
                os.makedirs(os.path.dirname(os.path.join(d, name)), exist_ok=True)
                with open(os.path.join(d, name), "w") as f:
                    f.write(text)
            with open(os.path.join(d, "events"), "w") as f:
                f.write(events)
            return check(d, 2000, quiet=True, bounds=bounds, output=output, recipe=recipe)

    # a lease loss at 1.0 s whose session the server expired at 1.7 s, the next grant at 1.8 s: a
    # margin of 0.8 s, above the default bound less its allowance (0.575 - 0.15 s), below 0.85 s
    def lost_at_1s(events):
        return ({"a.log": "G /p 100 4096 1a\nE /p 1000000000 lost lease_expired\n",
                 "b.log": "G /p 1800000000 8192 3c\nE /p 1900000000 released\n",
                 "servers/server1.log": expiring(1_700_000_000, "1a")}, "0 start\n" + events)
    stricter = dict(BOUND_BY_CASE, leader_depose=0.5)  # 1.0 s, less the allowance 0.85 s
    slow = "# slow-stop-ms 600\nG /p 100 4096 1\nE /p 1000000000 lost lease_expired\n"

    # an election run: a leads and resigns, b leads and loses; each proclaims and commits, and b
    # tries once more after its loss signal (which fails)
    lost_after = ("P /p 8192 410 420 fail lock_lost zklock:53 lock lost\n"
                  "C /p 8192 430 440 fail lock_lost zklock:53 lock lost\n")

    def elect(a_ops=None, b_ops=None, b_after=None, **swap):
        a = ("# recipe election\nG /p 100 4096 1\n" + (a_ops if a_ops is not None else
             "P /p 4096 110 120 ok a-1-p0\nC /p 4096 130 140 ok /p-data 1\n") + "E /p 200 released\n")
        b = ("# recipe election\nG /p 300 8192 2\n" + (b_ops if b_ops is not None else
             "P /p 8192 310 320 ok b-1-p0\nC /p 8192 330 340 ok /p-data 2\n") + "E /p 400 lost lease_expired\n" +
             (b_after if b_after is not None else lost_after))
        return {"a.log": a, "b.log": b}

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
        "peer's late loss signal does not hide a zklock overlap under it": (
            {"c1g1.log": "G /p 100 4096 1\nE /p 1000 lost suspended\n",
             "w1g1.log": "G /p 200 8192 2\nE /p 600 lost lease_expired\n",
             "w2g1.log": "G /p 500 12288 3\nE /p 700 released\n"}, "", False, None,
            "OVERLAP on /p: w2g1 granted at 500 while w1g1 held until 600"),
        "a log named like a peer's but not one is zklock's": (
            {"cx.log": "G /p 100 4096 1\nE /p 300 lost lease_expired\n",
             "w1g1.log": "G /p 250 8192 2\nE /p 400 released\n"}, "", False),
        "other paths do not interfere": ({"a.log": "G /p 100 4096 1\nE /p 300 released\n",
                                          "b.log": "G /q 200 8192 2\nE /q 400 released\n"}, "", True),
        # a holder that stops slowly after its loss signal (S): its hold ends when it stopped
        "slow stop ended before the next grant": (
            {"a.log": slow + "S /p 1500000000\n", "b.log": "G /p 1800000000 8192 2\nE /p 1900000000 released\n"},
            "", True, None, "slow stops (the holder acted on after its loss signal): 1, longest 0.500 s"),
        "slow stop ended after the next grant: an overlap": (
            {"a.log": slow + "S /p 1900000000\n", "b.log": "G /p 1800000000 8192 2\nE /p 1950000000 released\n"},
            "", False, None, "OVERLAP (a slow stop"),
        "slow stop cut short by a kill before the next grant": (
            {"a.log": slow, "b.log": "G /p 1800000000 8192 2\nE /p 1900000000 released\n"},
            "1500000000 worker_kill a\n", True),
        "slow stop cut short by a kill after the next grant: an overlap": (
            {"a.log": slow, "b.log": "G /p 1800000000 8192 2\nE /p 1900000000 released\n"},
            "1850000000 worker_kill a\n", False),
        "slow worker's loss without its stop line": (
            {"a.log": slow + "G /p 3000000000 12288 1\nE /p 3100000000 released\n",
             "b.log": "G /p 1800000000 8192 2\nE /p 1900000000 released\n"}, "", False),
        "stop line without a loss": ({"a.log": "G /p 100 4096 1\nE /p 200 released\nS /p 300\n"}, "", False),
        # the margin bound per fault case (BOUND_BY_CASE), the loss classified by the events
        "per-case bound: the loss follows leader_depose, reported per fault": (
            *lost_at_1s("500000000 leader_depose server3 6000ms\n"), True, None,
            "  leader_depose: 1 losses, smallest 0.800 s; session expired: 1, smallest 0.800 s; bound 0.575 s"),
        "per-case bound: below leader_depose's (stricter) bound": (
            *lost_at_1s("500000000 leader_depose server3 6000ms\n"), False, stricter, "fault: leader_depose"),
        "per-case bound: the same margin after leader_isolate, within its bound": (
            *lost_at_1s("500000000 leader_isolate server3 6000ms\n"), True, stricter),
        "per-case bound: a fault aimed at another worker does not classify the loss": (
            *lost_at_1s("500000000 leader_depose server3 6000ms\n900000000 drop b\n"), False, stricter),
        "per-case bound: a fault aimed at the holder does": (
            *lost_at_1s("500000000 leader_depose server3 6000ms\n900000000 drop a\n"), True, stricter, "  drop: 1"),
        "per-case bound: a fault that has ended still classifies the loss after it": (
            *lost_at_1s("500000000 leader_depose server3 6000ms\n900000000 leader_depose_rejoin server3\n"),
            False, stricter),
        "per-case bound: a fault after the loss does not": (
            *lost_at_1s("500000000 leader_isolate server3 6000ms\n1100000000 leader_depose server3 6000ms\n"),
            True, stricter, "  leader_isolate: 1"),
    }
    cases.update({
        # election runs (--recipe election): the "no stale write" check
        "election: clean": (elect(), "", True, None,
                            "election: commits 2 landed on 1 data node(s), 0 failed while leading, 1 failed after "
                            "the loss signal (lock_lost 1); proclaims 2 landed", "election"),
        "election: the versions go back in token (a stale write)": (
            elect(a_ops="P /p 4096 110 120 ok a-1-p0\nC /p 4096 130 140 ok /p-data 2\n",
                  b_ops="P /p 8192 310 320 ok b-1-p0\nC /p 8192 330 340 ok /p-data 1\n"),
            "", False, None, "STALE WRITE on /p-data: version 2 by a with token 4096", "election"),
        "election: two commits returned one version": (
            elect(b_ops="P /p 8192 310 320 ok b-1-p0\nC /p 8192 330 340 ok /p-data 1\n"),
            "", False, None, "DUPLICATE VERSION on /p-data", "election"),
        "election: a commit sent after the loss signal landed": (
            elect(b_after=lost_after + "C /p 8192 450 460 ok /p-data 3\n"), "", False, None,
            "OUTSIDE ITS HOLD: b's commit on /p (token 8192) was sent 0.000 ms after the hold's end "
            "(lost:lease_expired) and landed", "election"),
        "election: a commit in flight at the loss signal, acknowledged after it: reported": (
            elect(b_after="C /p 8192 390 410 ok /p-data 3\n" + lost_after), "", True, None,
            "late acknowledgement: b's commit", "election"),
        "election: ... and a stale write all the same if a later leader's commit came first": (
            {**elect(b_after="C /p 8192 390 410 ok /p-data 4\n" + lost_after),
             "c.log": "# recipe election\nG /p 405 12288 3\nP /p 12288 406 407 ok c-1-p0\n"
                      "C /p 12288 407 408 ok /p-data 3\nE /p 500 released\n"}, "", False, None,
            "STALE WRITE on /p-data: version 4 by b with token 8192", "election"),
        "election: a proclaim after the resignation landed": (
            elect(a_ops="P /p 4096 110 120 ok a-1-p0\nC /p 4096 130 140 ok /p-data 1\nP /p 4096 210 220 ok a-1-p1\n"),
            "", False, None, "OUTSIDE ITS HOLD: a's proclaim", "election"),
        "election: a commit without its hold": (
            elect(b_after=lost_after + "C /p 12288 450 460 fail lock_lost zklock:53 lock lost\n"), "", False, None,
            "a commit without its hold", "election"),
        "election: a leadership without its commit": (
            elect(a_ops="P /p 4096 110 120 ok a-1-p0\n"), "", False, None, "has no commit", "election"),
        "election: a lost leadership that did not try after its loss": (
            elect(b_after=""), "", False, None, "has no commit sent after its loss signal", "election"),
        "election: ... unless its worker was killed after the loss": (elect(b_after=""), "450 worker_kill b\n", True),
        "election: a killed leader needs no writes": (
            {"a.log": "# recipe election\nG /p 100 4096 1\nP /p 4096 110 120 ok a-1-p0\nC /p 4096 130 140 ok /p-data 1\n"
                      "E /p 200 released\n", "b.log": "# recipe election\nG /p 300 8192 2\n"}, "350 worker_kill b\n", True),
        "election: a run without a successful commit": (
            elect(a_ops="P /p 4096 110 120 ok a-1-p0\nC /p 4096 130 140 fail connection_loss zookeeper:-4 connection loss\n",
                  b_ops="P /p 8192 310 320 ok b-1-p0\nC /p 8192 330 340 fail connection_loss zookeeper:-4 connection loss\n"),
            "", False, None, "NO COMMIT", "election"),
        "election: an unreadable commit line": (
            elect(b_ops="P /p 8192 310 320 ok b-1-p0\nC /p 8192 330 340 ok /p-data\n"), "", False, None, None,
            "election"),
        "election: a mutex run checked as an election run fails (no commit)": (clean, "", False, None, "NO COMMIT",
                                                                             "election"),
        # election runs with peers (chaos.sh --recipe election --peers): their leaderships are holds,
        # without proclaims or commits
        "election with peers: a Curator and a kazoo leader without writes pass": (
            {**elect(), "c6g1.log": "G /p 500 12288 9\nE /p 600 released\n",
             "k7g1.log": "G /p 700 16384 a\nE /p 800 lost suspended\n"}, "", True, None,
            "holds by implementation: curator 1, kazoo 1, zklock 2", "election"),
        "election with peers: a peer leader whose loss signal came late: a peer overlap": (
            {**elect(), "k6g1.log": "G /p 500 12288 9\nE /p 1000 lost suspended\n",
             "w3g1.log": "# recipe election\nG /p 900 16384 3\nP /p 16384 910 920 ok w3g1-1-p0\n"
                         "C /p 16384 930 940 ok /p-data 3\nE /p 1100 released\n"}, "", True, None,
            "peer overlap (kazoo's loss signal came after the next grant) on /p: w3g1 granted at 900 while k6g1",
            "election"),
        "election with peers: a zklock leader overlapped by a peer's": (
            {**elect(), "c6g1.log": "G /p 350 12288 9\nE /p 600 released\n"}, "", False, None,
            "OVERLAP on /p: c6g1 granted at 350 while b held until 400 (lost:lease_expired)", "election"),
        # semaphore runs (--recipe semaphore): N holds of a path at once pass, N + 1 fail, and the
        # tokens are not ordered
        "semaphore of 2: two leases at once, tokens out of order": (
            {"a.log": "# recipe semaphore 2\nG /p 100 8192 1\nE /p 300 released\n",
             "b.log": "# recipe semaphore 2\nG /p 200 4096 2\nE /p 400 lost lease_expired\n"}, "", True, None,
            "a semaphore of 2", "semaphore"),
        "semaphore of 2: a third lease at once": (
            {"a.log": "# recipe semaphore 2\nG /p 100 4096 1\nE /p 300 released\n",
             "b.log": "# recipe semaphore 2\nG /p 200 8192 2\nE /p 400 released\n",
             "c.log": "# recipe semaphore 2\nG /p 250 12288 3\nE /p 500 released\n"}, "", False, None,
            "OVERLAP (3 holds of a semaphore of 2) on /p: c granted at 250", "semaphore"),
        "semaphore: workers of different N": (
            {"a.log": "# recipe semaphore 2\nG /p 100 4096 1\nE /p 300 released\n",
             "b.log": "# recipe semaphore 3\nG /p 400 8192 2\nE /p 500 released\n"}, "", False, None,
            "semaphore workers of different N", "semaphore"),
        "a regain: the same token, nobody granted in between": (
            {"a.log": "G /p 100 4096 1\nE /p 200 lost lease_expired\nR /p 900 4096 1\nE /p 1000 released\n",
             "b.log": "G /p 1100 8192 2\nE /p 1200 released\n"}, "", True, None,
            "suspended locks regained (R lines, same token, nobody granted in between): 1"),
        "a regain after another's grant": (
            {"a.log": "G /p 100 4096 1\nE /p 200 lost lease_expired\nR /p 900 4096 1\nE /p 1000 released\n",
             "b.log": "G /p 500 8192 2\nE /p 600 released\n"}, "", False, None, "REGAIN AFTER ANOTHER GRANT"),
        "a regain that overlaps another's hold": (
            {"a.log": "G /p 100 4096 1\nE /p 200 lost lease_expired\nR /p 900 4096 1\nE /p 1000 released\n",
             "b.log": "G /p 500 8192 2\nE /p 950 released\n"}, "", False, None, "OVERLAP"),
        "a regain without its lease loss": (
            {"a.log": "G /p 100 4096 1\nE /p 200 released\nR /p 900 4096 1\nE /p 1000 released\n"}, "", False,
            None, "does not follow its lease loss"),
        "election with peers: only peers lead: no commit": (
            {"c6g1.log": "G /p 500 12288 9\nE /p 600 released\n"}, "", False, None, "NO COMMIT", "election"),
    })
    bad = 0
    for name, (files, events, want, *more) in cases.items():
        bounds, text, recipe = (more + [None, None, None])[:3]
        lines = []
        got = run(files, events, bounds, lines, recipe)
        shown = text is None or any(text in line for line in lines)
        print(f"self-test {name}: {'pass' if got else 'fail'} (expected {'pass' if want else 'fail'})"
              + ("" if shown else f"; the report lacks {text!r}"))
        bad += got != want or not shown
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
    r = None
    if "--recipe" in sys.argv:
        r = sys.argv[sys.argv.index("--recipe") + 1]
        if r not in ("mutex", "election", "semaphore"):
            print("chaos_check.py: --recipe mutex|election|semaphore")
            sys.exit(2)
    sys.exit(0 if check(sys.argv[1], t, recipe=r) else 1)
