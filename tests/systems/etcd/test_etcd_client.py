"""The etcd client's outcomes (systems/etcd/client.py) against a canned gateway on loopback: what is
`ok`, what `fail` (nothing sent, a definite refusal) and what `info` (timeout, connection lost,
etcd's own timeouts), and the history values of its answers."""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from harness.chaos.consumers import BATCH
from harness.wait import wait_for
from nodes.client import DefiniteFailure, IndeterminateFailure
from systems.etcd.client import EtcdClient
from systems.etcd.gateway import b64
from systems.etcd.system import EtcdPuller

Reply = Callable[[BaseHTTPRequestHandler, dict], None]


class Gateway:
    """A loopback HTTP server answering each POST with the next of `replies`; records the requests."""

    def __init__(self) -> None:
        self.replies: list[Reply] = []
        self.requests: list[tuple[str, dict]] = []
        self.release = threading.Event()
        gateway = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                gateway.requests.append((self.path, body))
                gateway.replies.pop(0)(self, body)

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.endpoint = f"127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, args=(0.02,), daemon=True).start()

    def close(self) -> None:
        self.release.set()
        self.server.shutdown()
        self.server.server_close()


def answer(status: int, body: object) -> Reply:
    def reply(handler: BaseHTTPRequestHandler, _: dict) -> None:
        raw = json.dumps(body).encode()
        handler.send_response(status)
        handler.send_header("Content-Length", str(len(raw)))
        handler.end_headers()
        handler.wfile.write(raw)
    return reply


def hang(gateway: Gateway) -> Reply:
    def reply(handler: BaseHTTPRequestHandler, _: dict) -> None:
        gateway.release.wait(10)
    return reply


def drop(handler: BaseHTTPRequestHandler, _: dict) -> None:
    handler.connection.shutdown(socket.SHUT_RDWR)


@pytest.fixture
def fake() -> Iterator[Gateway]:
    gateway = Gateway()
    yield gateway
    gateway.close()


def closed_port() -> str:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return f"127.0.0.1:{sock.getsockname()[1]}"


HEADER = {"member_id": "1", "raft_term": "2"}


def header(revision: str) -> dict[str, str]:
    return {**HEADER, "revision": revision}


def test_an_append_answers_its_index_and_a_retry_the_same_one(fake: Gateway) -> None:
    fake.replies = [answer(200, {"header": header("12"), "succeeded": True}),
                    answer(200, {"header": header("12"), "responses": [{"response_range": {
                        "kvs": [{"key": b64(b"log/p1-7"), "create_revision": "12"}]}}]})]
    client = EtcdClient({"n1": fake.endpoint})
    first, retry = client.append("p1-7"), client.append("p1-7")
    assert first.history_value() == retry.history_value() == {"id": "p1-7", "log_index": 10}
    assert (first.duplicate, retry.duplicate, first.node) == (False, True, "n1")
    assert [path for path, _ in fake.requests] == ["/v3/kv/txn", "/v3/kv/txn"]


def test_a_read_is_cut_at_the_members_revision(fake: Gateway) -> None:
    kvs = [{"key": b64(b"log/a"), "create_revision": "7"}, {"key": b64(b"log/b"), "create_revision": "8"}]
    fake.replies = [answer(200, {"header": header("8"), "kvs": kvs}),
                    answer(200, {"header": header("8")})]
    client = EtcdClient({"n1": fake.endpoint})
    assert client.read(5, 9, serializable=True).history_value() == {
        "from": 5, "to": 6, "commit_index": 6, "entries": [[5, "a"], [6, "b"]]}
    assert fake.requests[0][1]["serializable"] is True
    assert client.read(10, 12).history_value() == {"from": 10, "to": 9, "commit_index": 6, "entries": []}


def test_an_unreachable_member_is_skipped_and_none_reachable_is_a_fail(fake: Gateway) -> None:
    fake.replies = [answer(200, {"header": header("2"), "succeeded": True})]
    client = EtcdClient({"n1": closed_port(), "n2": fake.endpoint})
    assert client.append("x").node == "n2"
    with pytest.raises(DefiniteFailure, match="no member could be reached"):
        EtcdClient({"n1": closed_port()}).append("x")
    with pytest.raises(DefiniteFailure):
        EtcdClient({"n1": closed_port(), "n2": fake.endpoint}).append("x", node="n1")


