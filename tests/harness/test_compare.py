"""`harness compare`: a row per mode from a checked results folder, the table, and its flags."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from harness.sweeps.compare import summarize, table

REPO = Path(__file__).resolve().parents[2]


def folder(tmp_path: Path, mode: str, lost: int) -> Path:
    run_dir = tmp_path / mode
    run_dir.mkdir()
    ops = [{"index": 0, "time": 1, "type": "invoke", "process": 0, "f": "append", "value": {"id": "p0-0"}},
           {"index": 1, "time": 2, "type": "ok", "process": 0, "f": "append",
            "value": {"id": "p0-0", "log_index": 0, "term": 1}},
           {"index": 2, "time": 3, "type": "invoke", "process": 0, "f": "append", "value": {"id": "p0-1"}},
           {"index": 3, "time": 4, "type": "info", "process": 0, "f": "append", "value": {"id": "p0-1"},
            "error": "timeout"}]
    (run_dir / "history.jsonl").write_text("".join(json.dumps(op) + "\n" for op in ops))
    faults = [{"ops": {"ok": 3, "fail": 1, "info": 0}, "longest_no_append_s": 2.5, "consumer_stall_s": 0.4},
              {"ops": {"ok": 1, "fail": 0, "info": 3}, "longest_no_append_s": 4.0, "consumer_stall_s": 1.2}]
    test = {"mode": mode, "time_limit": 2.0, "fault_log": {"faults": faults}}
    (run_dir / "test.json").write_text(json.dumps(test))
    checks = {"lost": {"valid": not lost, "count": lost}, "consumed-then-lost": {"valid": True, "count": 0},
              "recovered": {"valid": True, "count": 2, "informational": True},
              "divergence": {"valid": not lost, "count": lost}, "hole": {"valid": True, "count": 0}}
    (run_dir / "results.json").write_text(json.dumps({"valid": not lost, "checks": checks}))
    return run_dir


def test_a_row_says_what_was_acknowledged_lost_and_how_available_the_design_stayed(tmp_path):
    row = summarize(folder(tmp_path, "master-slave-async", lost=7))
    assert row["mode"] == "master-slave-async" and row["verdict"] == "INVALID"
    assert (row["acknowledged"], row["lost"], row["consumed-then-lost"], row["recovered"]) == (1, 7, 0, 2)
    assert row["other"] == {"divergence": 7}
    assert row["ok_share_in_faults"] == 0.5  # 4 ok of 8 ops completed during the faults
    assert (row["longest_outage_s"], row["consumer_stall_s"], row["throughput"]) == (4.0, 1.2, 0.5)


def test_the_table_lines_up_every_mode_and_names_each_report(tmp_path):
    rows = [summarize(folder(tmp_path, "dledger", 0)), summarize(folder(tmp_path, "master-slave-async", 3))]
    text = table(rows).splitlines()
    assert text[0].split()[:4] == ["mode", "verdict", "acked", "lost"]
    assert text[1].split()[:4] == ["dledger", "valid", "1", "0"]
    assert text[2].split()[:4] == ["master-slave-async", "INVALID", "1", "3"]
    assert text[0].index("lost") == text[1].index("0", text[0].index("lost"))  # aligned columns
    assert text[-1] == f"master-slave-async: {tmp_path / 'master-slave-async' / 'report.html'}"


def test_unknown_modes_are_refused_before_anything_runs(tmp_path):
    command = [sys.executable, "-m", "harness", "compare", "--modes", "dledger,raft",
               "--results-dir", str(tmp_path)]
    done = subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=60)
    assert done.returncode == 254 and "--modes: unknown raft" in done.stderr
    assert list(tmp_path.iterdir()) == []


def test_compare_runs_each_mode_with_one_seed_and_writes_the_table(tmp_path, monkeypatch, capsys):
    import argparse

    from harness.chaos import run
    from harness.sweeps import compare

    calls = []

    def fake_run_test(args, faults, name, seed):
        calls.append((args.mode, args.read_mode, faults, name, seed))
        return (1 if args.mode == "master-slave-async" else 0), folder(tmp_path, args.mode, 0)

    monkeypatch.setattr(run, "run_test", fake_run_test)
    monkeypatch.setattr(compare, "connect", lambda: argparse.Namespace(close=lambda: None))
    parser = argparse.ArgumentParser()
    compare.add_arguments(parser)
    args = parser.parse_args(["--nemesis", "kill", "--seed", "9", "--results-dir", str(tmp_path / "results")])
    assert compare.run(args) == 0
    assert [c[0] for c in calls] == ["dledger", "master-slave-sync", "master-slave-async"]
    assert [c[1] for c in calls] == ["mixed", "committed", "committed"]
    assert {c[4] for c in calls} == {9} and calls[0][2] == ["kill"]
    assert calls[2][3] == "compare-master-slave-async-kill"
    (written,) = (tmp_path / "results" / "compare").iterdir()
    assert [row["mode"] for row in json.loads((written / "compare.json").read_text())["rows"]] == [
        "dledger", "master-slave-sync", "master-slave-async"]
    assert (written / "compare.txt").read_text().strip() in capsys.readouterr().out
