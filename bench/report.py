# Turns bench/compare's JSON lines into a markdown table with zklock/peer ratios and a gnuplot script.
# A row measured several times (bench/compare --repeats) is reported by its median, with the
# spread (min-max) of its cycles/s; overlaps are summed over the runs.
import collections, json, statistics, sys

src, md_path, outdir = sys.argv[1], sys.argv[2], sys.argv[3]
rows = [json.loads(l) for l in open(src) if l.strip()]
groups = collections.defaultdict(list)
for r in rows:
    groups[(r["fsync"], r["workload"], r["impl"])].append(r)
CONFIG = {"workers", "sessions", "locks", "hold_ms", "rep", "processes", "handoff"}

def merge(rs):
    m = dict(rs[0])
    for k, v in rs[0].items():
        if k in CONFIG or isinstance(v, bool) or not isinstance(v, (int, float)):
            continue
        vals = [x[k] for x in rs if isinstance(x.get(k), (int, float))]
        if vals:
            m[k] = sum(vals) if k == "overlaps" else statistics.median(vals)
    for k in ("requests_per_cycle",):  # (null in some runs: the median of those that have it)
        vals = [x[k] for x in rs if isinstance(x.get(k), (int, float))]
        m[k] = statistics.median(vals) if vals else None
    cps = [x["cycles_per_s"] for x in rs]
    m["reps"], m["cps_min"], m["cps_max"] = len(rs), min(cps), max(cps)
    return m

by = collections.defaultdict(dict)
for (fs, wl, impl), rs in groups.items():
    by[(fs, wl)][impl] = merge(rs)
peers = ["curator", "kazoo", "raw-c"]
reps = max((len(rs) for rs in groups.values()), default=1)

def f(x, nd=0):
    return "-" if x is None else f"{x:,.{nd}f}"

def cps_cell(r):
    """cycles/s: the median, and the spread when there were several runs"""
    if not r:
        return "-"
    if r.get("reps", 1) > 1:
        return f"{f(r['cycles_per_s'])} ({f(r['cps_min'])}-{f(r['cps_max'])})"
    return f(r["cycles_per_s"])

def write_rtt(fs):
    """the median write round trip (zk_raw_bench rtt) of this forceSync setting, in us"""
    r = by.get((fs, "rtt"), {}).get("raw-c-rtt")
    return r.get("write_rtt_us") if r else None

def round_trips(fs, r):
    """A one-lock row's cycle, less its hold, in write round trips of the same run: its chain of
    waits, whatever the requests (a read round trip is shorter than a write's). Rows of many
    locks run in parallel: no chain to count."""
    w = write_rtt(fs)
    if not r or not w or r.get("locks") != 1 or not r.get("cycles_per_s"):
        return None
    return (1e6 / r["cycles_per_s"] - 1000 * (r.get("hold_ms") or 0)) / w

