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
the leader times out (syncLimit x tickTime), the leader when the follower's acks stop.

    quorum_relay.py DIR        serves the relays listed in DIR/relays ("i j listen_port target_port"
                               per line); the frozen pairs are the lines "i j" of DIR/frozen,
                               re-read whenever that file changes (zk.sh freeze / thaw write it)
"""
import asyncio
import os
import sys
import time


class Relays:
    def __init__(self, state_dir):
        self.dir = state_dir
        self.frozen = set()
        self.stamp = None

    def reload(self):
        path = os.path.join(self.dir, "frozen")
        try:
            stamp = os.stat(path).st_mtime_ns
        except FileNotFoundError:
            stamp = 0
        if stamp == self.stamp:
            return
        self.stamp = stamp
        frozen = set()
        if stamp:
            with open(path) as f:
                for line in f:
                    parts = line.split()
                    if len(parts) == 2:
                        frozen.add((int(parts[0]), int(parts[1])))
        if frozen != self.frozen:
            print(f"{time.strftime('%H:%M:%S')}.{int(time.time() * 1000) % 1000:03d} relay: frozen "
                  f"{sorted(frozen) or 'none'}", flush=True)
        self.frozen = frozen

    async def watch(self):
        while True:
            self.reload()
            await asyncio.sleep(0.002)

    async def gate(self, key):
        while key in self.frozen:
            await asyncio.sleep(0.002)

    async def pump(self, key, reader, writer):
        try:
            while True:
                await self.gate(key)
                data = await reader.read(65536)
                if not data:
                    break
                await self.gate(key)  # read while frozen: held here, not passed on
                writer.write(data)
                await writer.drain()
        except (ConnectionError, OSError):
            pass
        finally:
            writer.close()

    def serve(self, key, target):
        async def on_connect(reader, writer):
            try:
                up_reader, up_writer = await asyncio.open_connection("127.0.0.1", target)
            except OSError:  # the target does not lead: nothing listens there
                writer.close()
                return
            await asyncio.gather(self.pump(key, reader, up_writer), self.pump(key, up_reader, writer))
        return on_connect


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
