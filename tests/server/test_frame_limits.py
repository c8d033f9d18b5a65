"""Entries and answers too large for a frame: the node refuses or cuts them and keeps serving.

The limits are measured with the codec (`wire_limits`), checked here against `frame_message`;
the live tests run real node processes on loopback.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace

import pytest
from test_cluster import node_commit

from nodes.client import Client, DefiniteFailure
from nodes.clientapi import AppendRequest, ErrorResponse
from nodes.messages import AppendResponse, PushRequest, PushType, ReadResponse, ResponseCode
from nodes.protocol import wire_codec, wire_limits
from nodes.reads import read_range
from nodes.server import MAX_READ_ENTRIES, _Connection
from nodes.store.entrycodec import HEADER_SIZE
from nodes.store.logstore import Entry
from nodes.store.memstore import MemStore
from nodes.store.mmapstore import MmapStore
from nodes.store.termfile import TermState, save_term
from nodes.wire import MAX_FRAME, FrameParser, encode_frame, frame_message, frame_room
from tests.support.localcluster import LocalCluster
from tests.support.waiting import wait_until

# Segments larger than a frame (the wire limit binds), and DLedger's timing: on a busy machine,
# 16 MiB entries can hold up a fast-profile leader past its 300 ms lease, so appends would
# sometimes end TERM_CHANGED (indeterminate) rather than ok.
LARGE_SEGMENTS = ("--segment-mb", "32", "--timing", "dledger")
CODEC = wire_codec()


def body_limit(cluster: LocalCluster, segment_mb: int) -> int:
    """The largest body the cluster's nodes take: what fits a frame and a data segment."""
    return min(wire_limits(CODEC, cluster.ids, MAX_READ_ENTRIES).max_body, (segment_mb << 20) - HEADER_SIZE)


def read_all(client: Client, node: str, first: int, last: int) -> dict[int, bytes]:
    """{index: body} of `node`'s committed entries `first..last`, following shorter answers."""
    got: dict[int, bytes] = {}
    while first <= last:
        result = client.get(first, last, node=node, mode="follower")
        got.update((e.index, e.body) for e in result.entries)
        first = result.last_index + 1
    return got


# ---- the limits, measured -----------------------------------------------------------------


@pytest.mark.parametrize("members", [["n1", "n2", "n3"], ["n1", "a-much-longer-node-id-\u00e9"]])
def test_the_body_limit_is_exact_for_pushes_and_read_answers(members: list[str]) -> None:
    limits = wire_limits(CODEC, members, MAX_READ_ENTRIES)
    leader = max(members, key=lambda m: len(m.encode()))

    def push(size: int) -> PushRequest:
        return PushRequest(7, leader, 9, PushType.APPEND, 41, 7, 40, [Entry(42, 7, b"p" * size)])

    def read(sizes: list[int]) -> ReadResponse:
        entries = [Entry(i, 7, b"r" * size) for i, size in enumerate(sizes)]
        return ReadResponse(ResponseCode.SUCCESS, entries, 10**6, leader, len(sizes) - 1)

    assert len(frame_message(CODEC, push(limits.max_body), 1)) == MAX_FRAME + 4  # exactly full
    frame_message(CODEC, read([limits.max_body]), 1)
    with pytest.raises(ValueError, match="exceeds"):
        frame_message(CODEC, push(limits.max_body + 1), 1)
    # the largest read answer: the most entries, the bytes they may carry between them
    most = [0] * (MAX_READ_ENTRIES - 1)
    assert len(frame_message(CODEC, read([*most, limits.max_read_bytes]), 1)) == MAX_FRAME + 4
    with pytest.raises(ValueError, match="exceeds"):
        frame_message(CODEC, read([*most, limits.max_read_bytes + 1]), 1)
    # a body just over the limit still arrives in a frame, so it can be answered
    type_id, payload = CODEC.encode(AppendRequest([b"a" * (limits.max_body + 1)], "g"))
    encode_frame(type_id, 1, payload)


def test_read_range_cuts_by_bytes_and_says_where(tmp_path: Path) -> None:
    bodies = [b"a" * 5, b"b" * 5, b"c" * 20, b"d" * 5]
    mem = MemStore()
    mem.append_many(1, bodies)
    disk = MmapStore(tmp_path, data_segment_size=4096, index_segment_size=4096)
    disk.append_many(1, bodies)
    disk.close()
    reopened = MmapStore(tmp_path, data_segment_size=4096, index_segment_size=4096)  # reads the files
    try:
        for store in (mem, reopened):
            entries, covered = read_range(store, 0, 9, 3, max_bytes=10)
            assert ([e.body for e in entries], covered) == (bodies[:2], 1)
            entries, covered = read_range(store, 2, 9, 3, max_bytes=10)  # the first entry always
            assert ([e.body for e in entries], covered) == (bodies[2:3], 2)
            entries, covered = read_range(store, 0, 9, 3)  # no limit: the asked range
            assert (len(entries), covered) == (4, 9)
    finally:
        reopened.close()


class _Transport(asyncio.Transport):
    """Collects what a connection writes."""

    def __init__(self) -> None:
        super().__init__()
        self.data = bytearray()
        self.closed = False

    def get_extra_info(self, name: str, default: object = None) -> object:
        return ("127.0.0.1", 1) if name == "peername" else default

    def write(self, data: bytes | bytearray | memoryview) -> None:
        self.data += data

    def close(self) -> None:
        self.closed = True


