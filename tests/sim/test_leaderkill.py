"""The leaderkill fault: while a spell lasts, every new leader is killed soon after its election."""

from __future__ import annotations

import random
from typing import Any

import pytest

from nodes.election import Role
from nodes.logic import Ready
from nodes.sim import cluster
from nodes.sim.config import SimConfig
from nodes.sim.faults import KILL_AFTER_MS, KILL_DOWN_MS
from nodes.sim.liveness import Liveness
from nodes.sim.nodes import Nodes


class _WatchedNodes(Nodes):
    """Nodes that record elections (and whether a spell lasted), step-downs, crashes and starts."""

    def __init__(self, *args: Any) -> None:
        self.elected: list[tuple[float, str, bool]] = []  # (time, node, in a spell)
        self.stepped_down: list[tuple[float, str]] = []
        self.crashed: list[tuple[float, str, bool]] = []  # (time, node, it led)
        self.started: dict[str, list[float]] = {}
        super().__init__(*args)

    def applied(self, node: str, ready: Ready) -> None:
        for change in ready.role_changes:
            if change.role is Role.LEADER:
                self.elected.append((self.loop.now, node, self.faults.killing() is not None))
            else:
                self.stepped_down.append((self.loop.now, node))
        super().applied(node, ready)

    def crash(self, node: str, power_loss: bool, downtime: float, rng: random.Random | None = None) -> None:
        core = self.cores[node]
        if core is not None:
            self.crashed.append((self.loop.now, node, core.role is Role.LEADER))
        super().crash(node, power_loss, downtime, rng)

    def start(self, name: str) -> None:
        self.started.setdefault(name, []).append(self.loop.now)
        super().start(name)


class _WatchedLiveness(Liveness):
    """Liveness that records when it healed."""

    healed_at = float("inf")

    def heal(self) -> None:
        self.healed_at = self.loop.now
        super().heal()


def _first_after(times: list[float], start: float) -> float:
    return min((t for t in times if t >= start), default=float("inf"))


def test_every_leader_elected_in_a_spell_dies_within_the_window_and_comes_back(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cluster, "Nodes", _WatchedNodes)
    monkeypatch.setattr(cluster, "Liveness", _WatchedLiveness)
    low, high = KILL_AFTER_MS
    kills = 0
    for seed, nodes in ((1, 3), (2, 5), (3, 3)):
        run = cluster.Simulation(SimConfig(seed=seed, nodes=nodes, faults=("leaderkill",), steps=4000))
        result = run.run()
        assert result.violation is None, result.summary()
        sim, live = run.nodes, run.liveness
        assert isinstance(sim, _WatchedNodes) and isinstance(live, _WatchedLiveness)
        for elected_at, node, in_spell in sim.elected:
            died_at = _first_after([t for t, n, _ in sim.crashed if n == node], elected_at)
            led_until = min(_first_after([t for t, n in sim.stepped_down if n == node], elected_at), died_at)
            if in_spell and elected_at + high < min(live.healed_at, led_until):
                pytest.fail(f"seed {seed}: {node} led from {elected_at:.1f} to {led_until:.1f} in a spell")
            if in_spell and died_at < live.healed_at and died_at == led_until:
                assert low <= died_at - elected_at <= high
                kills += 1
        # no other fault runs: only leaders die (until healing restarts a follower), and each
        # comes back after its downtime, or at healing
        for died_at, node, led in sim.crashed:
            if died_at >= live.healed_at:
                continue
            assert led
            back = _first_after(sim.started[node], died_at) - died_at
            assert back <= KILL_DOWN_MS[1] and (back >= KILL_DOWN_MS[0] or died_at + back == live.healed_at)
    assert kills >= 6
