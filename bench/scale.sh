#!/usr/bin/env bash
# A session that holds many locks (issue 46): what holding costs the client and the ensemble as the
# held count grows. Rows, each against a fresh standalone server (scripts/zk.sh start; the containers
# of a row's 100,000 paths would otherwise be reaped, 10,000 a minute, into the next rows' windows),
# warmed with a 3 s acquire loop, all with T = 4 s:
#   * one session holding N locks (--locks, default 0 1000 10000 100000), each on its own path,
#     acquired 256 at a time (bench/scale_bench.cpp, target zklock_scale);
#   * M sessions in one process (--sessions, default 1000 2000 4000 10000), each holding one
#     lock, then each holding none (a session takes 4 descriptors: the C client's socket, zklock's
#     duplicate of it, two timerfds; a row that needs more than ulimit -n is recorded as not run:
#     10,000 needs about 40,256);
#   * Curator (bench/CuratorScale.java): one CuratorFramework holding N InterProcessMutex locks on
#     N paths (--curator-locks, default the --locks above 0; --curator-locks "" to skip).
# Per row: ramp-up (connect, acquire: timed, not in the window), 4 s to settle, then a hold window of
# --seconds S: locks lost, client CPU (getrusage / the JVM's), client RSS, the server's committed txns
# (zxid), its txn log (entries read back, and the log files' allocated growth), the packets it
# received (mntr), its CPU. Then, still holding, for zklock's single-session rows: --fg-sessions other
# sessions (another process) acquire and release, each its own lock, for --fg-seconds (cycles/s).
# Prints a Markdown table and writes it to bench/results/scale.md (raw rows: scale.jsonl).
#   bench/scale.sh [--seconds 60] [--locks "0 1000 10000 100000"] [--sessions "1000 2000 4000 10000"]
#                  [--curator-locks "1000 10000 100000"] [--fg-seconds 10] [--fg-sessions 4]
#                  [--build DIR] [--out FILE.md] [--note TEXT] [--detect] [--cold]
#   --cold: zklock's sessions with session_options::keep_lease_warm = false (an idle one sends only
#   the C client's pings)
#   --detect: after a single-session row's window, another session deletes one of its held nodes
#   (zklock break) and the row records how soon the holder reports it lost (stated bound:
#   ceil(N/64) heartbeat periods, T/10 each; 625 s at 100,000 held and T = 4 s)
#   bench/scale.sh --report FILE.jsonl [--out FILE.md] [--note TEXT]   (renders saved raw rows again)
# Needs:  ninja -C build zklock_scale   (and javac, Debian's Curator jars: scripts/curator-classpath.sh)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
secs=60 locks="0 1000 10000 100000" sessions="1000 2000 4000 10000" curator_locks="unset" fg_secs=10 fg_sessions=4
build="$root/build" out="$root/bench/results/scale.md" report_only="" note="" tms=4000 detect=no warm=1
while [ $# -gt 0 ]; do
  case "$1" in
    --seconds) secs=$2; shift 2;;
    --locks) locks=$2; shift 2;;
    --sessions) sessions=$2; shift 2;;
    --curator-locks) curator_locks=$2; shift 2;;
    --fg-seconds) fg_secs=$2; shift 2;;
    --fg-sessions) fg_sessions=$2; shift 2;;
    --report) report_only=$2; shift 2;;
    --note) note=$2; shift 2;;
    --build) build=$2; shift 2;;
    --out) out=$2; shift 2;;
    --detect) detect=yes; shift;;
    --cold) warm=0; shift;;
    *) sed -n '2,24p' "$0" >&2; exit 2;;
  esac
done
if [ "$curator_locks" = unset ]; then
  curator_locks=""; for n in $locks; do [ "$n" -gt 0 ] && curator_locks="$curator_locks $n"; done
fi

