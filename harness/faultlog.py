"""What each fault did, computed after a run from the history and the nodes' `events.jsonl`.

For every fault (a start/stop pair of one family, or an instant fault): when it started and
ended, its targets, whether the leader was among them, the leader changes and elections
from its start until `SETTLE_S` after its end, the client outcomes completed while it was in
force (appends and reads; consumes apart), the longest window with no successful append
while it was in force, the time from its end to the next successful append (recovery
time, as OpenChaos reports it) and, with consumers, the longest window in which a consumer
got no answer to its pulls while the fault was in force (its stall: a consumer that fails
over to a slave at once hardly stalls, even while no new entry comes).

Node events are placed on the history's time line by their `real_ns` (the machine's wall
clock, free of the clock nemesis's offset) minus the history's wall-clock start.
"""

from __future__ import annotations

import bisect
import itertools
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.history import refused_by_non_leader

SETTLE_S = 2.0
NS = 1e9


@dataclass
class Elections:
    """Leader and candidate role events on the history's time line, in time order."""

    leaders: list[tuple[float, int, str]] = field(default_factory=list)  # (time s, term, node)
    candidacies: list[tuple[float, int, str]] = field(default_factory=list)

    @classmethod
    def from_events(cls, events: Iterable[dict[str, Any]], wall_start_ns: int) -> Elections:
        from checkers.nodeseries import placed  # the report places node events by the same rule

        found = cls()
        for event in events:
            at = placed(event, wall_start_ns)
            if event.get("event") != "role" or at is None:
                continue
            if event["role"] == "leader":
                found.leaders.append((at, event["term"], event["node"]))
            elif event["role"] == "candidate":
                found.candidacies.append((at, event["term"], event["node"]))
        found.leaders.sort()
        found.candidacies.sort()
        return found

    def leader_at(self, at: float) -> str | None:
        """The most recently elected leader at time `at` (highest term wins a tie)."""
        before = [(term, t, node) for t, term, node in self.leaders if t <= at]
        return max(before)[2] if before else None

    def changes(self, start: float, end: float) -> int:
        """Leader elections in [start, end] that put a different node in charge."""
        previous = self.leader_at(start)
        count = 0
        for t, _term, node in self.leaders:
            if start < t <= end:
                if node != previous:
                    count += 1
                previous = node
        return count

    def elections(self, start: float, end: float) -> int:
        """Distinct terms in which some node stood as candidate in [start, end]."""
        return len({term for t, term, _node in self.candidacies if start < t <= end})

    def total_changes(self) -> int:
        """Leader changes after the first leader of the run was elected."""
        return self.changes(self.leaders[0][0], float("inf")) if self.leaders else 0


@dataclass
class Outcomes:
    """Completion times (s) of client ops by type, and of successful appends."""

    by_type: dict[str, list[float]] = field(default_factory=lambda: {"ok": [], "fail": [], "info": []})
    ok_appends: list[float] = field(default_factory=list)
    consumed: dict[int, list[float]] = field(default_factory=dict)  # consumer -> times of its ok pulls

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


HistoryRead = tuple[Outcomes, list[dict[str, Any]]]


def read_history(lines: Iterable[dict[str, Any]], vocabulary: dict[str, dict[str, Any]]) -> HistoryRead:
    """Client outcomes, and each fault as {family, start, end, value, error} (times in s)."""
    starts = {v["start"]: name for name, v in vocabulary.items()}
    stops = {v["stop"]: name for name, v in vocabulary.items() if v.get("stop")}
    outcomes = Outcomes()
    faults: list[dict[str, Any]] = []
    open_faults: dict[str, dict[str, Any]] = {}
    invoked: dict[str, float] = {}
    for op in lines:
        t = op["time"] / NS
        if op["process"] != "nemesis":
            if op["f"] == "consume":
                if op["type"] == "ok":
                    outcomes.consumed.setdefault(op["value"]["consumer"], []).append(t)
                elif op["type"] == "invoke":
                    outcomes.consumed.setdefault(op["value"]["consumer"], [])
            elif refused_by_non_leader(op["type"], op.get("value"), op.get("error")):
                pass
            elif op["type"] != "invoke":
                outcomes.by_type[op["type"]].append(t)
                if op["type"] == "ok" and op["f"] == "append":
                    outcomes.ok_appends.append(t)
            continue
        f = op["f"]
        if op["type"] == "invoke":
            invoked[f] = t
            continue
        began = invoked.pop(f, t)
        if f in starts:
            family = starts[f]
            record = {"family": family, "start": began, "end": t, "value": op.get("value"),
                      "error": op.get("error")}
            faults.append(record)
            if vocabulary[family].get("stop"):
                record["end"] = None
                open_faults[family] = record
        elif f in stops and stops[f] in open_faults:
            record = open_faults.pop(stops[f])
            record["end"] = t
            record["stop_error"] = op.get("error")
    for record in open_faults.values():  # never stopped (an interrupted run): in force to the end
        record["end"] = max([*outcomes.by_type["ok"][-1:], record["start"]])
    return outcomes, faults


