"""Porcupine's kv histories as results folders: one per key, appends as appends, gets as reads of
the whole log.

The format is that of Porcupine's `test_data/kv/*.txt` (MIT 6.824's key/value service), one EDN
map per line: `{:process 0, :type :invoke, :f :append, :key "6", :value "x 0 0 y"}`; an ok
`:get`'s value is the key's value, the concatenation of the values appended to it.

* An append's id is its value. A value appended to a key again (those files hold two runs
  against one store) gets the id `<value>#2`, `#3` ...: allowed only when every earlier append
  of the value was acknowledged before it was invoked, so that in a correct log the copies sit
  in that order; the n-th copy in a get is then the n-th append.
* A get's value is split into the key's appended values; when no split by those exists, by
  Porcupine's `x <client> <seq> y` pattern (values no append wrote are then ids no client
  appended).
* A key is an append-only log until its first `:put`, which replaces its value: its history is
  cut before that put's invoke, and operations still open there end as info.

A key is refused, with the reason, when nothing precedes its first put, a value is appended
again while an earlier append of it was not acknowledged, or a get's value splits several ways
or none; the other keys are written.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from checkers.importers.source import Operation, Record, Running, fields, read_records, text
from checkers.importers.writer import UNFINISHED, Folder, Imported, Refused, plural

FS = ("get", "put", "append")
TOKEN = r"x -?\d+ -?\d+ y"  # Porcupine's kv values: x <client> <seq> y
MAPPING = {
    "append": "an append is an append whose id is its value (`<value>#n` for the n-th append of one value)",
    "read": "a get is a read of the whole log: its value split into the key's appended values, entry i "
            "the i-th of them",
    "put": "a put replaces the key's value: the key's history is cut before its first put's invoke, and "
           "operations open there end as info",
    "unfinished": UNFINISHED,
}


@dataclass
class Op(Operation):
    """One operation of the source and its key and value."""

    key: str = ""
    value: Any = None
    answer: Any = None


def convert(path: Path) -> Imported:
    """A folder per key of the Porcupine kv history at `path`; keys that cannot be mapped are refused."""
    fmt, records = read_records(path)
    by_key: dict[str, list[Op]] = {}
    for op in _pair(records):
        by_key.setdefault(op.key, []).append(op)
    folders, refused = [], {}
    for key, ops in by_key.items():
        try:
            folders.append(_folder(key, ops))
        except Refused as e:
            refused[key] = str(e)
    return Imported("porcupine-kv", path, fmt, folders, refused, MAPPING)


def _pair(records: list[Record]) -> list[Op]:
    ops: list[Op] = []
    running: Running[Op] = Running()
    for record in records:
        kind, process, f, time, value = fields(record)
        if not isinstance(process, int):
            raise Refused(f"{record.where}: :process must be an integer")
        if f not in FS:
            raise Refused(f"{record.where}: :f :{f} is not one of {', '.join(':' + x for x in FS)}")
        if kind == "invoke":
            key = record.value.get("key")
            if key is None:
                raise Refused(f"{record.where}: no :key")
            ops.append(Op(record, process, f, time, key=text(key), value=value))
            running.invoke(process, ops[-1])
        else:
            op = running.complete(record, kind, process, f)
            op.completion, op.outcome, op.answer, op.done_time = record, kind, value, time
    return ops


def _folder(key: str, ops: list[Op]) -> Folder:
    """The key's folder; Refused (for this key only) when it cannot be mapped."""
    folder = Folder(key)
    put = next((op for op in ops if op.f == "put"), None)
    cut = put.invoke.number if put is not None else None
    kept = [op for op in ops if cut is None or op.invoke.number < cut]
    if not kept:
        raise Refused(f"{put.invoke.where if put else key}: the key's first operation is a put; nothing "
                      "before it is an append-only log")
    ids = _ids(kept)
    by_pattern = 0
    events = sorted([(op.invoke.number, 0, op) for op in kept]
                    + [(op.completion.number, 1, op) for op in kept
                       if op.completion is not None and (cut is None or op.completion.number < cut)],
                    key=lambda e: e[:2])
    for _, completing, op in events:
        line = op.completion.number if completing and op.completion else op.invoke.number
        f, asked = ("append", {"id": ids[id(op)]}) if op.f == "append" else ("read", {})
        if not completing:
            folder.source_ops += 1
            folder.invoke(op.time, op.process, f, asked, line)
        elif op.f == "append" or op.outcome != "ok":
            folder.complete(op.outcome, op.done_time, op.process, f, asked, line)
        else:
            values, by_pattern_now = _split(op, {text(o.value) for o in kept if o.f == "append"})
            by_pattern += by_pattern_now
            entries = [[i, ident] for i, ident in enumerate(_copies(values))]
            folder.complete("ok", op.done_time, op.process, "read",
                            {"from": 0, "to": len(entries) - 1, "entries": entries}, line)
    if put is not None:
        cut_open = [op.process for op in kept if folder.is_open(op.process) and op.completion is not None]
        folder.close_open(f"cut before the key's first put ({put.invoke.where})", cut_open)
        folder.notes.append(f"cut before its first put ({put.invoke.where}): "
                            f"{plural(len(ops) - len(kept), 'operation')} from the put on left out, "
                            f"{len(cut_open)} open at the cut ended as info")
    unfinished = folder.close_open()
    if unfinished:
        folder.notes.append(f"{plural(unfinished, 'operation')} without a completion in the source: info "
                            "completions at the end")
    if by_pattern:
        folder.notes.append(f"{plural(by_pattern, 'get')} returned values no append of the key wrote: split "
                            "by the x <client> <seq> y pattern")
    return folder