lines = []
for fs in ["no", "yes"]:
    keys = [k for k in by if k[0] == fs]
    if not keys:
        continue
    lines.append(f"\n### forceSync={fs}\n")
    if reps > 1:
        lines.append(f"Medians of {reps} runs each, the runs in turn; cycles/s with their spread (min-max).\n")
    lines.append("| workload | zklock cycles/s | curator | kazoo | raw C | zklock/curator | zklock/kazoo | zklock/raw | "
                 "p50 us zklock / curator | p99 us zklock / curator | CPU us/cycle zklock / curator | "
                 "requests/cycle zklock / curator / kazoo / raw C | round trips/cycle zklock / curator / kazoo / raw C | overlaps |")
    lines.append("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    order = [k for k in sorted(keys, key=lambda k: [w["workload"] for w in rows].index(k[1]))]
    for k in order:
        d = by[k]
        if k[1] in ("pipelined-ceiling", "pipelined-lock-ceiling", "rtt") or k[1].startswith("herd-") or k[1].startswith("ring-"):
            continue
        z = d.get("zklock")
        if not z:
            continue
        if k[1].endswith("-scope-exit"): # zklock released at scope exit; the peers as in the base workload
            d = dict(by.get((fs, k[1][: -len("-scope-exit")]), {}), zklock=z)
        cps = {p: d[p]["cycles_per_s"] if p in d else None for p in peers}
        ratio = lambda p: None if not cps[p] else z["cycles_per_s"] / cps[p]
        c = d.get("curator", {})
        ov = sum(x.get("overlaps", 0) or 0 for x in d.values())
        rq = " / ".join(f(d.get(p, {}).get("requests_per_cycle"), 2) for p in ["zklock"] + peers)
        rt = " / ".join(f(round_trips(fs, d.get(p)), 2) for p in ["zklock"] + peers)
        lines.append(f"| {k[1]} | {cps_cell(z)} | {cps_cell(d.get('curator'))} | {cps_cell(d.get('kazoo'))} | {cps_cell(d.get('raw-c'))} | "
                     f"{f(ratio('curator'), 2)} | {f(ratio('kazoo'), 2)} | {f(ratio('raw-c'), 2)} | "
                     f"{f(z['p50_us'])} / {f(c.get('p50_us'))} | {f(z['p99_us'])} / {f(c.get('p99_us'))} | "
                     f"{f(z['cpu_us_per_cycle'], 1)} / {f(c.get('cpu_us_per_cycle'), 1)} | {rq} | {rt} | {ov} |")
    if write_rtt(fs):
        rr = by[(fs, "rtt")]["raw-c-rtt"]
        lines.append(f"\nRound trips per cycle: a one-lock row's cycle (less its hold) over the median write round trip "
                     f"of the same run, {f(rr['write_rtt_us'])} us (a read's: {f(rr['read_rtt_us'])} us; zk_raw_bench rtt). "
                     f"So a cycle of two writes and a read counts a little under 3; a hand-off, one write and a watch.")
    ceil = by.get((fs, "pipelined-ceiling"), {}).get("raw-c-pipelined")
    if ceil:
        lines.append(f"\nRaw C client, pipelined create+delete pairs (64 in flight, one session): {f(ceil['cycles_per_s'])} pairs/s (the server's write ceiling).")
    lceil = by.get((fs, "pipelined-lock-ceiling"), {}).get("raw-c-pipelined-lock")
    if lceil:
        zk = by.get((fs, "32s-32l"), {}).get("zklock")
        share = f" ({100 * zk['cycles_per_s'] / lceil['cycles_per_s']:.0f}% of it)" if zk and lceil["cycles_per_s"] else ""
        lines.append(f"\nRaw C client, pipelined lock cycles (create + the parent's listing sent together, then delete; "
                     f"32 in flight, one parent each, one session): {f(lceil['cycles_per_s'])} cycles/s (the server's ceiling "
                     f"for a lock cycle's three requests); zklock 32s-32l: {f(zk['cycles_per_s']) if zk else '-'}{share}.")
    for n in (8, 32):
        ring = by.get((fs, f"ring-{n}s"), {}).get("raw-c-ring")
        zk = by.get((fs, f"{n}s-1l"), {}).get("zklock")
        if ring:
            share = f" ({100 * zk['cycles_per_s'] / ring['cycles_per_s']:.0f}% of it)" if zk and ring["cycles_per_s"] else ""
            lines.append(f"\nRaw C hand-off ring, {n} sessions in one queue: {f(ring['cycles_per_s'])} hand-offs/s (the contended "
                         f"ceiling: a delete's commit plus one watch delivery per hand-off); zklock {n}s-1l: "
                         f"{f(zk['cycles_per_s']) if zk else '-'}{share}.")
            cur = by.get((fs, f"{n}s-1l"), {}).get("curator", {}).get("cycles_per_s")
            if cur:
                lines.append(f"The raw C ring itself is {ring['cycles_per_s'] / cur:.2f}x Curator's {n}s-1l in this run.")
cost = [(fs, wl, on, off) for (fs, wl), d in by.items()
        for on, off in [("zklock", "zklock-metrics-off"), ("zklock-handoff64", "zklock-handoff64-metrics-off")]
        if on in d and off in d]
if cost:
    lines.append("\n### The metrics' cost: the same run with session_options::metrics on and off\n")
    lines.append("| forceSync | workload | cycles/s on | cycles/s off | on/off | CPU us/cycle on | off |")
    lines.append("|---|---|---:|---:|---:|---:|---:|")
    for fs, wl, on, off in cost:
        a, b = by[(fs, wl)][on], by[(fs, wl)][off]
        lines.append(f"| {fs} | {wl} | {f(a['cycles_per_s'])} | {f(b['cycles_per_s'])} | "
                     f"{f(a['cycles_per_s'] / b['cycles_per_s'], 2)} | {f(a['cpu_us_per_cycle'], 1)} | {f(b['cpu_us_per_cycle'], 1)} |")
tls = [(fs, wl, d["zklock"], d["zklock-tls"]) for (fs, wl), d in by.items() if "zklock" in d and "zklock-tls" in d]
if tls:
    lines.append("\n### TLS: zklock through its relay to the server's secure port, next to plain (same server)\n")
    lines.append("| forceSync | workload | cycles/s plain | cycles/s TLS | TLS/plain | p50 us plain / TLS | CPU us/cycle plain / TLS |")
    lines.append("|---|---|---:|---:|---:|---:|---:|")
    for fs, wl, a, b in tls:
        lines.append(f"| {fs} | {wl} | {f(a['cycles_per_s'])} | {f(b['cycles_per_s'])} | "
                     f"{f(b['cycles_per_s'] / a['cycles_per_s'], 2)} | {f(a['p50_us'])} / {f(b['p50_us'])} | "
                     f"{f(a['cpu_us_per_cycle'], 1)} / {f(b['cpu_us_per_cycle'], 1)} |")
herd = [r for r in rows if r["workload"].startswith("herd-")]
if herd:
    lines.append("\n### Herd effect (forceSync=no): the seeds' three algorithms, one lock, one session per waiter\n")
    lines.append("| algorithm | waiters | cycles/s | waiters woken per release | watch events per release | p99 acquire us |")
    lines.append("|---|---:|---:|---:|---:|---:|")
    names = {"zklock-predecessor": "predecessor watch (the recipe)", "zklock-children": "all watch the children",
             "zklock-unique": "unique node, all watch it"}
    for r in herd:
        lines.append(f"| {names.get(r['impl'], r['impl'])} | {r['workers']} | {f(r['cycles_per_s'])} | "
                     f"{f(r.get('waiters_woken_per_cycle', r.get('watch_events_per_cycle')), 2)} | "
                     f"{f(r.get('watch_events_per_cycle'), 2)} | {f(r['p99_us'])} |")
import os

def curator_cps(fs, workload):
    return by.get((fs, workload), {}).get("curator", {}).get("cycles_per_s")

handoff = [r for r in rows if r["workload"].startswith("handoff-")]
if handoff:
    fs0 = handoff[0]["fsync"]
    base = curator_cps(fs0, "32s-1l")
    lines.append(f"\n### In-process hand-off (forceSync={fs0}): 1,000 coroutines on one lock\n")
    lines.append("One session per process. `local_handoff` = most consecutive grants per node; "
                 "share = each process's fraction of the grants (min / max).\n")
    lines.append("| local_handoff | processes | cycles/s | x Curator 32s-1l | most grants per node | share min / max | "
                 "requests/cycle | CPU us/cycle | p99 acquire us | overlaps |")
    lines.append("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for r in handoff:
        ratio = r["cycles_per_s"] / base if base else None
        lines.append(f"| {r.get('handoff', 0)} | {r.get('processes', r['sessions'])} | {f(r['cycles_per_s'])} | {f(ratio, 1)} | "
                     f"{r.get('max_grants_per_node', '-')} | {r.get('session_share_min', 0):.3f} / {r.get('session_share_max', 0):.3f} | "
                     f"{f(r['requests_per_cycle'], 3)} | {f(r['cpu_us_per_cycle'], 1)} | {f(r['p99_us'])} | {r['overlaps']} |")
    if base:
        lines.append(f"\n(Curator, 32 sessions on one lock, same run: {f(base)} cycles/s.)")

wpath = os.path.join(outdir, "waiters.jsonl")
waiters = [json.loads(l) for l in open(wpath) if l.strip()] if os.path.exists(wpath) else []
if waiters:
    lines.append("\n### Many waiters on one lock in one process (one session, forceSync=no)\n")
    lines.append("| waiters | local_handoff | nodes in line | client bytes per waiter | ZooKeeper watch events per release | "
                 "drain s | grants/s | mass cancel s | cancelled | nodes left |")
    lines.append("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for w in waiters:
        lines.append(f"| {f(w['waiters'])} | {w.get('handoff', 0)} | {f(w['queued_nodes'])} | {f(w['client_bytes_per_waiter'])} | "
                     f"{w['watch_events_per_release']:.3f} | {w['drain_s']:.2f} | {f(w['grants_per_s'])} | {w['cancel_s']:.2f} | "
                     f"{f(w['aborted'])} | {w['nodes_left']} |")
    lines.append("\nEvery release completes exactly one waiter. Plain mode: one waiter woken per release (two watch events when the "
                 "release carries its marker: the marker's and the deletion's). "
                 "Hand-off: the next local waiter directly; ZooKeeper sees one node per `local_handoff` grants.")

# The issue's targets, read from this run (forceSync=no)
def z(workload, key="cycles_per_s", impl="zklock", fs="no"):
    return by.get((fs, workload), {}).get(impl, {}).get(key)

def ratio(a, b):
    return a / b if a and b else None

targets = []
def target(name, value, goal, ok):
    targets.append(f"| {name} | {value} | {goal} | {'met' if ok else 'missed'} |")
if z("1w-1l"):
    rq = z("1w-1l", "requests_per_cycle"); target("requests per cycle, uncontended (1w-1l)", f(rq, 2), "3", rq is not None and rq <= 3.005)
    worst = max((z(w, "requests_per_cycle") or 0) for w in ["8s-1l", "32s-1l", "8s-1l-hold1ms", "32s-1l-hold1ms"])
    target("requests per cycle, contended (worst 1-lock workload)", f(worst, 2), "<= 5", worst <= 5.005)
    r = ratio(z("1w-1l"), curator_cps("no", "1w-1l")); target("1w-1l cycles/s vs Curator", f(r, 2) + "x", ">= 1.5x", r and r >= 1.5)
    if z("1w-1l-scope-exit"):
        r = ratio(z("1w-1l-scope-exit"), curator_cps("no", "1w-1l"))
        target("1w-1l cycles/s vs Curator, zklock released at scope exit", f(r, 2) + "x", ">= 1.5x", r and r >= 1.5)
    r = ratio(z("1w-1l", "p50_us"), z("1w-1l", "p50_us", "curator")); target("1w-1l p50 acquire vs Curator", f(r, 2) + "x", "<= 0.7x", r and r <= 0.7)
    r = ratio(z("32s-1l"), curator_cps("no", "32s-1l")); target("32s-1l cycles/s vs Curator", f(r, 2) + "x", ">= 1.5x", r and r >= 1.5)
    r = ratio(z("32s-32l"), curator_cps("no", "32s-32l")); target("32s-32l cycles/s vs Curator", f(r, 2) + "x", ">= 1.2x", r and r >= 1.2)
    ceil = by.get(("no", "pipelined-ceiling"), {}).get("raw-c-pipelined", {}).get("cycles_per_s")
    r = ratio(z("32s-32l"), ceil); target("32s-32l vs raw pipelined ceiling", f(100 * r if r else None, 0) + "%", ">= 90%", r and r >= 0.9)
    if z("32s-32l-scope-exit"):
        r = ratio(z("32s-32l-scope-exit"), ceil)
        target("32s-32l vs raw pipelined ceiling, released at scope exit", f(100 * r if r else None, 0) + "%", ">= 90%", r and r >= 0.9)
    lceil = by.get(("no", "pipelined-lock-ceiling"), {}).get("raw-c-pipelined-lock", {}).get("cycles_per_s")
    if lceil:
        r = ratio(z("32s-32l"), lceil)
        target("32s-32l vs raw pipelined lock-cycle ceiling", f(100 * r if r else None, 0) + "%", ">= 90%", r and r >= 0.9)
    raw1 = by.get(("no", "1w-1l"), {}).get("raw-c", {}).get("cycles_per_s")
    r = ratio(z("1w-1l"), raw1); target("1w-1l cycles/s vs the raw C loop", f(r, 2) + "x", ">= 1.3x", r and r >= 1.3)
    for n in (8, 32):
        ring = by.get(("no", f"ring-{n}s"), {}).get("raw-c-ring", {}).get("cycles_per_s")
        r = ratio(z(f"{n}s-1l"), ring)
        target(f"{n}s-1l vs the raw C hand-off ring", f(100 * r if r else None, 0) + "%", ">= 95%", r and r >= 0.95)
        r = ratio(z(f"{n}s-1l"), curator_cps("no", f"{n}s-1l"))
        target(f"{n}s-1l cycles/s vs Curator", f(r, 2) + "x", ">= 2.5x", r and r >= 2.5)
    worst_cpu = max(ratio(z(w, "cpu_us_per_cycle"), z(w, "cpu_us_per_cycle", "curator")) or 0
                    for w in ["1w-1l", "8s-1l", "32s-1l", "32s-32l", "1w-1l-hold1ms", "8s-1l-hold1ms", "32s-1l-hold1ms", "32s-32l-hold1ms"])
    target("client CPU per cycle vs Curator (worst workload)", f(worst_cpu, 2) + "x", "<= 0.25x", worst_cpu <= 0.25)
ho = [r for r in handoff if r["fsync"] == "no" and r.get("handoff") and r["sessions"] == 1]
if ho:
    r = ratio(ho[0]["cycles_per_s"], curator_cps("no", "32s-1l"))
    target("hand-off, 1,000 coroutines, 1 lock vs Curator 32s-1l", f(r, 1) + "x", ">= 20x", r and r >= 20)
    multi = [x for x in handoff if x["fsync"] == "no" and x.get("handoff") and x["sessions"] > 1]
    if multi:
        m = multi[0]
        fair = m["max_grants_per_node"] <= m["handoff"] and m["session_share_min"] > 0
        target(f"hand-off, {m.get('processes', m['sessions'])} processes: most grants per node / smallest share",
               f"{m['max_grants_per_node']} / {m['session_share_min']:.3f}", f"<= {m['handoff']} / > 0", fair)
big = [w for w in waiters if w["waiters"] >= 10000]
for w in big:
    mode = f"hand-off {w['handoff']}" if w.get("handoff") else "plain"
    target(f"{f(w['waiters'])} waiters ({mode}): bytes per waiter", f(w["client_bytes_per_waiter"]), "< 2,048",
           w["client_bytes_per_waiter"] < 2048)
if targets:
    lines.append("\n### The issue's targets, read from this run (forceSync=no)\n")
    lines.append("| target | measured | goal | |")
    lines.append("|---|---:|---:|---|")
    lines += targets
open(md_path, "w").write("\n".join(lines) + "\n")

# gnuplot: cycles/s and p99 per workload, forceSync=no
fs = "no" if any(k[0] == "no" for k in by) else "yes"
wls = [w for w in dict.fromkeys(r["workload"] for r in rows if r["fsync"] == fs)
       if w not in ("pipelined-ceiling", "pipelined-lock-ceiling") and not w.startswith("herd-") and not w.startswith("handoff-") and not w.startswith("ring-")
       and not w.endswith("-scope-exit")]
impls = ["zklock", "curator", "kazoo", "raw-c"]
with open(f"{outdir}/compare.dat", "w") as dat:
    dat.write("# workload " + " ".join(f"{i}_cps {i}_p99" for i in impls) + "\n")
    for w in wls:
        d = by[(fs, w)]
        vals = []
        for i in impls:
            vals += [str(d[i]["cycles_per_s"]) if i in d else "NaN", str(d[i]["p99_us"] / 1000) if i in d else "NaN"]
        dat.write(f"{w} " + " ".join(vals) + "\n")
with open(f"{outdir}/compare.gp", "w") as gp:
    gp.write(f"""set terminal png size 1200,900
set output 'compare.png'
set multiplot layout 2,1 title 'zklock vs Curator, kazoo, raw C client (forceSync={fs})'
set style data histogram
set style histogram cluster gap 1
set style fill solid border -1
set xtics rotate by -20
set key top left
set ylabel 'lock cycles/s'
plot 'compare.dat' using 2:xtic(1) title 'zklock', '' using 4 title 'curator', '' using 6 title 'kazoo', '' using 8 title 'raw C'
set ylabel 'p99 acquire latency (ms)'
set logscale y
plot 'compare.dat' using 3:xtic(1) title 'zklock', '' using 5 title 'curator', '' using 7 title 'kazoo', '' using 9 title 'raw C'
unset multiplot
""")
