"""A stdlib-only JetStream client (a socket and the NATS text protocol of `systems.nats.protocol`).

`Connection` is one server's connection: request-reply through an inbox subscription, replies
matched by their inbox token (so requests can be pipelined). `JetStream` speaks the JetStream API
over it: create a file stream of R replicas with a dedup window, publish with a `Nats-Msg-Id`
header, stream info (last seq, leader, replicas), read one message by seq (`MSG.GET`, answered by
the stream leader, or `DIRECT.GET`, answered by a replica, the connected server's own when it is
current), leader step-down, and read the whole stream in order. `publish_retrying` retries an
unknown publish with the same `Nats-Msg-Id`, within the dedup window, so a retry never adds an
entry the first attempt did not. `replica_state` reads one server's own view of a stream (`/jsz`).

Outcomes (docs/formats.md) use the DLedger client's exceptions: `IndeterminateFailure` (`info`)
for a timeout, a lost connection, a reply that is not the protocol, or a retried publish whose
attempts were not all definite; `DefiniteFailure` (`fail`) for a connection never made (nothing
sent), no responders (503) and a JetStream error reply (`JetStreamError`: stream not found,
insufficient resources, ...). In the history an append's ok value is `{"id", "log_index"}` with
`log_index = seq - 1` (`PubAck.log_index`; JetStream's ack has no term, and a duplicate ack
answers the first landing's seq), and a read's ok value `{"from", "to", "entries"}` with entries
`[seq - 1, Nats-Msg-Id]` (`StreamRead.entries`; a seq the stream does not hold is a gap, listed
in `StreamRead.gaps`, not an entry).
"""

from __future__ import annotations

import base64
import itertools
import json
import secrets
import socket
import threading
import time
import urllib.error
import urllib.request
from collections import deque
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from nodes.client import DefiniteFailure, IndeterminateFailure
from systems.nats.config import CLIENT_PORT
from systems.nats.protocol import (
    PING,
    PONG,
    Err,
    Frame,
    Info,
    Msg,
    Ok,
    Parser,
    Ping,
    Pong,
    ProtocolError,
    decode_headers,
    encode_connect,
    encode_pub,
    encode_sub,
)

MSG_ID = "Nats-Msg-Id"
NO_RESPONDERS = 503
NOT_FOUND = 404
ERR_STREAM_NOT_FOUND = 10059
ERR_NO_MESSAGE = 10037
RECV_BYTES = 1 << 16
NANOS = 1_000_000_000


class JetStreamError(DefiniteFailure):
    """A JetStream API error reply: the request surely did not take effect."""

    def __init__(self, description: str, code: int, err_code: int) -> None:
        super().__init__(f"{description} (code {code}, err_code {err_code})")
        self.description = description
        self.status = code
        self.err_code = err_code

    @property
    def stream_not_found(self) -> bool:
        return self.err_code == ERR_STREAM_NOT_FOUND


