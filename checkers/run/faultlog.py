"""What each fault did, computed after a run from the history and the nodes' `events.jsonl`.

For every fault (a start/stop pair of one family, or an instant fault): when it started and
ended, its targets, whether the leader was among them, the leader changes and elections
from its start until `SETTLE_S` after its end, the client outcomes completed while it was in
force (appends and reads; consumes apart), the longest window with no successful append
while it was in force, the time from its end to the next successful append (recovery
time, as OpenChaos reports it) and, with consumers, the longest window in which a consumer
got no answer to its pulls while the fault was in force (its stall: a consumer that fails
over to a slave at once hardly stalls, even while no new entry comes).

Its parts listen to the run's one pass (`checkers.run.reader`, put together by
`checkers.run.afterrun`): the faults as `checkers.run.faultperiods` pairs them (the report's fault
bands are the same), the client outcomes (`Outcomes`) and who led when (`checkers.run.leaders`,
the model the report's leader plot draws).
"""

from __future__ import annotations

import bisect
import itertools
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from checkers.jsonlines import NEMESIS, refused_by_non_leader
from checkers.run.faultperiods import NS, FaultPairing, FaultPeriod
from checkers.run.leaders import Leaders
from checkers.run.nodeseries import SeriesReader
from checkers.run.reader import Line, feed

SETTLE_S = 2.0


@dataclass
class Outcomes:
    """Completion times (s) of client ops by type, and of successful appends."""

    by_type: dict[str, list[float]] = field(default_factory=lambda: {"ok": [], "fail": [], "info": []})
    ok_appends: list[float] = field(default_factory=list)
    consumed: dict[int, list[float]] = field(default_factory=dict)  # consumer -> times of its ok pulls

    def on_op(self, op: Line, invoke: Line | None) -> None:
        if op["process"] == NEMESIS:
            return
        t = op["time"] / NS
        if op["f"] == "consume":
            if op["type"] == "ok":
                self.consumed.setdefault(op["value"]["consumer"], []).append(t)
            elif op["type"] == "invoke":
                self.consumed.setdefault(op["value"]["consumer"], [])
        elif op["type"] != "invoke" and not refused_by_non_leader(op["type"], op.get("value"),
                                                                  op.get("error")):
            self.by_type[op["type"]].append(t)
            if op["type"] == "ok" and op["f"] == "append":
                self.ok_appends.append(t)

    def done(self, pending: list[Line]) -> None:
        """Nothing to finish."""

    def count(self, kind: str, start: float, end: float) -> int:
        times = self.by_type[kind]
        return bisect.bisect_right(times, end) - bisect.bisect_left(times, start)

    def longest_gap(self, start: float, end: float) -> float:
        """The longest stretch of [start, end] with no successful append."""
        return _longest_gap(self.ok_appends, start, end)

    def consumer_stall(self, start: float, end: float) -> float | None:
        """The longest stretch of [start, end] in which some consumer got no answer; None
        without consumers."""
        return max((_longest_gap(times, start, end) for times in self.consumed.values()), default=None)

    def recovery(self, end: float) -> float | None:
        """Seconds from `end` to the next successful append; None if none came."""
        i = bisect.bisect_left(self.ok_appends, end)
        return self.ok_appends[i] - end if i < len(self.ok_appends) else None


def _longest_gap(times: list[float], start: float, end: float) -> float:
    """The longest stretch of [start, end] between the sorted `times`."""
    inside = times[bisect.bisect_left(times, start):bisect.bisect_right(times, end)]
    return max(b - a for a, b in itertools.pairwise([start, *inside, end]))


def fault_log(history: Iterable[Line], vocabulary: dict[str, dict[str, Any]],
              events: Iterable[Line] | None, wall_start_ns: int) -> dict[str, Any]:
    """The fault log of history lines and node events (None: the system writes none)."""
    faults, outcomes = FaultPairing(vocabulary), Outcomes()
    feed(history, [faults, outcomes])
    if events is None:
        return fault_log_of(faults.periods, outcomes, None)
    series = SeriesReader([], wall_start_ns)
    for event in events:
        series.on_event(event.get("node", ""), event)
    series.done()
    return fault_log_of(faults.periods, outcomes, series.series)


def fault_log_of(faults: list[FaultPeriod], outcomes: Outcomes, leaders: Leaders | None) -> dict[str, Any]:
    """`{"faults": [one record per fault], "leader_changes": n, "elections": n}` for test.json.

    With `leaders` None (the system leaves no node events) who led is unknown: the leader
    fields are null rather than a count of zero."""
    known = leaders is not None
    who = leaders or Leaders()
    records = []
    for fault in faults:
        start, end = fault.start, fault.end
        value = fault.value if isinstance(fault.value, dict) else {}
        targets = value.get("targets", [])
        leader = who.leader_at(start)
        record: dict[str, Any] = {
            "family": fault.family,
            "label": fault.fault,
            "start_s": round(start, 3),
            "end_s": round(end, 3),
            "targets": targets,
            "leader_before": leader,
            "leader_hit": leader is not None and leader in targets if known else None,
            "leader_changes": who.changes(start, end + SETTLE_S) if known else None,
            "elections": who.elections(start, end + SETTLE_S) if known else None,
            "ops": {kind: outcomes.count(kind, start, end) for kind in ("ok", "fail", "info")},
            "longest_no_append_s": round(outcomes.longest_gap(start, end), 3),
            "recovery_s": _rounded(outcomes.recovery(end)),
        }
        stall = outcomes.consumer_stall(start, end)
        if stall is not None:
            record["consumer_stall_s"] = round(stall, 3)
        detail = {k: v for k, v in value.items() if k != "targets"}
        if detail:
            record["detail"] = detail
        if fault.error:
            record["error"] = fault.error
        if fault.stop_error:
            record["stop_error"] = fault.stop_error
        records.append(record)
    return {"faults": records, "leader_changes": who.total_changes() if known else None,
            "elections": who.elections() if known else None}


def _rounded(value: float | None) -> float | None:
    return None if value is None else round(value, 3)
