"""A run's timeline for people: client op latencies and nemesis fault periods, read from a history.

Streams `history.jsonl` once, through the checker's reader (`checkers.jsonlines`). Raw
latency points are thinned to a fixed budget so very long histories plot in bounded memory;
rates and quantiles use every op.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from checkers.jsonlines import history_line_problem, records
from checkers.thinning import Thinned

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


def build_timeline(path: Path, vocabulary: dict[str, dict] | None = None, max_points: int = 100_000
                   ) -> Timeline:
    """Read history file `path` into a Timeline (see `timeline_of`); InputError on a malformed line."""
    return timeline_of(records(path, history_line_problem), vocabulary, max_points)


def timeline_of(ops: Iterable[dict], vocabulary: dict[str, dict] | None = None, max_points: int = 100_000
                ) -> Timeline:
    """The Timeline of history lines `ops`, keeping about `max_points` raw latency points.

    `vocabulary` is test.json's `"faults"` ({family: {"start", "stop", "label"}}); a run
    recorded without one is read with the catalogue's vocabulary of every family.
    """
    if vocabulary is None:
        from nemesis import catalogue

        vocabulary = catalogue.vocabulary(list(catalogue.FAMILIES))
    faults = FaultPairing(vocabulary)
    timeline = Timeline()
    points: Thinned[tuple[float, float, str, str]] = Thinned(max_points)
    invoked: dict[object, dict] = {}
    for op in ops:
        t = op["time"] / SECOND_NS
        timeline.end = max(timeline.end, t)
        if op["process"] == "nemesis":
            faults.op(timeline, op, t)
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
        points.add((t0, latency_ms, op["f"], op["type"]))
    timeline.points = points.items
    faults.finish(timeline)
    return timeline


class FaultPairing:
    """Pairs nemesis ops into fault periods by the run's fault vocabulary."""

    def __init__(self, vocabulary: dict[str, dict]) -> None:
        self.vocabulary = vocabulary
        self.starts = {v["start"]: family for family, v in vocabulary.items()}
        self.stops = {v["stop"]: family for family, v in vocabulary.items() if v.get("stop")}
        self.open: dict[str, tuple[float, object]] = {}
        self.invoked: dict[str, float] = {}

    def label(self, family: str) -> str:
        return self.vocabulary[family].get("label") or family

    def op(self, timeline: Timeline, op: dict, t: float) -> None:
        """A fault starts when its start op is invoked; it ends when its stop op completes."""
        f = op["f"]
        if op["type"] == "invoke":
            self.invoked[f] = t
            return
        value = op.get("value")
        timeline.nemesis_ops.append({"time": round(t, 3), "f": f, "type": op["type"], "value": value})
        family = self.starts.get(f)
        began = self.invoked.pop(f, t)
        if family is not None and self.vocabulary[family].get("stop"):
            self.open.setdefault(family, (began, value))
        elif family is not None:
            timeline.faults.append(FaultPeriod(self.label(family), began, t, value))
        elif f in self.stops and self.stops[f] in self.open:
            start, value = self.open.pop(self.stops[f])
            timeline.faults.append(FaultPeriod(self.label(self.stops[f]), start, t, value))

    def finish(self, timeline: Timeline) -> None:
        """Faults still in force at the end of the history (also one whose start op never completed)."""
        for f, began in self.invoked.items():
            if f in self.starts:
                self.open.setdefault(self.starts[f], (began, None))
        for family, (start, value) in self.open.items():
            timeline.faults.append(FaultPeriod(self.label(family), start, timeline.end, value))
