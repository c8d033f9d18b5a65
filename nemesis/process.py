"""Faults on the node process itself: a signal to the chosen targets, undone by another action.

Kill (SIGKILL, then start: recovery from what was on disk), stop (SIGTERM, a graceful exit,
then start) and pause (SIGSTOP, then SIGCONT: a node that resumes still believes what it
believed when it stopped, the classic stale-leader test) share this shape.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

from nemesis.base import Nodes
from nemesis.targets import pick


class ProcessFault:
    """`hurt` each chosen target at start; `undo` each one at stop and on heal."""

    def __init__(self, nodes: Nodes, targets: tuple[str, ...], hurt: Callable[[str], None],
                 undo: Callable[[str], None], leftover: Callable[[str], str | None]) -> None:
        self.nodes = nodes
        self.targets = targets
        self._hurt = hurt
        self._undo = undo
        self._leftover = leftover
        self.hurt: list[str] = []

    def start(self, rng: random.Random) -> dict[str, Any]:
        spec, victims = pick(self.nodes, self.targets, rng)
        for node in victims:
            self._hurt(node)
            if node not in self.hurt:
                self.hurt.append(node)
        return {"target": spec, "targets": victims}

    def stop(self) -> dict[str, Any]:
        undone = sorted(self.hurt)
        for node in undone:
            self._undo(node)
        self.hurt.clear()
        return {"targets": undone}

    def heal(self) -> None:
        for node in self.nodes.names:
            self._undo(node)
        self.hurt.clear()

    def leftovers(self) -> list[str]:
        return [text for node in self.nodes.names if (text := self._leftover(node))]


def not_running(nodes: Nodes) -> Callable[[str], str | None]:
    return lambda node: None if nodes.running(node) else f"{node}: the node process is not running"
