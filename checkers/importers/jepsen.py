"""Jepsen histories as results folders: Kafka-style sends and polls, and Elle's list append.

Reads a history in EDN or JSON (one op map per line, as history.edn, or one vector of them)
and writes one folder per key. An operation becomes:

* sends and appends (`[:send k v]`, `[:append k v]`, `{:f :append, :value v}`): one `append` per
  value, its id the value's text; an ok send's offset is its `log_index`. The sends of one
  operation are concurrent appends spanning it: the first by the operation's process, the
  others by helper processes numbered after the source's (a process has one operation open);
* polls (`[:poll]`): one `consume` of the consumer that is the Jepsen process, its entries the
  `[offset value]` pairs of every poll of the operation, in order. It pulls from that
  consumer's offset: one past the last entry of its previous ok poll; at its first poll, the
  consumer group's committed offset (one past the last entry of the latest ok poll of any
  consumer of the key, 0 before any), where a Kafka consumer of the group starts;
* list reads (`[:r k nil]`, `{:f :read}`): a `read` of the whole log, entry i the list's i-th value;
* nemesis operations: nemesis lines, in every key's folder.

An operation that cannot be one of these is refused, with its line: a transaction across keys
or mixing reads and writes, `:subscribe`/`:assign` (which change what a consumer reads), any
other `:f`, a value sent twice to one key (ids must be unique). An invoke left without a
completion gets an `info` completion at the end of the history.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from checkers.importers.source import (
    Operation,
    Record,
    Running,
    fields,
    jsonable,
    name,
    read_records,
    text,
)
from checkers.importers.writer import NO_COMPLETION, UNFINISHED, Folder, Imported, Refused, plural

DEFAULT_KEY = "log"  # the key of simple {:f :append} / {:f :read} operations, which name none
WRITES = ("send", "append")
READS = ("poll", "r")
MAPPING = {
    "append": "a sent or appended value is an append whose id is the value's text; an ok send's offset "
              "is its log_index; the sends of one operation are concurrent appends spanning it, the "
              "first by its process, the others by helper processes",
    "consume": "a poll is a consume of the consumer that is its Jepsen process, from that consumer's "
               "offset (one past the last entry of its previous ok poll); a consumer's first poll pulls "
               "from the group's committed offset (one past the last entry of the latest ok poll of the "
               "key, 0 before any); the polls of one operation are one consume",
    "read": "a list read is a read of the whole log: entry i is the list's i-th value",
    "unfinished": UNFINISHED,
}


@dataclass
class Op(Operation):
    """One client operation of the source and what it maps to."""

    kind: str = ""  # append, consume or read
    key: str | None = None
    writes: list[tuple[Any, int | None]] = field(default_factory=list)  # (value, offset) per send
    got: list[Any] | None = None  # a poll's (offset, value) pairs or a read's values; None: nothing
    renamed: bool = False  # the completion names other values than the invoke
    processes: list[int] = field(default_factory=list)  # the process of each of its appends
    start: int = 0  # where its consume pulls from


@dataclass
class _Nemesis:
    """One nemesis record of the source."""

    record: Record
    kind: str
    f: str
    time: int
    value: Any


def convert(path: Path) -> Imported:
    """The folders of the Jepsen history at `path`; Refused (naming the line) when it cannot be mapped."""
    fmt, records = read_records(path)
    ops, events = _pair(records)
    for op in ops:
        _classify(op)
    keys = list(dict.fromkeys(op.key for op in ops if op.key is not None))
    if not keys:
        raise Refused("no sends, polls, appends or reads to import")
    keyless = [op for op in ops if op.key is None]
    for op in keyless:
        op.key = keys[0] if len(keys) == 1 else None
    _check_unique(ops)
    helper_base = max((op.process for op in ops), default=-1) + 1
    states = {key: _KeyState(Folder(key), helper_base) for key in keys}
    _emit(events, states)
    for state in states.values():
        _notes(state, [op for op in ops if op.key == state.folder.key], helper_base)
        if len(keys) > 1 and keyless:
            state.folder.notes.append(f"{plural(len(keyless), 'poll')} of the source named no key (they "
                                      "returned nothing): left out")
    return Imported("jepsen", path, fmt, [s.folder for s in states.values()], mapping=MAPPING)


def _pair(records: list[Record]) -> tuple[list[Op], list[tuple[str, Op | _Nemesis]]]:
    """The client operations (invoke and completion paired by process) and the events in order."""
    ops: list[Op] = []
    events: list[tuple[str, Op | _Nemesis]] = []
    running: Running[Op] = Running()
    for record in records:
        kind, process, f, time, value = fields(record)
        if isinstance(process, str):
            events.append(("nemesis", _Nemesis(record, kind, f, time, value)))
        elif kind == "invoke":
            op = Op(record, process, f, time)
            running.invoke(process, op)
            ops.append(op)
            events.append(("invoke", op))
        else:
            op = running.complete(record, kind, process, f)
            op.completion, op.outcome, op.done_time = record, kind, time
            events.append(("complete", op))
    return ops, events


def _classify(op: Op) -> None:
    """Set what `op` maps to (kind, key, writes, got); Refused when it maps to nothing we have."""
    where = op.invoke.where
    asked = op.invoke.value.get("value")
    answer = op.completion.value.get("value") if op.completion is not None else None
    if op.f == "append":
        value = asked if answer is None else answer
        op.kind, op.key, op.writes = "append", DEFAULT_KEY, [(value, None)]
        op.renamed = answer not in (None, asked)
    elif op.f == "read":
        op.kind, op.key, op.got = "read", DEFAULT_KEY, _read_values(op, answer)
    elif op.f in ("send", "poll", "txn"):
        _classify_mops(op, _mops(where, asked), None if answer is None else _mops(op.completion, answer))
    elif op.f in ("subscribe", "assign"):
        raise Refused(f"{where}: :{op.f} changes which partitions a consumer reads; our consumers read one "
                      "log from their offset, so it cannot be mapped")
    else:
        raise Refused(f"{where}: :f :{op.f} is not a send, poll, append or read: it cannot be mapped")


def _mops(at: Record | str | None, value: Any) -> list[list[Any]]:
    """An operation's micro-ops, each a vector whose first element names it; Refused when not."""
    where = at.where if isinstance(at, Record) else at
    mops = isinstance(value, list) and bool(value)
    if not (mops and all(isinstance(m, list) and m and name(m[0]) for m in value)):
        raise Refused(f"{where}: :value is not a vector of micro-ops such as [:send k v] or [:poll]")
    return list(value)