def _ids(ops: list[Op]) -> dict[int, str]:
    """id(op) -> the id of each append: its value, `<value>#n` for the n-th append of one value.

    Refused when a value is appended again while an earlier append of it was not acknowledged
    (ok) before this one was invoked: a get holding one copy could not say whose it is.
    """
    ids: dict[int, str] = {}
    earlier: dict[str, list[Op]] = {}
    for op in ops:
        if op.f != "append":
            continue
        value = text(op.value)
        before = earlier.setdefault(value, [])
        for first in before:
            done = first.completion.number if first.completion is not None else None
            if first.outcome != "ok" or done is None or done > op.invoke.number:
                raise Refused(f"{op.invoke.where}: value {value!r} is appended to key {op.key} again while "
                              f"its append at {first.invoke.where} was not acknowledged; a get holding one "
                              "copy could not say whose it is")
        before.append(op)
        ids[id(op)] = _copy(value, len(before))
    return ids


def _copy(value: str, n: int) -> str:
    """The id of the n-th append of `value` (from 1)."""
    return value if n == 1 else f"{value}#{n}"


def _copies(values: list[str]) -> list[str]:
    """A get's values as ids: the n-th copy of a value is the n-th append of it."""
    seen: dict[str, int] = {}
    ids = []
    for value in values:
        seen[value] = seen.get(value, 0) + 1
        ids.append(_copy(value, seen[value]))
    return ids


def _split(op: Op, appended: set[str]) -> tuple[list[str], int]:
    """The ids a get's value is made of, and 1 when they were split by the pattern (else 0)."""
    where = op.completion.where if op.completion else op.invoke.where
    if op.answer is None:
        return [], 0
    if not isinstance(op.answer, str):
        raise Refused(f"{where}: a get's value must be a string")
    value = str(op.answer)
    ways, ids = split_known(value, appended)
    if ways == 1:
        return ids, 0
    if ways > 1:
        raise Refused(f"{where}: the get's value {_clip(value)} splits into the key's appended values in "
                      "more than one way")
    if re.fullmatch(f"(?:{TOKEN})*", value):
        return re.findall(TOKEN, value), 1
    raise Refused(f"{where}: the get's value {_clip(value)} is not a concatenation of the key's appended "
                  "values")


def split_known(value: str, known: set[str]) -> tuple[int, list[str]]:
    """How many ways (0, 1, or 2 for "more") `value` is a concatenation of `known` strings, and the
    one split when there is exactly one."""
    lengths = sorted({len(k) for k in known if k})
    ways = [0] * (len(value) + 1)
    step = [0] * (len(value) + 1)
    ways[len(value)] = 1
    for i in range(len(value) - 1, -1, -1):
        for n in lengths:
            if i + n <= len(value) and ways[i + n] and value[i:i + n] in known:
                ways[i] = min(2, ways[i] + ways[i + n])
                step[i] = n
    if ways[0] != 1:
        return ways[0], []
    ids, i = [], 0
    while i < len(value):
        ids.append(value[i:i + step[i]])
        i += step[i]
    return 1, ids


def _clip(value: str) -> str:
    return repr(value if len(value) <= 80 else value[:80] + "...")
