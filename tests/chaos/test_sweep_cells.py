"""Each sweep cell, one run, gets the verdict its design predicts; controls come back invalid.

A cell that expects `valid` must end valid; a must-fail control must end invalid with witnesses in
its report (if one comes back valid, the harness lost its teeth); a cell with a known risk may end
either way. Every run's faults bit, and the run leaves nothing running.
"""

from __future__ import annotations

import pytest
from chaosrun import SEED, CellRuns, leftovers, read_json

from harness.sweeps.matrix import Cell

pytestmark = [pytest.mark.docker, pytest.mark.chaos]


def test_the_cell_gets_the_verdict_it_expects(cell_runs: CellRuns, cell: Cell) -> None:
    row = cell_runs.row(cell.name)
    run_dir = cell_runs.run_dir(cell.name)
    test = read_json(run_dir / "test.json")
    assert leftovers(test["run_id"]) == []
    assert test.get("nemesis_errors", []) == [], test["nemesis_errors"]
    assert row.outcome in (("pass", "known-risk") if cell.known_risk else ("pass",)), row.message
    assert {f["family"] for f in row.faults} == set(cell.families), "every family of the cell ran"
    assert sum(f["bit"] for f in row.faults) >= 1, f"no fault bit: {row.faults}"
    if len(row.faults) == 1:
        assert row.faults[0]["bit"] >= 1, f"the fault did not bite: {row.faults}"
    if row.verdict == "invalid":
        verdict = read_json(run_dir / "results.json")
        report = (run_dir / "report.html").read_text()
        for name in row.anomalies:
            assert verdict["checks"][name]["witnesses"], name
            assert f'id="witness-{name}-1"' in report
    assert f"--seed {SEED}" in (row.reproduce or ""), "the run says how to repeat it"
