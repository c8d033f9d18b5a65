"""What the nodes said over time, from nodes/<node>/events.jsonl: who led which term, the
elections, and each node's commit index.

A line is placed on the history's time line by its `real_ns` (the machine's wall clock, free
of the clock nemesis's offset) minus test.json's `history_wall_ns`, as the fault log places
them (harness/faultlog.py); lines without `real_ns` cannot be placed and are counted, not used.
Commit lines are thinned per node so a long run plots cheaply.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from checkers.jsonlines import event_line_problem, records
from checkers.thinning import Thinned

NS = 1e9
COMMIT_POINTS = 2_000  # per node, at least; at most twice that


@dataclass(frozen=True)
class Leadership:
    """`node` led `term` from `start` until `end` (s): its own next role line, or the election
    of a later term's leader elsewhere; None when neither came."""

    node: str
    term: int
    start: float
    end: float | None


@dataclass
class NodeSeries:
    """Leaderships, candidacies and commit indexes of every node, on the history's time line."""

    nodes: list[str]
    leaderships: list[Leadership] = field(default_factory=list)
    candidacies: list[tuple[float, str, int]] = field(default_factory=list)  # (time s, node, term)
    commits: dict[str, list[tuple[float, int]]] = field(default_factory=dict)  # node -> (time s, index)
    unplaced: int = 0  # lines without real_ns
    end: float = 0.0

    def elected(self, node: str, term: int) -> float | None:
        """When `node` became leader of `term`, if it did."""
        return next((ls.start for ls in self.leaderships if ls.node == node and ls.term == term), None)

    def committed(self, log_index: int) -> float | None:
        """When some node first committed `log_index`, or a little later (commit lines are thinned)."""
        times = [t for points in self.commits.values() for t, index in points if index >= log_index]
        return min(times, default=None)


def read_node_series(event_logs: dict[str, Path], wall_start_ns: int) -> NodeSeries:
    """The series of every node's events.jsonl; InputError on a malformed role line."""
    series = NodeSeries(sorted(event_logs))
    roles: list[tuple[float, str, int, str]] = []
    for node, path in sorted(event_logs.items()):
        commits: Thinned[tuple[float, int]] = Thinned(COMMIT_POINTS)
        for event in records(path, event_line_problem):
            at = placed(event, wall_start_ns)
            if at is None:
                series.unplaced += 1
                continue
            series.end = max(series.end, at)
            if "role" in event:
                roles.append((at, event["node"], event["term"], event["role"]))
            elif isinstance(event.get("commit_index"), int):
                commits.add((at, event["commit_index"]))
        series.commits[node] = commits.items
    roles.sort()
    series.leaderships = _leaderships(roles)
    series.candidacies = [(at, node, term) for at, node, term, role in roles if role == "candidate"]
    return series


def placed(event: dict[str, Any], wall_start_ns: int) -> float | None:
    """Seconds on the history's time line of a node event, or None when it has no `real_ns`."""
    real_ns = event.get("real_ns")
    return (real_ns - wall_start_ns) / NS if isinstance(real_ns, int) else None


def _leaderships(roles: list[tuple[float, str, int, str]]) -> list[Leadership]:
    """Leadership intervals from role lines in time order."""
    done: list[Leadership] = []
    open_: dict[str, tuple[int, float]] = {}
    for at, node, term, role in roles:
        if node in open_:
            led, since = open_.pop(node)
            done.append(Leadership(node, led, since, at))
        if role != "leader":
            continue
        for other, (led, since) in list(open_.items()):
            if led < term:
                del open_[other]
                done.append(Leadership(other, led, since, at))
        open_[node] = (term, at)
    done += [Leadership(node, term, since, None) for node, (term, since) in open_.items()]
    return sorted(done, key=lambda ls: (ls.start, ls.node))
