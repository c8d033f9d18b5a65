"""The run's phases without Docker: `harness.chaos.run.run_test` drives a fake system
(tests/harness/fakesystem.py) end to end — setup, workload with the kill family, heal, catch-up, final
reads, collect, check (by the session's warm checker service), teardown, report — and the results folder
it leaves is complete; its must-fail twin loses an acknowledged append, and an interrupted run ends
unknown, torn down."""

from __future__ import annotations

import argparse
import json
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from harness.chaos import flags
from harness.chaos.run import run_test
from tests.harness.fakesystem import FakeSystem, InterruptingSystem, LosingSystem

SEED = 7
NODES = ["n1", "n2", "n3"]
# The kill family fires at least once in 3 s: the schedule's first fault starts one interval in, lasts
# 0.75-1.25 intervals and must stop half an interval before the time limit (harness.chaos.generator).
KILL_FLAGS = ["--nemesis", "kill", "--time-limit", "3", "--nemesis-interval", "1", "--nodes", "3",
              "--rate", "200"]


def fake_args(tmp_path: Path, system: FakeSystem, extra: list[str]) -> argparse.Namespace:
    """The run's flags as `harness run` validates them, with `system` under test."""
    return flags.parsed(["--results-dir", str(tmp_path / "results"), "--seed", str(SEED), *extra],
                        "python -m harness run", system)


def run_killed(system: FakeSystem, tmp_path: Path) -> tuple[int, Path]:
    """`run_test` of `system` under the kill family (KILL_FLAGS): its exit code and results folder."""
    args = fake_args(tmp_path, system, KILL_FLAGS)
    return run_test(args, args.faults, system.name, SEED)


def lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def open_invokes(history: list[dict[str, Any]]) -> dict[Any, str]:
    """Processes whose last invoke has no completion; AssertionError on a completion without an invoke."""
    open_: dict[Any, str] = {}
    for line in history:
        if line["type"] == "invoke":
            assert line["process"] not in open_, line
            open_[line["process"]] = line["f"]
        else:
            assert open_.pop(line["process"], None) == line["f"], line
    return open_


@pytest.mark.spark
def test_a_fake_system_runs_every_phase_and_its_folder_is_complete(via_checker_service: Path,
                                                                   tmp_path: Path) -> None:
    system = FakeSystem()
    code, run_dir = run_killed(system, tmp_path)

    assert code == 0
    test = json.loads((run_dir / "test.json").read_text())
    assert set(test["phases"]) >= {"setup", "workload", "heal", "catch-up", "final-reads", "collect"}
    assert test["system"] == "fake"
    assert test["inputs"] == ["history", "final-logs"]
    assert test["nemesis"] == ["kill"]
    assert test["first_leader"] == "n1"
    assert "interrupted" not in test and "error" not in test and "heal_leftovers" not in test
    outcomes = test["client_outcomes"]
    assert outcomes["ok"] > 100 and outcomes["info"] == 0
    assert outcomes["fail"] > 0  # the killed node refused its clients
    kills = [f for f in test["fault_log"]["faults"] if f["family"] == "kill"]
    assert kills and all(f["targets"] for f in kills)

    history = lines(run_dir / "history.jsonl")
    assert [line["index"] for line in history] == list(range(len(history)))
    assert open_invokes(history) == {}
    nemesis = [line for line in history if line["process"] == "nemesis" and line["type"] == "info"]
    assert {line["f"] for line in nemesis} == {"kill", "start"}
    assert all(line["value"]["targets"] for line in nemesis if line["f"] == "kill")

    acked = {line["value"]["id"]: line["value"]["log_index"]
             for line in history if line["f"] == "append" and line["type"] == "ok"}
    assert sorted(p.name for p in (run_dir / "final").iterdir()) == [f"{n}.jsonl" for n in NODES]
    for node in NODES:
        final = lines(run_dir / "final" / f"{node}.jsonl")
        assert [e["log_index"] for e in final] == list(range(len(final)))
        assert {e["id"]: e["log_index"] for e in final} == acked  # every append landed where acknowledged
        assert test["final_logs"][node] == len(final)
    assert (run_dir / "nodes" / "n1" / "node.log").is_file()  # what the fake's collect writes

    results = json.loads((run_dir / "results.json").read_text())
    assert results["valid"] is True
    assert results["checks"]["lost"]["valid"] is True
    assert (run_dir / "report.html").is_file()

    cluster = system.cluster
    assert cluster is not None and cluster.teardowns == 1
    ops = [op for op, _ in cluster.calls]
    assert "kill" in ops and "start" in ops


@pytest.mark.spark
def test_a_system_that_loses_an_acknowledged_append_is_invalid(via_checker_service: Path,
                                                              tmp_path: Path) -> None:
    system = LosingSystem()
    code, run_dir = run_killed(system, tmp_path)

    assert code == 1
    results = json.loads((run_dir / "results.json").read_text())
    assert results["valid"] is False
    lost = results["checks"]["lost"]
    assert lost["valid"] is False and lost["count"] >= 1
    assert (run_dir / "report.html").is_file()
    assert system.cluster is not None and system.cluster.teardowns == 1


@pytest.fixture
def ctrl_c_interrupts() -> Iterator[None]:
    """SIGINT raises KeyboardInterrupt in the main thread, as it does in `python -m harness run`."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


def test_an_interrupted_run_is_unknown_and_torn_down(ctrl_c_interrupts: None, tmp_path: Path) -> None:
    time_limit = 30.0
    system = InterruptingSystem(after=40)
    args = fake_args(tmp_path, system, [*KILL_FLAGS[:2], "--time-limit", f"{time_limit:g}", "--nodes", "3",
                                        "--rate", "200"])

    code, run_dir = run_test(args, args.faults, "fake-interrupted", SEED)

    assert code == 2
    assert args.interrupted is True
    cluster = system.cluster
    assert cluster is not None and cluster.interrupted_at == 39
    assert cluster.teardowns == 1 and cluster.calls[-1] == ("teardown", None)
    test = json.loads((run_dir / "test.json").read_text())
    assert test["interrupted"] is True
    assert test["phases"]["workload"] < time_limit / 3  # the interrupt cut the workload short
    assert set(test["phases"]) >= {"setup", "workload", "heal", "collect"}
    assert "final-reads" not in test["phases"] and "final_logs" not in test
    assert "fault_log" in test
    history = lines(run_dir / "history.jsonl")  # the prefix: every op it holds completed
    assert open_invokes(history) == {}
    assert sum(1 for line in history if line["f"] == "append" and line["type"] == "ok") >= 40
    assert not (run_dir / "results.json").exists() and not (run_dir / "report.html").exists()
