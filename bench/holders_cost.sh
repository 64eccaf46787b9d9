#!/usr/bin/env bash
# What idle lock holders cost a 3-server ensemble: N sessions (T = 10 s) each holding one lock on its
# own path, in one process (bench/holders_cost.cpp, target zklock_holders), for N = 0 and --holders.
# Each N: ramp-up (connect, acquire; not measured), then a quiet hold window of --seconds S with
# only the holders running (heartbeats/s per holder, the leader's zxid delta, the txn log growth,
# the servers' CPU), then, still holding, the foreground zklock_bench (32 workers/sessions/locks,
# --fg-seconds) for cycles/s and the servers' CPU under load. N = 0 runs first (baseline) and again
# last (drift check). Per --fsync setting (forceSync of the servers).
# Prints a Markdown table and writes it to bench/results/holders_cost.md (raw rows: holders_cost.jsonl).
#   bench/holders_cost.sh [--seconds 60] [--fsync no|yes|both] [--holders "1 100 1000"] [--fg-seconds 10]
#                         [--warmup 10] [--build DIR] [--out FILE.md]
#   bench/holders_cost.sh --report FILE.jsonl [--out FILE.md] [--note TEXT]   (renders saved raw rows again)
# Needs the targets built:  ninja -C build zklock_bench zklock_holders
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
secs=60 fsyncs="no yes" holders="1 100 1000" fg_secs=10 warmup=10 build="$root/build" out="$root/bench/results/holders_cost.md" report_only="" note=""
while [ $# -gt 0 ]; do
  case "$1" in
    --seconds) secs=$2; shift 2;;
    --fsync) case "$2" in both) fsyncs="no yes";; no|yes) fsyncs=$2;; *) echo "--fsync no|yes|both" >&2; exit 2;; esac; shift 2;;
    --holders) holders=$2; shift 2;;
    --fg-seconds) fg_secs=$2; shift 2;;
    --warmup) warmup=$2; shift 2;;
    --report) report_only=$2; shift 2;;
    --note) note=$2; shift 2;;
    --build) build=$2; shift 2;;
    --out) out=$2; shift 2;;
    *) sed -n '2,13p' "$0" >&2; exit 2;;
  esac