report() { # report ROWS.jsonl OUT.md : the tables, on stdout and into OUT.md
  mkdir -p "$(dirname "$2")"
  python3 - "$1" "$(nproc)" "$(uname -r)" "$note" <<'PY' | tee "$2"
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
ncpu, kernel, note = sys.argv[2], sys.argv[3], sys.argv[4]
r0 = rows[0]
loads = [float(x) for r in rows for x in (r.get("load0"), r.get("load1")) if x]
total = sum(r.get("row_wall_s", 0) for r in rows)
print("# A session that holds many locks\n")
print(f"`bench/scale.sh`, {r0['when']}: per row a fresh standalone ZooKeeper 3.8.0 server on 127.0.0.1 "
      f"(`scripts/zk.sh start`, tickTime 500 ms, forceSync no: the script's default), warmed with a 3 s acquire loop; T = 4 s; a hold "
      f"window of {r0['seconds']:g} s after the ramp-up and 4 s to settle. zklock: one process, one io_context "
      f"thread, locks acquired 256 at a time, each on its own path. Curator 5.4.0: one CuratorFramework, "
      f"InterProcessMutex acquired by a pool of 256 threads. {ncpu} cores, Linux {kernel}; the whole run took "
      f"{total / 60:.0f} min.\n")
load = f" (load average, 1 min, at the windows' ends: {min(loads):.1f} to {max(loads):.1f})" if loads else ""
print(f"**The machine was shared**: two other engineers built and tested on the same 2 cores during the run{load}. "
      f"{note + ' ' if note else ''}\n")

def shape(r):
    if r["client"] == "curator": return f"Curator: 1 session × {r['held']:,} locks"
    cold = "" if r.get("keep_lease_warm", True) else " (keep_lease_warm = false)"
    if r["sessions"] == 1: return f"1 session × {r['per']:,} locks{cold}"
    return f"{r['sessions']:,} sessions × {r['per']} lock" + ("" if r["per"] == 1 else "s") + cold

print("| client, shape | locks held | lost (end of window) | acquire failures | ramp-up: connect + acquire, s | "
      "client CPU, % of a core | … per 10,000 held | client memory per held lock (per session if none held), B | "
      "txns/s (zxid) | txn log B/s (entries / allocated) | packets/s received per session | server CPU % | "
      "heartbeat: checks, ≈ request B | heartbeats/s per session | acquire cycles/s, other sessions |")
print("|" + "---|" * 15)
all_rows = rows
rows = [r for r in rows if not r.get("failed")]
base0 = next((r for r in rows if r["client"] == "zklock" and r["sessions"] == 1 and r["per"] == 0), None)
for r in all_rows:
    if r.get("failed"):
        print(f"| {shape(r)} | **the row failed**: {r['failed'].strip()} |" + " |" * 13)
        continue
    n, m = r["held"], r["sessions"]
    per10k = f"{r['client_cpu_pct'] * 10000 / n:.2f}" if n else "–"
    denom = n if n else m
    mem = f"{r['rss_delta'] / denom:,.0f}" if denom else "–"
    if r["client"] == "curator":
        mem = f"heap {r['heap_delta'] / denom:,.0f} (JVM RSS {r['rss_delta'] / denom:,.0f})"
    if n and r["client"] == "zklock" and r["sessions"] == 1 and base0:
        mem += f" ({(r['rss_delta'] - base0['rss_delta']) / n:,.0f} above 0 held)"
    ramp = f"{r['connect_s']:.1f} + {r['acquire_s']:.1f}"
    hb = "–"
    if r.get("heartbeats"):
        cph = r["checks"] / r["heartbeats"]
        hb = f"{cph:.0f}, ≈ {r['hb_request_bytes']:,.0f}"
    hbps = f"{r['heartbeats'] / r['window_s'] / m:.2f}" if r["client"] == "zklock" else "–"
    if r["client"] == "zklock" and r["per"] == 0:
        hbps = f"0 (touches {r['touches'] / r['window_s'] / m:.2f})"
    fg = f"{r['fg_cycles_per_s']:,.0f}" if r.get("fg_cycles_per_s") is not None else "–"
    lost = f"{r['lost']:,}" + (f" ({r['not_connected']:,} not connected)" if r.get("not_connected") else "")
    if r["client"] == "curator":
        lost += f" (SUSPENDED {r['suspended']}, LOST {r['lost_events']}; nodes missing {r.get('missing', '?')})"
    print(f"| {shape(r)} | {n:,} | {lost} | {r['acquire_failures']} | {ramp} | {r['client_cpu_pct']:.2f} | {per10k} | "
          f"{mem} | {r['txns_per_s']:.1f} | {r['log_entry_bytes'] / r['window_s']:,.0f} / {r['log_allocated_growth'] / r['window_s']:,.0f} | "
          f"{r['packets_per_s'] / m:.2f} | {r['server_cpu_pct']:.1f} | {hb} | {hbps} | {fg} |")

# the goals of issue 46, against the rows
z1 = [r for r in rows if r["client"] == "zklock" and r["sessions"] == 1 and r["per"] > 0]
print("\nThe goals of issue 46, against these rows:\n")
if z1:
    big = max(z1, key=lambda r: r["held"])
    print(f"* 0 locks lost at 100,000 held: the largest single-session row held {big['held']:,}: "
          f"**{big['lost']} lost**, {big['acquire_failures']} acquire failures.")
    big10k = [r for r in z1 if r["held"] >= 10000] or z1
    ok = all(r["client_cpu_pct"] * 10000 / r["held"] <= 1.0 for r in big10k)
    print(f"* Client CPU for holding at most 1% of a core per 10,000 held locks: "
          + ", ".join(f"{r['held']:,}: {r['client_cpu_pct'] * 10000 / r['held']:.2f}%" for r in z1)
          + f" per 10,000: **{'met' if ok else 'not met'}** at 10,000 held and more"
          + (f" (the session's fixed cost, {base0['client_cpu_pct']:.2f}% of a core holding nothing, weighs on the small rows)" if base0 else "") + ".")
    b0 = base0["rss_delta"] if base0 else 0
    ok = all((r["rss_delta"] - b0) / r["held"] <= 1024 for r in big10k)
    print(f"* Memory at most 1 KiB per held lock (above the session holding nothing, {b0:,} B): "
          + ", ".join(f"{r['held']:,}: {(r['rss_delta'] - b0) / r['held']:,.0f} B"
                      + (f" (the mutex and guard objects, made before any request: {r['rss_objects'] / r['held']:,.0f} B; "
                         f"the rest, what holding adds: {(r['rss_delta'] - r['rss_objects']) / r['held']:,.0f} B)"
                         if r.get("rss_objects") else "") for r in z1)
          + f": **{'met' if ok else 'not met'}** at 10,000 held and more.")
    tx = [r["txns_per_s"] for r in z1]
    lb = [r["log_entry_bytes"] / r["window_s"] for r in z1]
    ok = max(tx) <= 1.1 * min(tx) and max(lb) <= 1.1 * min(lb)
    print(f"* The ensemble's load from a holding session independent of the held count: txns/s "
          + ", ".join(f"{r['held']:,}: {r['txns_per_s']:.2f}" for r in z1)
          + "; txn log B/s " + ", ".join(f"{r['held']:,}: {r['log_entry_bytes'] / r['window_s']:,.0f}" for r in z1)
          + f": **{'met' if ok else 'not met'}** (within 10%; the log bytes grow with the slice up to 64 checks, then stop).")
idle = [r for r in rows if r["client"] == "zklock" and r["per"] == 0]
if idle:
    ping = 3 / (r0.get("T_ms", 4000) / 1000)
    ok = all(r["packets_per_s"] / r["sessions"] <= ping * 1.05 for r in idle)
    print(f"* An idle session sends no more than the C client's own pings (one per T/3 = {ping:.2f}/s at T = 4 s): "
          + ", ".join(f"{r['sessions']:,} idle: {r['packets_per_s'] / r['sessions']:.2f}/s per session "
                      f"(touches {r['touches'] / r['window_s'] / r['sessions']:.2f}/s)" for r in idle)
          + f": **{'met' if ok else 'not met'}**.")
errs = [(r, e) for r in rows for e in r.get("errors", [])]
if errs:
    print("\nAcquire errors (count, message), per row:\n")
    for r, e in errs: print(f"* {shape(r)}: {e}")
dt = [r for r in rows if r.get("detect_s") is not None]
if dt:
    print("\nA held node deleted by another session (`zklock break`), per row: how soon the holder reported it "
          "lost (the stated bound: ceil(N/64) heartbeat periods):\n")
    for r in dt:
        print(f"* {shape(r)}: " + (f"after {r['detect_s']:,.1f} s" if r["detect_reported"] else f"**not within {r['detect_s']:,.0f} s**")
              + f" (bound {r['detect_bound_s']:,.1f} s)")
sw = [r for r in rows if r.get("slowest_write_ms") is not None]
if sw:
    print("\nThe lease's liveness premise (docs/lease.md, premise 5: a write answered within ((f - 0.1) T - T/64) / 2, "
          "368 ms at T = 4 s; past it a session may report losses that did not happen), per row: the slowest write "
          "of any session over its life (ramp-up included) at the window's end, and the sessions past the premise:\n")
    for r in sw: print(f"* {shape(r)}: {r['slowest_write_ms']:,.0f} ms; {r['over_liveness']:,} of {r['sessions']:,} sessions past it")
print("""
How each column is computed (over the hold window unless said otherwise):

* lost: zklock: the held guards whose `is_lost()` is true at the window's end (and the sessions not
  connected); Curator: all held locks once its ConnectionStateListener saw LOST (0 otherwise), with its
  SUSPENDED/LOST events and, after the window, the held paths where no node of the client's session
  remained (exists() on each child).
* ramp-up: connecting the sessions, then acquiring the locks, 256 in flight; not in the window.
* client CPU: the process's user+system time (getrusage; Curator: the JVM's process CPU time) over the
  window / window, in % of one core; "per 10,000 held" scales it to 10,000 held locks.
* client memory per held lock: the process's RSS (`/proc/self/statm`) at the window's start minus the
  RSS before the first session was made, / locks held (sessions, when none is held); "above 0 held":
  minus the same delta of the row holding nothing, / locks held (what each lock adds). Curator's RSS is
  the JVM's (its heap grows in steps); "heap": used heap after a System.gc(), same difference.
* txns/s: the server's `Zxid` (4lw `srvr`) difference / window: every committed transaction.
* txn log B/s: the log entries with a zxid in the window, read back from `version-2/log.*` (8 B CRC +
  4 B length + the txn + 1 B end of record) / window; then the growth of the log files' allocated
  blocks / window (preallocated sparse in 64 MB steps: a coarse check of the same).
* packets/s received per session: the server's `zk_packets_received` (4lw `mntr`) difference / window
  / sessions: every request, the C client's pings included.
* server CPU: the server's java process utime+stime over the window, % of one core.
* heartbeat: the check ops the heartbeats carried over the window / the heartbeats (zklock's
  `session_impl::heartbeat_checks_sent()`), and the request's approximate size: 4 B length + 8 B header
  + per check (9 B op header + 4 B + the node path + 4 B version) + 9 B end, with the path lengths of
  a slice of the first session's nodes.
* heartbeats/s per session: `session::statistics().heartbeats` over the window / window / sessions
  (expected 10/T = 2.5/s); sessions that hold nothing send touches (a read of "/") instead.
* acquire cycles/s: after the window, still holding, another process (`zklock_scale --cycle-seconds`)
  with the given sessions, each acquiring and releasing a lock of its own in a loop.
""")
PY
}

