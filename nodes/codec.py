"""Binary encoding of message dataclasses, generated from their type hints.

Each registered dataclass gets an encoder and a decoder compiled once from its fields, so a
new field needs no hand-written code. Encodings, big-endian:

* `int` int64, `bool` uint8, `float` float64, `IntEnum` int64 of its value;
* `str` uint32 length + UTF-8, `bytes` uint32 length + raw bytes (entry bodies travel as is);
* `X | None` uint8 presence flag + X; `list[X]` / `tuple[X, ...]` uint32 count + items;
* a nested dataclass: its fields in order.

Consecutive fixed-size fields are packed with one `struct` call. Decoding checks every
length against the bytes present and rejects trailing bytes, so a malformed payload raises
`CodecError` and nothing else.
"""

from __future__ import annotations

import dataclasses
import enum
import operator
import struct
import types
import typing
from collections.abc import Callable
from typing import Any

Encoder = Callable[[Any, bytearray], None]
Decoder = Callable[[bytes, int], tuple[Any, int]]

_U32 = struct.Struct(">I")
_U8 = struct.Struct(">B")
_FIXED = {int: "q", bool: "?", float: "d"}


class CodecError(Exception):
    """A payload that does not decode as the message its type id names (or cannot be encoded)."""


def _fixed_code(tp: Any) -> str | None:
    if tp in _FIXED:
        return _FIXED[tp]
    if isinstance(tp, type) and issubclass(tp, enum.IntEnum):
        return "q"
    return None


def _enum_decoder(tp: type[enum.IntEnum]) -> Callable[[int], Any]:
    members = {m.value: m for m in tp}

    def convert(value: int) -> Any:
        member = members.get(value)
        if member is None:
            raise CodecError(f"{value} is not a valid {tp.__name__}")
        return member
    return convert


def _length(data: bytes, pos: int, what: str) -> tuple[int, int]:
    end = pos + 4
    if end > len(data):
        raise CodecError(f"truncated payload: {what} length at byte {pos}")
    return _U32.unpack_from(data, pos)[0], end


def _bytes_codec() -> tuple[Encoder, Decoder]:
    def enc(value: bytes, out: bytearray) -> None:
        out += _U32.pack(len(value))
        out += value

    def dec(data: bytes, pos: int) -> tuple[bytes, int]:
        n, pos = _length(data, pos, "bytes")
        end = pos + n
        if end > len(data):
            raise CodecError(f"truncated payload: {n} bytes announced at byte {pos - 4}")
        return data[pos:end], end
    return enc, dec


def _str_codec() -> tuple[Encoder, Decoder]:
    benc, bdec = _bytes_codec()

    def enc(value: str, out: bytearray) -> None:
        benc(value.encode(), out)

    def dec(data: bytes, pos: int) -> tuple[str, int]:
        raw, pos = bdec(data, pos)
        try:
            return raw.decode(), pos
        except UnicodeDecodeError as exc:
            raise CodecError(f"string at byte {pos - len(raw)} is not UTF-8") from exc
    return enc, dec


def _optional_codec(inner: Any) -> tuple[Encoder, Decoder]:
    ienc, idec = _codec_for(inner)

    def enc(value: Any, out: bytearray) -> None:
        if value is None:
            out.append(0)
        else:
            out.append(1)
            ienc(value, out)

    def dec(data: bytes, pos: int) -> tuple[Any, int]:
        if pos >= len(data):
            raise CodecError(f"truncated payload: optional flag at byte {pos}")
        flag = data[pos]
        if flag == 0:
            return None, pos + 1
        if flag != 1:
            raise CodecError(f"optional flag {flag} at byte {pos} is neither 0 nor 1")
        return idec(data, pos + 1)
    return enc, dec


def _sequence_codec(item: Any, make: Callable[[list[Any]], Any]) -> tuple[Encoder, Decoder]:
    ienc, idec = _codec_for(item)

    def enc(value: Any, out: bytearray) -> None:
        out += _U32.pack(len(value))
        for v in value:
            ienc(v, out)

    def dec(data: bytes, pos: int) -> tuple[Any, int]:
        n, pos = _length(data, pos, "sequence")
        if n > len(data) - pos:  # every item takes at least one byte
            raise CodecError(f"sequence of {n} items cannot fit in the {len(data) - pos} bytes left")
        items = []
        for _ in range(n):
            v, pos = idec(data, pos)
            items.append(v)
        return make(items), pos
    return enc, dec


def _converter(tp: Any) -> Callable[[int], Any] | None:
    if isinstance(tp, type) and issubclass(tp, enum.IntEnum):
        return _enum_decoder(tp)
    return None


def _scalar_codec(tp: Any) -> tuple[Encoder, Decoder]:
    st = struct.Struct(">" + (_fixed_code(tp) or ""))
    convert = _converter(tp)

    def enc(value: Any, out: bytearray) -> None:
        try:
            out += st.pack(value)
        except struct.error as exc:
            raise CodecError(f"{value!r} does not fit {tp.__name__}: {exc}") from exc

    def dec(data: bytes, pos: int) -> tuple[Any, int]:
        end = pos + st.size
        if end > len(data):
            raise CodecError(f"truncated payload: {tp.__name__} at byte {pos}")
        v = st.unpack_from(data, pos)[0]
        return (convert(v) if convert else v), end
    return enc, dec