done
report() { # report ROWS.jsonl OUT.md : the tables, on stdout and into OUT.md
  mkdir -p "$(dirname "$2")"
  python3 - "$1" "$(nproc)" "$(uname -r)" "$note" <<'PY' | tee "$2"
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
ncpu, kernel = sys.argv[2:4]
r0 = rows[0]
secs, fg_secs, warm = r0.get("seconds", 60), r0.get("fg_seconds", 10), r0.get("warmup_s", 3)
when = r0.get("when", "?")
loads = [float(x) for r in rows for x in (r.get("load0"), r.get("load1")) if x]
note = sys.argv[4] if len(sys.argv) > 4 else ""
name_of = lambda r: {"baseline": "0 (first)", "baseline-end": "0 (last)"}.get(r["label"], str(r["holders"]))
print("# What idle lock holders cost the ensemble\n")
print(f"`bench/holders_cost.sh`, {when}: a throwaway 3-server ZooKeeper 3.8.0 ensemble on 127.0.0.1 (tickTime 500 ms, "
      f"`scripts/zk.sh start --servers 3 --fsync no|yes`), warmed with a {warm:g} s zklock_bench run; N sessions "
      f"(T = 10 s) in one process (one io_context thread), each holding one lock on its own path; per N a quiet hold "
      f"window of {secs:g} s (ramp-up excluded), then, still holding, `zklock_bench --workers 32 --sessions 32 --locks 32 "
      f"--duration {fg_secs:g}`. N = 0 runs first and again last. {ncpu} cores, Linux {kernel}.\n")
load = f" (load average, 1 min, at the windows' ends: {min(loads):.1f} to {max(loads):.1f})" if loads else ""
print(f"**The machine was shared**: another engineer built and tested on the same cores during the run{load}. "
      f"{note + ' ' if note else ''}The servers' CPU (their own utime+stime) suffers little from that; the "
      f"foreground cycles/s do: compare the two N = 0 rows of each setting before reading the percentages.\n")
print("| fsync | holders | heartbeats/s per holder | txns/s total | txns/h per holder | log bytes/h per holder, per server (ensemble ×3) | bytes per heartbeat txn | foreground cycles/s (% of N=0 first / last) | server CPU % of one core, quiet | server CPU %, foreground |")
print("|---|---|---|---|---|---|---|---|---|---|")
base = {}
for r in rows:
    if r["label"].startswith("baseline"):
        base.setdefault(r["fsync"], {})[r["label"]] = r["fg_cycles_per_s"]
for r in rows:
    n = r["holders"]
    lg = r["log"]
    per_server = sum(x["bytes"] for x in lg) / 3
    hb_b = sum(x["hb_bytes"] for x in lg); hb_n = sum(x["hb_txns"] for x in lg)
    bs = base.get(r["fsync"], {})
    pcts = [f"{100 * r['fg_cycles_per_s'] / bs[k]:.0f}%" for k in ("baseline", "baseline-end") if bs.get(k)]
    pct = f" ({' / '.join(pcts)})" if pcts else ""
    hb = f"{r['hb_per_s_per_holder']:.3f}" if n else "–"
    tph = f"{r['txns_per_s'] * 3600 / n:,.0f}" if n else "–"
    bph = f"{per_server / r['window_s'] * 3600 / n:,.0f}" if n else f"({per_server:,.0f} B in the window)"
    bpt = f"{hb_b / hb_n:.0f}" if hb_n else "–"
    print(f"| {r['fsync']} | {name_of(r)} | {hb} | {r['txns_per_s']:.1f} | {tph} | {bph} | {bpt} | "
          f"{r['fg_cycles_per_s']:,.0f}{pct} | {r['server_cpu_pct']:.1f} | {r['fg_server_cpu_pct']:.1f} |")
print("""
How each column is computed (over the quiet window unless said otherwise):

* heartbeats/s per holder: the driver's `session::statistics().heartbeats`, summed over its sessions,
  difference over the window / window / N (expected 10/T = 1). No touches and no lease renewals were
  sent in the windows (raw rows: `touches`, `lease_renewals`).
* txns/s total: the leader's `Zxid` (four-letter `srvr`) difference over the window / window: every
  committed transaction (N = 0 shows the background: none). Reading the logs back (below) classifies
  every one of them as a heartbeat (a `multi` of `check` ops). txns/h per holder = txns/s × 3600 / N.
* log bytes/h per holder: the three servers' transaction logs (`dataI/version-2/log.*`) read back after
  the run: the entries with a zxid in the window, each 8 B CRC + 4 B length + the txn (32 B header, the
  multi with its check op and the node's path, 12 B digest) + 1 B end-of-record, summed per server,
  × 3600 / window / N. Each server logs every txn: the ensemble writes 3 times this. The files' sizes do
  not move (preallocated in 64 MB steps, sparse); their allocated blocks grow by as much (next table).
  bytes per heartbeat txn: the mean entry size of the window's heartbeats; it grows with the lock
  node's path (here `/zklock-holders/run-<pid>/h-<i>/_c_<uuid>-lock-<seq>`, about 85 characters:
  77 B of the entry are fixed, the rest is the path).
* foreground cycles/s: zklock_bench's `cycles_per_s` (acquire + release, 32 locks), run after the quiet
  window while the holders still hold; in % of the N = 0 rows (first and last) of the same setting.
* server CPU %: the three java processes' utime+stime (`/proc/PID/stat`) over the window, summed, in %
  of one core; "foreground": over zklock_bench's whole run (its connect, 1 s warm-up and close included).
""")
print("Detail (quiet window; fsyncs and sync batches from `mntr`, summed over the three servers):\n")
print("| fsync | holders | ramp-up: connect + acquire, s | fsyncs/s | mean fsync ms | txns per sync batch | log blocks allocated, B/s per server | snapshots | driver CPU % | heartbeats/s per holder during the foreground | load avg (1 min) at start / end | losses |")
print("|---|---|---|---|---|---|---|---|---|---|---|---|")
for r in rows:
    n = r["holders"]; w = r["window_s"]
    ramp = f"{r['ramp_connect_s']:.1f} + {r['ramp_acquire_s']:.1f}" if n else "–"
    fpm = f"{r['fsync_ms'] / r['fsyncs']:.2f}" if r["fsyncs"] else "–"
    bat = f"{r['sync_batched_txns'] / r['sync_batches']:.2f}" if r["sync_batches"] else "–"
    alloc = sum(r["log_allocated_growth"]) / 3 / w
    cc = f"{r['client_cpu_pct']:.1f}" if n else "–"
    hbfg = f"{r['hb_per_s_per_holder_during_fg']:.2f}" if n else "–"
    load = f"{r['load0']} / {r['load1']}" if "load0" in r else "–"
    lost = f"{r['lost']} lost, {r['not_connected']} not connected" if n else "–"
    print(f"| {r['fsync']} | {name_of(r)} | {ramp} | {r['fsyncs'] / w:.1f} | {fpm} | {bat} | {alloc:,.0f} | {r['snapshots']:.0f} | {cc} | {hbfg} | {load} | {lost} |")
PY
}