if [ -n "$report_only" ]; then report "$report_only" "$out"; exit 0; fi
scale="$build/bench/zklock_scale"
[ -x "$scale" ] || { echo "scale.sh: $scale missing: ninja -C $build zklock_scale" >&2; exit 1; }
max_m=1; for m in $sessions; do [ "$m" -gt "$max_m" ] && max_m=$m; done
# four descriptors per session (the C client's socket, zklock's duplicate of it, two timerfds: the
# lease's, the heartbeat's); the server inherits this limit too (it needs one per session).
# (Raising the hard limit needs CAP_SYS_RESOURCE.)
want=$((4 * max_m + 1024))
[ "$(ulimit -n)" -ge "$want" ] || ulimit -n "$want" 2>/dev/null || ulimit -n "$(ulimit -Hn)"
[ "$(ulimit -n)" -ge "$want" ] || echo "scale.sh: warning: ulimit -n is $(ulimit -n), below $want" >&2

work=$(mktemp -d /tmp/zklock-scale.XXXXXX)
zkdir="" dpid="" jfd=""
cleanup() {
  if [ -n "$dpid" ]; then kill -9 "$dpid" 2>/dev/null || true; fi
  if [ -n "$zkdir" ]; then "$root/scripts/zk.sh" stop "$zkdir" || true; fi
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
jsonl="$work/rows.jsonl"; : >"$jsonl"
when=$(date -u +%Y-%m-%dT%H:%MZ)
hz=$(getconf CLK_TCK)
say() { echo "scale: $*" >&2; }
now() { awk '{print $1}' /proc/uptime; }
zk() { "$root/scripts/zk.sh" "$@"; }
zxid() { printf '%d\n' "$(zk srvr "$zkdir" 1 | sed -n 's/^Zxid: //p')"; }
cpu_ticks() { local f; f=$(sed 's/.*) //' "/proc/$(cat "$zkdir/server1.pid")/stat"); echo $(($(echo "$f" | cut -d' ' -f12) + $(echo "$f" | cut -d' ' -f13))); }
packets() { zk mntr "$zkdir" 1 | awk '$1 == "zk_packets_received" {print $2}'; }
log_alloc() { find "$zkdir/data1/version-2" -name 'log.*' -printf '%b\n' | awk '{b += $1 * 512} END {printf "%d\n", b}'; }
log_entries() { # log_entries Z0 Z1 : "bytes txns {type: count}" of the entries with z0 < zxid <= z1
  python3 - "$zkdir" "$1" "$2" <<'PY'
import glob, json, struct, sys
d, z0, z1 = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
b = n = 0; types = {}
for fn in sorted(glob.glob(f"{d}/data1/version-2/log.*")):
    f = open(fn, "rb").read()
    off = 16
    while off + 12 <= len(f):
        _crc, ln = struct.unpack(">qi", f[off:off + 12])
        if ln <= 0: break
        t = f[off + 12:off + 12 + ln]; size = 12 + ln + 1; off += size
        _cid, _cxid, zx, _time, ty = struct.unpack(">qiqqi", t[:32])
        if z0 < zx <= z1:
            b += size; n += 1; types[str(ty)] = types.get(str(ty), 0) + 1
print(b, n, json.dumps(types, separators=(",", ":")))
PY
}

start_server() {
  local zout
  zout=$(ZK_JVM_OPTS="-XX:+UseParallelGC" ZK_LOG_LEVEL=warn zk start)
  ZK_CONNECT=$(echo "$zout" | sed -n 's/^ZK_CONNECT=//p'); zkdir=$(echo "$zout" | sed -n 's/^ZK_DIR=//p')
  # warm the server's JIT: 4 sessions acquiring and releasing for 3 s
  "$scale" --connect "$ZK_CONNECT" --sessions 4 --cycle-seconds 3 --prefix /zklock-warm >/dev/null 2>&1 || true
}
stop_server() { zk stop "$zkdir"; zkdir=""; }

last_mark() { grep '^MARK ' "$work/d.out" | tail -1; }
mark() { # asks the driver for a MARK line (SIGUSR1, or MARK on the Java driver's stdin) and prints it
  local n
  n=$(grep -c '^MARK ' "$work/d.out" || true)
  if [ -n "$jfd" ]; then echo MARK >&"$jfd"; else kill -USR1 "$dpid"; fi
  for _ in $(seq 1 1200); do
    [ "$(grep -c '^MARK ' "$work/d.out" || true)" -gt "$n" ] && { last_mark; return 0; }
    sleep 0.05
  done
  say "the driver gave no MARK"; cat "$work/d.err" >&2; return 1
}
wait_ready() {
  local ready=""
  for _ in $(seq 1 36000); do # (an hour at most)
    ready=$(grep '^READY ' "$work/d.out" || true); [ -n "$ready" ] && break
    kill -0 "$dpid" 2>/dev/null || break
    sleep 0.1
  done
  [ -n "$ready" ] || { say "the driver did not get ready:"; cat "$work/d.err" >&2; return 1; }
  echo "$ready"
}

run_row() { # run_row zklock|curator SESSIONS PER
  local client=$1 m=$2 per=$3 ready mk0 mk1 z0 z1 c0 c1 t0 t1 p0 p1 a0 a1 l0 l1 fg="" rc=0 logs missing="" tw0 tw1
  tw0=$(now)
  if [ "$client" = zklock ] && [ $((4 * m + 256)) -gt "$(ulimit -n)" ]; then
    say "$m sessions need about $((4 * m + 256)) descriptors, ulimit -n is $(ulimit -n): row skipped"
    python3 -c 'import json, sys; print(json.dumps({"client": "zklock", "sessions": int(sys.argv[1]), "per": int(sys.argv[2]), "failed": sys.argv[3], "when": sys.argv[4], "seconds": float(sys.argv[5]), "row_wall_s": 0.0}))' \
      "$m" "$per" "not run: $m sessions need 4 descriptors each (the C client's socket, zklock's duplicate of it, two timerfds), about $((4 * m + 256)) in all, and ulimit -n is $(ulimit -n) (raising it needs CAP_SYS_RESOURCE)" \
      "$when" "$secs" >>"$jsonl"
    return 0
  fi
  start_server
  say "$client: $m session(s) × $per lock(s) at $ZK_CONNECT"
  : >"$work/d.out"; : >"$work/d.err"
  if [ "$client" = zklock ]; then
    "$scale" --connect "$ZK_CONNECT" --sessions "$m" --locks-per-session "$per" --session-timeout-ms "$tms" \
      --keep-lease-warm "$warm" >"$work/d.out" 2>"$work/d.err" &
    dpid=$!
  else
    rm -f "$work/jin"; mkfifo "$work/jin"
    java -Xmx2g -cp "$work/java:$CP" CuratorScale "$ZK_CONNECT" "$per" "$tms" 256 <"$work/jin" >"$work/d.out" 2>"$work/d.err" &
    dpid=$!
    exec {jfd}>"$work/jin"
  fi
  if ! ready=$(wait_ready); then # a row that fails: recorded (with the driver's last words), the run goes on
    kill -9 "$dpid" 2>/dev/null || true; wait "$dpid" 2>/dev/null || true; dpid=""
    if [ -n "$jfd" ]; then exec {jfd}>&-; jfd=""; fi
    stop_server
    python3 -c 'import json, sys; print(json.dumps({"client": sys.argv[1], "sessions": int(sys.argv[2]), "per": int(sys.argv[3]), "failed": sys.argv[4], "when": sys.argv[5], "seconds": float(sys.argv[6]), "row_wall_s": float(sys.argv[7])}))' \
      "$client" "$m" "$per" "$(grep -v '^ACQUIRE_ERROR' "$work/d.err" | tail -3 | tr '\n' ' ')" "$when" "$secs" "$(echo "$(now) - $tw0" | bc)" >>"$jsonl"
    mkdir -p "$(dirname "$out")"; cp "$jsonl" "${out%.md}.jsonl"
    return 0
  fi
  say "ready: $ready"
  sleep 4 # the last grants' first heartbeats; the acquires' leftovers
  mk0=$(mark); z0=$(zxid); p0=$(packets); a0=$(log_alloc); l0=$(cut -d' ' -f1 /proc/loadavg)
  t0=$(now); c0=$(cpu_ticks)
  sleep "$secs"
  c1=$(cpu_ticks); t1=$(now)
  mk1=$(mark); z1=$(zxid); p1=$(packets); a1=$(log_alloc); l1=$(cut -d' ' -f1 /proc/loadavg)
  if [ "$client" = zklock ] && [ "$m" = 1 ] && [ "$fg_sessions" -gt 0 ] && [ "$fg_secs" != 0 ]; then
    say "foreground: $fg_sessions sessions acquire and release for $fg_secs s"
    fg=$("$scale" --connect "$ZK_CONNECT" --sessions "$fg_sessions" --cycle-seconds "$fg_secs" --prefix /zklock-fg 2>>"$work/fg.err" | grep '^CYCLES ' || true)
  fi
  DET=""
  if [ "$client" = zklock ] && [ "$m" = 1 ] && [ "$per" -gt 0 ] && [ "$detect" = yes ]; then
    say "a held node deleted by another session: until the holder reports it"
    kill -USR2 "$dpid"
    for _ in $(seq 1 36000); do
      DET=$(grep '^DETECTED ' "$work/d.out" || true); [ -n "$DET" ] && break
      kill -0 "$dpid" 2>/dev/null || break; sleep 0.1
    done
    say "detected: ${DET:-nothing}"
  fi
  export DET WARM=$warm
  if [ "$client" = zklock ]; then
    kill -TERM "$dpid"; wait "$dpid" || rc=$?
  else
    echo CHECK >&"$jfd"
    for _ in $(seq 1 12000); do grep -q '^CHECK ' "$work/d.out" && break; sleep 0.05; done
    missing=$(sed -n 's/^CHECK //p' "$work/d.out")
    echo QUIT >&"$jfd"; exec {jfd}>&-; jfd=""
    wait "$dpid" || rc=$?
  fi
  dpid=""
  logs=$(log_entries "$z0" "$z1")
  stop_server
  tw1=$(now)
  grep '^ACQUIRE_ERROR ' "$work/d.err" | sed 's/^ACQUIRE_ERROR //' >"$work/errors" || true
  python3 - "$client" "$m" "$per" "$secs" "$hz" "$ready" "$mk0" "$mk1" "$z0" "$z1" "$c0" "$c1" "$t0" "$t1" \
      "$p0" "$p1" "$a0" "$a1" "$logs" "$fg" "$rc" "$when" "$l0" "$l1" "$work/errors" "$missing" "$tms" \
      "$(echo "$tw1 - $tw0" | bc)" <<'PY' >>"$jsonl"
import json, sys
(client, m, per, secs, hz, ready, mk0, mk1, z0, z1, c0, c1, t0, t1, p0, p1, a0, a1, logs, fg, rc, when, l0, l1,
 errf, missing, tms, roww) = sys.argv[1:]
m, per, hz = int(m), int(per), int(hz)
dt = float(t1) - float(t0)
rd, a, b = ready.split(), mk0.split(), mk1.split()
lb, ln, lt = logs.split(" ", 2)
row = {"client": client, "sessions": m, "per": per, "seconds": float(secs), "when": when, "T_ms": int(tms),
       "load0": l0, "load1": l1, "window_s": round(dt, 2), "driver_rc": int(rc), "row_wall_s": float(roww),
       "txns": int(z1) - int(z0), "txns_per_s": (int(z1) - int(z0)) / dt,
       "server_cpu_pct": 100.0 * (int(c1) - int(c0)) / hz / dt,
       "packets_per_s": (int(p1) - int(p0)) / dt,
       "log_allocated_growth": int(a1) - int(a0), "log_entry_bytes": int(lb), "log_entries": int(ln),
       "log_types": json.loads(lt), "errors": [l.strip() for l in open(errf) if l.strip()]}
mdt = float(b[1]) - float(a[1])
row["client_cpu_pct"] = 100.0 * (float(b[2]) - float(a[2])) / mdt
if client == "zklock":
    # READY sessions held connect_s acquire_s T_ms failures slice_chars slice_checks rss0
    row.update({"held": int(rd[2]), "connect_s": float(rd[3]), "acquire_s": float(rd[4]), "negotiated_T_ms": int(rd[5]),
                "acquire_failures": int(rd[6]), "rss_delta": int(a[3]) - int(rd[9]), "rss_delta_end": int(b[3]) - int(rd[9]),
                "heartbeats": int(b[4]) - int(a[4]), "touches": int(b[5]) - int(a[5]), "checks": int(b[6]) - int(a[6]),
                "requests": int(b[7]) - int(a[7]), "lost": int(b[8]), "not_connected": int(b[9])})
    if len(b) > 11: row.update({"slowest_write_ms": int(b[10]) / 1000, "over_liveness": int(b[11])})
    if len(rd) > 10: row["rss_objects"] = int(rd[10]) - int(rd[9]) # the session and mutex objects, before any request
    chars, checks = int(rd[7]), int(rd[8])
    cph = row["checks"] / row["heartbeats"] if row["heartbeats"] else 0
    # the request of one heartbeat (per session): 4 B length + 8 B header + per check 9 + 4 + path + 4, + 9 B end
    row["hb_request_bytes"] = 4 + 8 + 9 + cph * (17 + (chars / checks if checks else 0))
else:
    # READY held acquire_s failures rss0 heap0 ; MARK t cpu rss heap lost suspended lost_events
    row.update({"held": int(rd[1]), "connect_s": 0.0, "acquire_s": float(rd[2]), "acquire_failures": int(rd[3]),
                "rss_delta": int(a[3]) - int(rd[4]), "rss_delta_end": int(b[3]) - int(rd[4]),
                "heap_delta": int(a[4]) - int(rd[5]), "lost": int(b[5]), "suspended": int(b[6]), "lost_events": int(b[7]),
                "missing": int(missing) if missing else None})
import os
row["keep_lease_warm"] = os.environ.get("WARM", "1") == "1"
if os.environ.get("DET"):
    d = os.environ["DET"].split()
    row.update({"detect_s": float(d[1]), "detect_reported": d[2] == "1", "detect_bound_s": float(d[3])})
if fg:
    f = fg.split()
    row.update({"fg_cycles": int(f[1]), "fg_seconds": float(f[2]), "fg_failures": int(f[3]),
                "fg_cycles_per_s": int(f[1]) / float(f[2])})
print(json.dumps(row))
PY
  tail -1 "$jsonl" | python3 -c 'import json,sys; r=json.loads(sys.stdin.read()); print("scale: %s %d x %d: held %d, lost %d, failures %d, acquire %.1f s, CPU %.2f%%, RSS %+d B, %.1f txns/s, %.2f packets/s per session, fg %s" % (r["client"], r["sessions"], r["per"], r["held"], r["lost"], r["acquire_failures"], r["acquire_s"], r["client_cpu_pct"], r["rss_delta"], r["txns_per_s"], r["packets_per_s"] / r["sessions"], r.get("fg_cycles_per_s")))' >&2
  [ "$rc" = 0 ] || say "warning: the driver exited $rc"
  mkdir -p "$(dirname "$out")"; cp "$jsonl" "${out%.md}.jsonl" # (each row as it comes)
}

t_all0=$(now)
for n in $locks; do run_row zklock 1 "$n"; done
for m in $sessions; do run_row zklock "$m" 1; run_row zklock "$m" 0; done
if [ -n "${curator_locks// /}" ]; then
  CP=$("$root/scripts/curator-classpath.sh")
  mkdir -p "$work/java"; javac -d "$work/java" -cp "$CP" "$root/bench/CuratorScale.java"
  for n in $curator_locks; do run_row curator 1 "$n"; done
fi
say "total: $(echo "$(now) - $t_all0" | bc) s"

mkdir -p "$(dirname "$out")"; cp "$jsonl" "${out%.md}.jsonl"
report "$jsonl" "$out"
say "written: $out (raw rows: ${out%.md}.jsonl)"
