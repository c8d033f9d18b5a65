"""The NATS client without a NATS server: the protocol's framing on canned bytes, and the JetStream client
against a scripted server on loopback (outcomes: timeouts and lost connections are unknown, refusals
definite; retries keep the Msg-Id)."""

from __future__ import annotations

import base64
import json
import socket
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import pytest

from nodes.client import DefiniteFailure, IndeterminateFailure
from systems.nats.client import Connection, JetStream, JetStreamError, StreamSpec, publish_retrying
from systems.nats.protocol import (
    Err,
    Info,
    Msg,
    Ok,
    Parser,
    Ping,
    Pong,
    ProtocolError,
    decode_headers,
    encode_headers,
    encode_pub,
)

# ---------------------------------------------------------------- framing, canned bytes


def test_info_ping_pong_ok_err_in_one_chunk() -> None:
    frames = Parser().feed(b'INFO {"server_name":"n1","headers":true}\r\nPING\r\n'
                           b"PONG\r\n+OK\r\n-ERR 'Unknown Protocol Operation'\r\n")
    assert frames == [Info({"server_name": "n1", "headers": True}), Ping(), Pong(), Ok(),
                      Err("Unknown Protocol Operation")]


def test_a_message_fed_byte_by_byte() -> None:
    parser = Parser()
    data = b"MSG _INBOX.ab.7 1 _INBOX.reply 12\r\nhello\r\nworld\r\n"
    frames = [frame for i in range(len(data)) for frame in parser.feed(data[i:i + 1])]
    assert frames == [Msg("_INBOX.ab.7", "1", "_INBOX.reply", b"hello\r\nworld")]


def test_no_responders_is_a_status_without_payload() -> None:
    block = b"NATS/1.0 503\r\n\r\n"
    [frame] = Parser().feed(b"HMSG _INBOX.ab.1 1 %d %d\r\n%s\r\n" % (len(block), len(block), block))
    assert isinstance(frame, Msg)
    assert (frame.status, frame.payload, frame.reply) == (503, b"", None)


def test_a_direct_get_answer_with_headers_and_data() -> None:
    block = b"NATS/1.0\r\nNats-Stream: dlc\r\nNats-Sequence: 42\r\nNats-Msg-Id: p3-41\r\n\r\n"
    data = b"HMSG _INBOX.ab.2 1 %d %d\r\n%sbody\r\n" % (len(block), len(block) + 4, block)
    [frame] = Parser().feed(data)
    assert isinstance(frame, Msg)
    assert frame.status is None
    assert frame.headers == {"Nats-Stream": "dlc", "Nats-Sequence": "42", "Nats-Msg-Id": "p3-41"}
    assert frame.payload == b"body"


def test_a_status_with_a_description() -> None:
    assert decode_headers(b"NATS/1.0 404 Message Not Found\r\n\r\n") == (404, "Message Not Found", {})


@pytest.mark.parametrize("data", [
    b"HELLO there\r\n",
    b"MSG subject 1 x\r\n",
    b"MSG subject 1 3\r\nabcd\r\n",  # payload longer than said
    b"HMSG subject 1 9 4\r\nNATS/1.0\r\n\r\n\r\n",  # header longer than the message
    b"HMSG subject 1 4 4\r\nHTTP\r\n",
    b"INFO [1]\r\n",
])
def test_what_is_not_the_protocol_is_refused(data: bytes) -> None:
    with pytest.raises(ProtocolError):
        Parser().feed(data)


def test_encoded_headers_parse_back_and_sizes_add_up() -> None:
    wire = encode_pub("dlc.log", b"payload", "_INBOX.x.1", {"Nats-Msg-Id": "p1-1"})
    line, _, rest = wire.partition(b"\r\n")
    op, subject, reply, header_size, total = line.split()
    assert (op, subject, reply) == (b"HPUB", b"dlc.log", b"_INBOX.x.1")
    assert len(rest) == int(total) + 2 and rest.endswith(b"payload\r\n")
    assert decode_headers(rest[:int(header_size)]) == (None, "", {"Nats-Msg-Id": "p1-1"})
    assert encode_pub("a.b", b"xy") == b"PUB a.b 2\r\nxy\r\n"


@pytest.mark.parametrize("headers", [{"Nats-Msg-Id": "a\r\nb"}, {"Bad Key": "v"}])
def test_headers_that_would_break_the_framing_are_refused(headers: dict[str, str]) -> None:
    with pytest.raises(ValueError):
        encode_headers(headers)