if [ -n "$report_only" ]; then report "$report_only" "$out"; exit 0; fi
bench="$build/bench/zklock_bench" holder="$build/bench/zklock_holders"
for b in "$bench" "$holder"; do
  [ -x "$b" ] || { echo "holders_cost.sh: $b missing: ninja -C $build zklock_bench zklock_holders" >&2; exit 1; }
done
max_n=0; for n in $holders; do [ "$n" -gt "$max_n" ] && max_n=$n; done
# one descriptor per session here, and the servers inherit this limit too
want=$((2 * max_n + 256))
[ "$(ulimit -n)" -ge "$want" ] || ulimit -n "$want" 2>/dev/null || ulimit -n "$(ulimit -Hn)"
[ "$(ulimit -n)" -ge "$want" ] || echo "holders_cost.sh: warning: ulimit -n is $(ulimit -n), below $want" >&2

work=$(mktemp -d /tmp/zklock-holders.XXXXXX)
zkdir="" hpid=""
cleanup() {
  if [ -n "$hpid" ]; then kill -9 "$hpid" 2>/dev/null || true; fi
  if [ -n "$zkdir" ]; then "$root/scripts/zk.sh" stop "$zkdir" || true; fi
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
jsonl="$work/rows.jsonl"; : >"$jsonl"
when=$(date -u +%Y-%m-%dT%H:%MZ)
hz=$(getconf CLK_TCK)
say() { echo "holders_cost: $*" >&2; }
now() { awk '{print $1}' /proc/uptime; } # (a monotonic clock in the script; the driver's MARKs use CLOCK_MONOTONIC)

leader() { # the id of the server that leads
  local i
  for i in 1 2 3; do
    "$root/scripts/zk.sh" srvr "$zkdir" "$i" 2>/dev/null | grep -q '^Mode: leader' && { echo "$i"; return 0; }
  done
  echo "holders_cost.sh: no leader" >&2; return 1
}
zxid() { # the leader's last zxid, in decimal
  printf '%d\n' "$("$root/scripts/zk.sh" srvr "$zkdir" "$1" | sed -n 's/^Zxid: //p')"
}
cpu_ticks() { # utime+stime of the three servers, in clock ticks
  local i t=0 f
  for i in 1 2 3; do
    f=$(sed 's/.*) //' "/proc/$(cat "$zkdir/server$i.pid")/stat")
    t=$((t + $(echo "$f" | cut -d' ' -f12) + $(echo "$f" | cut -d' ' -f13)))
  done
  echo "$t"
}
snapshots() { # snapshot files of the three servers
  find "$zkdir"/data[123]/version-2 -name 'snapshot.*' | wc -l
}
log_sizes() { # per server: apparent bytes and allocated bytes of its log.* files ("a1 b1 a2 b2 a3 b3")
  local i s
  for i in 1 2 3; do
    s=$(find "$zkdir/data$i/version-2" -name 'log.*' -printf '%s %b\n' | awk '{a += $1; b += $2 * 512} END {printf "%d %d", a, b}')
    printf '%s ' "$s"
  done
  echo
}
mntr_sum() { # mntr_sum KEY... : each key summed over the three servers
  local i
  for i in 1 2 3; do "$root/scripts/zk.sh" mntr "$zkdir" "$i" 2>/dev/null; done |
    awk -v keys="$*" 'BEGIN {n = split(keys, k, " ")} {v[$1] += $2} END {for (i = 1; i <= n; i++) printf "%s%s", (i > 1 ? " " : ""), v[k[i]] + 0; print ""}'
}
mntr_keys="zk_cnt_fsynctime zk_sum_fsynctime zk_cnt_sync_processor_batch_size zk_sum_sync_processor_batch_size zk_num_alive_connections"
settle() { # until the leader's zxid stays put for 2 s (containers reaped, sessions closed), 60 s at most
  local l z0 z1 i
  l=$(leader); z0=$(zxid "$l")
  for i in $(seq 1 30); do
    sleep 2; z1=$(zxid "$l"); [ "$z1" = "$z0" ] && return 0; z0=$z1
  done
  say "warning: the zxid still moves after 60 s"
}
last_mark() { grep '^MARK ' "$work/holders.out" | tail -1; }
mark() { # asks the driver for a MARK line and prints it
  local n
  n=$(grep -c '^MARK ' "$work/holders.out" || true)
  kill -USR1 "$hpid"
  for _ in $(seq 1 200); do
    [ "$(grep -c '^MARK ' "$work/holders.out" || true)" -gt "$n" ] && { last_mark; return 0; }
    sleep 0.05
  done
  say "the driver gave no MARK"; cat "$work/holders.err" >&2; return 1
}

foreground() { # runs zklock_bench; prints "cycles_per_s server_cpu_pct wall_s"
  local c0 c1 t0 t1 js
  t0=$(now); c0=$(cpu_ticks)
  js=$("$bench" --connect "$ZK_CONNECT" --workers 32 --sessions 32 --locks 32 --duration "$fg_secs" 2>"$work/fg.err") ||
    { say "zklock_bench failed:"; cat "$work/fg.err" >&2; return 1; }
  t1=$(now); c1=$(cpu_ticks)
  echo "$js" >>"$work/fg.jsonl"
  awk -v js="$js" -v c0="$c0" -v c1="$c1" -v t0="$t0" -v t1="$t1" -v hz="$hz" 'BEGIN {
    match(js, /"cycles_per_s":[0-9.]+/); cps = substr(js, RSTART + 15, RLENGTH - 15)
    printf "%s %.1f %.2f\n", cps, 100 * (c1 - c0) / hz / (t1 - t0), t1 - t0 }'
}

