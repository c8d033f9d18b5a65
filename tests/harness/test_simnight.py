"""The nightly sweep's simulator stage: seeds from the night's seed, a row per violation with its replay."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from harness.sweeps import simulator


def test_a_clean_stage_is_one_passing_row_naming_the_seeds_it_ran(tmp_path: Path) -> None:
    [row] = simulator.run_simulator(4242, 2.0, tmp_path)
    figures = json.loads((tmp_path / "simulator.json").read_text())
    assert figures["start"] == 4242 and figures["seeds"] > 0 and not figures["violations"]
    assert (row.outcome, row.verdict, row.seed, row.cell) == ("pass", "valid", 4242,
                                                              f"simulator-seeds-{figures['seeds']}")


def test_each_violating_seed_is_a_failing_row_whose_message_replays_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    replay = "python -m nodes simulate --seed 17 --steps 4000 --nodes 3 --faults all --flush sync"

    def fake_run(argv: list[str], stdout: object, stderr: object) -> subprocess.CompletedProcess[str]:
        report = Path(argv[argv.index("--json") + 1])
        report.write_text(json.dumps({"seeds": 40, "violations": [{"seed": 17, "kind": "election safety"},
                                                                   {"seed": 30, "kind": "liveness"}]}))
        stdout.write(f"seed 17: VIOLATION election safety\nreplay: {replay}\n")  # type: ignore[attr-defined]
        return subprocess.CompletedProcess(argv, 1)

    monkeypatch.setattr(simulator.subprocess, "run", fake_run)
    summary, first, second = simulator.run_simulator(10, 1.0, tmp_path)
    assert summary.outcome == "pass" and summary.cell == "simulator-seeds-40"
    assert (first.outcome, first.verdict, first.seed, first.reproduce) == ("fail", "invalid", 17, replay)
    assert first.message == f"simulator seed 17: election safety; replay: {replay}"
    assert second.message and "simulate-many --start 30" in second.message  # not printed in full: a hint


def test_a_simulator_that_writes_no_report_is_a_failing_row(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(simulator.subprocess, "run",
                        lambda argv, stdout, stderr: subprocess.CompletedProcess(argv, 255))
    [row] = simulator.run_simulator(1, 1.0, tmp_path)
    assert row.outcome == "fail" and row.verdict == "error" and "exit 255" in (row.message or "")