@pytest.mark.parametrize(("status", "code", "kind"), [
    (412, 9, DefiniteFailure), (429, 8, DefiniteFailure), (503, 14, IndeterminateFailure),
    (504, 4, IndeterminateFailure)])
def test_error_answers(fake: Gateway, status: int, code: int, kind: type[Exception]) -> None:
    fake.replies = [answer(status, {"error": "etcdserver: x", "message": "etcdserver: x", "code": code})]
    with pytest.raises(kind, match="n1: etcdserver: x"):
        EtcdClient({"n1": fake.endpoint}).append("x")


def test_a_timeout_and_a_lost_connection_are_info(fake: Gateway) -> None:
    fake.replies = [hang(fake), drop]
    client = EtcdClient({"n1": fake.endpoint}, timeout=0.3)
    with pytest.raises(IndeterminateFailure, match="timeout"):
        client.append("x")
    with pytest.raises(IndeterminateFailure, match="connection lost"):
        client.append("y")


def test_leader_and_move_leader_ask_the_leader(fake: Gateway) -> None:
    status = {"header": header("3"), "leader": "1", "raftTerm": "2"}
    members = {"header": HEADER, "members": [{"ID": "1", "name": "n1"}, {"ID": "2", "name": "n2"}]}
    fake.replies = [answer(200, status), answer(200, members), answer(200, {"header": HEADER})]
    client = EtcdClient({"n1": fake.endpoint})
    assert client.move_leader("n2") == "n1"
    assert fake.requests[-1] == ("/v3/maintenance/transfer-leadership", {"targetID": "2"})


def test_the_leader_is_asked_of_every_member_at_once(fake: Gateway) -> None:
    paused = [Gateway(), Gateway()]
    try:
        for gateway in paused:
            gateway.replies = [hang(gateway)]
        status = {"header": header("3"), "leader": "1", "raftTerm": "2"}
        members = {"header": HEADER, "members": [{"ID": "1", "name": "n3"}]}
        fake.replies = [answer(200, status), answer(200, members)]
        endpoints = {"n1": paused[0].endpoint, "n2": paused[1].endpoint, "n3": fake.endpoint}
        client = EtcdClient(endpoints, timeout=60)
        with ThreadPoolExecutor(1) as pool:
            asking = pool.submit(client.leader)
            # within the 10 s a hung answer lasts: asked in turn, the second would wait for the first
            wait_for(lambda: all(g.requests for g in paused), 5,
                     "a paused member was asked only after another one's answer")
            for gateway in paused:
                gateway.release.set()  # the hung answers end without a reply: those members are skipped
            assert asking.result(timeout=30) == "n3"
    finally:
        for gateway in paused:
            gateway.close()


def test_a_consumers_pull_is_a_serializable_range_on_the_member_asked(fake: Gateway) -> None:
    kvs = [{"key": b64(b"log/a"), "create_revision": "7"}, {"key": b64(b"log/b"), "create_revision": "8"}]
    fake.replies = [answer(200, {"header": header("8"), "kvs": kvs}), answer(200, {"header": header("8")})]
    puller = EtcdPuller(EtcdClient({"n1": closed_port(), "n2": fake.endpoint}))
    got = puller.pull(5, "n2")
    assert (got.entries, got.next_offset, got.node, got.end) == ([(5, "a"), (6, "b")], 7, "n2", None)
    body = fake.requests[0][1]
    assert body["serializable"] is True
    assert (body["min_create_revision"], body["max_create_revision"]) == ("7", str(5 + BATCH - 1 + 2))
    again = puller.pull(7, "n2")
    assert (again.entries, again.next_offset) == ([], 7)
    with pytest.raises(DefiniteFailure):  # the member asked, and only it
        puller.pull(7, "n1")
