"""The NATS client protocol's text framing, pure (no sockets): encode what a client sends, parse what a
server sends.

Server to client: `INFO {json}`, `MSG <subject> <sid> [reply] <bytes>` and `HMSG <subject> <sid>
[reply] <header bytes> <total bytes>` (each followed by its payload), `PING`, `PONG`, `+OK`,
`-ERR '<message>'`. Client to server: `CONNECT {json}`, `PUB`/`HPUB` (with a reply subject for
request-reply), `SUB`, `UNSUB`, `PING`, `PONG`. A header block is `NATS/1.0[ <status>
[<description>]]` then `Key: Value` lines then an empty line; a status without a payload is how the
server says `503` (no responders) or `404` (a direct get of a missing message). This module maps
nothing to the history (docs/formats.md); `systems.nats.client` does.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

CRLF = b"\r\n"
HEADER_VERSION = "NATS/1.0"
MAX_CONTROL_LINE = 1 << 20  # INFO lines list every server's URL; anything longer is garbage
PING = b"PING\r\n"
PONG = b"PONG\r\n"


class ProtocolError(Exception):
    """The server sent bytes that are not the NATS protocol."""


@dataclass(frozen=True)
class Info:
    fields: dict[str, Any]


@dataclass(frozen=True)
class Msg:
    subject: str
    sid: str
    reply: str | None
    payload: bytes
    headers: dict[str, str] = field(default_factory=dict)
    status: int | None = None  # from the header line, e.g. 503 (no responders), 404
    description: str = ""


@dataclass(frozen=True)
class Ping:
    pass


@dataclass(frozen=True)
class Pong:
    pass


@dataclass(frozen=True)
class Ok:
    pass


@dataclass(frozen=True)
class Err:
    message: str


Frame = Info | Msg | Ping | Pong | Ok | Err


class Parser:
    """Turns the server's byte stream, fed in pieces of any size, into frames."""

    def __init__(self) -> None:
        self._buffer = bytearray()

    def feed(self, data: bytes) -> list[Frame]:
        self._buffer += data
        frames: list[Frame] = []
        while (frame := self._next()) is not None:
            frames.append(frame)
        return frames

    def _next(self) -> Frame | None:
        end = self._buffer.find(CRLF)
        if end < 0:
            if len(self._buffer) > MAX_CONTROL_LINE:
                raise ProtocolError(f"no line end in {len(self._buffer)} bytes")
            return None
        line = bytes(self._buffer[:end]).decode("utf-8", "replace")
        op, _, rest = line.partition(" ")
        op = op.upper()
        if op in ("MSG", "HMSG"):
            return self._message(op, rest.split(), end + 2)
        del self._buffer[:end + 2]
        if op == "INFO":
            return Info(_json_object(rest))
        simple: dict[str, Frame] = {"PING": Ping(), "PONG": Pong(), "+OK": Ok()}
        if op in simple:
            return simple[op]
        if op == "-ERR":
            return Err(rest.strip().strip("'"))
        raise ProtocolError(f"unknown operation {line[:80]!r}")

    def _message(self, op: str, args: list[str], start: int) -> Msg | None:
        counts = 2 if op == "HMSG" else 1
        if len(args) not in (2 + counts, 3 + counts) or not all(a.isdigit() for a in args[-counts:]):
            raise ProtocolError(f"bad {op} arguments {args!r}")
        sizes = [int(a) for a in args[-counts:]]
        total = sizes[-1]
        header_size = sizes[0] if op == "HMSG" else 0
        if header_size > total:
            raise ProtocolError(f"{op} header of {header_size} bytes in a message of {total}")
        if len(self._buffer) < start + total + 2:
            return None  # the payload has not all arrived
        body = bytes(self._buffer[start:start + total])
        if self._buffer[start + total:start + total + 2] != CRLF:
            raise ProtocolError(f"{op} payload of {total} bytes not followed by CRLF")
        del self._buffer[:start + total + 2]
        reply = args[2] if len(args) == 3 + counts else None
        if op == "MSG":
            return Msg(args[0], args[1], reply, body)
        status, description, headers = decode_headers(body[:header_size])
        return Msg(args[0], args[1], reply, body[header_size:], headers, status, description)


def _json_object(text: str) -> dict[str, Any]:
    try:
        value = json.loads(text)
    except ValueError as e:
        raise ProtocolError(f"INFO is not JSON: {text[:80]!r}") from e
    if not isinstance(value, dict):
        raise ProtocolError(f"INFO is not a JSON object: {text[:80]!r}")
    return value


def decode_headers(block: bytes) -> tuple[int | None, str, dict[str, str]]:
    """A header block's status (None when it has none), description and headers (the first of
    repeated keys)."""
    lines = block.decode("utf-8", "replace").split("\r\n")
    if not lines[0].startswith(HEADER_VERSION):
        raise ProtocolError(f"header block starts {lines[0][:40]!r}, not {HEADER_VERSION}")
    code, _, description = lines[0][len(HEADER_VERSION):].strip().partition(" ")
    if code and not code.isdigit():
        raise ProtocolError(f"bad header status {lines[0][:80]!r}")
    headers: dict[str, str] = {}
    for line in lines[1:]:
        if not line:
            continue
        key, sep, value = line.partition(":")
        if not sep:
            raise ProtocolError(f"bad header line {line[:80]!r}")
        headers.setdefault(key.strip(), value.strip())
    return (int(code) if code else None), description.strip(), headers


def encode_headers(headers: Mapping[str, str]) -> bytes:
    for key, value in headers.items():
        if any(ch in key for ch in ": \r\n") or any(ch in value for ch in "\r\n"):
            raise ValueError(f"header {key!r}: {value!r} cannot be sent")
    lines = [HEADER_VERSION, *(f"{key}: {value}" for key, value in headers.items()), "", ""]
    return "\r\n".join(lines).encode()


def _token(name: str, value: str) -> str:
    if not value or any(ch.isspace() for ch in value):
        raise ValueError(f"{name} {value!r} must be non-empty and hold no white space")
    return value


def encode_connect(options: Mapping[str, Any]) -> bytes:
    return b"CONNECT " + json.dumps(dict(options), separators=(",", ":")).encode() + CRLF


def encode_pub(subject: str, payload: bytes, reply: str | None = None,
               headers: Mapping[str, str] | None = None) -> bytes:
    """PUB, or HPUB when there are headers."""
    target = _token("subject", subject) + (f" {_token('reply subject', reply)}" if reply else "")
    if not headers:
        return f"PUB {target} {len(payload)}\r\n".encode() + payload + CRLF
    block = encode_headers(headers)
    return f"HPUB {target} {len(block)} {len(block) + len(payload)}\r\n".encode() + block + payload + CRLF


def encode_sub(subject: str, sid: str) -> bytes:
    return f"SUB {_token('subject', subject)} {_token('sid', sid)}\r\n".encode()
