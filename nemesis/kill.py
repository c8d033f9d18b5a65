"""Crash faults: SIGKILL node processes, then start them again (recovery from whatever was on disk)."""

from __future__ import annotations

import random
from typing import Any

from nemesis.base import Nodes

TARGETS = ("one", "leader", "minority")


class KillNemesis:
    """Kills one random node, the leader, or a random minority; `stop` restarts them."""

    name = "kill"
    start_f = "kill"
    stop_f = "start"

    def __init__(self, nodes: Nodes, targets: tuple[str, ...] = ("one", "leader", "minority")) -> None:
        unknown = set(targets) - set(TARGETS)
        if unknown:
            raise ValueError(f"unknown kill target(s) {sorted(unknown)}; choose from {list(TARGETS)}")
        self.nodes = nodes
        self.targets = targets
        self.killed: list[str] = []

    def victims(self, target: str, rng: random.Random) -> list[str]:
        names = self.nodes.names
        if target == "leader":
            return [self.nodes.leader() or rng.choice(names)]
        if target == "minority":
            return sorted(rng.sample(names, max(1, (len(names) - 1) // 2)))
        return [rng.choice(names)]

    def start(self, rng: random.Random) -> Any:
        victims = self.victims(rng.choice(self.targets), rng)
        for node in victims:
            self.nodes.kill(node)
            if node not in self.killed:
                self.killed.append(node)
        return victims

    def stop(self) -> Any:
        restarted = list(self.killed)
        for node in restarted:
            self.nodes.start(node)
        self.killed.clear()
        return restarted

    def heal(self) -> None:
        self.stop()
