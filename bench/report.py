# Turns bench/compare's JSON lines into a markdown table with zklock/peer ratios and a gnuplot script.
import collections, json, sys

src, md_path, outdir = sys.argv[1], sys.argv[2], sys.argv[3]
rows = [json.loads(l) for l in open(src) if l.strip()]
for r in rows:
    if r["impl"].startswith("zklock-"):
        r["workload"] = r["workload"]  # herd rows keep their own label
by = collections.defaultdict(dict)
for r in rows:
    by[(r["fsync"], r["workload"])][r["impl"]] = r
peers = ["curator", "kazoo", "raw-c"]

def f(x, nd=0):
    return "-" if x is None else f"{x:,.{nd}f}"

lines = []
for fs in ["no", "yes"]:
    keys = [k for k in by if k[0] == fs]
    if not keys:
        continue
    lines.append(f"\n### forceSync={fs}\n")
    lines.append("| workload | zklock cycles/s | curator | kazoo | raw C | zklock/curator | zklock/kazoo | zklock/raw | "
                 "p50 us zklock / curator | p99 us zklock / curator | CPU us/cycle zklock / curator | zklock req/cycle | overlaps |")
    lines.append("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    order = [k for k in sorted(keys, key=lambda k: [w["workload"] for w in rows].index(k[1]))]
    for k in order:
        d = by[k]
        if k[1] == "pipelined-ceiling" or k[1].startswith("herd-"):
            continue
        z = d.get("zklock")
        if not z:
            continue
        cps = {p: d[p]["cycles_per_s"] if p in d else None for p in peers}
        ratio = lambda p: None if not cps[p] else z["cycles_per_s"] / cps[p]
        c = d.get("curator", {})
        ov = sum(x.get("overlaps", 0) or 0 for x in d.values())
        lines.append(f"| {k[1]} | {f(z['cycles_per_s'])} | {f(cps['curator'])} | {f(cps['kazoo'])} | {f(cps['raw-c'])} | "
                     f"{f(ratio('curator'), 2)} | {f(ratio('kazoo'), 2)} | {f(ratio('raw-c'), 2)} | "
                     f"{f(z['p50_us'])} / {f(c.get('p50_us'))} | {f(z['p99_us'])} / {f(c.get('p99_us'))} | "
                     f"{f(z['cpu_us_per_cycle'], 1)} / {f(c.get('cpu_us_per_cycle'), 1)} | {f(z['requests_per_cycle'], 2)} | {ov} |")
    ceil = by.get((fs, "pipelined-ceiling"), {}).get("raw-c-pipelined")
    if ceil:
        lines.append(f"\nRaw C client, pipelined create+delete pairs (64 in flight, one session): {f(ceil['cycles_per_s'])} pairs/s (the server's write ceiling).")
herd = [r for r in rows if r["workload"].startswith("herd-")]
if herd:
    lines.append("\n### Herd effect (forceSync=no): the seeds' three algorithms, one lock, one session per waiter\n")
    lines.append("| algorithm | waiters | cycles/s | watch notifications per release | p99 acquire us |")
    lines.append("|---|---:|---:|---:|---:|")
    names = {"zklock-predecessor": "predecessor watch (the recipe)", "zklock-children": "all watch the children",
             "zklock-unique": "unique node, all watch it"}
    for r in herd:
        lines.append(f"| {names.get(r['impl'], r['impl'])} | {r['workers']} | {f(r['cycles_per_s'])} | "
                     f"{f(r.get('watch_events_per_cycle'), 2)} | {f(r['p99_us'])} |")
import os
wpath = os.path.join(outdir, "waiters.json")
if os.path.exists(wpath) and os.path.getsize(wpath) > 0:
    w = json.loads(open(wpath).read().strip().splitlines()[-1])
    lines.append(f"\n### {w['waiters']} waiters on one lock in one process (one session)\n")
    lines.append(f"client memory per waiter: {f(w['client_bytes_per_waiter'])} bytes; wakeups per release: "
                 f"{w['wakeups_per_release']:.3f}; queue drained in {w['drain_s']:.1f} s ({f(w['grants_per_s'])} grants/s); "
                 f"mass cancellation of {w['aborted']} waiters in {w['cancel_s']:.2f} s, nodes left: {w['nodes_left']}.")
open(md_path, "w").write("\n".join(lines) + "\n")

# gnuplot: cycles/s and p99 per workload, forceSync=no
fs = "no" if any(k[0] == "no" for k in by) else "yes"
wls = [w for w in dict.fromkeys(r["workload"] for r in rows if r["fsync"] == fs)
       if w != "pipelined-ceiling" and not w.startswith("herd-")]
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
