"""The client library against scripted fake nodes: redirects and the two failure kinds."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from nodes.client import Client, DefiniteFailure, IndeterminateFailure
from nodes.clientapi import MetadataRequest
from nodes.messages import AppendResponse, MetadataResponse, ReadResponse, ResponseCode
from nodes.peers import Address
from nodes.protocol import wire_codec
from nodes.store.logstore import Entry
from nodes.wire import FrameParser, encode_frame

CLOSE = object()  # the fake node drops the connection instead of answering


class FakeNode:
    """A listening socket that answers each request with `script(request)`."""

    def __init__(self, script: Callable[[Any], Any]) -> None:
        self.script = script
        self.requests: list[Any] = []
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.address = Address("127.0.0.1", self.listener.getsockname()[1])
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        codec = wire_codec()
        while True:
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return
            with conn:
                parser = FrameParser()
                while data := conn.recv(65536):
                    for frame in parser.feed(data):
                        request = codec.decode(frame.msg_type, frame.payload)
                        self.requests.append(request)
                        reply = self.script(request)
                        if reply is CLOSE:
                            break
                        if reply is not None:
                            type_id, payload = codec.encode(reply)
                            conn.sendall(encode_frame(type_id, frame.request_id, payload))
                    else:
                        continue
                    break

    def close(self) -> None:
        self.listener.close()


@pytest.fixture
def fakes() -> Iterator[Callable[..., dict[str, Address]]]:
    started: list[FakeNode] = []

    def start(**scripts: Callable[[Any], Any]) -> dict[str, Address]:
        nodes = {name: FakeNode(script) for name, script in scripts.items()}
        started.extend(nodes.values())
        return {name: node.address for name, node in nodes.items()}

    yield start
    for node in started:
        node.close()


def closed_port() -> Address:
    with socket.create_server(("127.0.0.1", 0)) as s:
        return Address("127.0.0.1", s.getsockname()[1])


def append_reply(code: ResponseCode, leader: str | None = "n2") -> Callable[[Any], Any]:
    return lambda _req: AppendResponse(code, 3, 10, 10, leader)


def test_append_follows_not_leader_to_the_leader(fakes):
    peers = fakes(n1=append_reply(ResponseCode.NOT_LEADER), n2=append_reply(ResponseCode.SUCCESS))
    with Client(peers, timeout=2) as client:
        client.leader = "n1"
        ack = client.append(b"p1-1")
        assert (ack.first_index, ack.term, ack.node) == (10, 3, "n2")
        assert client.leader == "n2"


def test_no_node_answering_is_a_definite_failure_naming_the_nodes():
    with (
        Client({"n1": closed_port(), "n2": closed_port()}, timeout=0.3) as client,
        pytest.raises(DefiniteFailure, match="no node answered") as err,
    ):
        client.append(b"x")
    assert err.value.code == ResponseCode.NETWORK_ERROR


def test_append_without_an_answer_is_indeterminate(fakes):
    peers = fakes(n1=lambda _req: None)
    with Client(peers, timeout=0.3) as client, pytest.raises(IndeterminateFailure, match="timed out"):
        client.append(b"x")


def test_connection_lost_after_sending_is_indeterminate(fakes):
    peers = fakes(n1=lambda _req: CLOSE)
    with Client(peers, timeout=1) as client, pytest.raises(IndeterminateFailure, match="closed"):
        client.append(b"x")


@pytest.mark.parametrize(
    "code, kind",
    [
        (ResponseCode.WAIT_QUORUM_ACK_TIMEOUT, IndeterminateFailure),
        (ResponseCode.TERM_CHANGED, IndeterminateFailure),
        (ResponseCode.LEADER_PENDING_FULL, DefiniteFailure),
        (ResponseCode.LEADER_TRANSFERRING, DefiniteFailure),
    ],
)
def test_append_codes_map_to_failure_kinds(fakes, code, kind):
    peers = fakes(n1=append_reply(code, "n1"))
    with Client(peers, timeout=1) as client, pytest.raises(kind) as err:
        client.append(b"x")
    assert err.value.code == code


def test_not_leader_everywhere_until_the_deadline_is_definite(fakes):
    nobody = append_reply(ResponseCode.NOT_LEADER, None)
    peers = fakes(n1=nobody, n2=nobody)
    with Client(peers, timeout=0.3) as client, pytest.raises(DefiniteFailure) as err:
        client.append(b"x")
    assert err.value.code == ResponseCode.NOT_LEADER


def test_read_is_retried_on_another_node_after_a_lost_reply(fakes):
    entry = Entry(4, 2, b"p1-1")
    peers = fakes(
        n1=lambda _req: CLOSE, n2=lambda _req: ReadResponse(ResponseCode.SUCCESS, [entry], 4, "n2", 4)
    )
    with Client(peers, timeout=2) as client:
        client.leader = "n1"
        result = client.get(4)
        assert (result.entries, result.commit_index, result.node, result.last_index) == ([entry], 4, "n2", 4)


def test_metadata_learns_the_leader(fakes):
    peers = fakes(n1=lambda _req: MetadataResponse(["n1", "n2"], "n2", 5, "follower"))
    with Client(peers, timeout=1) as client:
        assert client.metadata().term == 5
        assert client.leader is None  # n2 is not among the client's peers here


def test_discovery_believes_another_node_before_a_node_that_names_itself(fakes):
    """A leader cut off from its peers still names itself; a follower of the new leader knows better."""
    def meta(leader):
        return lambda req: (MetadataResponse(["n1", "n2", "n3"], leader, 5, "follower")
                            if isinstance(req, MetadataRequest) else None)

    peers = fakes(n1=meta("n1"), n2=meta("n3"), n3=meta("n3"))
    for _ in range(10):  # the order of asking is random
        with Client(peers, timeout=2) as client:
            client._discover(time.monotonic() + 2, {})
            assert client.leader == "n3"
    alone = fakes(n1=meta("n1"), n2=lambda _req: CLOSE)
    with Client(alone, timeout=2) as client:
        client._discover(time.monotonic() + 2, {})
        assert client.leader == "n1", "a self-claim is believed when nobody names another leader"
