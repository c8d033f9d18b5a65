"""A frame relay on a node: delays, jitters, duplicates and reorders what the chosen peers send it.

Where the kernel has no `sch_netem`, the packet nemesis redirects (iptables nat REDIRECT)
the TCP connections the chosen peers open to the node's port to this relay. The relay
accepts each one, opens its own connection to the node, and forwards the node's
length-prefixed frames (nodes/wire.py: a 4-byte big-endian length, then that many bytes)
one by one. Each frame is held `delay ± jitter` ms and released at its own deadline: with
`--reorder` a later frame can overtake an earlier one, otherwise a frame also waits for
the frames before it. With probability `--duplicate` a frame is sent twice, the copy held
on its own. The first frame of a connection (a peer's hello) is never overtaken: TCP
orders a connection's setup; the relay reorders the messages after it. Bytes the node
sends back pass straight through.

Counters (connections accepted, frames released, duplicated, reordered) go to `--stats`
as JSON, rewritten every 0.2 s while they change and at exit (SIGTERM). Standard library only.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import heapq
import itertools
import json
import os
import random
import signal
import struct
from dataclasses import asdict, dataclass

LENGTH = struct.Struct(">I")
MAX_FRAME = 16 * 1024 * 1024  # nodes.wire.MAX_FRAME: a longer frame ends the connection, as at the node
STATS_EVERY_S = 0.2


@dataclass(frozen=True)
class Settings:
    delay_ms: float
    jitter_ms: float
    duplicate: float
    reorder: bool
    target: tuple[str, int]


@dataclass
class Stats:
    connections: int = 0
    frames: int = 0
    duplicated: int = 0
    reordered: int = 0


class Relay:
    """What every connection shares: settings, one seeded random source, the counters."""

    def __init__(self, settings: Settings, seed: int) -> None:
        self.settings = settings
        self.rng = random.Random(seed)
        self.stats = Stats()
        self.connections: set[Downstream] = set()

    def hold_s(self) -> float:
        """One frame's hold: uniform in [delay - jitter, delay + jitter] ms, never negative."""
        s = self.settings
        return self.rng.uniform(max(0.0, s.delay_ms - s.jitter_ms), s.delay_ms + s.jitter_ms) / 1000


class Upstream(asyncio.Protocol):
    """The relay's own connection to the node: what the node sends goes straight back."""

    def __init__(self, down: Downstream) -> None:
        self.down = down

    def data_received(self, data: bytes) -> None:
        if not self.down.transport.is_closing():
            self.down.transport.write(data)

    def connection_lost(self, exc: Exception | None) -> None:
        self.down.close()


class Downstream(asyncio.Protocol):
    """One redirected connection from a peer: its frames are held, duplicated, released."""

    def __init__(self, relay: Relay) -> None:
        self.relay = relay
        self.loop = asyncio.get_running_loop()
        self.transport: asyncio.Transport
        self.up: asyncio.Transport | None = None
        self.buffer = bytearray()
        self.held: list[tuple[float, int, int, bytes]] = []  # (deadline, tie-break, arrival seq, frame)
        self.order = itertools.count()
        self.arrivals = 0
        self.released = -1  # highest arrival seq released so far
        self.floor = 0.0  # no frame leaves before the connection's first one
        self.last = 0.0  # the latest deadline given, for in-order release
        self.eof = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        self.relay.stats.connections += 1
        self.relay.connections.add(self)
        transport.pause_reading()
        self.loop.create_task(self._connect())

    async def _connect(self) -> None:
        host, port = self.relay.settings.target
        try:
            up, _ = await self.loop.create_connection(lambda: Upstream(self), host, port)
        except OSError:
            self.close()
            return
        assert isinstance(up, asyncio.Transport)
        self.up = up
        if self.eof:
            up.close()
        else:
            self.transport.resume_reading()

    def data_received(self, data: bytes) -> None:
        buffer = self.buffer
        buffer += data
        while len(buffer) >= LENGTH.size:
            (length,) = LENGTH.unpack_from(buffer)
            if length > MAX_FRAME:
                self.close()
                return
            end = LENGTH.size + length
            if len(buffer) < end:
                break
            self._take(bytes(buffer[:end]))
            del buffer[:end]

    def _take(self, frame: bytes) -> None:
        relay, settings = self.relay, self.relay.settings
        seq, self.arrivals = self.arrivals, self.arrivals + 1
        copies = 2 if relay.rng.random() < settings.duplicate else 1
        relay.stats.duplicated += copies - 1
        now = self.loop.time()
        for _ in range(copies):
            deadline = max(now + relay.hold_s(), self.floor)
            if seq == 0:
                self.floor = max(self.floor, deadline)
            if not settings.reorder:
                deadline = self.last = max(deadline, self.last)
            heapq.heappush(self.held, (deadline, next(self.order), seq, frame))
            self.loop.call_at(deadline, self._release, deadline)

    def _release(self, until: float) -> None:
        up = self.up
        if up is None or up.is_closing():
            self.held.clear()
            return
        stats = self.relay.stats
        while self.held and self.held[0][0] <= until:
            _, _, seq, frame = heapq.heappop(self.held)
            if seq < self.released:
                stats.reordered += 1
            self.released = max(self.released, seq)
            up.write(frame)
            stats.frames += 1
        if self.eof and not self.held:
            up.close()

    def connection_lost(self, exc: Exception | None) -> None:
        self.eof = True
        self.relay.connections.discard(self)
        if self.up is not None and not self.held:
            self.up.close()

    def close(self) -> None:
        self.transport.close()
        if self.up is not None:
            self.up.close()


def write_stats(path: str, stats: Stats) -> None:
    with open(f"{path}.tmp", "w") as f:
        json.dump(asdict(stats), f)
    os.replace(f"{path}.tmp", path)


async def serve(port: int, relay: Relay, stats_path: str) -> None:
    loop = asyncio.get_running_loop()
    server = await loop.create_server(lambda: Downstream(relay), "0.0.0.0", port, reuse_address=True)
    stop = asyncio.Event()
    loop.add_signal_handler(signal.SIGTERM, stop.set)
    written = None
    while not stop.is_set():
        if asdict(relay.stats) != written:
            write_stats(stats_path, relay.stats)
            written = asdict(relay.stats)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), STATS_EVERY_S)
    server.close()
    for conn in list(relay.connections):
        conn.close()
    write_stats(stats_path, relay.stats)


def parse_target(text: str) -> tuple[str, int]:
    host, _, port = text.rpartition(":")
    return host, int(port)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, required=True, help="where the redirected connections arrive")
    parser.add_argument("--target", type=parse_target, required=True, help="the node's HOST:PORT")
    parser.add_argument("--delay-ms", type=float, default=0.0)
    parser.add_argument("--jitter-ms", type=float, default=0.0)
    parser.add_argument("--duplicate", type=float, default=0.0, help="probability a frame is sent twice")
    parser.add_argument("--reorder", action="store_true", help="frames leave by their own deadline")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--stats", required=True, help="JSON file of the counters")
    args = parser.parse_args()
    settings = Settings(args.delay_ms, args.jitter_ms, args.duplicate, args.reorder, args.target)
    asyncio.run(serve(args.port, Relay(settings, args.seed), args.stats))


if __name__ == "__main__":
    main()
