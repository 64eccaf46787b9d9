#!/usr/bin/python3
"""Tests of the `zklock` command-line program against the real ZooKeeper of scripts/test.sh
($ZK_CONNECT). kazoo (Debian's python3-kazoo) is the independent admin client that checks what
is in ZooKeeper. Each test leaves its lock path empty and checks that it does.

Run one: ZKLOCK_BIN=build/zklock ZK_CONNECT=... /usr/bin/python3 test/cli/cli_test.py CliTest.test_x
"""
import json
import os
import re
import select
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import unittest
import uuid

from kazoo.client import KazooClient
from kazoo.exceptions import NoNodeError

ZKLOCK = os.environ.get("ZKLOCK_BIN", "build/zklock")
# The same program built with its test hooks (ZKLOCK_TEST_SPAWN_DELAY_MS, ZKLOCK_TEST_INTERNAL_ERROR),
# which the shipped one does not read: CMakeLists.txt's zklock_cli_test_hooks, never installed.
ZKLOCK_HOOKS = os.environ.get("ZKLOCK_HOOKS_BIN", "build/test/zklock-test-hooks")
ZK = os.environ.get("ZK_CONNECT", "")

EX_NOTHING, EX_USAGE, EX_UNAVAILABLE, EX_EXPIRED, EX_BUSY, EX_LOST = 3, 64, 69, 74, 75, 76
SOURCE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")


class Proxy:
    """A TCP proxy on loopback that can turn into a black hole (a network partition)."""

    def __init__(self, target_port):
        self.target = ("127.0.0.1", target_port)
        self.sock = socket.socket()
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.port = self.sock.getsockname()[1]
        self.blackhole = False
        self.closed = False
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while not self.closed:
            try:
                c, _ = self.sock.accept()
            except OSError:
                return
            s = socket.create_connection(self.target)
            threading.Thread(target=self._pump, args=(c, s), daemon=True).start()

    def _pump(self, a, b):
        socks = [a, b]
        try:
            while not self.closed:
                r, _, _ = select.select(socks, [], [], 0.2)
                for x in r:
                    data = x.recv(65536)
                    if not data:
                        return
                    if not self.blackhole:
                        (b if x is a else a).sendall(data)
        except OSError:
            pass
        finally:
            a.close()
            b.close()

    def close(self):
        self.closed = True
        self.sock.close()


def zklock(*args, timeout=60, binary=None, **kw):
    return subprocess.run([binary or ZKLOCK, *args], capture_output=True, text=True, timeout=timeout, **kw)


