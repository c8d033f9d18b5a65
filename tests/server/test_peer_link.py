"""A peer link to a peer that stops reading keeps a bounded backlog, over real sockets."""

from __future__ import annotations

import asyncio

from nodes.messages import Entry, PushRequest, PushType
from nodes.peers import Address, PeerLink, buffer_limit
from nodes.protocol import wire_codec

LIMIT = 256 * 1024


async def _fill_a_link_nobody_reads() -> tuple[int, int, int]:
    held: list[asyncio.StreamWriter] = []

    async def never_read(_reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        held.append(writer)  # accept, keep the socket open, never read from it

    server = await asyncio.start_server(never_read, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    link = PeerLink("n1", "g", "n2", Address("127.0.0.1", port), wire_codec(), LIMIT)
    link.start()
    try:
        async with asyncio.timeout(10):
            while not link.connected:
                await asyncio.sleep(0.01)
        body = bytes(64 * 1024)
        seq = 0
        async with asyncio.timeout(30):
            while link.dropped == 0:  # the kernel's buffers fill first, then the transport's
                seq += 1
                link.send(PushRequest(1, "n1", seq, PushType.APPEND, seq - 1, 1, -1, [Entry(seq, 1, body)]))
                await asyncio.sleep(0)
        for _ in range(50):
            link.send(PushRequest(1, "n1", seq, PushType.APPEND, seq - 1, 1, -1, [Entry(seq, 1, body)]))
            await asyncio.sleep(0)
        assert link._transport is not None
        return link._transport.get_write_buffer_size(), link.dropped, seq
    finally:
        await link.close()
        for writer in held:
            writer.close()
        server.close()
        await server.wait_closed()


def test_a_link_to_a_peer_that_stops_reading_drops_messages_past_its_limit() -> None:
    buffered, dropped, sent = asyncio.run(_fill_a_link_nobody_reads())
    assert dropped >= 50 and sent > 1
    assert buffered <= LIMIT + 2 * 64 * 1024  # at most one frame past the limit, plus the one being joined


def test_the_dledger_limit_is_twice_what_the_pushes_in_flight_carry() -> None:
    assert buffer_limit(4, 1 << 20) == 8 << 20
