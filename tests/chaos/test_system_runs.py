"""End to end against a system we did not write: NATS JetStream in containers, under the same
harness, nemesis and checker.

Jepsen's NATS 2.12.1 analysis: JetStream acknowledges a publish before it fsyncs, so when every
node loses power at once acknowledged messages are gone (a must-fail control: the sweep's
`nats-power-loss-3n-all-nodes`); with `sync_interval: always` they survive, and its consumer
reads them all in order (`nats-power-loss-3n-all-nodes-always`). Both runs are the sweep's cells
(seed 4); etcd's must-pass (`etcd-kill+partition+pause+churn-5n`) is one of tests/chaos/test_sweep_cells.py's.
"""

from __future__ import annotations

import json

import pytest
from chaosrun import CellRuns, leftovers, read_json

pytestmark = [pytest.mark.docker, pytest.mark.chaos]


def power_losses(run_dir) -> list[dict]:
    ops = [json.loads(line) for line in (run_dir / "history.jsonl").read_text().splitlines()]
    return [op["value"] for op in ops if op["f"] == "power-off" and op["type"] != "invoke"]


def checked(cell_runs: CellRuns, name: str) -> tuple[dict, dict, object]:
    row = cell_runs.row(name)
    run_dir = cell_runs.run_dir(name)
    test, verdict = read_json(run_dir / "test.json"), read_json(run_dir / "results.json")
    assert test["system"] == "nats" and test["inputs"] == ["history", "final-logs"]
    assert leftovers(test["run_id"]) == []
    losses = power_losses(run_dir)
    assert losses and all(sorted(loss["targets"]) == ["n1", "n2", "n3"] for loss in losses)
    assert any(sum(d["bytes"] for d in loss["dropped"].values()) > 0 for loss in losses), (
        "every server lost unsynced writes: the fault bit")
    return test, verdict, row


def test_nats_by_default_loses_acknowledged_messages_when_every_node_loses_power(cell_runs: CellRuns) -> None:
    test, verdict, row = checked(cell_runs, "nats-power-loss-3n-all-nodes")
    assert row.verdict == "invalid", row.message
    assert test["nats_sync_interval"] == "default"
    lost = verdict["checks"]["lost"]
    assert lost["valid"] is False and lost["count"] > 0 and lost["witnesses"]
    assert verdict["checks"]["election-safety"]["valid"] == "not applicable"


def test_nats_with_sync_interval_always_keeps_every_acknowledged_message(cell_runs: CellRuns) -> None:
    test, verdict, row = checked(cell_runs, "nats-power-loss-3n-all-nodes-always")
    assert row.verdict == "valid", row.message
    assert test["nats_sync_interval"] == "always"
    assert verdict["checks"]["lost"]["valid"] is True
    acked = test["client_outcomes"]["ok"]
    finals = test["final_logs"]
    assert acked > 100 and all(isinstance(n, int) and n > 0 for n in finals.values()), finals
    assert test["consumers"] == 1 and test["consume_outcomes"]["ok"] > 0, test["consume_outcomes"]
    assert all(verdict["checks"][name]["valid"] is True
               for name in ("consumed-then-lost", "consume-divergence", "skipped-offset")), verdict["checks"]