class Connection:
    """One server's connection, made on first use and again after any unknown outcome; one call at a time."""

    def __init__(self, host: str, port: int = CLIENT_PORT, timeout: float = 5.0, name: str = "") -> None:
        self.host, self.port, self.timeout, self.name = host, port, timeout, name
        self.server_info: dict[str, Any] = {}
        self._sock: socket.socket | None = None
        self._parser = Parser()
        self._frames: deque[Frame] = deque()
        self._inbox = ""
        self._tokens = itertools.count(1)
        self._replies: dict[str, Msg] = {}
        self._lock = threading.Lock()

    @property
    def server_name(self) -> str:
        """The server's own name (its INFO's `server_name`), else the name given."""
        return str(self.server_info.get("server_name") or self.name or f"{self.host}:{self.port}")

    def request(self, subject: str, payload: bytes = b"", headers: Mapping[str, str] | None = None,
                timeout: float | None = None) -> Msg:
        """Send one request and wait for its reply. A 503 (no responders) is a DefiniteFailure."""
        return self.pipeline([(subject, payload, headers)], timeout)[0]

    def pipeline(self, requests: Sequence[tuple[str, bytes, Mapping[str, str] | None]],
                 timeout: float | None = None) -> list[Msg]:
        """Send every request at once, then wait for their replies, each at most `timeout` seconds
        (the connection's by default) from when the one before it arrived; the replies in order."""
        with self._lock:
            self._ensure_connected()
            self._replies.clear()  # answers to requests of an earlier call that raised
            tokens = [str(next(self._tokens)) for _ in requests]
            asked = zip(tokens, requests, strict=True)
            self._write(b"".join(encode_pub(subject, payload, f"{self._inbox}.{token}", headers)
                                 for token, (subject, payload, headers) in asked))
            replies = [self._wait(token, time.monotonic() + (timeout or self.timeout)) for token in tokens]
        for reply in replies:
            if reply.status == NO_RESPONDERS and not reply.payload:
                raise DefiniteFailure(f"no responders for the request to {self.server_name}")
        return replies

    def close(self) -> None:
        if self._sock is not None:
            try:
                self._sock.close()
            finally:
                self._sock = None

    def _ensure_connected(self) -> None:
        if self._sock is not None:
            return
        try:
            sock = socket.create_connection((self.host, self.port), timeout=self.timeout)
        except OSError as e:
            raise DefiniteFailure(f"cannot connect to {self.host}:{self.port}: {e}") from None
        self._sock, self._parser, self._replies = sock, Parser(), {}
        self._frames.clear()
        try:
            info = self._frame(time.monotonic() + self.timeout)
            if not isinstance(info, Info):
                raise ProtocolError(f"the server's first frame is {info!r}, not INFO")
            self.server_info = info.fields
            self._inbox = f"_INBOX.{secrets.token_hex(8)}"
            options = {"verbose": False, "pedantic": False, "headers": True, "no_responders": True,
                       "protocol": 1, "lang": "python-dledger-chaos", "version": "0.1.0"}
            self._write(encode_connect(options) + encode_sub(f"{self._inbox}.*", "1") + PING)
            while not isinstance(self._frame(time.monotonic() + self.timeout), Pong):
                pass
        except IndeterminateFailure as e:  # nothing was asked yet: the connection surely failed
            raise DefiniteFailure(f"connecting to {self.host}:{self.port}: {e}") from None

    def _wait(self, token: str, deadline: float) -> Msg:
        while token not in self._replies:
            frame = self._frame(deadline)
            if isinstance(frame, Msg) and frame.subject.startswith(f"{self._inbox}."):
                self._replies[frame.subject.rsplit(".", 1)[1]] = frame
        return self._replies.pop(token)

    def _frame(self, deadline: float) -> Info | Msg | Pong:
        """The next frame that is not PING (answered) or +OK; -ERR loses the connection."""
        while True:
            frame = self._next_frame(deadline)
            if isinstance(frame, Ping):
                self._write(PONG)
            elif isinstance(frame, Err):
                self._lost(f"the server said -ERR {frame.message!r}")
            elif not isinstance(frame, Ok):
                return frame

    def _next_frame(self, deadline: float) -> Frame:
        assert self._sock is not None
        while not self._frames:
            left = deadline - time.monotonic()
            if left <= 0:
                self._lost(f"timeout waiting for {self.server_name}")
            try:
                self._sock.settimeout(left)
                data = self._sock.recv(RECV_BYTES)
                if not data:
                    self._lost(f"{self.server_name} closed the connection")
                self._frames.extend(self._parser.feed(data))
            except TimeoutError:
                self._lost(f"timeout waiting for {self.server_name}")
            except (OSError, ProtocolError) as e:
                self._lost(f"connection to {self.server_name} lost: {e}")
        return self._frames.popleft()

    def _write(self, data: bytes) -> None:
        assert self._sock is not None
        try:
            self._sock.settimeout(self.timeout)
            self._sock.sendall(data)
        except OSError as e:  # part of it may have gone out
            self._lost(f"sending to {self.server_name} failed: {e}")

    def _lost(self, reason: str) -> None:
        self.close()
        raise IndeterminateFailure(reason)


@dataclass(frozen=True)
class StreamSpec:
    """A file stream of `replicas` copies taking `subject`, deduplicating Msg-Ids over
    `duplicate_window_s`."""

    name: str = "dlc"
    subject: str = "dlc.log"
    replicas: int = 3
    duplicate_window_s: float = 120.0
    allow_direct: bool = True

    def config(self) -> dict[str, Any]:
        return {"name": self.name, "subjects": [self.subject], "retention": "limits", "storage": "file",
                "num_replicas": self.replicas, "discard": "old", "allow_direct": self.allow_direct,
                "duplicate_window": int(self.duplicate_window_s * NANOS)}


