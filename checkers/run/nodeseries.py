"""What the nodes said over time, from nodes/<node>/events.jsonl: who led which term and the
elections (`checkers.run.leaders`), and each node's commit index.

`SeriesReader` listens to the run's pass over the events (`checkers.run.reader`). Lines are
placed on the history's time line as `checkers.run.leaders.placed` says; lines without `real_ns`
are counted, not used. Commit lines are thinned per node so a long run plots cheaply.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from checkers.pages.thinning import Thinned
from checkers.run.leaders import Leaders, Role, leaders_of, placed

COMMIT_POINTS = 2_000  # per node, at least; at most twice that


@dataclass
class NodeSeries(Leaders):
    """Who led when, and the commit indexes of every node, on the history's time line."""

    nodes: list[str] = field(default_factory=list)
    commits: dict[str, list[tuple[float, int]]] = field(default_factory=dict)  # node -> (time s, index)
    unplaced: int = 0  # lines without real_ns
    end: float = 0.0

    def committed(self, log_index: int) -> float | None:
        """When some node first committed `log_index`, or a little later (commit lines are thinned)."""
        times = [t for points in self.commits.values() for t, index in points if index >= log_index]
        return min(times, default=None)


class SeriesReader:
    """Builds the `NodeSeries` of the events of `nodes` (the reader names a malformed role line)."""

    def __init__(self, nodes: list[str], wall_start_ns: int) -> None:
        self.nodes = nodes
        self.wall_start_ns = wall_start_ns
        self.roles: list[Role] = []
        self.commits: dict[str, Thinned[tuple[float, int]]] = {node: Thinned(COMMIT_POINTS) for node in nodes}
        self.unplaced = 0
        self.end = 0.0
        self.series = NodeSeries(nodes=nodes)

    def on_event(self, node: str, event: dict[str, Any]) -> None:
        at = placed(event, self.wall_start_ns)
        if at is None:
            self.unplaced += 1
            return
        self.end = max(self.end, at)
        if "role" in event:
            self.roles.append((at, event["node"], event["term"], event["role"]))
        elif isinstance(event.get("commit_index"), int):
            self.commits.setdefault(node, Thinned(COMMIT_POINTS)).add((at, event["commit_index"]))

    def done(self) -> None:
        leaderships, candidacies = leaders_of(self.roles)
        self.series = NodeSeries(leaderships, candidacies, self.nodes,
                                 {node: points.items for node, points in self.commits.items()},
                                 self.unplaced, self.end)
