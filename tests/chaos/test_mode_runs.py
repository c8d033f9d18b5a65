"""End to end, one short run per design under the same fault: the leader (master) is cut off
from its peers for a step while clients still reach it, then lost for good (isolate-lose).

What each design predicts, and what the run must show:
* DLedger: the isolated leader commits nothing alone, a majority elects another: valid.
* SYNC_MASTER: the isolated master answers SLAVE_NOT_AVAILABLE (recorded as info, the
  outcome unknown), the harness promotes the most advanced slave: valid.
* ASYNC_MASTER: the isolated master acknowledges writes no slave has; after the promotion
  they are gone: invalid, with `lost` witnesses (a must-fail control).
Consumers run in every mode and fail over when their node is lost. The runs are the sweep's
`<mode>-isolate-lose-sync-3n` cells (one flag set, seed 4), shared with test_sweep_cells.py.
"""

from __future__ import annotations

import json

import pytest
from chaosrun import CellRuns, leftovers, read_json

pytestmark = [pytest.mark.docker, pytest.mark.chaos]


def ops_of(run_dir):
    return [json.loads(line) for line in (run_dir / "history.jsonl").read_text().splitlines()]


def lost_leaders(ops):
    return [op["value"] for op in ops if op["f"] == "start-isolate-lose" and op["type"] != "invoke"]


def isolation_windows(ops):
    """node -> (from, to) in history ns: from 0.2 s after its isolation to its loss."""
    windows = {}
    for op in ops:
        if op["f"] == "start-isolate-lose" and op["type"] == "invoke":
            began = op["time"]
        elif op["f"] == "start-isolate-lose":
            steps = {s["step"]: s["at_s"] for s in op["value"]["steps"]}
            windows[op["value"]["targets"][0]] = (began + int((steps["isolate"] + 0.2) * 1e9),
                                                   began + int(steps["lose"] * 1e9))
    return windows


@pytest.mark.parametrize("mode, expect", [("dledger", "valid"), ("master-slave-sync", "valid"),
                                          ("master-slave-async", "invalid")])
def test_each_design_under_a_lost_isolated_leader_gets_its_predicted_verdict(cell_runs: CellRuns, mode: str,
                                                                             expect: str) -> None:
    row = cell_runs.row(f"{mode}-isolate-lose-sync-3n")
    assert row.verdict == expect, row.message
    run_dir = cell_runs.run_dir(row.cell)
    test, verdict = read_json(run_dir / "test.json"), read_json(run_dir / "results.json")
    ops = ops_of(run_dir)
    assert test["mode"] == mode and leftovers(test["run_id"]) == []
    faults = lost_leaders(ops)
    assert faults and all(f["steps"][1]["step"] == "lose" for f in faults), "the nemesis lost a leader"
    consumes = [op for op in ops if op["f"] == "consume" and op["type"] == "ok"]
    assert {op["value"]["consumer"] for op in consumes} == {0, 1}
    assert len({op["node"] for op in consumes}) >= 2, "consumers moved to another node when theirs was lost"
    if mode == "dledger":
        assert "promoted" not in faults[0] and test["read_mode"] == "mixed"
        assert verdict["stats"]["faults"]["leader_changes"] >= 1
    else:
        assert test["read_mode"] == "committed"
        promoted = faults[0]["promoted"]
        assert promoted["node"] in ("n2", "n3") and promoted["epoch"] >= 2 and "error" not in promoted
    if mode == "master-slave-sync":
        cut_off = isolation_windows(ops)
        alone = [op for op in ops if op["f"] == "append" and op["type"] == "ok" and op.get("node") in cut_off
                 and cut_off[op["node"]][0] < op["time"] <= cut_off[op["node"]][1]]
        assert alone == [], "the isolated SYNC_MASTER acknowledged writes no slave had"
        unanswered = [op for op in ops if op["f"] == "append" and op["type"] == "info"]
        assert unanswered, "the appends sent to the isolated master ended unknown (refused, timed out or cut)"
    if mode == "master-slave-async":
        lost = verdict["checks"]["lost"]
        assert verdict["valid"] is False and lost["count"] > 0 and lost["witnesses"]
        witness = lost["witnesses"][0]
        acked = next(op for op in ops if op["f"] == "append" and op["type"] == "ok"
                     and op["value"]["id"] == witness["id"])
        assert acked["node"] == faults[0]["leader"], "the lost write was acknowledged by the isolated master"
        assert 'id="witness-lost-1"' in (run_dir / "report.html").read_text()
    else:
        assert verdict["valid"] is True, verdict