def _classify_mops(op: Op, asked: list[list[Any]], answer: list[list[Any]] | None) -> None:
    where = op.invoke.where
    kinds = [name(m[0]) for m in asked]
    answered = None if answer is None else [name(m[0]) for m in answer]
    polls_only = set(kinds) == {"poll"} and answered is not None and set(answered) <= {"poll"}
    if answered is not None and answered != kinds and not polls_only:  # a client may poll more than asked
        raise Refused(f"{op.completion.where if op.completion else where}: the completion's micro-ops are "
                      f"not the invoke's ({where})")
    unknown = sorted({str(k) for k in kinds if k not in WRITES + READS})
    if unknown:
        raise Refused(f"{where}: micro-op :{unknown[0]} is not a send, poll, append or read")
    if any(k in WRITES for k in kinds) and any(k in READS for k in kinds):
        raise Refused(f"{where}: one operation mixes reads and writes; it cannot be split into our single "
                      "appends and reads")
    if "poll" in kinds and "r" in kinds:
        raise Refused(f"{where}: one operation both polls and reads lists")
    if kinds[0] in WRITES:
        _writes(op, asked, answer)
    elif kinds[0] == "poll":
        _polls(op, answer)
    elif len(asked) > 1:
        raise Refused(f"{where}: several reads in one operation")
    else:
        if len(asked[0]) != 3:
            raise Refused(f"{where}: a read micro-op is [:r key value]")
        op.kind, op.key = "read", text(asked[0][1])
        op.got = _read_values(op, answer[0][2] if answer is not None and len(answer[0]) == 3 else None)


