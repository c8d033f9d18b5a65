"""Peer addresses (`--peers n1=HOST:PORT,...`) and outbound peer links that reconnect.

A node sends everything it has for a peer (requests and responses) over its own outbound
`PeerLink` to that peer; the first frame on a fresh connection is a `PeerHello` naming the
sender. While a link is down its messages are dropped, as a lossy network would: the core
retries what matters.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from typing import Any

from nodes.codec import CodecError, MessageCodec
from nodes.protocol import PeerHello
from nodes.wire import frame_message

log = logging.getLogger(__name__)

RECONNECT_MIN_S = 0.02
RECONNECT_MAX_S = 0.5
CONNECT_TIMEOUT_S = 1.0


@dataclass(frozen=True, slots=True)
class Address:
    host: str
    port: int

    def __str__(self) -> str:
        return f"{self.host}:{self.port}"


def parse_peers(text: str) -> dict[str, Address]:
    """`n1=HOST:PORT,n2=HOST:PORT` as {id: Address}, in the given order; ValueError says what is wrong."""
    peers: dict[str, Address] = {}
    for item in filter(None, (part.strip() for part in text.split(","))):
        node, sep, hostport = item.partition("=")
        host, colon, port = hostport.rpartition(":")
        if not sep or not node or not colon or not host:
            raise ValueError(f"peer {item!r} is not ID=HOST:PORT (example: n1=127.0.0.1:20911)")
        if not port.isdigit() or not 0 < int(port) < 65536:
            raise ValueError(f"peer {item!r}: port {port!r} is not a number in 1..65535")
        if node in peers:
            raise ValueError(f"peer id {node!r} appears twice in {text!r}")
        peers[node] = Address(host.strip("[]"), int(port))
    if not peers:
        raise ValueError("no peers given; pass --peers n1=HOST:PORT,n2=HOST:PORT,...")
    return peers


class _LinkProtocol(asyncio.Protocol):
    """The outbound socket: peers answer on their own links, so incoming bytes are ignored."""

    def __init__(self, link: PeerLink) -> None:
        self._link = link
        self.lost = asyncio.get_running_loop().create_future()

    def data_received(self, data: bytes) -> None:
        pass

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.lost.done():
            self.lost.set_result(exc)


HA_MAX_BUFFERED = 32 * 1024 * 1024  # master-slave bounds its data in flight by entries, not bytes


def buffer_limit(max_inflight_pushes: int, max_batch_bytes: int) -> int:
    """Bytes a DLedger link may hold unsent before it drops messages: twice what the pushes
    in flight can carry. A healthy link never holds more (the dispatcher waits on acks); a
    link to a paused or cut-off peer would otherwise pile up resent pushes in the node's
    heap. Raft tolerates the loss: the dispatcher resends after its timeout."""
    return 2 * max_inflight_pushes * max_batch_bytes


class PeerLink:
    """One outbound connection to one peer, kept up by a reconnect loop; while more than
    `max_buffered` bytes wait unsent, messages to it are dropped (counted in `dropped`)."""

    def __init__(self, me: str, group: str, peer: str, address: Address, codec: MessageCodec,
                 max_buffered: int) -> None:
        self.peer = peer
        self.address = address
        self._codec = codec
        self._max_buffered = max_buffered
        self._hello = bytes(frame_message(codec, PeerHello(me, group), 0))
        self._transport: asyncio.Transport | None = None
        self._pending: list[bytes | bytearray] = []
        self._flush_scheduled = False
        self._task: asyncio.Task[None] | None = None
        self._closed = False
        self.dropped = 0

    @property
    def connected(self) -> bool:
        return self._transport is not None

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run(), name=f"link-{self.peer}")

    def send(self, message: Any) -> None:
        """Queue `message` for the peer; written once per event-loop turn, dropped while down."""
        transport = self._transport
        if transport is None or transport.get_write_buffer_size() > self._max_buffered:
            self.dropped += 1
            return
        try:
            frame = frame_message(self._codec, message, 0)
        except (ValueError, CodecError) as exc:  # e.g. an entry stored before bodies had a limit
            self.dropped += 1
            log.error("dropping %s for %s: %s", type(message).__name__, self.peer, exc)
            return
        self._pending.append(frame)
        if not self._flush_scheduled:
            self._flush_scheduled = True
            asyncio.get_running_loop().call_soon(self._flush)

    def _flush(self) -> None:
        self._flush_scheduled = False
        if self._transport is not None and self._pending:
            self._transport.write(b"".join(self._pending))
        self._pending.clear()

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        delay = RECONNECT_MIN_S
        was_up = False
        while not self._closed:
            try:
                transport, protocol = await asyncio.wait_for(
                    loop.create_connection(lambda: _LinkProtocol(self), self.address.host, self.address.port),
                    CONNECT_TIMEOUT_S,
                )
            except (OSError, TimeoutError) as exc:
                if was_up:
                    log.info("link to %s at %s down: %s", self.peer, self.address, exc)
                    was_up = False
                await asyncio.sleep(delay)
                delay = min(delay * 2, RECONNECT_MAX_S)
                continue
            assert isinstance(transport, asyncio.Transport)
            transport.write(self._hello)
            self._transport = transport
            log.info("link to %s at %s up", self.peer, self.address)
            was_up, delay = True, RECONNECT_MIN_S
            await protocol.lost
            self._transport = None
            self._pending.clear()

    async def close(self) -> None:
        self._closed = True
        if self._transport is not None:
            self._transport.close()
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
