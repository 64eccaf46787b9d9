#!/usr/bin/env python3
"""Mutation runs of the deterministic simulator: does it find a defect nobody told it about?

Each mutant changes one line of zklock's own protocol code (src/protocol/: the acquire's state
machine, its decisions, the order of contenders, the semaphore's machine, the hand-off's queue; the
release machine of src/session/) in a scratch copy, builds
the simulator (its semaphore world for the semaphore's, its clocked world for the lease's rules) against that copy and runs it. A mutant is "killed" when some seed fails (and its first failing seed and
violation are printed), "survived" otherwise. Survivors are listed with the reason the simulator
cannot see them (docs/internals.md, "The deterministic simulator").

  scripts/sim_mutants.py [--seeds N] [--only NAME] [--keep]

Runs by hand (about 20 s per mutant: one build, then the seeds); CI runs the simulator's own
re-introduced defects instead (sim.FindsTheDefect.*). Needs g++ and the ZooKeeper C client
(scripts/setup.sh installs both).
"""
import argparse
import os
import shutil
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# (name, file, old text, new text, what it breaks[, simulator arguments]). Each old text must occur
# exactly once.
MUTANTS = [
    ("wake-other-grants-alone", "src/protocol/acquire_steps.hpp",
     "if (alone && (w == wake::predecessor_deleted || w == wake::predecessor_missing)) return wake_step::grant;",
     "if (alone) return wake_step::grant;",
     "an alone waiter granted by any wake-up (a reconnect, a data change)"),
    ("wake-deleted-grants-always", "src/protocol/acquire_steps.hpp",
     "if (alone && (w == wake::predecessor_deleted || w == wake::predecessor_missing)) return wake_step::grant;",
     "if (w == wake::predecessor_deleted || w == wake::predecessor_missing) return wake_step::grant;",
     "a predecessor's deletion grants even behind a deeper queue"),
    ("alone-second-and-third", "src/protocol/protocol.cpp",
     "d.alone = d.position == 1;",
     "d.alone = d.position <= 2;",
     "the third in line thinks it is alone"),
    ("watch-the-lowest", "src/protocol/protocol.cpp",
     "if (it != all.begin()) blocker = it - 1;",
     "if (it != all.begin()) blocker = all.begin();",
     "every waiter watches the lowest node (a herd)"),
    ("no-duplicate-cleanup", "src/protocol/acquire_steps.cpp",
     "if (*it != mine && it->find(guid) != std::string::npos) {",
     "if (false) {",
     "our own earlier node (a lost create applied, then created again) is kept, and waited on"),
    ("no-recovery", "src/protocol/acquire_fsm.hpp",
     "                st_ = state::recover_connecting;\n                return act(acquire_action::wait_connected);\n            }\n            return in.result == outcome::no_node",
     "                return create_top(in.stop);\n            }\n            return in.result == outcome::no_node",
     "a create whose reply was lost is made again without looking for the first"),
    ("recovery-ignores-the-find", "src/protocol/acquire_fsm.hpp",
     "if (!found || c_.guid.empty()) return create_top(in.stop); // never applied: create again",
     "return create_top(in.stop); // never applied: create again",
     "the guid lookup finds the node, and the machine creates again anyway"),
    ("wait-even-if-gone", "src/protocol/acquire_fsm.hpp",
     "bool wait = in.result == outcome::ok && !in.marked;",
     "bool wait = in.result != outcome::connection;",
     "waits on a predecessor the read found gone (no watch was set)"),
    ("forget-the-listing-after-create", "src/protocol/acquire_fsm.hpp",
     "                if (in.listed == outcome::ok) {\n                    children_ = std::move(in.children);",
     "                if (in.listed == outcome::ok && false) {\n                    children_ = std::move(in.children);",
     "the flight's listing is dropped (one more round trip; not a safety defect)"),
    ("no-sweep-when-giving-up", "src/protocol/acquire_fsm.hpp",
     "            if (!in.ok) {\n                auto a = fail(acquire_action::stop);\n                a.delete_by_guid = true;",
     "            if (!in.ok) {\n                auto a = fail(acquire_action::stop);\n                a.delete_by_guid = false;",
     "a stop while a lost create is unresolved leaves its node"),
    ("no-barrier", "src/protocol/acquire_fsm.hpp",
     "                a.barrier = true;\n",
     "                a.barrier = false;\n",
     "the recovery's listing without the write before it: a stale read takes a create in the pipeline for never applied"),
    ("stop-ignored-before-grant", "src/protocol/acquire_fsm.hpp",
     "            if (in.stop) return fail(acquire_action::stop);\n            st_ = state::done;",
     "            st_ = state::done;",
     "a cancel that races the grant is not honoured (not visible here: the simulator's user takes the lock)"),
    ("order-by-name", "src/protocol/protocol.cpp",
     "auto all = sorted_contenders(children, dialect, f, cv);",
     "auto all = sorted_contenders(children, dialect, f, cv);\n    std::sort(all.begin(), all.end(), [](const contender& a, const contender& b) { return a.name < b.name; });",
     "contenders ordered by their full name (the guid first) instead of their sequence number"),
    ("writer-passes-readers", "src/protocol/protocol.cpp",
     "    if (it->writer) {\n        if (it != all.begin()) blocker = it - 1;\n    } else {",
     "    {",
     "a writer waits only for writers below it, like a reader (the read/write lock)", ["--rw"]),
    ("reader-passes-writers", "src/protocol/protocol.cpp",
     "if (j->writer && j->name != own_writer) {",
     "if (false) {",
     "a reader never waits (the read/write lock)", ["--rw"]),
    ("reader-alone-behind-any-writer", "src/protocol/protocol.cpp",
     "            d.alone = std::none_of(all.begin(), blocker,",
     "            d.alone = true || std::none_of(all.begin(), blocker,",
     "a reader thinks its writer is all in its way (the read/write lock)", ["--rw"]),
    # the semaphore's machine, run by the simulator's semaphore world (--semaphore: sem_sim.cpp)
    ("sem-one-too-many", "src/protocol/semaphore_fsm.hpp",
     "return leases <= static_cast<std::size_t>(max_leases);",
     "return leases <= static_cast<std::size_t>(max_leases) + 1;",
     "the count lets N + 1 leases be held", ["--semaphore"]),
    ("sem-no-sweep", "src/protocol/semaphore_fsm.hpp",
     "        auto a = failed(rc);\n        a.delete_by_guid = true;",
     "        auto a = failed(rc);\n        a.delete_by_guid = false;",
     "a round that lost its create's reply leaves the lease it may have made", ["--semaphore"]),
    ("cleanup-lost-delete-not-retried", "src/session/cleanup_fsm.hpp",
     "            return retry(r.rc, connected); // the node may still be there",
     "            return end();",
     "a release or background delete lost with the connection is not sent again (its node stays)"),
    ("cleanup-lost-marked-release-retried-plain", "src/session/cleanup_fsm.hpp",
     "            default:\n                return retry(r.rc, connected);\n            }\n        case cleanup_action::remove:",
     "            default:\n                marked_ = false;\n                return retry(r.rc, connected);\n            }\n        case cleanup_action::remove:",
     "a marked release whose reply was lost is sent again without its marker"),
    ("cleanup-sweep-finds-nothing", "src/session/cleanup_fsm.hpp",
     "if (auto found = find_by_guid(r.children, guid_)) {",
     "if (auto found = std::optional<std::string>()) {",
     "the sweep by guid never deletes the node it finds"),
    ("handoff-grant-on-arrival", "src/protocol/handoff_fsm.hpp",
     "        if (phase_ == phase::idle) start(out);\n        return out;",
     "        if (phase_ == phase::idle) start(out);\n        if (phase_ == phase::held) grant_next(out);\n        return out;",
     "a local acquirer that comes while the node is held is granted at once", ["--handoff", "3"]),
    ("handoff-no-requeue", "src/protocol/handoff_fsm.hpp",
     "            release(out);\n            start(out);\n            break;",
     "            release(out);\n            break;",
     "after the bound, the node goes and the queue does not ask for a new one", ["--handoff", "3"]),
    ("handoff-session-end-keeps-waiters", "src/protocol/handoff_fsm.hpp",
     "        fail_if([](bool) { return true; }, handoff_reason::session_end, out);",
     "",
     "the session's end does not tell the local waiters", ["--handoff", "3"]),
    ("sem-no-restart", "src/protocol/semaphore_fsm.hpp",
     "        if (internal_lost_) {",
     "        if (false) {",
     "a round whose internal lock was lost waits on (two waiters' leases block each other)",
     ["--semaphore", "--leases", "1"]),
    ("sem-count-before-the-path-check", "src/protocol/semaphore_fsm.hpp",
     "        if (!lost(made_.listed)) return failed(made_.list_rc);",
     "        if (!lost(made_.listed)) return failed(made_.list_rc);\n        return line_top();",
     "a path listing lost with the connection is not made again (one path, one lock unchecked: no "
     "other lock in this world, so not visible here)", ["--semaphore"]),
    # the lease's rules (src/session/lease.hpp) and the acquire machine, run by the simulator's
    # clocked world (--lease: lease_sim.cpp, three servers with replicas, on one clock)
    ("lease-gap-quarter", "src/session/lease.hpp",
     "double gap = ping_gap;  ///< G, as a fraction of T",
     "double gap = 0.25;  ///< G, as a fraction of T",
     "rule (b)'s gap G is T/4, not the premise's 5T/16", ["--lease"]),
    ("lease-gap-from-send", "src/session/lease.hpp",
     "bool from_reply = true; ///< G counted from j's reply (false: from j's send)",
     "bool from_reply = false; ///< G counted from j's reply (false: from j's send)",
     "rule (b)'s gap G counted from the earlier request's send, not its reply", ["--lease"]),
    ("lease-any-reply-vouches", "src/session/lease.hpp",
     "        bool gap = false;\n        if (commit) {",
     "        bool gap = false;\n        if (true) {",
     "any reply vouches, a read's too (a follower cut off from its leader still answers reads)", ["--lease"]),
]


