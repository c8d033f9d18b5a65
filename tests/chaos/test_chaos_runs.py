"""End to end: `python -m harness run` against containers, checked and reported.

A healthy cluster under kills and partitions passes, and under every family at once (a sweep
cell); a cluster weakened on purpose (DLedger's unsafe reads, which show uncommitted entries) is
caught; an interrupted run leaves a usable results folder and nothing running. The must-fail
controls are sweep cells (test_sweep_cells.py).
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys

import pytest
import tenacity
from chaosrun import REPO, CellRuns, harness_run, leftovers, only_run_dir, read_json

from harness.chaos.generator import Slotted, nemesis_schedule

pytestmark = [pytest.mark.docker, pytest.mark.chaos]


@pytest.fixture
def results(tmp_path, via_checker_service):
    """The run's results folder; its check goes to the session's warm checker service."""
    return tmp_path / "results"


def test_short_chaos_run_is_valid_and_complete(results):
    done = harness_run(results, "--nodes", "3", "--time-limit", "20", "--nemesis", "kill,partition",
                       "--nemesis-interval", "4", "--rate", "300", "--seed", "11", "--name", "short")
    assert done.returncode == 0, done.stdout + done.stderr
    run_dir = only_run_dir(results)
    verdict = read_json(run_dir / "results.json")
    assert verdict["valid"] is True
    assert "valid: true" in done.stdout and f"report: {run_dir}/report.html" in done.stdout
    assert "checked by the checker service at" in done.stderr, "the session's warm service checked it"
    stats = verdict["stats"]
    assert stats["history_preloaded"] and stats["final_logs_preloaded"] and stats["screen_preloaded"], (
        "the service loaded the history and the final logs and screened them while the run ended"
    )
    log = (run_dir / "harness.log").read_text()
    assert "history loaded for the check in the checker service" in log
    assert "finals loaded for the check in the checker service" in log
    for name in ("test.json", "history.jsonl", "harness.log", "results.json", "report.html",
                 "latency-raw.png", "latency-quantiles.png", "rate.png"):
        assert (run_dir / name).stat().st_size > 0, name
    for node in ("n1", "n2", "n3"):
        assert (run_dir / "final" / f"{node}.jsonl").stat().st_size > 0
        for name in ("node.log", "events.jsonl"):
            assert (run_dir / "nodes" / node / name).stat().st_size > 0
        assert any((run_dir / "nodes" / node / "data").iterdir()), "store files collected"
    test = read_json(run_dir / "test.json")
    assert test["seed"] == 11 and "--seed 11" in test["reproduce"]
    ops = [json.loads(line) for line in (run_dir / "history.jsonl").read_text().splitlines()]
    faults = {op["f"] for op in ops if op["process"] == "nemesis"}
    assert faults & {"kill", "start-partition"}, "the nemesis acted"
    assert sum(1 for op in ops if op["type"] == "ok") > 500
    assert leftovers(test["run_id"]) == []


UNSAFE_SEED = 2  # its isolation lasts 12.4 s: DLedger's 6 s failover and a vote round, with room under load


def test_unsafe_reads_of_an_isolated_leader_are_caught(results):
    """DLedger's timing keeps the isolated leader serving unsafe reads of entries it alone holds for
    6 s; the others must elect a new leader before the heal, so those entries are then cut."""
    (start, stop) = nemesis_schedule(UNSAFE_SEED, [Slotted("partition", 1.0, False, None)], 10, 30)
    assert stop.at - start.at > 12, "the isolation outlasts a failover with DLedger's timing"
    done = harness_run(results, "--nodes", "3", "--time-limit", "30", "--nemesis", "partition",
                       "--partition-shapes", "isolate-leader", "--nemesis-interval", "10",
                       "--timing", "dledger", "--read-mode", "unsafe", "--read-fraction", "0.8",
                       "--concurrency", "4n",
                       "--rate", "300", "--seed", str(UNSAFE_SEED), "--name", "unsafe")
    run_dir = only_run_dir(results)
    verdict = read_json(run_dir / "results.json")
    assert done.returncode == 1, done.stdout + done.stderr
    assert verdict["valid"] is False
    broken = {name for name, check in verdict["checks"].items() if check["valid"] is False}
    assert broken & {"divergence", "lost", "aborted-read"}, broken
    assert "INVALID" in done.stdout or "valid: false" in done.stdout
    assert leftovers(read_json(run_dir / "test.json")["run_id"]) == []


def _default_sigint() -> None:
    """Ctrl-C's default in the child even when the suite runs as a background job of a
    script (which starts with SIGINT ignored, and Python keeps an inherited SIG_IGN)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def test_interrupted_run_leaves_usable_results_and_no_containers(results, tmp_path):
    out_path, err_path = tmp_path / "stdout", tmp_path / "stderr"
    with out_path.open("w") as out, err_path.open("w") as err:
        process = subprocess.Popen(
            [sys.executable, "-m", "harness", "run", "--results-dir", str(results), "--nodes", "3",
             "--time-limit", "120", "--nemesis", "kill", "--nemesis-interval", "3", "--name", "interrupted"],
            cwd=REPO, stdout=out, stderr=err, text=True, preexec_fn=_default_sigint)
    try:
        waiting = tenacity.Retrying(stop=tenacity.stop_after_delay(600), wait=tenacity.wait_fixed(0.5),
                                    retry=tenacity.retry_if_exception_type(AssertionError), reraise=True)
        for attempt in waiting:
            with attempt:
                assert process.poll() is None, err_path.read_text()
                history = results / "latest" / "history.jsonl"
                assert history.exists() and history.read_text().count("\n") > 300
        process.send_signal(signal.SIGINT)
        process.wait(timeout=300)
    finally:
        if process.poll() is None:
            process.kill()
    run_dir = only_run_dir(results)
    err = err_path.read_text()
    assert process.returncode == 2, err + (run_dir / "harness.log").read_text()
    test = read_json(run_dir / "test.json")
    assert test["interrupted"] is True and leftovers(test["run_id"]) == []
    assert f"python -m checkers check {run_dir}" in err
    lines = (run_dir / "history.jsonl").read_text().splitlines()
    assert all(json.loads(line)["index"] == i for i, line in enumerate(lines)), "a clean, parseable prefix"
    check = subprocess.run([sys.executable, "-m", "checkers", "check", str(run_dir)], cwd=REPO,
                           capture_output=True, text=True, timeout=600)
    assert check.returncode in (0, 2), check.stdout + check.stderr
    assert (run_dir / "results.json").exists()


def test_every_family_at_once_with_sync_flush_is_valid(cell_runs: CellRuns):
    """The sweep's dledger-all-sync-3n cell (every family, two at a time, seed 4; the nightly runs
    the 5-node one too)."""
    row = cell_runs.row("dledger-all-sync-3n")
    run_dir = cell_runs.run_dir(row.cell)
    test = read_json(run_dir / "test.json")
    assert row.verdict == "valid", row.message
    assert test["nemesis_errors"] == [], test["nemesis_errors"]
    log = test["fault_log"]
    assert {f["family"] for f in log["faults"]} == set(test["faults"]), "every family ran"
    assert log["leader_changes"] >= 1 and any(f["leader_hit"] for f in log["faults"])
    stats = read_json(run_dir / "results.json")["stats"]
    assert stats["faults"] == log, "results.json carries the fault log"
    assert leftovers(test["run_id"]) == []
