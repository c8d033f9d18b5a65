"""The report's timeline of a run: client op latencies and rates, and the fault periods.

`TimelineReader` listens to the run's pass over its history (`checkers.run.reader`); the faults
come from the pass's `checkers.run.faultperiods.FaultPairing`. Raw latency points are thinned to a
fixed budget so very long histories plot in bounded memory; rates and quantiles use every op.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from checkers.jsonlines import NEMESIS, history_line_problem, records
from checkers.pages.thinning import Thinned
from checkers.run.faultperiods import FaultPairing, FaultPeriod
from checkers.run.reader import Line, feed

SECOND_NS = 1_000_000_000


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
    nemesis_ops: list[dict[str, Any]] = field(default_factory=list)
    end: float = 0.0


class TimelineReader:
    """Builds the `Timeline` of the history lines it is given, keeping about `max_points` raw
    latency points; its faults are those `faults` pairs."""

    def __init__(self, faults: FaultPairing, max_points: int = 100_000) -> None:
        self.faults = faults
        self.timeline = Timeline()
        self._points: Thinned[tuple[float, float, str, str]] = Thinned(max_points)

    def on_op(self, op: Line, invoke: Line | None) -> None:
        if op["process"] == NEMESIS or invoke is None:
            return
        t0 = invoke["time"] / SECOND_NS
        latency_ms = (op["time"] - invoke["time"]) / 1e6
        counts = self.timeline.per_second.setdefault(int(t0), {})
        key = (op["f"], op["type"])
        counts[key] = counts.get(key, 0) + 1
        if op["type"] == "ok":
            self.timeline.ok_latencies.setdefault(op["f"], {}).setdefault(int(t0), []).append(latency_ms)
        self._points.add((t0, latency_ms, op["f"], op["type"]))

    def done(self, pending: list[Line]) -> None:
        self.timeline.points = self._points.items
        self.timeline.faults = self.faults.periods
        self.timeline.nemesis_ops = self.faults.nemesis_ops
        self.timeline.end = self.faults.end


def build_timeline(path: Path, vocabulary: dict[str, dict] | None = None, max_points: int = 100_000
                   ) -> Timeline:
    """The Timeline of history file `path`; InputError on a malformed line.

    `vocabulary` is test.json's `"faults"` ({family: {"start", "stop", "label"}}); without one
    the catalogue's vocabulary of every family is used.
    """
    faults = FaultPairing.of(vocabulary)
    reader = TimelineReader(faults, max_points)
    feed(records(path, history_line_problem), [faults, reader])
    return reader.timeline
