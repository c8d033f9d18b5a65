"""Binary encoding of message dataclasses, generated from their type hints.

Each registered dataclass gets an encoder and a decoder compiled once (as Python source,
with nested types inlined) from its fields, so a new field needs no hand-written code and
a message with many entries costs one generated loop, not a call per field. Encodings,
big-endian:

* `int` int64, `bool` uint8, `float` float64, `IntEnum` int64 of its value;
* `str` uint32 length + UTF-8, `bytes` uint32 length + raw bytes (entry bodies travel as is);
* `X | None` uint8 presence flag + X; `list[X]` / `tuple[X, ...]` uint32 count + items;
* a nested dataclass: its fields in order.

Consecutive fixed-size fields are packed with one `struct` call. Decoding checks every
length against the bytes present and rejects trailing bytes, so a malformed payload raises
`CodecError` and nothing else. A decoded frozen dataclass with slots and no
`__post_init__` is built as `pickle` would, by setting its slots without calling
`__init__` (a frozen `__init__` costs about twice as much, per entry of every push).
"""

from __future__ import annotations

import dataclasses
import enum
import struct
import types
import typing
from collections.abc import Callable
from typing import Any

Encoder = Callable[[Any, bytearray], None]
Decoder = Callable[[bytes, int], tuple[Any, int]]

_U32 = struct.Struct(">I")
_FIXED = {int: "q", bool: "?", float: "d"}


class CodecError(Exception):
    """A payload that does not decode as the message its type id names (or cannot be encoded)."""


def _fixed_code(tp: Any) -> str | None:
    if tp in _FIXED:
        return _FIXED[tp]
    if isinstance(tp, type) and issubclass(tp, enum.IntEnum):
        return "q"
    return None


def _struct_for(types_: list[Any]) -> struct.Struct:
    """One struct for consecutive fixed-size values of `types_`."""
    return struct.Struct(">" + "".join(_fixed_code(tp) or "" for tp in types_))


def _type_name(tp: Any) -> str:
    return getattr(tp, "__name__", repr(tp))