def answer_with(message: object) -> tuple[list[object], bool]:
    """What a client connection receives when the node answers request 7 with `message`,
    and whether the connection was closed."""
    transport = _Transport()

    async def scenario() -> None:
        conn = _Connection(SimpleNamespace(codec=CODEC, connections=set()))  # type: ignore[arg-type]
        conn.connection_made(transport)
        conn.reply(7, message)
        done = asyncio.get_running_loop().create_future()
        asyncio.get_running_loop().call_soon(done.set_result, None)  # runs after the queued flush
        await done

    asyncio.run(scenario())
    frames = FrameParser().feed(bytes(transport.data))
    return [CODEC.decode(f.msg_type, f.payload) for f in frames if f.request_id == 7], transport.closed


def test_an_answer_that_does_not_fit_is_an_error_for_a_read_and_a_closed_connection_otherwise() -> None:
    too_large = ReadResponse(ResponseCode.SUCCESS, [Entry(0, 1, b"x" * MAX_FRAME)], 0, "n1", 0)
    answers, closed = answer_with(too_large)
    assert not closed and len(answers) == 1
    assert isinstance(answers[0], ErrorResponse) and answers[0].code is ResponseCode.INTERNAL_ERROR
    # an append's outcome must stay unknown: no refusal, the connection closes
    answers, closed = answer_with(AppendResponse(ResponseCode.SUCCESS, 2**63, 0, 0, "n1"))
    assert closed and answers == []


# ---- live nodes ---------------------------------------------------------------------------


@pytest.mark.cluster
@pytest.mark.parametrize(
    ("segment_mb", "args"),
    [(32, LARGE_SEGMENTS), (1, ("--segment-mb", "1"))],
    ids=["frame-bound", "segment-bound"],
)
def test_a_body_over_the_limit_is_refused_and_one_at_the_limit_is_served(
    local_cluster: Callable[..., LocalCluster], segment_mb: int, args: tuple[str, ...]
) -> None:
    cluster = local_cluster(3, *args)
    cluster.wait_for_leader()
    limit = body_limit(cluster, segment_mb)
    with cluster.client(timeout=20) as client:
        before = client.append(b"before")
        with pytest.raises(DefiniteFailure) as refused:
            client.append(b"o" * (limit + 1))
        assert refused.value.code is ResponseCode.UNEXPECTED_ARGUMENT
        at = client.append(b"a" * limit)
        after = client.append(b"after")
        for node in cluster.ids:
            wait_until(lambda n=node: node_commit(client, n) >= after.first_index, 30, f"{node} commits")
            log = read_all(client, node, 0, after.first_index)
            assert log[before.first_index] == b"before"
            assert log[at.first_index] == b"a" * limit
            assert log[after.first_index] == b"after"
            assert sorted(log) == list(range(after.first_index + 1)), "no hole, nothing else"
            assert all(len(body) <= limit for body in log.values())
    assert all(cluster.alive(n) for n in cluster.ids)
    logs = "".join((cluster.data_dir(n) / "node.log").read_text() for n in cluster.ids)
    assert f"exceeds the {limit}-byte limit" in logs


@pytest.mark.cluster
def test_a_get_over_16_mib_comes_back_shorter(local_cluster: Callable[..., LocalCluster]) -> None:
    cluster = local_cluster(3, *LARGE_SEGMENTS)
    cluster.wait_for_leader()
    bodies = [bytes([ord("A") + i]) * (6 << 20) for i in range(3)]  # 18 MiB between them
    with cluster.client(timeout=20) as client:
        acks = [client.append(body) for body in bodies]
        first, last = acks[0].first_index, acks[-1].first_index
        result = client.get(first, last)
        assert first <= result.last_index < last, "a shorter answer"
        assert [e.index for e in result.entries] == list(range(first, result.last_index + 1))
        assert sum(len(e.body) for e in result.entries) < MAX_FRAME
        rest = client.get(result.last_index + 1, last)
        assert rest.last_index == last
        served = {e.index: e.body for e in [*result.entries, *rest.entries]}
        assert [served[a.first_index] for a in acks] == bodies
        for node in cluster.ids:
            wait_until(lambda n=node: node_commit(client, n) >= last, 30, f"{node} commits")
            log = read_all(client, node, first, last)
            assert [log[a.first_index] for a in acks] == bodies
    assert all(cluster.alive(n) for n in cluster.ids)


@pytest.mark.cluster
def test_an_entry_stored_before_the_limit_neither_crashes_a_leader_nor_its_reads(tmp_path: Path) -> None:
    # What an append frame could carry before the limit: its push and read answer do not fit.
    legacy = b"L" * frame_room(CODEC, AppendRequest([b""]))
    with LocalCluster(tmp_path, 3, extra_args=LARGE_SEGMENTS) as cluster:
        for node in ("n1", "n2"):  # a majority holds it: the leader is one of them
            cluster.data_dir(node).mkdir(parents=True)
            store = MmapStore(cluster.data_dir(node), data_segment_size=32 << 20, index_segment_size=32 << 20)
            store.append_leader(1, legacy)
            store.close()
            save_term(cluster.data_dir(node), TermState(1, None))
        cluster.start_all()
        leader = cluster.wait_for_leader()
        leader_log = cluster.data_dir(leader) / "node.log"
        wait_until(
            lambda: "dropping PushRequest for n3" in leader_log.read_text(), 20, "a push that cannot go"
        )
        with cluster.client(timeout=10) as client:
            with pytest.raises(DefiniteFailure) as err:
                client.get(0)
            assert err.value.code is ResponseCode.INTERNAL_ERROR
            ack = client.append(b"still serving")
            assert [e.body for e in client.get(ack.first_index).entries] == [b"still serving"]
        assert all(cluster.alive(n) for n in cluster.ids)
        assert "cannot answer request" in leader_log.read_text()