def build(src_root, out, world="sim.cpp"):
    zk = "-l:libzookeeper_st.so.2"
    # (the scratch copy's src/ first: its protocol/ is the mutated one; the rest from the tree)
    cmd = ["g++", "-std=c++20", "-O2", "-I" + os.path.join(src_root, "src"), "-I" + os.path.join(ROOT, "src"),
           "-I" + os.path.join(ROOT, "include"),
           os.path.join(src_root, "test/sim", world), os.path.join(src_root, "src/protocol/protocol.cpp"),
           os.path.join(src_root, "src/protocol/acquire_steps.cpp"), os.path.join(ROOT, "src/common/error.cpp"),
           zk, "-o", out]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit("sim_mutants: build failed:\n" + r.stderr[-3000:])


def main():
    sys.stdout.reconfigure(line_buffering=True)
    ap = argparse.ArgumentParser()
    ap.add_argument("--seeds", type=int, default=10000)
    ap.add_argument("--only")
    ap.add_argument("--keep", action="store_true", help="keep the scratch copies")
    args = ap.parse_args()
    survived = 0
    for mutant in MUTANTS:
        name, path, old, new, what = mutant[:5]
        extra = mutant[5] if len(mutant) > 5 else []
        if args.only and name != args.only:
            continue
        scratch = tempfile.mkdtemp(prefix="zklock-mutant-")
        try:
            for d in ("src/protocol", "src/session", "test/sim"):
                shutil.copytree(os.path.join(ROOT, d), os.path.join(scratch, d))
            target = os.path.join(scratch, path)
            text = open(target).read()
            if text.count(old) != 1:
                sys.exit(f"sim_mutants: {name}: the text to change occurs {text.count(old)} times in {path}")
            open(target, "w").write(text.replace(old, new))
            exe = os.path.join(scratch, "zklock_sim")
            world = "sim.cpp"
            if extra and extra[0] == "--semaphore":
                world, extra = "sem_sim.cpp", extra[1:]
            if extra and extra[0] == "--lease":
                world, extra = "lease_sim.cpp", extra[1:]
            build(scratch, exe, world)
            r = subprocess.run([exe, "--seeds", str(args.seeds)] + extra, capture_output=True, text=True)
            lines = r.stdout.strip().splitlines()
            if r.returncode != 0 and lines and lines[0].startswith("seed "):
                print(f"killed    {name}: {what}\n          {lines[0][:200]}")
            else:
                survived += 1
                print(f"SURVIVED  {name}: {what}\n          {lines[-1] if lines else r.stderr.strip()[:200]}")
        finally:
            if not args.keep:
                shutil.rmtree(scratch, ignore_errors=True)
    print(f"sim_mutants: {survived} survived")


if __name__ == "__main__":
    main()
