"""A run's timeline for people: client op latencies and nemesis fault periods, read from a history.

Streams `history.jsonl` once. Raw latency points are thinned to a fixed budget so very long
histories plot in bounded memory; rates and quantiles use every op.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

# Nemesis start op -> the op that ends its fault period, and the fault's name in plots.
FAULT_NAMES = {"start-partition": "partition", "start-packet": "packet", "bump-clock": "clock"}
FAULT_PAIRS = {
    "start-partition": "stop-partition",
    "kill": "start",
    "pause": "resume",
    "start-packet": "stop-packet",
    "bump-clock": "reset-clock",
}
INSTANT_FAULTS = {"corrupt-file", "transfer-leader"}
SECOND_NS = 1_000_000_000


@dataclass(frozen=True)
class FaultPeriod:
    """A fault in force from `start` to `end` (seconds since the run started)."""

    fault: str
    start: float
    end: float
    value: object


@dataclass
class Timeline:
    """Completed client ops and fault periods of one run."""

    # (invoke time s, latency ms, f, type) for a thinned sample of completed client ops
    points: list[tuple[float, float, str, str]] = field(default_factory=list)
    # per whole second since start: {(f, type): count}
    per_second: dict[int, dict[tuple[str, str], int]] = field(default_factory=dict)
    # per whole second: latencies (ms) of ok ops by f, for quantiles
    ok_latencies: dict[str, dict[int, list[float]]] = field(default_factory=dict)
    faults: list[FaultPeriod] = field(default_factory=list)
    nemesis_ops: list[dict] = field(default_factory=list)
    end: float = 0.0


def read_ops(path: Path) -> Iterator[dict]:
    """History lines as dicts; a torn last line (a run killed mid-write) is skipped."""
    with path.open(encoding="utf-8") as lines:
        for number, line in enumerate(lines, 1):
            try:
                yield json.loads(line)
            except json.JSONDecodeError:
                if lines.readline():
                    raise ValueError(f"{path}:{number}: not a JSON line") from None


def build_timeline(path: Path, max_points: int = 100_000) -> Timeline:
    """Read `path` into a Timeline, keeping at most about `max_points` raw latency points."""
    timeline = Timeline()
    invoked: dict[object, dict] = {}
    open_faults: dict[str, tuple[float, object]] = {}
    stride, seen = 1, 0
    for op in read_ops(path):
        t = op["time"] / SECOND_NS
        timeline.end = max(timeline.end, t)
        if op["process"] == "nemesis":
            _nemesis_op(timeline, op, t, open_faults)
            continue
        if op["type"] == "invoke":
            invoked[op["process"]] = op
            continue
        start = invoked.pop(op["process"], None)
        if start is None:
            continue
        t0 = start["time"] / SECOND_NS
        latency_ms = (op["time"] - start["time"]) / 1e6
        counts = timeline.per_second.setdefault(int(t0), {})
        key = (op["f"], op["type"])
        counts[key] = counts.get(key, 0) + 1
        if op["type"] == "ok":
            timeline.ok_latencies.setdefault(op["f"], {}).setdefault(int(t0), []).append(latency_ms)
        seen += 1
        if seen % stride == 0:
            timeline.points.append((t0, latency_ms, op["f"], op["type"]))
            if len(timeline.points) >= 2 * max_points:
                timeline.points = timeline.points[::2]
                stride *= 2
    for fault, (start, value) in open_faults.items():
        timeline.faults.append(FaultPeriod(FAULT_NAMES.get(fault, fault), start, timeline.end, value))
    return timeline


def _nemesis_op(timeline: Timeline, op: dict, t: float, open_faults: dict[str, tuple[float, object]]) -> None:
    f = op["f"]
    if op["type"] != "invoke":
        timeline.nemesis_ops.append(
            {"time": round(t, 3), "f": f, "type": op["type"], "value": op.get("value")}
        )
    if op["type"] == "invoke" and f in FAULT_PAIRS:
        open_faults.setdefault(f, (t, op.get("value")))
    elif op["type"] != "invoke" and f in FAULT_PAIRS.values():
        starter = next((s for s, e in FAULT_PAIRS.items() if e == f and s in open_faults), None)
        if starter is not None:
            start, value = open_faults.pop(starter)
            timeline.faults.append(FaultPeriod(FAULT_NAMES.get(starter, starter), start, t, value))
    elif op["type"] == "invoke" and f in INSTANT_FAULTS:
        timeline.faults.append(FaultPeriod(f, t, t, op.get("value")))
