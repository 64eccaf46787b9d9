#!/usr/bin/env python3
"""Mutants of the library's drivers (src/recipes, src/session), run by the whole-library simulation.

Each mutant changes one place of zklock's own source in a scratch copy of the tree, rebuilds the
whole-library simulator (test/sim/whole/: the library, unchanged but for the mutant, on the
simulated platform) and runs it. "killed" when a seed fails (its first failing seed and the
violation are printed), "survived" otherwise; each survivor's reason is in docs/internals.md ("The
whole library under simulation"). The scratch copy and its build directory are kept between
mutants (build-mutants/ in the tree, ignored by git): the first build is the library's, then each
mutant rebuilds one file and relinks.

  scripts/sim_whole_mutants.py [--seeds N] [--only NAME]

Runs by hand (after a first build of a few minutes, well under a minute per mutant). The pure
machines' mutants are scripts/sim_mutants.py's.
"""
import argparse
import os
import shutil
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCRATCH = os.path.join(ROOT, "build-mutants")

# (name, file, old text, new text, what it breaks[, the simulator's arguments]). Each old text must
# occur exactly once.
MUTANTS = [
    ("timeout-keeps-node", "src/recipes/mutex.cpp",
     "auto r = co_await s_->async_remove(my_node_, use_awaitable);\n                done = r.rc == ZOK || r.rc == ZNONODE;",
     "done = true;",
     "an acquire that gives up keeps its node: the queue behind it waits on a waiter that is gone"),
    ("release-skips-delete", "src/recipes/guard.cpp",
     "if (!done) return session->delete_in_background(node, std::nullopt, owner, marks_release);",
     "if (!done) return;",
     "a release without a completion handler never deletes the node"),
    ("no-heartbeat", "src/session/session_heartbeat.cpp",
     "if (now && state() == session_state::connected) send_heartbeat();",
     "if (false) send_heartbeat();",
     "no heartbeat: a hold longer than the lease loses its lock with no fault"),
    ("token-ignores-local-grant", "src/recipes/guard.cpp",
     "return h_ ? detail::fencing_token(h_->czxid, h_->local_index) : 0;",
     "return h_ ? detail::fencing_token(h_->czxid, 0) : 0;",
     "an in-process hand-off's grant repeats the node's fencing token"),
    ("create-and-list-lists-the-node", "src/session/session_requests.cpp",
     "    r.parent = parent;\n",
     "    r.parent = path;\n",
     "the create's pipelined listing names the new node, not the lock path"),
    ("fsm-deletes-dropped", "src/recipes/mutex.cpp",
     "for (const auto& n : a.delete_nodes) s.delete_in_background(n);",
     "for (const auto& n : a.delete_nodes) (void)n;",
     "the acquire machine's deletes (a duplicate node, a node left by a lost create) are not sent"),
    ("lease-timer-silent", "src/session/session_heartbeat.cpp",
     "        notify(session_event::lease_check);\n    lease_checked_at_ = now;",
     "        (void)0;\n    lease_checked_at_ = now;",
     "the lease's timer finds the lapse and tells no holder", ["--faults"]),
    ("unwatch-never", "src/session/session_impl.cpp",
     "if (!armed || path.empty()) return;",
     "return;",
     "a watch the library gives up is never removed at the server"),
]


def sync_tree():
    """The scratch copy: the tree's tracked files as they are in the work tree."""
    files = subprocess.run(["git", "-C", ROOT, "ls-files", "--cached", "--others", "--exclude-standard"], capture_output=True, text=True, check=True).stdout.split()
    for f in files:
        src, dst = os.path.join(ROOT, f), os.path.join(SCRATCH, "tree", f)
        if not os.path.isfile(src):
            continue
        if os.path.exists(dst) and open(src, "rb").read() == open(dst, "rb").read():
            continue
        os.makedirs(os.path.dirname(dst), exist_ok=True)
        shutil.copy2(src, dst)


def build():
    bdir = os.path.join(SCRATCH, "build")
    if not os.path.exists(os.path.join(bdir, "build.ninja")):
        subprocess.run(["cmake", "-S", os.path.join(SCRATCH, "tree"), "-B", bdir, "-G", "Ninja",
                        "-DCMAKE_BUILD_TYPE=Release"], check=True, capture_output=True)
    r = subprocess.run(["cmake", "--build", bdir, "--target", "zklock_sim_whole"], capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit("sim_whole_mutants: build failed:\n" + r.stdout[-3000:])
    return os.path.join(bdir, "test", "zklock_sim_whole")


def main():
    sys.stdout.reconfigure(line_buffering=True)
    ap = argparse.ArgumentParser()
    ap.add_argument("--seeds", type=int, default=2000)
    ap.add_argument("--only")
    args = ap.parse_args()
    sync_tree()
    exe = build()
    r = subprocess.run([exe, "--seeds", str(args.seeds)], capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit("sim_whole_mutants: the unmutated library fails:\n" + r.stdout[-2000:])
    survived = killed = 0
    for mutant in MUTANTS:
        name, path, old, new, what = mutant[:5]
        extra = mutant[5] if len(mutant) > 5 else []
        if args.only and name != args.only:
            continue
        target = os.path.join(SCRATCH, "tree", path)
        text = open(target).read()
        if text.count(old) != 1:
            sys.exit(f"sim_whole_mutants: {name}: the text to change occurs {text.count(old)} times in {path}")
        try:
            open(target, "w").write(text.replace(old, new))
            exe = build()
            r = subprocess.run([exe, "--seeds", str(args.seeds)] + extra, capture_output=True, text=True,
                               timeout=600)
            lines = r.stdout.strip().splitlines()
            failed = [l for l in lines if l.startswith("seed ")]
            if r.returncode != 0 and failed:
                killed += 1
                print(f"killed    {name}: {what}\n          {failed[0][:200]}")
            elif r.returncode != 0:
                killed += 1
                print(f"killed    {name}: {what}\n          (the simulator ended with {r.returncode}: "
                      f"{(r.stderr.strip().splitlines() or ['no output'])[-1][:160]})")
            else:
                survived += 1
                print(f"SURVIVED  {name}: {what}\n          {lines[-1] if lines else r.stderr.strip()[:200]}")
        finally:
            open(target, "w").write(text)
    print(f"sim_whole_mutants: {killed} killed, {survived} survived")


if __name__ == "__main__":
    main()