def _writes(op: Op, asked: list[list[Any]], answer: list[list[Any]] | None) -> None:
    for i, mop in enumerate(asked):
        if len(mop) != 3 or (answer is not None and len(answer[i]) != 3):
            raise Refused(f"{op.invoke.where}: a send or append micro-op is [:send key value]")
        value, offset = mop[2], None
        if answer is not None:
            value, offset = _sent(answer[i][2])
            op.renamed = op.renamed or value != mop[2]
        op.writes.append((value, offset))
    keys = list(dict.fromkeys(text(m[1]) for m in asked))
    if len(keys) > 1:
        raise Refused(f"{op.invoke.where}: one operation writes to keys {keys[0]} and {keys[1]}; a "
                      "transaction across keys cannot be split into our one-log histories")
    op.kind, op.key = "append", keys[0]


def _sent(value: Any) -> tuple[Any, int | None]:
    """A completed send's value and offset: `[offset value]` when the client learned the offset."""
    if isinstance(value, list) and len(value) == 2 and (value[0] is None or _is_int(value[0])):
        return value[1], value[0]
    return value, None


def _polls(op: Op, answer: list[list[Any]] | None) -> None:
    """A poll's key and (offset, value) pairs, over every [:poll {k pairs}] of the operation."""
    where = op.completion.where if op.completion is not None else op.invoke.where
    pairs: dict[str, list[Any]] = {}
    for mop in answer or []:
        result = mop[1] if len(mop) > 1 else {}
        if not isinstance(result, dict):
            raise Refused(f"{where}: a poll's result is a map of keys to [offset value] pairs")
        for k, got in result.items():
            if not isinstance(got, list):
                raise Refused(f"{where}: a poll's result is a map of keys to [offset value] pairs")
            pairs.setdefault(text(k), []).extend(_pair_of(where, p) for p in got)
    with_entries = [k for k, got in pairs.items() if got]
    if len(with_entries) > 1:
        raise Refused(f"{where}: one poll returns messages of keys {with_entries[0]} and {with_entries[1]}; "
                      "a poll across keys cannot be split into our one-log histories")
    named = with_entries or list(pairs)
    op.kind, op.key = "consume", named[0] if len(named) == 1 else None
    op.got = pairs.get(op.key, []) if op.key is not None else []
    if op.completion is not None and op.outcome != "ok" and answer is None:
        op.got = None


def _pair_of(where: str, pair: Any) -> tuple[int, Any]:
    if not (isinstance(pair, list) and len(pair) == 2 and _is_int(pair[0])):
        raise Refused(f"{where}: a polled message must be [offset value], with an integer offset: {pair!r}")
    if pair[1] is None:
        raise Refused(f"{where}: a polled message has no value (nil at offset {pair[0]})")
    return pair[0], pair[1]


def _read_values(op: Op, answer: Any) -> list[Any] | None:
    """A list read's values: its list (nil: empty) when ok; what a fail or info carried, if a list."""
    if op.outcome != "ok":
        return answer if isinstance(answer, list) else None
    if answer is None:
        return []
    if not isinstance(answer, list):
        raise Refused(f"{op.completion.where if op.completion else op.invoke.where}: a read's value must be "
                      "a list")
    return answer


def _check_unique(ops: list[Op]) -> None:
    """An append's id is its value: one value sent twice to one key cannot be told apart."""
    first: dict[tuple[str | None, str], Op] = {}
    for op in ops:
        for value, _ in op.writes:
            ident = (op.key, text(value))
            if ident in first:
                raise Refused(f"{op.invoke.where}: value {ident[1]} is written to key {op.key} a second time "
                              f"(first at {first[ident].invoke.where}); append ids must be unique")
            first[ident] = op


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


class _KeyState:
    """One key's folder as it is written, its helper processes and its consumers' offsets."""

    def __init__(self, folder: Folder, helper_base: int) -> None:
        self.folder = folder
        self.next_helper = helper_base
        self.free: list[int] = []  # helper processes with no append open
        self.offsets: dict[int, int] = {}  # consumer -> its offset
        self.group = 0  # the consumer group's committed offset: after the latest ok poll

    def helper(self) -> int:
        if self.free:
            return heapq.heappop(self.free)
        self.next_helper += 1
        return self.next_helper - 1


