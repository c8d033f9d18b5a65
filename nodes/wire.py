"""Framing on the wire: length prefix, version, message type, request id, payload.

A frame is, big-endian::

    length   uint32   bytes that follow this field (header rest + payload)
    version  uint8    WIRE_VERSION
    type     uint16   message type (see `nodes.codec`)
    request  uint32   request id, echoed by the reply
    payload  bytes    the message, encoded by `nodes.codec`

`FrameParser` is sans-IO: feed it whatever bytes arrived and take the complete frames out.
A frame whose length is out of bounds or whose version is unknown cannot be resynchronised,
so the parser raises `FrameError` and the connection must be closed.
"""

from __future__ import annotations

import struct
from typing import Any, NamedTuple

from nodes.codec import MessageCodec

WIRE_VERSION = 1
MAX_FRAME = 16 * 1024 * 1024
_LENGTH = struct.Struct(">I")
_HEADER = struct.Struct(">IBHI")
_REST = _HEADER.size - _LENGTH.size


class FrameError(Exception):
    """The byte stream is not a valid frame sequence; the connection cannot continue."""


class Frame(NamedTuple):
    msg_type: int
    request_id: int
    payload: bytes


def encode_frame(msg_type: int, request_id: int, payload: bytes) -> bytes:
    """One frame carrying `payload`; ValueError if it would exceed MAX_FRAME."""
    _check_length(_REST + len(payload))
    return _HEADER.pack(_REST + len(payload), WIRE_VERSION, msg_type, request_id & 0xFFFFFFFF) + payload


def frame_message(codec: MessageCodec, message: Any, request_id: int) -> bytearray:
    """One frame carrying `message` encoded by `codec` (in place, no copy of the payload);
    CodecError if it does not encode, ValueError if it would exceed MAX_FRAME."""
    out = bytearray(_HEADER.size)
    type_id = codec.encode_into(message, out)
    length = len(out) - _LENGTH.size
    _check_length(length)
    _HEADER.pack_into(out, 0, length, WIRE_VERSION, type_id, request_id & 0xFFFFFFFF)
    return out


def frame_room(codec: MessageCodec, message: Any) -> int:
    """How many more payload bytes a frame carrying `message` could take within MAX_FRAME
    (negative when it is already too large)."""
    out = bytearray()
    codec.encode_into(message, out)
    return MAX_FRAME - _REST - len(out)


def _check_length(length: int) -> None:
    if length > MAX_FRAME:
        raise ValueError(f"frame of {length} bytes exceeds the {MAX_FRAME}-byte limit; send smaller batches")


RECV_BYTES = 1 << 16  # one read of a connection: a buffer this size is reused for every read


class FrameParser:
    """Incremental frame decoder over a byte stream."""

    def __init__(self, max_frame: int = MAX_FRAME) -> None:
        self._buf = bytearray()
        self._max = max_frame

    def feed(self, data: bytes | memoryview) -> list[Frame]:
        """Add `data`; return every frame now complete. FrameError on a bad length or version."""
        buf = self._buf
        buf += data
        frames: list[Frame] = []
        pos = 0
        end = len(buf)
        header, unpack, limit = _HEADER.size, _HEADER.unpack_from, self._max
        with memoryview(buf) as view:  # released before `buf` shrinks
            while end - pos >= header:
                length, version, msg_type, request_id = unpack(buf, pos)
                if length < _REST or length > limit:
                    raise FrameError(f"frame length {length} outside {_REST}..{limit}")
                if version != WIRE_VERSION:
                    raise FrameError(f"wire version {version}, this node speaks {WIRE_VERSION}")
                total = _LENGTH.size + length
                if end - pos < total:
                    break
                frames.append(Frame(msg_type, request_id, bytes(view[pos + header : pos + total])))
                pos += total
        if pos:
            del buf[:pos]
        return frames

    @property
    def buffered(self) -> int:
        """Bytes held that do not yet make a whole frame."""
        return len(self._buf)
