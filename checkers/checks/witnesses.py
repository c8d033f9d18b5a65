"""The ops and log entries each witness names, looked up so a person can follow the anomaly.

A witness in results.json names ops by their history index (`invoke_index`, `complete_index`,
`history_index`, `seen_by_read`) and log positions by index (`log_index`, `ack_index`, ...).
`HistoryLookup` picks the named ops out of the history as the report streams it past, each
paired with its invoke and completion; `final_entries` reads what each node's final log holds
at the named indexes. A witness's time is its earliest op, else when its leader was elected or
its log index committed (from the nodes' events), so the report can link it to the timeline.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from checkers.jsonlines import final_line_problem, records
from checkers.run.nodeseries import NodeSeries

HISTORY_KEYS = frozenset({"invoke_index", "complete_index", "history_index", "seen_by_read", "covered_by"})
LOG_KEYS = frozenset(
    {"log_index", "ack_index", "final_index", "index", "later_index", "missing_from", "missing_to"}
)
MAX_LOG_INDEXES = 6  # per witness
NS = 1e9


def named(value: Any, keys: frozenset[str]) -> set[int]:
    """Every integer found under one of `keys`, anywhere in the JSON `value`."""
    found: set[int] = set()
    if isinstance(value, dict):
        for key, inner in value.items():
            if key in keys and isinstance(inner, int) and not isinstance(inner, bool):
                found.add(inner)
            else:
                found |= named(inner, keys)
    elif isinstance(value, list):
        for inner in value:
            found |= named(inner, keys)
    return found


def log_indexes(witness: dict[str, Any]) -> list[int]:
    """The log indexes a witness names, lowest first, at most MAX_LOG_INDEXES."""
    return sorted(named(witness, LOG_KEYS))[:MAX_LOG_INDEXES]


@dataclass
class Op:
    """A client op as the history has it: its invoke and, when it completed, its completion."""

    index: int
    process: Any
    f: str
    node: str | None
    time: float  # invoke, s since the run started
    value: Any
    type: str = "pending"
    completed: float | None = None
    error: str | None = None

    @classmethod
    def invoked(cls, line: dict[str, Any]) -> Op:
        return cls(line["index"], line["process"], line["f"], line.get("node"), line["time"] / NS,
                   line.get("value"))

    def complete(self, line: dict[str, Any]) -> None:
        self.type = line["type"]
        self.completed = line["time"] / NS
        self.error = line.get("error")
        if line.get("value") is not None:
            self.value = line["value"]


@dataclass
class HistoryLookup:
    """The ops at `wanted` history indexes (invoke or completion), caught as the history streams by."""

    wanted: set[int]
    ops: dict[int, Op] = field(default_factory=dict)  # by invoke and by completion index

    def watch(self, lines: Iterable[dict[str, Any]]) -> Iterator[dict[str, Any]]:
        """Pass `lines` through unchanged, keeping the wanted ops."""
        open_: dict[Any, dict[str, Any]] = {}  # process -> its open invoke
        waiting: dict[Any, Op] = {}  # process -> a wanted op not yet completed
        for line in lines:
            index, process = line["index"], line["process"]
            if line["type"] == "invoke":
                open_[process] = line
                if index in self.wanted:
                    waiting[process] = self.ops[index] = Op.invoked(line)
            else:
                invoke = open_.pop(process, None)
                op = waiting.pop(process, None)
                if op is None and index in self.wanted and invoke is not None:
                    op = self.ops[invoke["index"]] = Op.invoked(invoke)
                if op is not None:
                    op.complete(line)
                    self.ops[index] = op
            yield line


def final_entries(finals: dict[str, Path], wanted: set[int]) -> dict[int, dict[str, dict[str, Any]]]:
    """log index -> node -> its final-log entry there, for the `wanted` indexes."""
    found: dict[int, dict[str, dict[str, Any]]] = {}
    if not wanted:
        return found
    last = max(wanted)
    for node, path in finals.items():
        for entry in records(path, final_line_problem):
            if entry["log_index"] in wanted:
                found.setdefault(entry["log_index"], {})[node] = entry
            if entry["log_index"] >= last:
                break
    return found


@dataclass
class WitnessView:
    """One witness laid out for the report."""

    anchor: str  # witness-<check>-<n>, the id of its row
    witness: dict[str, Any]
    ops: list[Op]
    entries: list[tuple[int, dict[str, dict[str, Any]]]]  # (log index, node -> entry)
    time: float | None

    @property
    def raw(self) -> str:
        return json.dumps(self.witness, indent=2, sort_keys=True)


def witness_views(check: str, witnesses: list[dict[str, Any]], lookup: HistoryLookup,
                  entries: dict[int, dict[str, dict[str, Any]]], series: NodeSeries | None
                  ) -> list[WitnessView]:
    """The views of one check's witnesses, numbered from 1."""
    views = []
    for n, witness in enumerate(witnesses, 1):
        ops = {id(op): op for i in sorted(named(witness, HISTORY_KEYS)) if (op := lookup.ops.get(i))}
        ordered = sorted(ops.values(), key=lambda op: op.index)
        at_indexes = log_indexes(witness)
        views.append(WitnessView(f"witness-{check}-{n}", witness, ordered,
                                 [(i, entries.get(i, {})) for i in at_indexes],
                                 _time(witness, ordered, at_indexes, series)))
    return views


def _time(witness: dict[str, Any], ops: list[Op], at_indexes: list[int], series: NodeSeries | None
          ) -> float | None:
    if ops:
        return min(op.time for op in ops)
    if series is None:
        return None
    if isinstance(witness.get("term"), int) and isinstance(witness.get("leaders"), list):
        elected = [series.elected(node, witness["term"]) for node in witness["leaders"]]
        return min((t for t in elected if t is not None), default=None)
    return series.committed(at_indexes[0]) if at_indexes else None