def fault_log(history: Iterable[dict[str, Any]], vocabulary: dict[str, dict[str, Any]],
              events: Iterable[dict[str, Any]] | None, wall_start_ns: int) -> dict[str, Any]:
    """`{"faults": [one record per fault], "leader_changes": n, "elections": n}` for test.json."""
    return _fault_log(read_history(history, vocabulary), vocabulary, events, wall_start_ns)


def _fault_log(read: HistoryRead, vocabulary: dict[str, dict[str, Any]],
               events: Iterable[dict[str, Any]] | None, wall_start_ns: int) -> dict[str, Any]:
    """With `events` None (the system leaves no node events) who led is unknown: the leader
    fields are null rather than a count of zero."""
    outcomes, faults = read
    known = events is not None
    elections = Elections.from_events(events or (), wall_start_ns)
    records = []
    for fault in faults:
        start, end = fault["start"], fault["end"]
        value = fault["value"] if isinstance(fault["value"], dict) else {}
        targets = value.get("targets", [])
        leader = elections.leader_at(start)
        record: dict[str, Any] = {
            "family": fault["family"],
            "label": vocabulary[fault["family"]]["label"],
            "start_s": round(start, 3),
            "end_s": round(end, 3),
            "targets": targets,
            "leader_before": leader,
            "leader_hit": leader is not None and leader in targets if known else None,
            "leader_changes": elections.changes(start, end + SETTLE_S) if known else None,
            "elections": elections.elections(start, end + SETTLE_S) if known else None,
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
        for key in ("error", "stop_error"):
            if fault.get(key):
                record[key] = fault[key]
        records.append(record)
    return {"faults": records, "leader_changes": elections.total_changes() if known else None,
            "elections": len({term for _t, term, _n in elections.candidacies}) if known else None}


def _rounded(value: float | None) -> float | None:
    return None if value is None else round(value, 3)


def read_history_file(run_dir: Path, vocabulary: dict[str, dict[str, Any]]) -> HistoryRead:
    """`read_history` of the folder's history.jsonl, streamed (a run reads it while it ends).

    ValueError (checkers.jsonlines.InputError) names a malformed line (a torn last line is skipped).
    """
    from checkers.jsonlines import history_line_problem, records

    return read_history(records(run_dir / "history.jsonl", history_line_problem), vocabulary)


def run_fault_log(run_dir: Path, vocabulary: dict[str, dict[str, Any]], wall_start_ns: int,
                  read: HistoryRead | None = None) -> dict[str, Any]:
    """The fault log of a results folder: nodes/*/events.jsonl streamed, with `read` (the
    history's `read_history_file`, read now when None). ValueError names a malformed line."""
    from checkers.jsonlines import event_line_problem, records

    paths = sorted(run_dir.glob("nodes/*/events.jsonl"))
    # Streamed: a node's events.jsonl holds a line per commit-index step (2 million lines
    # for an hour's run of 3 nodes, 1.9 GB held as a list). None: a system that writes none.
    events = (e for path in paths for e in records(path, event_line_problem)) if paths else None
    return _fault_log(read or read_history_file(run_dir, vocabulary), vocabulary, events, wall_start_ns)
