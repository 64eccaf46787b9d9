#!/usr/bin/env python3
"""Freezable TCP relays on the links between the servers of a scripts/zk.sh ensemble
(zk.sh start --relay).

Server i's configuration names, for every other server j, relay ports of this process instead of
j's quorum and election ports, so the links that server i opens to server j (the quorum link of
follower i to leader j, and its election connections) pass through here and can be frozen; the
client ports stay direct. (Not every election message: a server answers an election connection
from a lower id by connecting back to the address that server advertises, its real port.)

Frozen means what a partition on a live network does: the bytes stop in both directions, nothing
is closed, new connections are accepted and held. The follower notices only when its read from
the leader times out (syncLimit x tickTime), the leader when the follower's acks stop. A connection
made to a frozen link is opened upstream only once the link thaws: the far side sees nothing of it
until then, as behind a real partition. (Opening it at once, as this relay did before, handed the
far server a connection that never sent its first message; ZooKeeper's election listener reads
that message before accepting the next connection, so the far server's listener stayed blocked
for its socket timeout, syncLimit x tickTime, and could not hear from anyone else meanwhile: seen
when the old leader, cut off, reached a restarted server's election port through a frozen relay.)

A refused upstream (nothing listens there yet: a new leader still opening its quorum port, a
restarted server still starting its JVM) is retried every 75 ms for up to 5 s of unfrozen time
before the accepted connection is closed, so a follower that reaches a leader a moment early is
not dropped (it would wait a second or more before its next attempt).

After applying a change of DIR/frozen, the relay writes the content it applied to
DIR/frozen.applied (zk.sh freeze / thaw wait for it, so a fault is in place when they return).

    quorum_relay.py DIR        serves the relays listed in DIR/relays ("i j listen_port target_port"
                               per line); the frozen pairs are the lines "i j" of DIR/frozen,
                               re-read whenever that file changes (zk.sh freeze / thaw write it);
                               a line "i j in" holds back only what j sends to i on the links i
                               opened to j (zk.sh hold: a leader's pings and proposals to follower
                               i), while what i sends to j passes
"""
import asyncio
import os
import sys
import time

RETRY_FOR = 5.0        # s of unfrozen time a refused upstream is retried for
RETRY_EVERY = 0.075    # s between two attempts
REREAD_EVERY = 0.1     # s: DIR/frozen is read again even if its stamp looks unchanged


class Relays:
    def __init__(self, state_dir):
        self.dir = state_dir
        self.frozen = set()
        self.stamp = None
        self.text = None
        self.read_at = 0.0

    def reload(self):
        path = os.path.join(self.dir, "frozen")
        try:
            st = os.stat(path)
            # zk.sh replaces the file (rename): a new inode. The mtime alone can miss a second write
            # within the file system's timestamp granularity, hence also the periodic re-read.
            stamp = (st.st_ino, st.st_mtime_ns, st.st_size)
        except FileNotFoundError:
            stamp = None
        now = time.monotonic()
        if stamp == self.stamp and now - self.read_at < REREAD_EVERY:
            return
        self.stamp, self.read_at = stamp, now
        text = ""
        if stamp is not None:
            try:
                with open(path) as f:
                    text = f.read()
            except FileNotFoundError:
                pass
        if text == self.text:
            return
        frozen = set()
        for line in text.splitlines():
            parts = line.split()
            if len(parts) == 2:
                frozen.add((int(parts[0]), int(parts[1])))
            elif len(parts) == 3 and parts[2] == "in":
                frozen.add((int(parts[0]), int(parts[1]), "in"))
        if frozen != self.frozen:
            log(f"frozen {sorted(frozen) or 'none'}")
        self.frozen = frozen
        self.text = text
        # the acknowledgement: what was applied, byte for byte (written whole, then renamed)
        tmp = os.path.join(self.dir, "frozen.applied.tmp")
        with open(tmp, "w") as f:
            f.write(text)
        os.replace(tmp, os.path.join(self.dir, "frozen.applied"))

    async def watch(self):
        while True:
            self.reload()
            await asyncio.sleep(0.002)

    async def gate(self, key, inbound=False):
        while key in self.frozen or (inbound and (key[0], key[1], "in") in self.frozen):
            await asyncio.sleep(0.002)

    async def pump(self, key, reader, writer, inbound=False):
        """inbound: the direction from j back to i (held by a line "i j in" too)."""
        try:
            while True:
                await self.gate(key, inbound)
                try:
                    data = await reader.read(65536)
                except (ConnectionError, OSError):
                    data = b""
                # Whatever came while frozen is held here, not passed on: bytes, and also the end of
                # the stream. (A process killed during a freeze closes its sockets; its peer across
                # the partition must not see that close until the link thaws: zk.sh depose kills the
                # followers of a cut-off leader, which would otherwise lose them at once.)
                await self.gate(key, inbound)
                if not data:
                    break
                writer.write(data)
                await writer.drain()
        except (ConnectionError, OSError):
            pass
        finally:
            writer.close()

    async def connect(self, key, target):
        """The upstream connection, opened once the link is not frozen; None once it was refused for
        RETRY_FOR s in a row of unfrozen time."""
        deadline, tries = None, 0
        while True:
            if key in self.frozen:
                await self.gate(key)  # the far side sees nothing of a connection made during a freeze
                deadline = None
            if deadline is None:
                deadline = time.monotonic() + RETRY_FOR
            tries += 1
            try:
                return await asyncio.open_connection("127.0.0.1", target)
            except OSError as e:  # nothing listens there (yet): a server that does not lead, or starts
                if time.monotonic() >= deadline:
                    log(f"{key[0]}->{key[1]}: port {target} refused for {RETRY_FOR:g} s ({tries} tries, {e}): "
                        f"closing the connection")
                    return None
            await asyncio.sleep(RETRY_EVERY)

    def serve(self, key, target):
        async def on_connect(reader, writer):
            up = await self.connect(key, target)
            if up is None:
                writer.close()
                return
            up_reader, up_writer = up
            await asyncio.gather(self.pump(key, reader, up_writer), self.pump(key, up_reader, writer, True))
        return on_connect


def log(what):
    print(f"{time.strftime('%H:%M:%S')}.{int(time.time() * 1000) % 1000:03d} relay: {what}", flush=True)


async def main(state_dir):
    relays = Relays(state_dir)
    relays.reload()
    servers = []
    with open(os.path.join(state_dir, "relays")) as f:
        for line in f:
            i, j, listen, target = (int(x) for x in line.split())
            servers.append(await asyncio.start_server(relays.serve((i, j), target), "127.0.0.1", listen,
                                                      reuse_address=True))
    print(f"relay: {len(servers)} relays up", flush=True)
    await relays.watch()


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    asyncio.run(main(sys.argv[1]))
