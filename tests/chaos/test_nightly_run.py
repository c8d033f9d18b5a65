"""`harness nightly` end to end against containers: a one-cell sweep of a must-fail control comes
back invalid, which passes the sweep (exit 0). The run is the cell's own run for its cell test
(tests/chaos/test_mode_runs.py): `CellRuns` runs that cell through this command."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from chaosrun import BY_NIGHTLY, CellRuns, leftovers

pytestmark = [pytest.mark.docker, pytest.mark.chaos]
CELL = "master-slave-async-isolate-lose-sync-3n"


def test_a_one_cell_sweep_runs_a_control_against_containers(cell_runs: CellRuns) -> None:
    assert CELL in BY_NIGHTLY
    done, out = cell_runs.nightly(CELL)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    summary = json.loads((out / "summary.json").read_text())
    [row] = summary["rows"]
    assert (row["cell"], row["verdict"], row["outcome"], row["control"]) == (CELL, "invalid", "pass", True)
    assert row["anomalies"]["lost"] > 0
    assert (out / row["report"]).is_file() and row["throughput"] > 0 and row["to_verdict_s"] > 0
    assert row["faults"][0]["family"] == "isolate-lose" and row["faults"][0]["bit"] >= 1
    run_id = json.loads((Path(row["run_dir"]) / "test.json").read_text())["run_id"]
    assert leftovers(run_id) == []
    assert f'href="{row["report"]}"' in (out / "summary.html").read_text()
    suite = ET.parse(out / "junit.xml").getroot().find("testsuite")
    assert suite is not None
    assert (suite.get("tests"), suite.get("failures"), suite.get("errors")) == ("1", "0", "0")
    assert f"nightly [1/1] pass {CELL} seed 4" in done.stderr