# ---------------------------------------------------------------- the client against a scripted server


@dataclass(frozen=True)
class Request:
    subject: str
    reply: str
    headers: dict[str, str]
    payload: bytes


Answer = Callable[[Request], bytes | None]  # the bytes to send back (None: nothing), `{reply}` filled in


def msg(payload: bytes | dict) -> bytes:
    body = json.dumps(payload).encode() if isinstance(payload, dict) else payload
    return b"MSG {reply} 1 %d\r\n%s\r\n" % (len(body), body)


def status(code: int, description: str = "") -> bytes:
    block = f"NATS/1.0 {code} {description}".strip().encode() + b"\r\n\r\n"
    return b"HMSG {reply} 1 %d %d\r\n%s\r\n" % (len(block), len(block), block)


class ScriptedServer:
    """Accepts connections on loopback one at a time, greets with INFO, answers PING and each request
    with `answer`; records every request. `close_after` requests it hangs up instead of answering."""

    def __init__(self, answer: Answer, close_after: int | None = None) -> None:
        self.answer, self.close_after = answer, close_after
        self.requests: list[Request] = []
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return
            with conn, conn.makefile("rb") as stream:
                conn.sendall(b'INFO {"server_name":"fake","headers":true}\r\nPING\r\n')
                self._session(conn, stream)

    def _session(self, conn: socket.socket, stream) -> None:
        for raw in iter(stream.readline, b""):
            op, *args = raw.decode().split()
            if op == "PING":
                conn.sendall(b"PONG\r\n")
            elif op in ("PUB", "HPUB"):
                data = stream.read(int(args[-1]) + 2)[:-2]
                size = int(args[2]) if op == "HPUB" else 0
                headers = decode_headers(data[:size])[2] if size else {}
                request = Request(args[0], args[1], headers, data[size:])
                self.requests.append(request)
                if self.close_after is not None and len(self.requests) > self.close_after:
                    return
                answer = self.answer(request)
                if answer is not None:
                    conn.sendall(b"PING\r\n" + answer.replace(b"{reply}", request.reply.encode()))

    def close(self) -> None:
        self.listener.close()


@pytest.fixture
def serve() -> Iterator[Callable[..., ScriptedServer]]:
    servers: list[ScriptedServer] = []

    def start(answer: Answer, close_after: int | None = None) -> ScriptedServer:
        servers.append(ScriptedServer(answer, close_after))
        return servers[-1]

    yield start
    for server in servers:
        server.close()


def client(server: ScriptedServer, timeout: float = 2.0) -> JetStream:
    return JetStream(Connection("127.0.0.1", server.port, timeout=timeout))


def test_publish_sends_the_msg_id_and_reads_the_ack(serve) -> None:
    server = serve(lambda r: msg({"stream": "dlc", "seq": 7}))
    ack = client(server).publish("dlc.log", b"body", "p3-41")
    assert (ack.stream, ack.seq, ack.log_index, ack.duplicate, ack.node) == ("dlc", 7, 6, False, "fake")
    [request] = server.requests
    assert (request.subject, request.payload) == ("dlc.log", b"body")
    assert request.headers == {"Nats-Msg-Id": "p3-41"}


def test_a_duplicate_ack(serve) -> None:
    ack = client(serve(lambda r: msg({"stream": "dlc", "seq": 3, "duplicate": True}))).publish("s", b"", "i")
    assert (ack.seq, ack.duplicate) == (3, True)


def test_a_jetstream_error_is_definite(serve) -> None:
    error = {"error": {"code": 404, "err_code": 10059, "description": "stream not found"}}
    with pytest.raises(JetStreamError) as raised:
        client(serve(lambda r: msg(error))).info("dlc")
    assert isinstance(raised.value, DefiniteFailure) and raised.value.stream_not_found


def test_no_responders_is_definite(serve) -> None:
    with pytest.raises(DefiniteFailure, match="no responders"):
        client(serve(lambda r: status(503))).publish("dlc.log", b"x", "p1-1")


def test_no_answer_is_unknown(serve) -> None:
    with pytest.raises(IndeterminateFailure, match="timeout"):
        client(serve(lambda r: None), timeout=0.3).publish("dlc.log", b"x", "p1-1")