def _emit(events: list[tuple[str, Op | _Nemesis]], states: dict[str, _KeyState]) -> None:
    """Write each event into its key's folder (nemesis lines into every folder), in source order."""
    nemesis_open: str | None = None
    for what, item in events:
        if isinstance(item, _Nemesis):
            steps, nemesis_open = _nemesis_steps(item, nemesis_open)
            line = item.record.number
            for kind, f, value, error in steps:
                for state in states.values():
                    if kind == "invoke":
                        state.folder.invoke(item.time, "nemesis", f, value, line)
                    else:
                        state.folder.complete("info", item.time, "nemesis", f, value, line, error)
        elif item.key is not None:
            (_invoke if what == "invoke" else _complete)(states[item.key], item)
    for state in states.values():
        state.folder.close_open()


Step = tuple[str, str, Any, str | None]  # a nemesis line: type, f, value, error


def _nemesis_steps(event: _Nemesis, open_f: str | None) -> tuple[list[Step], str | None]:
    """The nemesis lines one Jepsen nemesis op makes, and the nemesis operation open after them.

    Jepsen's nemesis logs an op as two :info records (invocation and completion): the first
    opens an operation, the next one of the same :f completes it; one of another :f (or an
    :invoke) first closes the open one with an info completion.
    """
    steps: list[Step] = []
    if open_f is not None and (event.f != open_f or event.kind == "invoke"):
        steps.append(("info", open_f, None, NO_COMPLETION))
        open_f = None
    if open_f is None:
        steps.append(("invoke", event.f, jsonable(event.value), None))
        return steps, event.f
    steps.append(("info", event.f, jsonable(event.value), None))
    return steps, None


def _invoke(state: _KeyState, op: Op) -> None:
    folder, line = state.folder, op.invoke.number
    folder.source_ops += 1
    if op.kind == "append":
        op.processes = [op.process, *(state.helper() for _ in op.writes[1:])]
        for process, (value, _) in zip(op.processes, op.writes, strict=True):
            folder.invoke(op.time, process, "append", {"id": text(value)}, line)
    elif op.kind == "consume":
        op.start = state.offsets.setdefault(op.process, state.group)
        folder.invoke(op.time, op.process, "consume", {"consumer": op.process, "from": op.start}, line)
    else:
        folder.invoke(op.time, op.process, "read", {}, line)


def _complete(state: _KeyState, op: Op) -> None:
    folder, line, kind = state.folder, op.completion.number if op.completion else 0, op.outcome
    if op.kind == "append":
        for process, (value, offset) in zip(op.processes, op.writes, strict=True):
            done: dict[str, Any] = {"id": text(value)}
            if kind == "ok" and offset is not None:
                done["log_index"] = offset
            folder.complete(kind, op.done_time, process, "append", done, line)
        for process in op.processes[1:]:
            heapq.heappush(state.free, process)
        return
    if op.kind == "consume":
        asked: dict[str, Any] = {"consumer": op.process, "from": op.start}
        entries = [[offset, text(value)] for offset, value in op.got or []]
    else:
        asked = {}
        entries = [[i, text(value)] for i, value in enumerate(op.got or [])]
    if kind != "ok":
        carried = {"entries": entries} if entries else {}  # what a fail or info returned: kept, not judged
        folder.complete(kind, op.done_time, op.process, op.kind, {**asked, **carried}, line)
    elif op.kind == "consume":
        offset = entries[-1][0] + 1 if entries else op.start
        to = max(e[0] for e in entries) if entries else op.start - 1
        folder.complete("ok", op.done_time, op.process, "consume",
                        {**asked, "to": to, "entries": entries, "offset": offset}, line)
        state.offsets[op.process] = state.group = offset
    else:
        folder.complete("ok", op.done_time, op.process, "read",
                        {"from": 0, "to": len(entries) - 1, "entries": entries}, line)


def _notes(state: _KeyState, ops: list[Op], helper_base: int) -> None:
    """What the folder's test.json says the import did beyond the mapping."""
    notes = state.folder.notes
    several = sum(len(op.writes) > 1 for op in ops)
    if several:
        notes.append(f"{plural(several, 'operation')} sent several values: the appends after each one's "
                     f"first are by helper processes {helper_base} to {state.next_helper - 1}")
    renamed = sum(op.renamed for op in ops)
    if renamed:
        notes.append(f"{plural(renamed, 'operation')} with a completion naming other values than its invoke: "
                     "the completion's are used, as Jepsen's checker does")
    unfinished = sum(op.completion is None for op in ops)
    if unfinished:
        notes.append(f"{plural(unfinished, 'operation')} without a completion in the source: info "
                     "completions at the end")
