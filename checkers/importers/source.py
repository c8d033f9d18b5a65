"""Reading a source history: EDN (with the `edn_format` library) or JSON, one op map per line or
one vector (JSON array) of them.

Values come back as plain Python: maps as dicts, vectors and lists as lists, sets as sorted
lists, EDN keywords as `Keyword` (a str of the name, without the colon), and whatever else
EDN has (dates, UUIDs, characters) as its text. `name` reads a keyword, or a JSON string
standing for one (`"ok"` or `":ok"`), as the bare name, so the importers read EDN and JSON alike.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Generic, TypeVar

import edn_format  # type: ignore[import-untyped]

from checkers.importers.writer import Refused

TYPES = ("invoke", "ok", "fail", "info")
BATCH = 1000  # EDN lines parsed in one call (one call per line is three times slower)

# Jepsen may print an op as the record it is: #jepsen.history.Op{:index 0, ...}
edn_format.add_tag("jepsen.history.Op", lambda op: op)


class Keyword(str):
    """An EDN keyword, as its name."""

    __slots__ = ()


@dataclass(frozen=True)
class Record:
    """One op map of the source: `number` is its line (its position in a vector), from 1, and
    `where` names it in messages (`line 12`, `op 12`)."""

    number: int
    where: str
    value: Any


def read_records(path: Path) -> tuple[str, list[Record]]:
    """The source's format (`edn` or `json`) and its op maps, in order; Refused when unreadable."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeError) as e:
        raise Refused(f"cannot read it ({e})") from None
    lines = text.splitlines()
    first = next((line.strip() for line in lines if line.strip()), "")
    if first.startswith("["):
        try:
            found = json.loads(text)
        except ValueError:
            return "edn", _vector(_edn(text, "the file"))
        return "json", _vector([found])
    try:
        json.loads(first)
    except ValueError:
        return "edn", _edn_lines(lines)
    return "json", _json_lines(lines)


def fields(record: Record) -> tuple[str, int | str, str, int, Any]:
    """An op map's type, process (an integer, or "nemesis"), f, time (the record's number when it
    has none) and value; Refused when it is not an op map."""
    op = record.value
    if not isinstance(op, dict):
        raise Refused(f"{record.where}: not an op map")
    kind, f, process = name(op.get("type")), name(op.get("f")), op.get("process")
    if kind not in TYPES:
        raise Refused(f"{record.where}: :type must be one of {', '.join(':' + t for t in TYPES)}")
    if not f:
        raise Refused(f"{record.where}: no :f")
    if name(process) == "nemesis":
        process = "nemesis"
    elif not isinstance(process, int) or isinstance(process, bool):
        raise Refused(f"{record.where}: :process must be an integer or :nemesis")
    time = op.get("time")
    time = int(time) if isinstance(time, int | float) and not isinstance(time, bool) else record.number
    return kind, process, f, time, op.get("value")


@dataclass
class Operation:
    """One client operation of a source: its invoke and completion records (None: none yet)."""

    invoke: Record
    process: int
    f: str
    time: int
    completion: Record | None = None
    outcome: str = ""  # the completion's type
    done_time: int = 0


Op = TypeVar("Op", bound=Operation)


class Running(Generic[Op]):
    """The operation each process has open: a completion closes the process's open invoke of the
    same :f; Refused (naming the line) for an invoke while one is open, or a completion with none."""

    def __init__(self) -> None:
        self.open: dict[int, Op] = {}

    def invoke(self, process: int, op: Op) -> None:
        before = self.open.get(process)
        if before is not None:
            raise Refused(f"{op.invoke.where}: process {process} invokes :{op.f} before its :{before.f} "
                          f"({before.invoke.where}) completed")
        self.open[process] = op

    def complete(self, record: Record, kind: str, process: int, f: str) -> Op:
        op = self.open.pop(process, None)
        if op is None or op.f != f:
            raise Refused(f"{record.where}: a :{kind} :{f} of process {process}, which has no :{f} open")
        return op


def name(value: Any) -> str | None:
    """A keyword's name, or a string's without a leading colon; None for anything else."""
    if isinstance(value, Keyword):
        return str(value)
    if isinstance(value, str):
        return value.removeprefix(":")
    return None


def text(value: Any) -> str:
    """A value as the text of an id or a key: an integer's digits, a keyword's or string's
    characters, anything else as compact JSON."""
    if isinstance(value, str):
        return str(value)
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    return json.dumps(value, separators=(",", ":"), sort_keys=True, default=str)


def jsonable(value: Any) -> Any:
    """A plain value as JSON can hold it: map keys as text."""
    if isinstance(value, dict):
        return {text(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [jsonable(v) for v in value]
    if isinstance(value, str):
        return str(value)
    return value


def plain(value: Any) -> Any:
    """An EDN value as plain Python (see the module's docstring)."""
    if isinstance(value, edn_format.Keyword):
        return Keyword(value.name)
    if isinstance(value, str | int | float | bool) or value is None:
        return value
    if isinstance(value, Mapping):
        return {_hashable(plain(k)): plain(v) for k, v in value.items()}
    if isinstance(value, frozenset | set):
        return sorted((plain(v) for v in value), key=text)
    if isinstance(value, Sequence):
        return [plain(v) for v in value]
    return str(value)


def _hashable(value: Any) -> Any:
    if isinstance(value, list):
        return tuple(_hashable(v) for v in value)
    if isinstance(value, dict):
        return tuple(sorted((text(k), _hashable(v)) for k, v in value.items()))
    return value


def _edn(text_: str, where: str) -> list[Any]:
    try:
        return list(edn_format.loads_all(text_, write_ply_tables=False))
    except Exception as e:  # edn_format and ply raise several kinds for text that is not EDN
        raise Refused(f"{where}: not valid EDN ({type(e).__name__}: {e})") from None


def _vector(forms: list[Any]) -> list[Record]:
    if len(forms) != 1 or not isinstance(forms[0], Sequence) or isinstance(forms[0], str):
        raise Refused("expected one op map per line, or one vector of op maps")
    return [Record(n, f"op {n}", plain(op)) for n, op in enumerate(forms[0], 1)]


def _edn_lines(lines: list[str]) -> list[Record]:
    numbered = [(n, line) for n, line in enumerate(lines, 1)
                if line.strip() and not line.lstrip().startswith(";")]
    records: list[Record] = []
    for start in range(0, len(numbered), BATCH):
        batch = numbered[start:start + BATCH]
        try:
            forms = _edn("\n".join(line for _, line in batch), "")
        except Refused:
            forms = []
        if len(forms) != len(batch):  # find the line that is not one op map
            forms = [_one_form(n, line) for n, line in batch]
        records.extend(Record(n, f"line {n}", plain(form)) for (n, _), form in zip(batch, forms, strict=True))
    return records


def _one_form(number: int, line: str) -> Any:
    forms = _edn(line, f"line {number}")
    if len(forms) != 1:
        raise Refused(f"line {number}: expected one op map per line, found {len(forms)} values")
    return forms[0]


def _json_lines(lines: list[str]) -> list[Record]:
    records = []
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            records.append(Record(n, f"line {n}", json.loads(line)))
        except ValueError as e:
            raise Refused(f"line {n}: not valid JSON ({e})") from None
    return records
