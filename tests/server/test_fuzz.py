"""Random and mutated frames thrown at live nodes: they keep serving and their logs stay intact."""

from __future__ import annotations

import random
import socket
import struct
import time

import pytest
from test_cluster import committed_log, node_commit

from nodes.clientapi import AppendRequest, GetRequest, LeadershipTransferRequest, MetadataRequest
from nodes.messages import VoteRequest
from nodes.payload import encode_payload
from nodes.protocol import PeerHello, wire_codec
from nodes.wire import WIRE_VERSION, encode_frame
from tests.support.waiting import wait_until

pytestmark = pytest.mark.cluster

SEED = 20240611
CONNECTIONS = 40
FRAMES_PER_CONNECTION = 25
TIME_LIMIT_S = 30.0


def valid_frames() -> list[bytes]:
    """Well-formed frames to mutate: every client request and peer traffic without a valid hello."""
    codec = wire_codec()
    messages = [MetadataRequest(), AppendRequest([b"fuzz"]), GetRequest(0, 3),
                GetRequest(0, 3, mode="follower"), LeadershipTransferRequest("n2"), PeerHello("intruder", ""),
                VoteRequest(99, "n2", 0, 0, 1, False),
                AppendRequest([b"a", b"b"], "other")]
    frames = []
    for message in messages:
        type_id, payload = codec.encode(message)
        frames.append(encode_frame(type_id, 7, payload))
    return frames


def fuzz_frame(rng: random.Random, seeds: list[bytes]) -> bytes:
    kind = rng.randrange(6)
    if kind == 0:  # random bytes
        return rng.randbytes(rng.randrange(1, 200))
    if kind == 1:  # a good header, a random type and payload
        payload = rng.randbytes(rng.randrange(0, 100))
        return struct.pack(">IBHI", 7 + len(payload), WIRE_VERSION, rng.randrange(65536), 1) + payload
    frame = bytearray(rng.choice(seeds))
    if kind == 2:  # flipped bytes in the payload (header kept)
        for _ in range(rng.randrange(1, 6)):
            if len(frame) > 11:
                frame[rng.randrange(11, len(frame))] = rng.randrange(256)
        return bytes(frame)
    if kind == 3:  # wrong length: truncated or oversized
        struct.pack_into(">I", frame, 0, rng.choice([0, 3, 1 << 30, len(frame) - 4 + rng.randrange(1, 9)]))
        return bytes(frame)
    if kind == 4:  # unknown wire version
        frame[4] = rng.randrange(2, 256)
        return bytes(frame)
    return bytes(frame[:rng.randrange(1, len(frame))])  # cut short, then the connection closes


def throw(address: tuple[str, int], frames: list[bytes]) -> None:
    with socket.create_connection(address, timeout=2) as sock:
        sock.settimeout(0.05)
        for frame in frames:
            try:
                sock.sendall(frame)
                sock.recv(65536)
            except TimeoutError:
                continue
            except OSError:
                return  # the node closed the connection: allowed


def test_fuzzed_frames_neither_crash_a_node_nor_touch_its_log(local_cluster):
    cluster = local_cluster(3)
    leader = cluster.wait_for_leader()
    with cluster.client() as client:
        for i in range(50):
            client.append(encode_payload(f"pre-{i}"))
        top = node_commit(client, leader)
        before = committed_log(client, leader, top)

    rng = random.Random(SEED)
    seeds = valid_frames()
    started = time.monotonic()
    for c in range(CONNECTIONS):
        if time.monotonic() - started > TIME_LIMIT_S:
            break
        target = cluster.peers[cluster.ids[c % len(cluster.ids)]]
        throw((target.host, target.port), [fuzz_frame(rng, seeds) for _ in range(FRAMES_PER_CONNECTION)])

    assert all(cluster.alive(n) for n in cluster.ids), "a node died under fuzzing"
    leader = cluster.wait_for_leader()
    with cluster.client() as client:
        ack = client.append(encode_payload("after-fuzz"))
        for node in cluster.ids:
            wait_until(lambda n=node: node_commit(client, n) >= ack.first_index, 10, f"{node} commits")
            log = committed_log(client, node, ack.first_index)
            assert {i: log[i] for i in before} == before, f"{node}'s log changed under fuzzing"
        assert committed_log(client, cluster.ids[0], ack.first_index) == committed_log(
            client, cluster.ids[1], ack.first_index) == committed_log(client, cluster.ids[2], ack.first_index)
    logs = "".join((cluster.data_dir(n) / "node.log").read_text() for n in cluster.ids)
    assert "bad frame" in logs and "closing connection" in logs
