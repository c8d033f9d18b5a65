"""The deterministic simulator: random seeds across sizes and fault mixes, replay, and known failures."""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

import pytest

from nodes import election
from nodes.core import Core
from nodes.election import Role
from nodes.messages import ReadMode
from nodes.sim import many
from nodes.sim.cli import flush_policy
from nodes.sim.cli import run as simulate_run
from nodes.sim.cluster import run_seed
from nodes.sim.config import SimConfig
from nodes.sim.faults import parse_faults
from tests.support.simsearch import SEEDS, first_violation

SIZES = (3, 5, 7)
SEEDS_PER_CASE = 8  # 3 sizes x 19 mixes x 8 = 456 seeds


@pytest.mark.parametrize("mix", many.MIXES)
@pytest.mark.parametrize("nodes", SIZES)
def test_random_seeds_find_no_violation_with_sync_flush(nodes: int, mix: str) -> None:
    start = 1000 * nodes + 100 * many.MIXES.index(mix)
    for seed in range(start, start + SEEDS_PER_CASE):
        result = run_seed(SimConfig(seed=seed, nodes=nodes, faults=parse_faults(mix)))
        assert result.violation is None, result.summary()
        assert result.stats["probe-ok"] == 1  # liveness: after healing a fresh append committed everywhere


def test_the_same_seed_replays_byte_for_byte() -> None:
    config = SimConfig(seed=42, nodes=5, steps=3000)
    assert run_seed(config).summary() == run_seed(config).summary()
    cmd = [sys.executable, "-m", "nodes", "simulate", "--seed", "42", "--nodes", "3", "--steps", "1500"]
    first = subprocess.run(cmd, capture_output=True, check=True, timeout=120).stdout
    second = subprocess.run(
        cmd, capture_output=True, check=True, timeout=120, env={**os.environ, "PYTHONHASHSEED": "123"}
    ).stdout
    assert first == second and b"no violation" in first


def test_async_flush_loses_committed_entries_on_power_loss_and_sync_never_does() -> None:
    losses = []
    for seed in range(60):
        cfg = dict(seed=seed, nodes=3, faults=("powerloss",), steps=3000)
        result = run_seed(SimConfig(durability=flush_policy("async"), **cfg))
        if result.violation is not None:
            losses.append(result.violation.kind)
            assert run_seed(SimConfig(durability=flush_policy("sync"), **cfg)).violation is None
    assert losses, "async flush with power loss never lost a committed entry in 60 seeds"
    assert set(losses) <= {"leader completeness", "state machine safety", "committed entry lost"}


def test_a_broken_vote_rule_is_caught_within_1000_seeds(monkeypatch: pytest.MonkeyPatch) -> None:
    # vote rules 3-4 broken: votes granted without the log check
    monkeypatch.setattr(election, "check_ledger", lambda req, view: None)
    for seed in range(1000):
        result = run_seed(SimConfig(seed=seed, nodes=SIZES[seed % 3], steps=3000))
        if result.violation is not None:
            break
    else:
        pytest.fail("granting votes without the log check went unnoticed for 1000 seeds")
    assert result.violation.kind in (
        "leader completeness",
        "state machine safety",
        "committed entry lost",
        "log matching",
        "acknowledged append",
        "read-index read",
    )
    report = result.summary()
    assert f"seed {seed}" in report and "VIOLATION at step" in report and "trace of the last events" in report


def test_a_read_index_read_without_the_quorum_round_breaks_read_after_read_order(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    client_read = Core.client_read

    def at_once(self: Core, rid: int, first: int, last: int, mode: ReadMode, now: float) -> None:
        if mode is ReadMode.READ_INDEX and self.role is Role.LEADER:  # broken: no leadership check
            self._complete_read(rid, first, last)
        else:
            client_read(self, rid, first, last, mode, now)

    monkeypatch.setattr(Core, "client_read", at_once)
    order = "a linearizable read completed before this one was invoked"
    for seed in range(300):  # read-heavy, so few acknowledged appends and the read order is what catches it
        config = SimConfig(seed=seed, nodes=SIZES[seed % 3], steps=3000, append_share=0.05)
        result = run_seed(config)
        if result.violation is not None and order in result.violation.detail:
            break
    else:
        pytest.fail("read-index reads served without a quorum round never broke read-after-read order")
    assert result.violation.kind == "read-index read"
    monkeypatch.undo()
    assert run_seed(config).violation is None


def test_appends_a_deposed_leader_never_answers_are_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    leave = Core._leave_leadership

    def forgetting(self: Core) -> None:
        self._pending.clear()  # broken: a deposed leader never answers its pending appends
        leave(self)

    monkeypatch.setattr(Core, "_leave_leadership", forgetting)
    for seed in range(60):
        result = run_seed(SimConfig(seed=seed, nodes=SIZES[seed % 3]))
        if result.violation is not None:
            break
    else:
        pytest.fail("appends a deposed leader never answered went unnoticed for 60 seeds")
    # a request its node never answers breaks the node's own timeout first, else liveness
    assert result.violation.kind in ("answer in time", "liveness")
    assert "got no answer" in result.violation.detail


def test_simulate_exits_1_with_seed_step_and_trace_on_a_violation(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(election, "check_ledger", lambda req, view: None)
    found = first_violation(SEEDS)
    assert found is not None
    c = found.config
    args = argparse.Namespace(
        seed=c.seed, nodes=c.nodes, steps=c.steps, faults=c.faults, flush="sync", profile="fast", clients=3
    )
    assert simulate_run(args) == 1
    out = capsys.readouterr().out
    assert "VIOLATION" in out and f"replay: python -m nodes simulate --seed {c.seed} " in out


@pytest.mark.parametrize(
    "argv",
    [
        ["--seed", "x"],
        ["--seed", "1", "--nodes", "0"],
        ["--seed", "1", "--faults", "meteor"],
        ["--seed", "1", "--flush", "maybe"],
        [],
    ],
)
def test_bad_arguments_exit_254(argv: list[str]) -> None:
    proc = subprocess.run([sys.executable, "-m", "nodes", "simulate", *argv], capture_output=True, timeout=60)
    assert proc.returncode == 254 and b"error" in proc.stderr


def test_simulate_many_reports_seeds_per_second(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "sim.json"
    args = argparse.Namespace(
        budget=60.0,
        seeds=6,
        start=0,
        nodes="3,5",
        mixes="partition;crash",
        jobs=1,
        json=out,
        show=1,
        steps=1500,
        flush="sync",
        profile="fast",
        clients=2,
        engine="interpreted",
    )
    assert many.run(args) == 0
    assert "6 seeds" in capsys.readouterr().out and "seeds_per_second" in out.read_text()