@dataclass(frozen=True)
class PubAck:
    stream: str
    seq: int
    duplicate: bool
    node: str  # the server the publish went to (JetStream does not say which one stored it)

    @property
    def log_index(self) -> int:
        return self.seq - 1


@dataclass(frozen=True)
class StoredMessage:
    seq: int
    msg_id: str | None
    data: bytes
    subject: str

    @property
    def log_index(self) -> int:
        return self.seq - 1


@dataclass(frozen=True)
class Replica:
    name: str
    current: bool
    offline: bool
    lag: int


@dataclass(frozen=True)
class StreamInfo:
    name: str
    first_seq: int
    last_seq: int
    messages: int
    leader: str | None
    replicas: tuple[Replica, ...]  # the followers (the leader is not listed)


@dataclass(frozen=True)
class StreamRead:
    """Seqs 1..`last_seq` of a stream as one server served them: the messages it holds, in order,
    and the seqs it answered it does not hold (`gaps`: deleted, lost, or never replicated)."""

    node: str
    last_seq: int
    messages: tuple[StoredMessage, ...]
    gaps: tuple[int, ...]

    def entries(self) -> list[list[Any]]:
        """The history's read entries, `[log_index, Nats-Msg-Id]` pairs."""
        return [[m.log_index, m.msg_id] for m in self.messages]


class JetStream:
    """The JetStream API over one connection."""

    def __init__(self, connection: Connection) -> None:
        self.connection = connection

    @property
    def node(self) -> str:
        return self.connection.server_name

    def api(self, subject: str, request: Mapping[str, Any] | None = None,
            timeout: float | None = None) -> dict:
        """A `$JS.API.` request's JSON answer; an error answer raises JetStreamError."""
        payload = json.dumps(dict(request)).encode() if request is not None else b""
        return _answer(self.connection.request(f"$JS.API.{subject}", payload, timeout=timeout))

    def create_stream(self, spec: StreamSpec) -> StreamInfo:
        """Create the stream (idempotent for the same config)."""
        return _stream_info(self.api(f"STREAM.CREATE.{spec.name}", spec.config()))

    def info(self, stream: str) -> StreamInfo:
        return _stream_info(self.api(f"STREAM.INFO.{stream}"))

    def step_down(self, stream: str) -> None:
        """Ask the stream's leader to step down (another replica is elected)."""
        self.api(f"STREAM.LEADER.STEPDOWN.{stream}")

    def delete_stream(self, stream: str) -> None:
        self.api(f"STREAM.DELETE.{stream}")

    def publish(self, subject: str, body: bytes, msg_id: str, timeout: float | None = None) -> PubAck:
        """Publish `body` with `Nats-Msg-Id: msg_id` and wait for the stream's ack."""
        reply = self.connection.request(subject, body, {MSG_ID: msg_id}, timeout=timeout)
        answer = _answer(reply)
        if not isinstance(answer.get("seq"), int) or "stream" not in answer:
            raise IndeterminateFailure(f"the publish ack is not JetStream's: {answer!r}")
        return PubAck(answer["stream"], answer["seq"], bool(answer.get("duplicate")), self.node)

    def get(self, stream: str, seq: int, direct: bool = False) -> StoredMessage | None:
        """Message `seq`, or None when the stream does not hold it."""
        return next(self.get_many(stream, [seq], direct))

    def get_many(self, stream: str, seqs: Iterable[int], direct: bool = False,
                 window: int = 64) -> Iterator[StoredMessage | None]:
        """Messages `seqs` in order (None where the stream holds none), asked `window` at a time."""
        subject = f"$JS.API.DIRECT.GET.{stream}" if direct else f"$JS.API.STREAM.MSG.GET.{stream}"
        parse = _direct_message if direct else _stored_message
        pending = iter(seqs)
        while chunk := list(itertools.islice(pending, window)):
            asked = [(subject, json.dumps({"seq": seq}).encode(), None) for seq in chunk]
            yield from (parse(reply) for reply in self.connection.pipeline(asked))

    def read_all(self, stream: str, direct: bool = False, last_seq: int | None = None) -> StreamRead:
        """Seqs 1..`last_seq` (the stream's last seq by default) in order, gaps reported."""
        last = self.info(stream).last_seq if last_seq is None else last_seq
        messages: list[StoredMessage] = []
        gaps: list[int] = []
        for seq, message in zip(range(1, last + 1), self.get_many(stream, range(1, last + 1), direct),
                                strict=True):
            if message is None:
                gaps.append(seq)
            else:
                messages.append(message)
        return StreamRead(self.node, last, tuple(messages), tuple(gaps))