def test_a_connection_lost_after_sending_is_unknown(serve) -> None:
    with pytest.raises(IndeterminateFailure, match="closed"):
        client(serve(lambda r: None, close_after=0)).publish("dlc.log", b"x", "p1-1")


def test_a_connection_never_made_is_definite() -> None:
    with socket.create_server(("127.0.0.1", 0)) as probe:
        port = probe.getsockname()[1]
    with pytest.raises(DefiniteFailure, match="cannot connect"):
        JetStream(Connection("127.0.0.1", port, timeout=1)).publish("dlc.log", b"x", "p1-1")


def test_a_retry_after_an_unknown_publish_keeps_the_msg_id(serve) -> None:
    answers = iter([None, msg({"stream": "dlc", "seq": 5, "duplicate": True})])
    server = serve(lambda r: next(answers))
    ack = publish_retrying([client(server, timeout=0.3)], StreamSpec(), b"x", "p2-9", pause_s=0)
    assert (ack.seq, ack.duplicate) == (5, True)
    assert [r.headers for r in server.requests] == [{"Nats-Msg-Id": "p2-9"}] * 2


def test_unknown_then_refused_stays_unknown(serve) -> None:
    answers = iter([None, status(503), status(503)])
    server = serve(lambda r: next(answers))
    with pytest.raises(IndeterminateFailure, match="may have landed"):
        publish_retrying([client(server, timeout=0.3)], StreamSpec(), b"x", "p2-9", pause_s=0)
    assert len(server.requests) == 3


def test_refused_every_time_is_definite(serve) -> None:
    server = serve(lambda r: status(503))
    with pytest.raises(DefiniteFailure):
        publish_retrying([client(server)], StreamSpec(), b"x", "p2-9", attempts=2, pause_s=0)
    assert len(server.requests) == 2


def test_no_retry_outside_the_dedup_window(serve) -> None:
    server = serve(lambda r: None)
    with pytest.raises(IndeterminateFailure):
        publish_retrying([client(server, timeout=0.2)], StreamSpec(duplicate_window_s=0.1), b"x", "p",
                         pause_s=0)
    assert len(server.requests) == 1


def stream_answers(held: dict[int, str], last_seq: int) -> Answer:
    """STREAM.INFO, MSG.GET and DIRECT.GET of a stream holding `held` (seq -> Msg-Id)."""
    def answer(request: Request) -> bytes:
        if request.subject.startswith("$JS.API.STREAM.INFO."):
            return msg({"config": {"name": "dlc"}, "state": {"first_seq": 1, "last_seq": last_seq},
                        "cluster": {"leader": "n2", "replicas": [{"name": "n1", "current": True}]}})
        seq = json.loads(request.payload)["seq"]
        direct = request.subject.startswith("$JS.API.DIRECT.GET.")
        if seq not in held:
            return status(404, "Message Not Found") if direct else msg(
                {"error": {"code": 404, "err_code": 10037, "description": "no message found"}})
        if direct:
            return _direct(seq, held[seq])
        hdrs = base64.b64encode(encode_headers({"Nats-Msg-Id": held[seq]})).decode()
        return msg({"message": {"subject": "dlc.log", "seq": seq, "hdrs": hdrs,
                                "data": base64.b64encode(b"data").decode()}})
    return answer


def _direct(seq: int, msg_id: str) -> bytes:
    block = f"NATS/1.0\r\nNats-Stream: dlc\r\nNats-Sequence: {seq}\r\nNats-Msg-Id: {msg_id}\r\n\r\n".encode()
    return b"HMSG {reply} 1 %d %d\r\n%sdata\r\n" % (len(block), len(block) + 4, block)


@pytest.mark.parametrize("direct", [False, True])
def test_read_all_reports_gaps_in_order(serve, direct: bool) -> None:
    server = serve(stream_answers({1: "p1-1", 2: "p2-1", 4: "p1-2"}, last_seq=5))
    read = client(server).read_all("dlc", direct=direct)
    assert read.entries() == [[0, "p1-1"], [1, "p2-1"], [3, "p1-2"]]
    assert (read.gaps, read.last_seq, read.node) == ((3, 5), 5, "fake")
    assert [m.data for m in read.messages] == [b"data"] * 3
    assert len(server.requests) == 6  # the info, then five gets


def test_stream_info(serve) -> None:
    info = client(serve(stream_answers({}, last_seq=9))).info("dlc")
    assert (info.last_seq, info.leader, [r.name for r in info.replicas]) == (9, "n2", ["n1"])