class _Source:
    """Python source of one encoder or decoder being generated, with the objects it uses."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.names: dict[str, Any] = {"CodecError": CodecError, "UnicodeDecodeError": UnicodeDecodeError,
                                      "u32_pack": _U32.pack, "u32_unpack": _U32.unpack_from,
                                      "object_new": object.__new__}
        self._count = 0
        self._building: list[type] = []

    def fresh(self, prefix: str) -> str:
        self._count += 1
        return f"{prefix}{self._count}"

    def const(self, prefix: str, value: Any) -> str:
        name = self.fresh(prefix)
        self.names[name] = value
        return name

    def emit(self, depth: int, line: str) -> None:
        self.lines.append("    " * depth + line)

    def compile(self, header: str, name: str) -> Any:
        text = "\n".join([header, *self.lines])
        exec(compile(text, f"<codec {name}>", "exec"), self.names)  # our own generated source
        return self.names[name]

    def enter(self, cls: type) -> None:
        if cls in self._building:
            raise TypeError(f"the codec cannot encode the recursive dataclass {cls.__name__}")
        self._building.append(cls)

    def leave(self) -> None:
        self._building.pop()


def _dataclass_fields(cls: type) -> tuple[list[tuple[str, Any]], bool]:
    hints = typing.get_type_hints(cls)
    init = [f for f in dataclasses.fields(cls) if f.init]
    return [(f.name, hints[f.name]) for f in init], not any(f.kw_only for f in init)


def _runs(fields: list[tuple[str, Any]]) -> list[list[tuple[str, Any]]]:
    """Fields split into runs: consecutive fixed-size fields together, every other field alone."""
    runs: list[list[tuple[str, Any]]] = []
    for name, tp in fields:
        if _fixed_code(tp) is not None and runs and _fixed_code(runs[-1][-1][1]) is not None:
            runs[-1].append((name, tp))
        else:
            runs.append([(name, tp)])
    return runs


def _shape(tp: Any) -> tuple[str, Any]:
    """What kind of value `tp` is: fixed, bytes, str, dataclass, optional, list or tuple."""
    if _fixed_code(tp) is not None:
        return "fixed", None
    if tp is bytes or tp is str:
        return _type_name(tp), None
    if dataclasses.is_dataclass(tp) and isinstance(tp, type):
        return "dataclass", None
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin in (typing.Union, types.UnionType) and len(args) == 2 and type(None) in args:
        return "optional", args[0] if args[1] is type(None) else args[1]
    if origin is list and len(args) == 1:
        return "list", args[0]
    if origin is tuple and len(args) == 2 and args[1] is Ellipsis:
        return "tuple", args[0]
    raise TypeError(f"the codec cannot encode type {tp!r}; use int, bool, float, IntEnum, str, bytes, "
                    "X | None, list[X], tuple[X, ...] or a dataclass")


def _gen_encode(src: _Source, var: str, tp: Any, depth: int) -> None:
    """Source appending the encoding of local `var` (of type `tp`) to `out`."""
    kind, inner = _shape(tp)
    if kind == "fixed":
        src.emit(depth, f"out += {src.const('pack', _struct_for([tp]).pack)}({var})")
    elif kind == "bytes":
        src.emit(depth, f"out += u32_pack(len({var}))")
        src.emit(depth, f"out += {var}")
    elif kind == "str":
        raw = src.fresh("raw")
        src.emit(depth, f"{raw} = {var}.encode()")
        src.emit(depth, f"out += u32_pack(len({raw}))")
        src.emit(depth, f"out += {raw}")
    elif kind == "optional":
        src.emit(depth, f"if {var} is None:")
        src.emit(depth + 1, "out.append(0)")
        src.emit(depth, "else:")
        src.emit(depth + 1, "out.append(1)")
        _gen_encode(src, var, inner, depth + 1)
    elif kind in ("list", "tuple"):
        item = src.fresh("item")
        src.emit(depth, f"out += u32_pack(len({var}))")
        src.emit(depth, f"for {item} in {var}:")
        _gen_encode(src, item, inner, depth + 1)
    else:
        src.enter(tp)
        fields, _ = _dataclass_fields(tp)
        for run in _runs(fields):
            if _fixed_code(run[0][1]) is not None:
                pack = src.const("pack", _struct_for([t for _, t in run]).pack)
                src.emit(depth, f"out += {pack}({', '.join(f'{var}.{n}' for n, _ in run)})")
            else:
                name, ftp = run[0]
                field = src.fresh("field")
                src.emit(depth, f"{field} = {var}.{name}")
                _gen_encode(src, field, ftp, depth)
        src.leave()


def _gen_length(src: _Source, target: str, what: str, depth: int) -> None:
    """Source reading a uint32 length at `pos` into `target`."""
    src.emit(depth, "if pos + 4 > size:")
    src.emit(depth + 1, f'raise CodecError(f"truncated payload: {what} length at byte {{pos}}")')
    src.emit(depth, f"{target}, = u32_unpack(data, pos)")
    src.emit(depth, "pos += 4")


def _gen_fixed_decode(src: _Source, targets: list[str], run: list[tuple[str, Any]], what: str,
                      depth: int) -> None:
    st = _struct_for([t for _, t in run])
    unpack = src.const("unpack", st.unpack_from)
    src.emit(depth, f"if pos + {st.size} > size:")
    src.emit(depth + 1, f'raise CodecError(f"truncated payload: {what} at byte {{pos}}")')
    src.emit(depth, f"{', '.join(targets)}, = {unpack}(data, pos)")
    src.emit(depth, f"pos += {st.size}")
    for target, (_, tp) in zip(targets, run, strict=True):
        if isinstance(tp, type) and issubclass(tp, enum.IntEnum):
            members = src.const("members", {m.value: m for m in tp}.get)
            member = src.fresh("member")
            src.emit(depth, f"{member} = {members}({target})")
            src.emit(depth, f"if {member} is None:")
            src.emit(depth + 1, f'raise CodecError(f"{{{target}}} is not a valid {tp.__name__}")')
            src.emit(depth, f"{target} = {member}")


def _gen_decode(src: _Source, target: str, tp: Any, depth: int) -> None:
    """Source decoding a `tp` at `pos` of `data` (`size` bytes) into local `target`."""
    kind, inner = _shape(tp)
    if kind == "fixed":
        _gen_fixed_decode(src, [target], [("", tp)], _type_name(tp), depth)
    elif kind in ("bytes", "str"):
        n = src.fresh("n")
        _gen_length(src, n, "bytes", depth)
        src.emit(depth, f"if pos + {n} > size:")
        src.emit(depth + 1, f'raise CodecError(f"truncated payload: {{{n}}} bytes announced at '
                            f'byte {{pos - 4}}")')
        if kind == "bytes":
            src.emit(depth, f"{target} = data[pos:pos + {n}]")
        else:
            src.emit(depth, "try:")
            src.emit(depth + 1, f"{target} = data[pos:pos + {n}].decode()")
            src.emit(depth, "except UnicodeDecodeError as exc:")
            src.emit(depth + 1, 'raise CodecError(f"string at byte {pos} is not UTF-8") from exc')
        src.emit(depth, f"pos += {n}")
    elif kind == "optional":
        flag = src.fresh("flag")
        src.emit(depth, "if pos >= size:")
        src.emit(depth + 1, 'raise CodecError(f"truncated payload: optional flag at byte {pos}")')
        src.emit(depth, f"{flag} = data[pos]")
        src.emit(depth, "pos += 1")
        src.emit(depth, f"if {flag} == 0:")
        src.emit(depth + 1, f"{target} = None")
        src.emit(depth, f"elif {flag} == 1:")
        _gen_decode(src, target, inner, depth + 1)
        src.emit(depth, "else:")
        src.emit(depth + 1, f'raise CodecError(f"optional flag {{{flag}}} at byte {{pos - 1}} is '
                            f'neither 0 nor 1")')
    elif kind in ("list", "tuple"):
        count, items, item = src.fresh("count"), src.fresh("items"), src.fresh("item")
        _gen_length(src, count, "sequence", depth)
        src.emit(depth, f"if {count} > size - pos:  # every item takes at least one byte")
        src.emit(depth + 1, f'raise CodecError(f"sequence of {{{count}}} items cannot fit in the '
                            f'{{size - pos}} bytes left")')
        src.emit(depth, f"{items} = []")
        src.emit(depth, f"for _ in range({count}):")
        _gen_decode(src, item, inner, depth + 1)
        src.emit(depth + 1, f"{items}.append({item})")
        src.emit(depth, f"{target} = {items}" if kind == "list" else f"{target} = tuple({items})")
    else:
        src.enter(tp)
        fields, positional = _dataclass_fields(tp)
        values: list[str] = []
        for run in _runs(fields):
            names = [src.fresh("v") for _ in run]
            if _fixed_code(run[0][1]) is not None:
                _gen_fixed_decode(src, names, run, str([n for n, _ in run]), depth)
            else:
                _gen_decode(src, names[0], run[0][1], depth)
            values += names
        slots = _slot_setters(tp, [n for n, _ in fields])
        if slots is not None:
            src.emit(depth, f"{target} = object_new({src.const('cls', tp)})")
            for setter, value in zip(slots, values, strict=True):
                src.emit(depth, f"{src.const('set', setter)}({target}, {value})")
        else:
            named = (f"{n}={v}" for (n, _), v in zip(fields, values, strict=True))
            args = ", ".join(values if positional else named)
            src.emit(depth, f"{target} = {src.const('make', tp)}({args})")
        src.leave()


def _slot_setters(cls: type, names: list[str]) -> list[Callable[[Any, Any], None]] | None:
    """Setters of `cls`'s slots `names` when it can be built without `__init__`, else None:
    a frozen dataclass whose fields are exactly those slots and that has no `__post_init__`."""
    params = getattr(cls, "__dataclass_params__", None)
    if params is None or not params.frozen or hasattr(cls, "__post_init__"):
        return None
    slots = tuple(getattr(cls, "__slots__", ()))
    if [f.name for f in dataclasses.fields(cls)] != names or slots != tuple(names):
        return None
    return [cls.__dict__[name].__set__ for name in names]


def _build_codec(tp: Any) -> tuple[Encoder, Decoder]:
    enc_src = _Source()
    _gen_encode(enc_src, "value", tp, 1)
    enc = enc_src.compile("def encode(value, out):", "encode")
    dec_src = _Source()
    dec_src.emit(1, "size = len(data)")
    _gen_decode(dec_src, "result", tp, 1)
    dec_src.emit(1, "return result, pos")
    dec = dec_src.compile("def decode(data, pos):", "decode")
    return enc, dec


_CACHE: dict[Any, tuple[Encoder, Decoder]] = {}


def _codec_for(tp: Any) -> tuple[Encoder, Decoder]:
    cached = _CACHE.get(tp)
    if cached is None:
        cached = _CACHE[tp] = _build_codec(tp)
    return cached


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
        out = bytearray()
        type_id = self.encode_into(message, out)
        return type_id, bytes(out)

    def encode_into(self, message: Any, out: bytearray) -> int:
        """Append the payload of a registered message to `out`; its type id. CodecError if a
        value does not fit (`out` may then hold part of the payload)."""
        try:
            type_id, enc = self._by_cls[type(message)]
        except KeyError:
            raise CodecError(f"{type(message).__name__} is not a registered message") from None
        try:
            enc(message, out)
        except struct.error as exc:
            raise CodecError(f"{type(message).__name__}: a value does not fit its field: {exc}") from exc
        except (AttributeError, TypeError, UnicodeEncodeError) as exc:
            raise CodecError(f"cannot encode {type(message).__name__}: {exc}") from exc
        return type_id

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