def publish_retrying(clients: Sequence[JetStream], spec: StreamSpec, body: bytes, msg_id: str,
                     attempts: int = 3, pause_s: float = 0.05) -> PubAck:
    """Publish with the same Msg-Id up to `attempts` times, over `clients` in turn, while within half
    the dedup window of the first attempt, so the stream keeps one copy however many land. A
    definite failure is `fail` only when every attempt was definite; one unknown attempt makes the
    whole unknown (`info`): it may have landed."""
    started = time.monotonic()
    unknown: IndeterminateFailure | None = None
    last: DefiniteFailure | None = None
    for attempt in range(attempts):
        if attempt and time.monotonic() - started + pause_s > spec.duplicate_window_s / 2:
            break
        if attempt:
            time.sleep(pause_s)  # a retry's pause, not a wait on a condition
        try:
            return clients[attempt % len(clients)].publish(spec.subject, body, msg_id)
        except IndeterminateFailure as e:
            unknown = e
        except DefiniteFailure as e:
            last = e
    if unknown is not None:
        raise IndeterminateFailure(f"publish {msg_id}: no ack, an attempt may have landed ({unknown})")
    assert last is not None
    raise last


def replica_state(host: str, monitor_port: int, stream: str, timeout: float = 5.0) -> dict[str, Any] | None:
    """One server's own state of `stream` from its monitoring port (`/jsz?streams=true`): `messages`,
    `first_seq`, `last_seq`, ...; None when that server holds no replica of it."""
    url = f"http://{host}:{monitor_port}/jsz?streams=true"
    try:
        with urllib.request.urlopen(url, timeout=timeout) as response:
            jsz = json.load(response)
    except (OSError, ValueError) as e:
        raise IndeterminateFailure(f"{url}: {e}") from None
    for account in jsz.get("account_details") or []:
        for detail in account.get("stream_detail") or []:
            if detail.get("name") == stream:
                return dict(detail.get("state") or {})
    return None


def _answer(reply: Msg) -> dict:
    try:
        answer = json.loads(reply.payload)
    except ValueError:
        raise IndeterminateFailure(f"a JetStream answer that is not JSON: {reply.payload[:80]!r}") from None
    if not isinstance(answer, dict):
        raise IndeterminateFailure(f"a JetStream answer that is not an object: {answer!r}")
    error = answer.get("error")
    if error is not None:
        raise JetStreamError(str(error.get("description", error)), int(error.get("code", 0)),
                             int(error.get("err_code", 0)))
    return answer


def _stream_info(answer: Mapping[str, Any]) -> StreamInfo:
    state, cluster = answer.get("state") or {}, answer.get("cluster") or {}
    replicas = tuple(Replica(r["name"], bool(r.get("current")), bool(r.get("offline")), int(r.get("lag", 0)))
                     for r in cluster.get("replicas") or [])
    return StreamInfo(answer["config"]["name"], int(state.get("first_seq", 0)), int(state.get("last_seq", 0)),
                      int(state.get("messages", 0)), cluster.get("leader") or None, replicas)


def _stored_message(reply: Msg) -> StoredMessage | None:
    try:
        answer = _answer(reply)
    except JetStreamError as e:
        if e.err_code == ERR_NO_MESSAGE:
            return None
        raise
    message = answer["message"]
    headers = base64.b64decode(message.get("hdrs") or "")
    msg_id = decode_headers(headers)[2].get(MSG_ID) if headers else None
    return StoredMessage(int(message["seq"]), msg_id, base64.b64decode(message.get("data") or ""),
                         message["subject"])


def _direct_message(reply: Msg) -> StoredMessage | None:
    if reply.status == NOT_FOUND:
        return None
    if reply.status is not None or "Nats-Sequence" not in reply.headers:
        raise DefiniteFailure(f"direct get refused: {reply.status} {reply.description}".strip())
    return StoredMessage(int(reply.headers["Nats-Sequence"]), reply.headers.get(MSG_ID), reply.payload,
                         reply.headers.get("Nats-Subject", ""))