def _dataclass_codec(cls: type) -> tuple[Encoder, Decoder]:
    hints = typing.get_type_hints(cls)
    fields = [(f.name, hints[f.name]) for f in dataclasses.fields(cls) if f.init]
    # Split the fields into runs: fixed-size runs are one struct, others their own codec.
    steps: list[tuple[Encoder, Any]] = []
    run: list[tuple[str, Any]] = []

    def close_run() -> None:
        if run:
            steps.append(_run_step(list(run)))
            run.clear()

    for name, tp in fields:
        if _fixed_code(tp) is not None:
            run.append((name, tp))
            continue
        close_run()
        fenc, fdec = _codec_for(tp)
        steps.append((_field_encoder(name, fenc), _field_decoder(fdec)))
    close_run()
    names = [n for n, _ in fields]
    positional = not any(f.kw_only for f in dataclasses.fields(cls) if f.init)
    make = cls
    encoders = [s[0] for s in steps]
    decoders = [s[1] for s in steps]

    def enc(value: Any, out: bytearray) -> None:
        for e in encoders:
            e(value, out)

    def dec(data: bytes, pos: int) -> tuple[Any, int]:
        values: list[Any] = []
        for d in decoders:
            pos = d(data, pos, values)
        return (make(*values) if positional else make(**dict(zip(names, values, strict=True)))), pos
    return enc, dec


def _field_encoder(name: str, fenc: Encoder) -> Encoder:
    def enc(value: Any, out: bytearray) -> None:
        fenc(getattr(value, name), out)
    return enc


def _field_decoder(fdec: Decoder) -> Any:
    def dec(data: bytes, pos: int, values: list[Any]) -> int:
        v, pos = fdec(data, pos)
        values.append(v)
        return pos
    return dec


def _run_step(run: list[tuple[str, Any]]) -> tuple[Encoder, Any]:
    names = [n for n, _ in run]
    st = struct.Struct(">" + "".join(_fixed_code(tp) or "" for _, tp in run))
    converters = [_converter(tp) for _, tp in run]
    getter = _attrgetter(names)
    size = st.size

    def enc(value: Any, out: bytearray) -> None:
        try:
            out += st.pack(*getter(value))
        except struct.error as exc:
            raise CodecError(f"{type(value).__name__} fields {names}: {exc}") from exc

    needs_convert = any(converters)

    def dec(data: bytes, pos: int, values: list[Any]) -> int:
        end = pos + size
        if end > len(data):
            raise CodecError(f"truncated payload: {names} at byte {pos}")
        raw = st.unpack_from(data, pos)
        if needs_convert:
            raw = tuple(c(v) if c else v for c, v in zip(converters, raw, strict=True))
        values.extend(raw)
        return end
    return enc, dec


def _attrgetter(names: list[str]) -> Callable[[Any], tuple[Any, ...]]:
    if len(names) > 1:
        return operator.attrgetter(*names)
    single = operator.attrgetter(names[0])
    return lambda value: (single(value),)


_CACHE: dict[Any, tuple[Encoder, Decoder]] = {}


def _codec_for(tp: Any) -> tuple[Encoder, Decoder]:
    cached = _CACHE.get(tp)
    if cached is not None:
        return cached
    result = _build_codec(tp)
    _CACHE[tp] = result
    return result


def _build_codec(tp: Any) -> tuple[Encoder, Decoder]:
    if _fixed_code(tp) is not None:
        return _scalar_codec(tp)
    if tp is bytes:
        return _bytes_codec()
    if tp is str:
        return _str_codec()
    if dataclasses.is_dataclass(tp) and isinstance(tp, type):
        return _dataclass_codec(tp)
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if origin in (typing.Union, types.UnionType) and len(args) == 2 and type(None) in args:
        return _optional_codec(args[0] if args[1] is type(None) else args[1])
    if origin is list and len(args) == 1:
        return _sequence_codec(args[0], list)
    if origin is tuple and len(args) == 2 and args[1] is Ellipsis:
        return _sequence_codec(args[0], tuple)
    raise TypeError(f"the codec cannot encode type {tp!r}; use int, bool, float, IntEnum, str, bytes, "
                    "X | None, list[X], tuple[X, ...] or a dataclass")


class MessageCodec:
    """Maps message dataclasses to wire type ids and encodes/decodes their payloads."""

    def __init__(self) -> None:
        self._by_id: dict[int, tuple[type, Decoder]] = {}
        self._by_cls: dict[type, tuple[int, Encoder]] = {}

    def register(self, type_id: int, cls: type) -> None:
        """Give `cls` the wire type `type_id` (each id and each class once)."""
        if type_id in self._by_id or cls in self._by_cls:
            raise ValueError(f"type id {type_id} or class {cls.__name__} is already registered")
        enc, dec = _codec_for(cls)
        self._by_id[type_id] = (cls, dec)
        self._by_cls[cls] = (type_id, enc)

    def knows(self, type_id: int) -> bool:
        return type_id in self._by_id

    def encode(self, message: Any) -> tuple[int, bytes]:
        """(type id, payload) for a registered message; CodecError if a value does not fit."""
        try:
            type_id, enc = self._by_cls[type(message)]
        except KeyError:
            raise CodecError(f"{type(message).__name__} is not a registered message") from None
        out = bytearray()
        try:
            enc(message, out)
        except (AttributeError, TypeError, UnicodeEncodeError) as exc:
            raise CodecError(f"cannot encode {type(message).__name__}: {exc}") from exc
        return type_id, bytes(out)

    def decode(self, type_id: int, payload: bytes) -> Any:
        """The message in `payload`; CodecError for an unknown type or a malformed payload."""
        entry = self._by_id.get(type_id)
        if entry is None:
            raise CodecError(f"unknown message type {type_id}")
        cls, dec = entry
        try:
            message, end = dec(payload, 0)
        except CodecError:
            raise
        except (ValueError, TypeError) as exc:  # a dataclass __post_init__ refusing the values
            raise CodecError(f"{cls.__name__}: {exc}") from exc
        if end != len(payload):
            raise CodecError(f"{cls.__name__}: {len(payload) - end} trailing bytes")
        return message
