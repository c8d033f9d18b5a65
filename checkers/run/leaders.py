"""Who led when: the one model of leadership over a run, from the nodes' role lines.

The fault log asks it who led when a fault began and how often leadership moved; the report
draws it (the leader plot) and times witnesses by it. A node event is placed on the history's
time line by its `real_ns` (the machine's wall clock, free of the clock nemesis's offset)
minus test.json's `history_wall_ns`; lines without `real_ns` cannot be placed.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

NS = 1e9
Role = tuple[float, str, int, str]  # (time s, node, term, role)


@dataclass(frozen=True)
class Leadership:
    """`node` led `term` from `start` until `end` (s): its own next role line, or the election
    of a later term's leader elsewhere; None when neither came."""

    node: str
    term: int
    start: float
    end: float | None


@dataclass
class Leaders:
    """Every leadership, by start, and every candidacy `(time s, node, term)`, in time order."""

    leaderships: list[Leadership] = field(default_factory=list)
    candidacies: list[tuple[float, str, int]] = field(default_factory=list)

    def leader_at(self, at: float) -> str | None:
        """The leader of the highest term elected by time `at`."""
        elected = [(ls.term, ls.start, ls.node) for ls in self.leaderships if ls.start <= at]
        return max(elected)[2] if elected else None

    def changes(self, start: float, end: float) -> int:
        """Elections in (start, end] that put a different node in charge than the one before."""
        previous = self.leader_at(start)
        count = 0
        for ls in self.leaderships:
            if start < ls.start <= end:
                count += ls.node != previous
                previous = ls.node
        return count

    def total_changes(self) -> int:
        """Leader changes after the first leader of the run was elected."""
        return self.changes(self.leaderships[0].start, float("inf")) if self.leaderships else 0

    def elections(self, start: float = float("-inf"), end: float = float("inf")) -> int:
        """Distinct terms in which some node stood as candidate in (start, end]."""
        return len({term for at, _node, term in self.candidacies if start < at <= end})

    def elected(self, node: str, term: int) -> float | None:
        """When `node` became leader of `term`, if it did."""
        return next((ls.start for ls in self.leaderships if ls.node == node and ls.term == term), None)


def placed(event: dict[str, Any], wall_start_ns: int) -> float | None:
    """Seconds on the history's time line of a node event, or None when it has no `real_ns`."""
    real_ns = event.get("real_ns")
    return (real_ns - wall_start_ns) / NS if isinstance(real_ns, int) else None


def leaders_of(roles: list[Role]) -> tuple[list[Leadership], list[tuple[float, str, int]]]:
    """The leaderships and candidacies of `roles`, in any order."""
    roles = sorted(roles)
    return _leaderships(roles), [(at, node, term) for at, node, term, role in roles if role == "candidate"]


def _leaderships(roles: list[Role]) -> list[Leadership]:
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
    return sorted(done, key=lambda ls: (ls.start, ls.term, ls.node))