run_one() { # run_one FSYNC N LABEL
  local fs=$1 n=$2 label=$3 p0 p1 l0 l1 ready="" ramp_c=0 ramp_a=0 l z0 z1 c0 c1 t0 t1 s0 s1 m0 m1 mk0="" mk1="" mk2="" fg rc=0
  if [ "$n" -gt 0 ]; then
    : >"$work/holders.out"
    "$holder" --connect "$ZK_CONNECT" --holders "$n" --session-timeout-ms 10000 >"$work/holders.out" 2>"$work/holders.err" &
    hpid=$!
    for _ in $(seq 1 6000); do
      ready=$(grep '^READY ' "$work/holders.out" || true); [ -n "$ready" ] && break
      kill -0 "$hpid" 2>/dev/null || break
      sleep 0.1
    done
    [ -n "$ready" ] || { say "the driver did not get ready:"; cat "$work/holders.err" >&2; return 1; }
    read -r _ _ ramp_c ramp_a tneg <<<"$ready"
    [ "$tneg" = 10000 ] || say "warning: negotiated T = $tneg ms"
    say "fsync=$fs N=$n: connected in $ramp_c s, acquired in $ramp_a s"
    sleep 2 # the last grants' first heartbeats
  fi
  # the quiet window: the holders alone
  l=$(leader)
  m0=$(mntr_sum $mntr_keys); s0=$(log_sizes); p0=$(snapshots)
  [ -n "$hpid" ] && mk0=$(mark)
  l0=$(cut -d' ' -f1 /proc/loadavg)
  z0=$(zxid "$l"); t0=$(now); c0=$(cpu_ticks)
  sleep "$secs"
  c1=$(cpu_ticks); t1=$(now); z1=$(zxid "$l")
  l1=$(cut -d' ' -f1 /proc/loadavg)
  [ -n "$hpid" ] && mk1=$(mark)
  s1=$(log_sizes); m1=$(mntr_sum $mntr_keys); p1=$(snapshots)
  # the foreground, still holding
  say "fsync=$fs N=$n: foreground"
  fg=$(foreground)
  if [ -n "$hpid" ]; then
    mk2=$(mark)
    kill -TERM "$hpid"; wait "$hpid" || rc=$?; hpid=""
    [ "$rc" = 0 ] || say "warning: the driver exited $rc (a lock lost or a session not connected: see the MARKs)"
  fi
  # the window's txn log entries, read back from each server's log files
  local logs
  logs=$(python3 - "$zkdir" "$z0" "$z1" <<'PY'
import glob, json, struct, sys
d, z0, z1 = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
out = []
for i in (1, 2, 3):
    r = {"txns": 0, "bytes": 0, "hb_txns": 0, "hb_bytes": 0, "types": {}}
    for fn in sorted(glob.glob(f"{d}/data{i}/version-2/log.*")):
        f = open(fn, "rb").read()
        off = 16  # FileHeader: magic, version, dbid
        while off + 12 <= len(f):
            _crc, ln = struct.unpack(">qi", f[off:off + 12])
            if ln <= 0:
                break  # the zeros of the preallocated tail
            t = f[off + 12:off + 12 + ln]
            size = 12 + ln + 1  # crc, length, txn (header, record, digest), EOR byte
            off += size
            _cid, _cxid, zx, _time, ty = struct.unpack(">qiqqi", t[:32])
            if not (z0 < zx <= z1):
                continue
            r["txns"] += 1; r["bytes"] += size
            key = str(ty)
            if ty == 14:  # multi: a heartbeat if all its ops are checks (13)
                n, p, ops = struct.unpack(">i", t[32:36])[0], 36, []
                for _ in range(n):
                    oty, dl = struct.unpack(">ii", t[p:p + 8]); ops.append(oty); p += 8 + dl
                if ops and all(o == 13 for o in ops):
                    key = "multi-check"; r["hb_txns"] += 1; r["hb_bytes"] += size
            r["types"][key] = r["types"].get(key, 0) + 1
    out.append(r)
print(json.dumps(out))
PY
)
  python3 - "$fs" "$n" "$label" "$secs" "$hz" "$z0" "$z1" "$c0" "$c1" "$t0" "$t1" "$s0" "$s1" "$m0" "$m1" \
      "$mk0" "$mk1" "$mk2" "$fg" "$ramp_c" "$ramp_a" "$rc" "$logs" "$((p1 - p0))" "$fg_secs" "$warmup" "$when" "$l0" "$l1" <<'PY' >>"$jsonl"
import json, sys
(fs, n, label, secs, hz, z0, z1, c0, c1, t0, t1, s0, s1, m0, m1, mk0, mk1, mk2, fg, ramp_c, ramp_a, rc, logs, snaps, fg_secs, warmup, when, l0, l1) = sys.argv[1:]
n, hz, z0, z1, c0, c1, t0, t1 = int(n), int(hz), int(z0), int(z1), int(c0), int(c1), float(t0), float(t1)
dt = t1 - t0
s0, s1 = [int(x) for x in s0.split()], [int(x) for x in s1.split()]
m0, m1 = [float(x) for x in m0.split()], [float(x) for x in m1.split()]
fcps, fcpu, fwall = fg.split()
row = {"fsync": fs, "holders": n, "label": label, "window_s": round(dt, 2), "seconds": float(secs),
       "fg_seconds": float(fg_secs), "warmup_s": float(warmup), "when": when, "load0": l0, "load1": l1,
       "ramp_connect_s": float(ramp_c), "ramp_acquire_s": float(ramp_a), "driver_rc": int(rc),
       "zxid_epoch_changed": (z0 >> 32) != (z1 >> 32), "txns": z1 - z0, "txns_per_s": (z1 - z0) / dt,
       "server_cpu_pct": 100.0 * (c1 - c0) / hz / dt,
       "log_apparent_growth": [s1[2 * i] - s0[2 * i] for i in range(3)],
       "log_allocated_growth": [s1[2 * i + 1] - s0[2 * i + 1] for i in range(3)],
       "fsyncs": m1[0] - m0[0], "fsync_ms": m1[1] - m0[1], "sync_batches": m1[2] - m0[2], "sync_batched_txns": m1[3] - m0[3],
       "alive_connections": m1[4], "snapshots": int(snaps),
       "fg_cycles_per_s": float(fcps), "fg_server_cpu_pct": float(fcpu), "fg_wall_s": float(fwall),
       "log": json.loads(logs)}
if mk0:
    a, b, c = mk0.split(), mk1.split(), mk2.split()
    ddt = float(b[1]) - float(a[1])
    row.update({"heartbeats": int(b[2]) - int(a[2]), "hb_per_s_per_holder": (int(b[2]) - int(a[2])) / ddt / n,
                "touches": int(b[3]) - int(a[3]), "lease_renewals": int(b[4]) - int(a[4]),
                "recipe_requests": int(b[5]) - int(a[5]), "client_cpu_pct": 100 * (float(b[6]) - float(a[6])) / ddt,
                "lost": int(c[7]), "not_connected": int(c[8]),
                "hb_per_s_per_holder_during_fg": (int(c[2]) - int(b[2])) / (float(c[1]) - float(b[1])) / n})
print(json.dumps(row))
PY
  tail -1 "$jsonl" | python3 -c 'import json,sys; r=json.loads(sys.stdin.read()); print("holders_cost: fsync=%s N=%d: %.1f txns/s, server CPU %.1f%%, foreground %.0f cycles/s (server CPU %.1f%%)" % (r["fsync"], r["holders"], r["txns_per_s"], r["server_cpu_pct"], r["fg_cycles_per_s"], r["fg_server_cpu_pct"]))' >&2
  settle
}

for fs in $fsyncs; do
  zout=$(ZK_JVM_OPTS="-XX:+UseParallelGC" ZK_LOG_LEVEL=warn "$root/scripts/zk.sh" start --servers 3 --fsync "$fs")
  ZK_CONNECT=$(echo "$zout" | sed -n 's/^ZK_CONNECT=//p'); zkdir=$(echo "$zout" | sed -n 's/^ZK_DIR=//p')
  say "forceSync=$fs: ensemble at $ZK_CONNECT ($zkdir)"
  # warm the servers' JIT before measuring (as bench/compare does)
  "$bench" --connect "$ZK_CONNECT" --workers 32 --sessions 32 --locks 32 --duration "$warmup" >/dev/null 2>&1 || true
  settle
  run_one "$fs" 0 baseline
  for n in $holders; do run_one "$fs" "$n" holders; done
  run_one "$fs" 0 baseline-end
  "$root/scripts/zk.sh" stop "$zkdir"; zkdir=""
done

mkdir -p "$(dirname "$out")"; cp "$jsonl" "${out%.md}.jsonl"
report "$jsonl" "$out"
say "written: $out (raw rows: ${out%.md}.jsonl)"