def spawn(*args, binary=None, **kw):
    return subprocess.Popen([binary or ZKLOCK, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            **kw)


class CliTest(unittest.TestCase):
    def setUp(self):
        self.assertTrue(ZK, "ZK_CONNECT is not set: run the suite with scripts/test.sh")
        self.zk = KazooClient(hosts=ZK)
        self.zk.start(timeout=15)
        self.path = "/zklock-test/cli-%s-%s" % (self._testMethodName, uuid.uuid4().hex[:8])
        self.tmp = tempfile.mkdtemp(prefix="zklock-cli-")
        self.procs = []
        os.environ["ZK_CONNECT"] = ZK

    def tearDown(self):
        shutil.rmtree(self.tmp, ignore_errors=True)
        for p in self.procs:
            if p.poll() is None:
                p.kill()
                p.wait()
        self.zk.stop()
        self.zk.close()

    def spawn(self, *args, **kw):
        p = spawn(*args, **kw)
        self.procs.append(p)
        return p

    def children(self, path=None):
        path = path or self.path
        try:
            return self.zk.get_children(path)
        except NoNodeError:  # never made, or an empty container the server reaped
            return []

    def wait_children(self, n, limit=10.0, path=None):
        deadline = time.time() + limit
        while time.time() < deadline:
            if len(self.children(path)) == n:
                return
            time.sleep(0.02)
        self.fail("%s never had %d children: %s" % (path or self.path, n, self.children(path)))

    def assert_no_leftovers(self, limit=15.0):
        deadline = time.time() + limit
        while time.time() < deadline and self.children():
            time.sleep(0.1)
        self.assertEqual(self.children(), [], "lock nodes left behind")

    def wait_signal_caught(self, pid, sig, limit=15.0):
        """Until process `pid` has a handler for `sig` (its SigCgt mask in /proc/PID/status)."""
        deadline = time.time() + limit
        while time.time() < deadline:
            try:
                with open("/proc/%d/status" % pid) as f:
                    for line in f:
                        if line.startswith("SigCgt:") and int(line.split()[1], 16) >> (int(sig) - 1) & 1:
                            return
            except OSError:
                break
            time.sleep(0.01)
        self.fail("process %d never caught %s" % (pid, sig.name))

    def wait_file(self, path, limit=10.0):
        deadline = time.time() + limit
        while time.time() < deadline:
            if os.path.exists(path):
                with open(path) as f:
                    text = f.read().strip()
                if text:
                    return text
            time.sleep(0.02)
        self.fail("%s never appeared" % path)

    def assert_gone(self, pid, limit=5.0):
        """The process is gone (or a zombie nobody reaped yet: it runs no more)."""
        deadline = time.time() + limit
        while time.time() < deadline:
            try:
                with open("/proc/%d/stat" % pid) as f:
                    if f.read().split(") ", 1)[1].startswith("Z"):
                        return
            except FileNotFoundError:
                return
            time.sleep(0.02)
        self.fail("process %d still runs" % pid)

    def assert_one_error_line(self, r):
        lines = r.stderr.strip().splitlines()
        self.assertEqual(len(lines), 1, "expected one line on stderr, got: %r" % r.stderr)
        self.assertTrue(lines[0].startswith("zklock: "), lines[0])
        return lines[0]

    # ------------------------------------------------------------------ run
    def test_version_is_the_librarys(self):
        hpp = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "include", "zklock", "version.hpp")
        with open(hpp) as f:
            text = f.read()
        want = ".".join(re.search(r"^#define ZKLOCK_VERSION_%s (\d+)" % k, text, re.M).group(1)
                        for k in ("MAJOR", "MINOR", "PATCH"))
        r = zklock("--version")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stdout.strip(), "zklock " + want)

    def test_two_runs_on_one_path_never_overlap(self):
        log = os.path.join(self.tmp, "log")
        script = ('echo "start $$ $(date +%%s%%N)" >> %s; sleep 0.15; echo "end $$ $(date +%%s%%N)" >> %s' % (log, log))
        procs = []
        for _ in range(2):
            # each of two shells runs `zklock run` five times in a row
            loop = "for i in 1 2 3 4 5; do %s run %s -- sh -c '%s' || exit 9; done" % (ZKLOCK, self.path, script)
            procs.append(subprocess.Popen(["sh", "-c", loop]))
            self.procs.append(procs[-1])
        for p in procs:
            self.assertEqual(p.wait(timeout=120), 0)
        events = []
        with open(log) as f:
            for line in f:
                kind, pid, ns = line.split()
                events.append((int(ns), kind, pid))
        self.assertEqual(len(events), 20)
        events.sort()
        inside = None
        for ns, kind, pid in events:
            if kind == "start":
                self.assertIsNone(inside, "two commands held the lock at once")
                inside = pid
            else:
                self.assertEqual(inside, pid)
                inside = None
        self.assert_no_leftovers()

    def test_the_command_sees_a_fencing_token_that_increases(self):
        tokens = []
        for _ in range(3):
            r = zklock("run", self.path, "--", "sh", "-c",
                       'echo "$ZKLOCK_FENCING_TOKEN $ZKLOCK_NODE $ZKLOCK_SESSION_ID $ZKLOCK_PATH"')
            self.assertEqual(r.returncode, 0, r.stderr)
            token, node, sid, path = r.stdout.split()
            self.assertTrue(node.startswith(self.path + "/"), node)
            self.assertTrue(sid.startswith("0x"), sid)
            self.assertEqual(path, self.path)
            tokens.append(int(token))
        self.assertEqual(tokens, sorted(tokens))
        self.assertEqual(len(set(tokens)), 3, tokens)
        self.assert_no_leftovers()

    def test_the_command_does_not_inherit_the_key_password(self):
        # ZK_TLS_KEY_PASSWORD is zklock's secret (the private key's password), not the command's
        env = dict(os.environ, ZK_TLS_KEY_PASSWORD="s3cret-zklock", ZKLOCK_TEST_OTHER_VAR="kept")
        r = zklock("run", self.path, "--", "env", env=env)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("ZKLOCK_TEST_OTHER_VAR=kept", r.stdout)
        self.assertNotIn("ZK_TLS_KEY_PASSWORD", r.stdout)
        self.assertNotIn("s3cret-zklock", r.stdout)
        self.assert_no_leftovers()

    def test_exit_status_of_the_command_passes_through(self):
        self.assertEqual(zklock("run", self.path, "--", "sh", "-c", "exit 7").returncode, 7)
        self.assertEqual(zklock("run", self.path, "--", "sh", "-c", "kill -KILL $$").returncode, 128 + 9)
        r = zklock("run", self.path, "--", "no-such-command-zklock")
        self.assertEqual(r.returncode, 127)
        self.assertIn("no-such-command-zklock", self.assert_one_error_line(r))
        not_executable = os.path.join(self.tmp, "not-executable")
        open(not_executable, "w").close()
        self.assertEqual(zklock("run", self.path, "--", not_executable).returncode, 126)
        self.assert_no_leftovers()

    def test_nonblock_and_timeout_exit_with_the_busy_code(self):
        holder = self.spawn("run", self.path, "--", "sleep", "30")
        self.wait_children(1)
        r = zklock("run", "--nonblock", self.path, "--", "true")
        self.assertEqual(r.returncode, EX_BUSY, r.stderr)
        self.assertIn("held", self.assert_one_error_line(r))
        t0 = time.time()
        r = zklock("run", "--timeout", "700ms", self.path, "--", "true")
        waited = time.time() - t0
        self.assertEqual(r.returncode, EX_BUSY, r.stderr)
        self.assertIn("timed out", self.assert_one_error_line(r))
        self.assertGreaterEqual(waited, 0.65)
        self.assertEqual(len(self.children()), 1, "a waiter that gave up left its node")
        holder.send_signal(signal.SIGTERM)  # passed on to `sleep`; the lock goes with it
        self.assertEqual(holder.wait(timeout=15), 128 + signal.SIGTERM)
        self.assert_no_leftovers()

    def test_a_shared_run_and_an_exclusive_run_on_one_path_exclude_each_other(self):
        # guards against a reader being granted while a mutex holds the path, and the reverse
        for first, second in ((["run"], ["run", "--shared"]), (["run", "--shared"], ["run"])):
            holder = self.spawn(*first, "--data", "first", self.path, "--", "sleep", "30")
            self.wait_children(1)
            r = zklock(*second, "--nonblock", self.path, "--", "echo", "OVERLAP")
            self.assertEqual(r.returncode, EX_BUSY, r.stdout + r.stderr)
            self.assertNotIn("OVERLAP", r.stdout)
            # list shows the holder whatever its kind, and revoke finds it
            listed = zklock("list", self.path)
            self.assertEqual(listed.returncode, 0, listed.stderr)
            lines = listed.stdout.strip().splitlines()
            self.assertEqual(len(lines), 1, listed.stdout)
            self.assertTrue(lines[0].startswith("holder") and "first" in lines[0], lines[0])
            self.assertIn("read" if "--shared" in first else "write", lines[0])
            rv = zklock("revoke", self.path)
            self.assertEqual(rv.returncode, 0, rv.stderr)
            holder.send_signal(signal.SIGTERM)
            holder.wait(timeout=15)
            self.assert_no_leftovers()

    def test_sigterm_is_passed_on_and_the_lock_released_when_the_command_ends(self):
        marker = os.path.join(self.tmp, "got-term")
        ready = os.path.join(self.tmp, "ready")
        holder = self.spawn("run", self.path, "--", "sh", "-c",
                            "trap 'echo term > %s; exit 0' TERM; echo ready > %s; while :; do sleep 0.05; done"
                            % (marker, ready))
        self.wait_file(ready)  # the trap is in place
        holder.send_signal(signal.SIGTERM)
        self.assertEqual(holder.wait(timeout=15), 0)
        self.assertTrue(os.path.exists(marker), "the command never saw the SIGTERM")
        self.assert_no_leftovers(limit=1.0)  # released at once, not at the session's end

    def test_a_sigkilled_run_frees_the_lock_within_the_session_timeout_and_takes_its_command_along(self):
        pidfile = os.path.join(self.tmp, "child")
        holder = self.spawn("run", "--session-timeout", "2s", self.path, "--", "sh", "-c",
                            "echo $$ > %s; exec sleep 60" % pidfile)
        self.wait_children(1)
        child = int(self.wait_file(pidfile))
        holder.kill()
        holder.wait()
        t0 = time.time()
        r = zklock("run", "--timeout", "10s", self.path, "--", "true")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertLess(time.time() - t0, 2.0 + 3.0, "the lock was not freed within the session timeout")
        self.assert_gone(child)  # the command did not outlive its zklock run
        self.assert_no_leftovers()

    def test_a_sigkilled_run_takes_the_commands_children_along(self):
        # `sh -c 'sleep 31'` under a SIGKILLed zklock: sh dies of its parent-death signal, and
        # sleep must not run on without the lock. The guardian kills the whole group.
        pidfile = os.path.join(self.tmp, "grandchild")
        holder = self.spawn("run", "--session-timeout", "2s", self.path, "--", "sh", "-c",
                            "sleep 60 & echo $! > %s; wait" % pidfile)
        self.wait_children(1)
        grandchild = int(self.wait_file(pidfile))
        holder.kill()
        holder.wait()
        self.assert_gone(grandchild)  # the command's children did not outlive zklock either
        r = zklock("run", "--timeout", "10s", self.path, "--", "true")  # (the node goes with the session)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assert_no_leftovers()

    def test_a_command_that_ignores_sigterm_is_killed_soon_after_a_loss(self):
        # --kill-after is long, but after a loss SIGKILL comes within T/4: before the server can
        # hand the lock on (the loss comes at s + 0.3 T, the node stays until s + 0.65 T).
        ready = os.path.join(self.tmp, "ready")
        holder = self.spawn("run", "--session-timeout", "2s", "--kill-after", "60s", self.path, "--", "sh", "-c",
                            "trap '' TERM; echo $$ > %s; while :; do sleep 0.05; done" % ready)
        self.wait_children(1)
        shell = int(self.wait_file(ready))
        node = self.path + "/" + self.children()[0]
        t0 = time.time()
        self.assertEqual(zklock("break", node).returncode, 0)
        self.assertEqual(holder.wait(timeout=20), EX_LOST)
        self.assertLess(time.time() - t0, 2.0, "SIGKILL did not come within T/4 of the loss")
        self.assert_gone(shell)
        self.assert_no_leftovers()

    def test_what_the_command_leaves_running_is_killed_before_the_lock_is_released(self):
        bg = os.path.join(self.tmp, "bg")
        r = zklock("run", self.path, "--", "sh", "-c", "sleep 60 & echo $! > %s" % bg)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assert_gone(int(self.wait_file(bg)), limit=1.0)
        self.assert_no_leftovers()

    def test_sigint_while_waiting_gives_the_request_up_and_leaves_no_node(self):
        holder = self.spawn("run", self.path, "--", "sleep", "30")
        self.wait_children(1)
        waiter = self.spawn("run", self.path, "--", "true")
        self.wait_children(2)
        waiter.send_signal(signal.SIGINT)
        self.assertEqual(waiter.wait(timeout=15), 128 + signal.SIGINT)
        self.assertIn("interrupted by SIGINT", waiter.stderr.read())
        self.wait_children(1)
        holder.send_signal(signal.SIGTERM)
        holder.wait(timeout=15)
        self.assert_no_leftovers()

    def test_a_signal_while_connecting_ends_the_run_with_its_code_and_no_crash(self):
        # Port 1 refuses every attempt: the run is still connecting when the signal comes. (It
        # died of SIGSEGV here, every time: the connect's handler wrote into a dead stack frame.)
        # The delay counts from when the run catches the signal (its handler is installed: the
        # process's SigCgt mask in /proc): before that the signal's default action ends it, as it
        # would any program (seen under ASan, whose start-up took longer than 0.3 s: rc -15).
        for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            for delay in (0.3, 1.0):
                p = self.spawn("run", "-c", "127.0.0.1:1", "--connect-timeout", "30s", self.path, "--", "true")
                self.wait_signal_caught(p.pid, sig)
                time.sleep(delay)
                p.send_signal(sig)
                rc = p.wait(timeout=15)
                err = p.stderr.read()
                self.assertEqual(rc, 128 + sig, "%s after %ss: %s" % (sig.name, delay, err))  # 130, 143, 129
                self.assertIn("interrupted by %s while connecting" % sig.name, err)
        self.assertIsNone(self.zk.exists(self.path), "a run that never connected created something")

    def test_a_lock_deleted_by_someone_else_stops_the_command(self):
        holder = self.spawn("run", "--kill-after", "1s", self.path, "--", "sleep", "60")
        self.wait_children(1)
        node = self.path + "/" + self.children()[0]
        r = zklock("break", node)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(holder.wait(timeout=15), EX_LOST)
        self.assertIn("lost", holder.stderr.read())
        self.assert_no_leftovers()

    def test_a_lock_lost_before_the_command_starts_is_not_run(self):
        # Lost between the grant and the spawn: exit with the loss code and do
        # not run the command. ZKLOCK_TEST_SPAWN_DELAY_MS widens that gap for the test.
        marker = os.path.join(self.tmp, "ran")
        holder = self.spawn("run", self.path, "--", "touch", marker, binary=ZKLOCK_HOOKS,
                            env=dict(os.environ, ZKLOCK_TEST_SPAWN_DELAY_MS="2000"))
        self.wait_children(1)
        node = self.path + "/" + self.children()[0]
        r = zklock("break", node)
        self.assertEqual(r.returncode, 0, r.stderr)
        rc = holder.wait(timeout=20)
        err = holder.stderr.read()
        self.assertEqual(rc, EX_LOST, err)
        self.assertIn("not run", err)
        self.assertFalse(os.path.exists(marker), "the command ran although the lock was lost")
        self.assert_no_leftovers()

    def test_a_session_that_expires_while_waiting_exits_74(self):
        # The expiry code, not 1, which would look like a command that failed.
        ready = os.path.join(self.tmp, "ready")
        holder = self.spawn("run", self.path, "--", "sh", "-c",
                            "echo ready > %s; while :; do sleep 0.05; done" % ready)
        self.wait_file(ready)
        proxy = Proxy(int(ZK.split(",")[0].split(":")[1]))
        try:
            marker = os.path.join(self.tmp, "ran")
            waiter = self.spawn("run", "-c", "127.0.0.1:%d" % proxy.port, "--session-timeout", "2s",
                                self.path, "--", "touch", marker)
            self.wait_children(2)
            proxy.blackhole = True
            time.sleep(4.0)  # the server expires the waiter's session (2 s)
            proxy.blackhole = False
            rc = waiter.wait(timeout=30)
            err = waiter.stderr.read()
            self.assertEqual(rc, EX_EXPIRED, err)
            self.assertIn("expired", err)
            self.assertFalse(os.path.exists(marker))
        finally:
            proxy.close()
        holder.send_signal(signal.SIGTERM)
        holder.wait(timeout=20)
        self.assert_no_leftovers()

    def test_a_partition_loses_the_lock_and_stops_the_command_before_the_session_expires(self):
        proxy = Proxy(int(ZK.split(",")[0].split(":")[1]))
        try:
            marker = os.path.join(self.tmp, "stopped")
            ready = os.path.join(self.tmp, "ready")
            holder = self.spawn("run", "-c", "127.0.0.1:%d" % proxy.port, "--session-timeout", "3s",
                                "--kill-after", "500ms", self.path, "--", "sh", "-c",
                                "trap 'echo $(date +%%s%%N) > %s; exit 0' TERM; echo ready > %s; "
                                "while :; do sleep 0.05; done" % (marker, ready))
            self.wait_children(1)
            self.wait_file(ready)
            proxy.blackhole = True
            t0 = time.time()
            rc = holder.wait(timeout=20)
            err = holder.stderr.read()
            self.assertEqual(rc, EX_LOST, err)
            self.assertIn("lost", err)
            stopped_at = int(open(marker).read()) / 1e9
            self.assertLess(stopped_at - t0, 3.0, "the command was stopped after the session could expire")
            # the server expires the session and frees the lock for the next one
            r = zklock("run", "--timeout", "10s", self.path, "--", "sh", "-c", "date +%s%N")
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertLess(stopped_at, int(r.stdout) / 1e9, "the next holder ran before the command stopped")
        finally:
            proxy.close()
        self.assert_no_leftovers()

    # ------------------------------------------------------------------ admin
    def test_list_shows_the_holder_first_then_the_waiters(self):
        holder = self.spawn("run", "--data", "the-holder", self.path, "--", "sleep", "30")
        self.wait_children(1)
        waiter = self.spawn("run", "--data", "the-waiter", self.path, "--", "true")
        self.wait_children(2)
        r = zklock("list", self.path)
        self.assertEqual(r.returncode, 0, r.stderr)
        lines = r.stdout.strip().splitlines()
        self.assertEqual(len(lines), 2, r.stdout)
        self.assertTrue(lines[0].startswith("holder") and "the-holder" in lines[0], lines[0])
        self.assertTrue(lines[1].startswith("waiter") and "the-waiter" in lines[1], lines[1])
        r = zklock("list", "--json", self.path)
        self.assertEqual(r.returncode, 0, r.stderr)
        items = json.loads(r.stdout)
        self.assertEqual([i["role"] for i in items], ["holder", "waiter"])
        self.assertEqual([i["data"] for i in items], ["the-holder", "the-waiter"])
        self.assertTrue(items[0]["node"].startswith(self.path + "/"))
        self.assertLess(items[0]["sequence"], items[1]["sequence"])
        self.assertGreaterEqual(items[0]["age_ms"], items[1]["age_ms"])
        stat = self.zk.exists(items[0]["node"])
        self.assertEqual(int(items[0]["session"], 16), stat.ephemeralOwner)
        holder.send_signal(signal.SIGTERM)
        holder.wait(timeout=15)
        self.assertEqual(waiter.wait(timeout=15), 0)
        self.assertEqual(json.loads(zklock("list", "--json", self.path).stdout), [])
        self.assert_no_leftovers()

    def test_leader_prints_the_value_of_a_run_and_watch_follows_each_change(self):
        r = zklock("leader", self.path)
        self.assertEqual(r.returncode, EX_NOTHING, r.stderr)
        self.assertEqual(r.stdout.strip(), "(no leader)")
        self.assertIn("no leader on " + self.path, self.assert_one_error_line(r))
        first = self.spawn("run", "--data", "primary-a:8080", self.path, "--", "sleep", "30")
        self.wait_children(1)
        r = zklock("leader", self.path)
        self.assertEqual((r.returncode, r.stdout), (0, "primary-a:8080\n"), r.stderr)
        r = zklock("leader", "--json", self.path)
        self.assertEqual(r.returncode, 0, r.stderr)
        info = json.loads(r.stdout)
        self.assertEqual(info["value"], "primary-a:8080")
        stat = self.zk.exists(info["node"])
        self.assertEqual(int(info["session"], 16), stat.ephemeralOwner)
        self.assertEqual(info["fencing_token"], stat.czxid * 4096)
        # --watch: the current leader, then one line per change, until SIGINT (exit 0). Its first
        # line is awaited before anything changes: a watcher that starts slowly (under ASan it
        # once took longer than the next leader's start and the first one's resignation) rightly
        # prints only the leader it finds.
        watch = self.spawn("leader", "--watch", self.path)
        seen = b""

        def watched_through(line):
            # reads the watcher's output until `line` (raw: nothing left in Python's buffer);
            # each change is made only after the watcher printed the one before: a value set
            # while the watcher is still reading the new leader (seen under CI's load) is the
            # one it prints, and the test would ask for a change nobody could see
            nonlocal seen
            deadline = time.time() + 15
            while line not in seen.split(b"\n")[:-1] and time.time() < deadline:
                ready, _, _ = select.select([watch.stdout], [], [], max(0.0, deadline - time.time()))
                if not ready:
                    break
                chunk = os.read(watch.stdout.fileno(), 4096)
                if not chunk:
                    break
                seen += chunk

        watched_through(b"primary-a:8080")
        self.assertEqual(seen, b"primary-a:8080\n", "the watcher's first line")
        second = self.spawn("run", "--data", "primary-b:8080", self.path, "--", "sleep", "30")
        self.wait_children(2)
        first.send_signal(signal.SIGTERM)  # the leader resigns: the next one leads
        first.wait(timeout=15)
        self.wait_children(1)
        watched_through(b"primary-b:8080")
        self.zk.set(self.path + "/" + self.children()[0], b"primary-b:9090")  # a new value
        time.sleep(0.5)
        second.send_signal(signal.SIGTERM)
        second.wait(timeout=15)
        self.wait_children(0)
        time.sleep(0.5)
        self.wait_signal_caught(watch.pid, signal.SIGINT)
        watch.send_signal(signal.SIGINT)
        out, _ = watch.communicate(timeout=15)
        self.assertEqual(watch.returncode, 0)
        self.assertEqual((seen.decode() + out).splitlines(),
                         ["primary-a:8080", "primary-b:8080", "primary-b:9090", "(no leader)"])
        r = zklock("leader", "no-slash")
        self.assertEqual(r.returncode, EX_USAGE)
        self.assertIn("bad election path", self.assert_one_error_line(r))
        self.assert_no_leftovers()

    def test_list_json_stays_valid_for_binary_node_data(self):
        # a contender made by another client, with bytes that are not UTF-8 and control bytes
        node = self.zk.create(self.path + "/_c_0f1e2d3c-lock-", b"\xff\x00\xfe\x01\"\\ tail",
                              ephemeral=True, sequence=True, makepath=True)
        r = zklock("list", "--json", self.path)
        self.assertEqual(r.returncode, 0, r.stderr)
        items = json.loads(r.stdout)  # raises if the output is not valid JSON
        self.assertEqual(len(items), 1, r.stdout)
        self.assertEqual(items[0]["node"], node)
        self.assertIsInstance(items[0]["data"], str)
        self.assertTrue(items[0]["data"].endswith(" tail"), items[0]["data"])
        r = zklock("list", self.path)  # the text form: valid UTF-8 (decoded here), no control bytes
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn('????"\\ tail', r.stdout)
        self.zk.delete(node)
        self.assert_no_leftovers()

    def test_hand_made_nodes_are_listed_as_foreign_and_can_be_broken(self):
        # a child named like a lock node that no sequential create made (its
        # suffix is at the counter's cap while the parent's cversion is small) must not deny the lock
        odd = self.path + "/x-lock-2147483647"
        self.zk.create(odd, b"crafted", makepath=True)
        r = zklock("run", "--timeout", "10s", self.path, "--", "true")
        self.assertEqual(r.returncode, 0, r.stderr)
        items = json.loads(zklock("list", "--json", self.path).stdout)
        self.assertEqual([(i["role"], i["node"]) for i in items], [("foreign", odd)])
        r = zklock("list", self.path)
        self.assertTrue(r.stdout.startswith("foreign  " + odd), r.stdout)
        self.assertEqual(zklock("break", odd).returncode, 0)
        self.assertIsNone(self.zk.exists(odd))
        self.assert_no_leftovers()

    def test_job_control_stops_do_not_stop_a_run(self):
        # a stopped zklock would stop renewing its lease while its command goes on: it ignores them
        # (each in a process group of its own whose parent, this test, is in another group: the
        # kernel discards job-control stops sent to an orphaned group, which would prove nothing)
        def state(pid):
            with open("/proc/%d/stat" % pid) as f:
                return f.read().split(") ", 1)[1][0]
        control = subprocess.Popen(["sleep", "30"], process_group=0)  # the same signal stops a plain process
        self.procs.append(control)
        ready = os.path.join(self.tmp, "ready")
        holder = self.spawn("run", self.path, "--", "sh", "-c", "echo ready > %s; sleep 30" % ready, process_group=0)
        self.wait_file(ready)
        for sig in (signal.SIGTSTP, signal.SIGTTIN, signal.SIGTTOU):
            holder.send_signal(sig)
        control.send_signal(signal.SIGTSTP)
        time.sleep(0.5)
        self.assertEqual(state(control.pid), "T", "the control process was not stopped: the check proves nothing")
        self.assertNotEqual(state(holder.pid), "T", "zklock run was stopped by a job-control signal")
        self.assertIsNone(holder.poll(), "zklock run ended")
        self.assertEqual(len(self.children()), 1, "the lock is no longer held")
        holder.send_signal(signal.SIGTERM)
        holder.wait(timeout=15)
        self.assert_no_leftovers(limit=2.0)

    def test_revoke_asks_the_holder_to_stop_its_command(self):
        holder = self.spawn("run", self.path, "--", "sleep", "60")
        self.wait_children(1)
        r = zklock("revoke", self.path)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn(self.path + "/", r.stdout)
        self.assertEqual(holder.wait(timeout=15), 128 + signal.SIGTERM)  # the command's own status
        self.assertIn("asked to release", holder.stderr.read())
        self.assert_no_leftovers()
        r = zklock("revoke", self.path)
        self.assertEqual(r.returncode, EX_NOTHING, r.stderr)  # not 1: nothing was refused
        self.assertIn("nobody holds", self.assert_one_error_line(r))

    def test_break_of_a_missing_node_is_an_error(self):
        r = zklock("break", self.path + "/_c_0-lock-0000000000")
        self.assertEqual(r.returncode, EX_NOTHING, r.stderr)
        self.assertIn("no such lock node", self.assert_one_error_line(r))

    def test_break_of_a_node_that_is_not_a_lock_node_is_bad_input(self):
        # refused by its name before anything is sent: 64 (bad arguments), not 1, which --help
        # keeps for a server's refusal
        self.zk.ensure_path(self.path + "/config")
        r = zklock("break", self.path + "/config")
        self.assertEqual(r.returncode, EX_USAGE, r.stderr)
        self.assertIn("not a lock node", self.assert_one_error_line(r))
        self.assertIsNotNone(self.zk.exists(self.path + "/config"), "the node was deleted")
        self.zk.delete(self.path + "/config")

    def test_the_man_page_has_every_subcommand_and_the_exit_statuses_once(self):
        man = os.path.join(os.path.dirname(ZKLOCK), "zklock.1")
        self.assertTrue(os.path.exists(man), "zklock.1 is made at build time, beside the program")
        with open(man) as f:
            page = f.read()
        top = zklock("--help").stdout
        subs = re.findall(r"^  ([a-z]+) ", top[top.index("Subcommands:"):], re.M)
        self.assertIn("leader", subs)
        for sub in subs:
            self.assertIn(".SH ZKLOCK %s\n" % sub.upper(), page, "the page lacks zklock %s" % sub)
            self.assertIn(".B zklock %s\n" % sub, page, "the synopsis lacks zklock %s" % sub)
        self.assertEqual(page.count("Exit status of run"), 1, "the exit statuses belong on the page once")
        self.assertIn(".SH EXIT STATUS", page)

    # ------------------------------------------------------------------ bad input
    def test_bad_arguments_get_one_clear_line_and_touch_nothing(self):
        cases = [
            (["run", "relative/path", "--", "true"], "bad lock path"),
            (["run", self.path + "/", "--", "true"], "bad lock path"),
            (["run", "--timeout", "ten", self.path, "--", "true"], "--timeout"),
            (["run", "--timeout", "-1s", self.path, "--", "true"], "negative"),
            (["run", "--kill-after", "5x", self.path, "--", "true"], "unknown unit"),
            (["run", "--session-timeout", "1ms", self.path, "--", "true"], "--session-timeout"),
            (["run", "--nonblock", "--timeout", "1s", self.path, "--", "true"], "exclude"),
            (["run", self.path], "command"),
            (["run"], "path"),
            (["run", "-c", "not a connect string", self.path, "--", "true"], "connect string"),
            (["run", "--no-such-option", self.path, "--", "true"], "unknown option '--no-such-option'"),
            (["--bogus"], "unknown option '--bogus'"),
            (["run", self.path, "ls", "-la"], "unknown option '-la' (the command and its arguments go after '--'"),
            (["bogus"], "unknown subcommand 'bogus'"),
            (["run", "--data", "", self.path, "--", "true"], "--data"),
            (["run", "--data", "x" * 65537, self.path, "--", "true"], "--data: 65537 bytes"),
            (["run", "--connect-timeout", "0", self.path, "--", "true"], "--connect-timeout"),
            (["run", "-c", "http://127.0.0.1:2181", self.path, "--", "true"], "invalid connect string"),
            (["run", "-c", "127.0.0.1:2181/chroot/", self.path, "--", "true"], "chroot"),
            (["run", "-c", "127.0.0.1:2181;127.0.0.1:2182", self.path, "--", "true"], "the separator is a comma"),
            (["list", "bad"], "bad lock path"),
            (["break", "bad"], "bad node path"),
            ([], "subcommand"),
        ]
        lines = []
        for args, needle in cases:
            r = zklock(*args)
            self.assertEqual(r.returncode, EX_USAGE, "%s: %s" % (str(args)[:200], r.stderr[:500]))
            line = self.assert_one_error_line(r)
            self.assertIn(needle, line, str(args)[:200])
            lines.append(line)
        # no two different mistakes share one message
        self.assertEqual(len(set(lines)), len(lines), "\n".join(lines))
        env = dict(os.environ)
        del env["ZK_CONNECT"]
        r = zklock("run", self.path, "--", "true", env=env)
        self.assertEqual(r.returncode, EX_USAGE)
        self.assertIn("ZK_CONNECT", self.assert_one_error_line(r))
        # the run's own mistakes are named first, even without ZK_CONNECT
        r = zklock("run", "--timeout", "abc", self.path, "--", "true", env=env)
        self.assertEqual(r.returncode, EX_USAGE)
        self.assertIn("--timeout", self.assert_one_error_line(r))
        # a bare number is seconds, and --help says so
        self.assertIn("bare number is seconds", zklock("run", "--help").stdout)
        self.assertIsNone(self.zk.exists(self.path), "bad arguments created something")

    # ------------------------------------------------------------------ TLS
    def test_run_and_list_over_tls(self):
        tls_connect, zk_dir = os.environ.get("ZK_TLS_CONNECT", ""), os.environ.get("ZK_DIR", "")
        self.assertTrue(tls_connect and zk_dir, "ZK_TLS_CONNECT / ZK_DIR not set: run the suite with scripts/test.sh")
        pki = os.path.join(zk_dir, "tls")
        tls = ["-c", tls_connect, "--tls-ca", pki + "/ca.pem", "--tls-cert", pki + "/client.pem",
               "--tls-key", pki + "/client.key"]
        out = os.path.join(self.tmp, "ran")
        r = zklock("run", *tls, self.path, "--", "sh", "-c", "echo ran > " + out)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(open(out).read().strip(), "ran")
        # the same from the environment, as ZK_CONNECT: a holder, listed over TLS
        env = dict(os.environ, ZK_CONNECT=tls_connect, ZK_TLS_CA=pki + "/ca.pem", ZK_TLS_CERT=pki + "/client.pem",
                   ZK_TLS_KEY=pki + "/client.key")
        holder = self.spawn("run", self.path, "--", "sleep", "30", env=env)
        self.wait_children(1)
        r = zklock("list", self.path, env=env)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("holder", r.stdout)
        holder.terminate()
        holder.wait(timeout=10)
        self.assert_no_leftovers()
        # mistakes: a CA that cannot be read (usage), a server that wants a certificate (refused)
        r = zklock("run", "-c", tls_connect, "--tls-ca", "/nonexistent/ca.pem", self.path, "--", "true")
        self.assertEqual(r.returncode, EX_USAGE, r.stderr)
        self.assertIn("cannot read the CA file /nonexistent/ca.pem", self.assert_one_error_line(r))
        r = zklock("run", "-c", tls_connect, "--tls-ca", pki + "/ca.pem", self.path, "--", "true")
        self.assertEqual(r.returncode, 1, r.stderr)
        line = self.assert_one_error_line(r)
        self.assertIn("requires a client certificate", line)
        # the flag to give, not the library's C++ name for it (tls_options::certificate_file)
        self.assertIn("(--tls-cert)", line)
        self.assertNotIn("tls_options", line)
        r = zklock("run", "-c", tls_connect, "--tls-cert", pki + "/client.pem", self.path, "--", "true")
        self.assertEqual(r.returncode, EX_USAGE, r.stderr)
        self.assertIn("need --tls-ca", self.assert_one_error_line(r))
        self.assertIsNone(self.zk.exists(self.path + "/never"), "")

    def test_an_unresolvable_host_is_unavailable_and_named(self):
        r = zklock("run", "-c", "no-such-host.invalid:2181", "--connect-timeout", "5s", self.path, "--", "true")
        self.assertEqual(r.returncode, EX_UNAVAILABLE, r.stderr)  # was 1, as if a server had refused
        line = self.assert_one_error_line(r)
        self.assertIn("no-such-host.invalid:2181: cannot resolve", line)
        r = zklock("list", "-c", "no-such-host.invalid:2181", self.path)
        self.assertEqual(r.returncode, EX_UNAVAILABLE, r.stderr)

    def test_a_timeout_while_the_servers_are_gone_says_the_connection_was_lost(self):
        holder = self.spawn("run", self.path, "--", "sleep", "60")
        self.wait_children(1)
        proxy = Proxy(int(ZK.split(",")[0].split(":")[1]))
        try:
            waiter = self.spawn("run", "-c", "127.0.0.1:%d" % proxy.port, "--session-timeout", "2s",
                                "--timeout", "3s", self.path, "--", "true")
            self.wait_children(2)
        finally:
            proxy.close()  # its connections close, and new ones are refused: no server left
        rc = waiter.wait(timeout=30)
        err = waiter.stderr.read()
        self.assertEqual(rc, EX_UNAVAILABLE, err)  # not 75: the lock may well be free
        self.assertIn("the connection to ZooKeeper at 127.0.0.1:%d was lost" % proxy.port, err)
        self.assertNotIn("timed out waiting for lock", err)
        holder.send_signal(signal.SIGTERM)
        holder.wait(timeout=20)
        self.assert_no_leftovers()  # (the waiter's node goes with its session)

    def test_an_internal_error_is_one_line_and_exits_70(self):
        # (the exception path: reached through a test-only variable of the test build, as nothing
        # else reaches it)
        r = zklock("run", self.path, "--", "true", binary=ZKLOCK_HOOKS,
                   env=dict(os.environ, ZKLOCK_TEST_INTERNAL_ERROR="made up"))
        self.assertEqual(r.returncode, 70, r.stderr)
        self.assertIn("internal error: made up", self.assert_one_error_line(r))
        self.assertIsNone(self.zk.exists(self.path))

    def test_the_shipped_program_reads_no_test_hook(self):
        # the hooks exist only in the test build: the shipped zklock ignores the variables
        r = zklock("run", self.path, "--", "true", env=dict(os.environ, ZKLOCK_TEST_INTERNAL_ERROR="made up"))
        self.assertEqual(r.returncode, 0, r.stderr)
        with open(ZKLOCK, "rb") as f:
            self.assertNotIn(b"ZKLOCK_TEST_", f.read(), "a test hook in the shipped program")

    def test_help_man_page_and_docs_list_every_exit_code(self):
        # every code of src/cli/exit_codes.hpp, and the signals' 129/130/143
        with open(os.path.join(SOURCE, "src/cli/exit_codes.hpp")) as f:
            codes = [int(c) for c in re.findall(r"^\s*ex_\w+ = (\d+),", f.read(), re.M)]
        self.assertIn(3, codes)
        codes += [129, 130, 143]
        text = zklock("--help").stdout
        with open(os.path.join(SOURCE, "docs/operations.md")) as f:
            docs = f.read()
        docs = docs[docs.index("* Exit codes"):]
        docs = docs[:docs.index("\n* ")]
        man = os.path.join(os.path.dirname(ZKLOCK), "zklock.1")
        pages = [("zklock --help", text), ("docs/operations.md", docs)]
        if os.path.exists(man):  # (made from --help at build time)
            with open(man) as f:
                pages.append(("zklock.1", f.read()))
        for name, page in pages:
            for c in codes:
                self.assertRegex(page, r"(?<![\d.])%d(?![\d.])" % c, "%s does not list exit code %d" % (name, c))

    def test_a_chroot_that_does_not_exist_is_reported_at_connect(self):
        chroot = "/zklock-test/no-such-chroot-%s" % uuid.uuid4().hex[:8]
        r = zklock("run", "-c", ZK.split(",")[0] + chroot, self.path, "--", "true")
        self.assertEqual(r.returncode, 1, r.stderr)
        line = self.assert_one_error_line(r)
        self.assertIn("cannot connect", line)  # (it was the acquire that said so)
        self.assertIn("chroot does not exist", line)
        self.assertIsNone(self.zk.exists(chroot), "the chroot was created")

    def test_an_unreachable_server_is_reported(self):
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # bound, never listening: connections are refused
        try:
            r = zklock("run", "-c", "127.0.0.1:%d" % port, "--connect-timeout", "1s", self.path, "--", "true")
        finally:
            s.close()
        self.assertEqual(r.returncode, EX_UNAVAILABLE)
        lines = r.stderr.strip().splitlines()
        self.assertEqual(len(lines), 2, r.stderr)  # the first round of refusals, then the error
        self.assertIn("refused the connection", lines[0])
        self.assertIn("cannot connect", lines[1])
        # what the attempts got, per server
        self.assertIn("127.0.0.1:%d: connection refused" % port, lines[1])

    def test_servers_that_all_refuse_are_named_at_once_while_the_run_keeps_trying(self):
        socks = []
        for _ in range(2):  # bound, never listening: connections are refused
            s = socket.socket()
            s.bind(("127.0.0.1", 0))
            socks.append(s)
        ports = [s.getsockname()[1] for s in socks]
        try:
            connect = ",".join("127.0.0.1:%d" % p for p in ports)
            t0 = time.time()
            p = self.spawn("run", "-c", connect, "--connect-timeout", "30s", self.path, "--", "true")
            line = p.stderr.readline()  # (it was silent until the connect timeout)
            said_after = time.time() - t0
            self.assertLess(said_after, 5.0, line)
            self.assertIn("every server of %s refused the connection" % connect, line)
            for port in ports:
                self.assertIn("127.0.0.1:%d: connection refused" % port, line)
            self.assertIn("still trying until --connect-timeout", line)
            time.sleep(0.5)
            self.assertIsNone(p.poll(), "it gave up at the first round")
            p.send_signal(signal.SIGTERM)
            self.assertEqual(p.wait(timeout=15), 128 + signal.SIGTERM)
            self.assertIn("interrupted by SIGTERM while connecting", p.stderr.read())
        finally:
            for s in socks:
                s.close()
        self.assertIsNone(self.zk.exists(self.path))


if __name__ == "__main__":
    unittest.main()
