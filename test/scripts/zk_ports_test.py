#!/usr/bin/python3
"""scripts/zk_ports.py: the ports of throwaway ZooKeeper servers stay out of the kernel's
ephemeral range, are free when picked, and two pickers never share one (a quorum port taken
by someone else keeps an ensemble without a leader)."""
import os
import socket
import subprocess
import sys
import tempfile
import unittest

PICKER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "scripts", "zk_ports.py")


class ZkPortsTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory(prefix="zk-ports-test.")
        self.registry = os.path.join(self.tmp.name, "registry")
        self.env = dict(os.environ, ZK_PORT_REGISTRY=self.registry)
        self.env.pop("ZK_PORT_RANGE", None)

    def tearDown(self):
        self.tmp.cleanup()

    def state_dir(self, name):
        d = os.path.join(self.tmp.name, name)
        os.makedirs(d, exist_ok=True)
        return d

    def run_picker(self, *args, env=None, check=True):
        return subprocess.run([sys.executable, PICKER, *args], env=env or self.env, capture_output=True,
                              text=True, check=check, timeout=60)

    def pick(self, n, state_dir, env=None):
        out = self.run_picker("pick", str(n), state_dir, env=env).stdout.split()
        return [int(p) for p in out]

    def test_ports_are_distinct_and_outside_the_ephemeral_range(self):
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            lo, hi = (int(x) for x in f.read().split())
        ports = self.pick(60, self.state_dir("a"))
        self.assertEqual(len(ports), 60)
        self.assertEqual(len(set(ports)), 60)
        for p in ports:
            self.assertFalse(lo <= p <= hi, f"{p} is in the ephemeral range {lo}-{hi}")
            self.assertGreaterEqual(p, 10000)
            self.assertLessEqual(p, 65535)

    def test_concurrent_pickers_never_share_a_port(self):
        dirs = [self.state_dir(f"d{i}") for i in range(4)]
        procs = [subprocess.Popen([sys.executable, PICKER, "pick", "150", d], env=self.env,
                                  stdout=subprocess.PIPE, text=True) for d in dirs]
        seen = {}
        for d, proc in zip(dirs, procs):
            out, _ = proc.communicate(timeout=60)
            self.assertEqual(proc.returncode, 0)
            for p in map(int, out.split()):
                self.assertFalse(p in seen, f"port {p} given to {seen.get(p)} and to {d}")
                seen[p] = d
        self.assertEqual(len(seen), 600)

    def test_a_port_in_use_is_never_picked(self):
        # three neighbours below the ephemeral range (which the kernel never hands out, so they
        # stay as found), the middle one listened on: only the other two can be had
        def free(p):
            s = socket.socket()
            try:
                s.bind(("127.0.0.1", p))
                return True
            except OSError:
                return False
            finally:
                s.close()
        port = next(p for p in range(20001, 32000, 7) if free(p - 1) and free(p) and free(p + 1))
        busy = socket.socket()
        busy.bind(("127.0.0.1", port))
        busy.listen(1)
        env = dict(self.env, ZK_PORT_RANGE=f"{port - 1}-{port + 1}")
        try:
            self.assertEqual(sorted(self.pick(2, self.state_dir("a"), env=env)), [port - 1, port + 1])
            r = self.run_picker("pick", "1", self.state_dir("b"), env=env, check=False)
            self.assertNotEqual(r.returncode, 0)
            self.assertIn("free ports", r.stderr)
        finally:
            busy.close()

    def test_release_frees_the_ports_and_a_dead_dirs_reservations_are_taken_over(self):
        port = self.pick(1, self.state_dir("a"))[0]
        env = dict(self.env, ZK_PORT_RANGE=f"{port}-{port}")
        # reserved by a live state dir: not given out again
        r = self.run_picker("pick", "1", self.state_dir("b"), env=env, check=False)
        self.assertNotEqual(r.returncode, 0)
        # released by its dir: available
        self.run_picker("release", self.state_dir("a"))
        self.assertEqual(self.pick(1, self.state_dir("b"), env=env), [port])
        # its dir removed without a release (a killed run): stale, taken over
        os.rmdir(self.state_dir("b"))
        self.assertEqual(self.pick(1, self.state_dir("c"), env=env), [port])
        with open(os.path.join(self.registry, str(port))) as f:
            self.assertEqual(f.read().strip(), self.state_dir("c"))

    def test_bad_arguments_are_refused(self):
        for args in (["pick"], ["pick", "x", "d"], ["frobnicate", "d"]):
            r = self.run_picker(*args, check=False)
            self.assertEqual(r.returncode, 1, args)
            self.assertIn("usage", r.stderr)
        for bad in ("99999-1", "0-10", "10-99999", "x-y", "100"):
            r = self.run_picker("pick", "1", self.state_dir("a"), env=dict(self.env, ZK_PORT_RANGE=bad), check=False)
            self.assertEqual(r.returncode, 1, bad)
            self.assertIn("ZK_PORT_RANGE", r.stderr)

    def test_the_registry_is_shared_by_every_user(self):
        self.pick(1, self.state_dir("a"))
        self.assertEqual(os.stat(self.registry).st_mode & 0o7777, 0o1777)
        self.assertEqual(os.stat(os.path.join(self.registry, ".lock")).st_mode & 0o777, 0o666)


if __name__ == "__main__":
    unittest.main()
