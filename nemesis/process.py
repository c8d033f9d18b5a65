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


def each(act: Callable[[str], None]) -> Callable[[list[str]], dict[str, Any]]:
    """A strike that does `act` to every victim and has nothing to add to the history value."""
    def strike(victims: list[str]) -> dict[str, Any]:
        for node in victims:
            act(node)
        return {}
    return strike


def undo_each(hurt: list[str], undo: Callable[[str], None]) -> dict[str, Any]:
    """A fault's stop: `undo` each node of `hurt` in name order, then empty it; the history value."""
    undone = sorted(hurt)
    for node in undone:
        undo(node)
    hurt.clear()
    return {"targets": undone}


class UndoEach:
    """What a fault that undoes node by node shares: `stop` undoes (`_undo`) each node it hurt
    since the last stop, in name order; `heal` undoes every node; `leftovers` asks each node
    what it still shows (`_leftover`)."""

    nodes: Nodes
    hurt: list[str]
    _undo: Callable[[str], None]
    _leftover: Callable[[str], str | None]

    def stop(self) -> dict[str, Any]:
        return undo_each(self.hurt, self._undo)

    def heal(self) -> None:
        for node in self.nodes.names:
            self._undo(node)
        self.hurt.clear()

    def leftovers(self) -> list[str]:
        return [text for node in self.nodes.names if (text := self._leftover(node))]


class ProcessFault(UndoEach):
    """`hurt` the chosen targets at start (what it returns joins the history value); `undo` each
    one at stop and on heal."""

    def __init__(self, nodes: Nodes, targets: tuple[str, ...], hurt: Callable[[list[str]], dict[str, Any]],
                 undo: Callable[[str], None], leftover: Callable[[str], str | None]) -> None:
        self.nodes = nodes
        self.targets = targets
        self._hurt = hurt
        self._undo = undo
        self._leftover = leftover
        self.hurt = []

    def start(self, rng: random.Random) -> dict[str, Any]:
        spec, victims = pick(self.nodes, self.targets, rng)
        detail = self._hurt(victims)
        self.hurt += [node for node in victims if node not in self.hurt]
        return {"target": spec, "targets": victims, **detail}


NOT_RUNNING = "{}: the node process is not running"  # a leftover of a node that should run


def not_running(nodes: Nodes) -> Callable[[str], str | None]:
    return lambda node: None if nodes.running(node) else NOT_RUNNING.format(node)


class StartedWithin:
    """What an instant fault that starts its victims again inside its own start shares (bounce,
    disk): its stop undoes nothing, its heal starts every node left down."""

    nodes: Nodes

    def stop(self) -> dict[str, Any]:
        return {"targets": []}

    def heal(self) -> None:
        for node in self.nodes.names:
            self.nodes.start(node)

    def leftovers(self) -> list[str]:
        gone = not_running(self.nodes)
        return [text for node in self.nodes.names if (text := gone(node))]
