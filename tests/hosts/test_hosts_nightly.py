"""`python -m harness nightly --hosts`: the sweep's cells on machines the harness did not create.

A tiny sweep on n1, n2 and `bare` (no iptables): the kill cell runs and passes; the partition
cells are skipped, not failed, with the reason (`bare` lacks iptables; the 5-node
cell needs more hosts than the inventory names), in summary.json and junit.xml.
"""

from __future__ import annotations

import json
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from tests.hosts.conftest import SshHosts

pytestmark = pytest.mark.docker
REPO = Path(__file__).resolve().parents[2]


def test_a_small_sweep_runs_what_the_hosts_can_and_skips_the_rest_with_the_reason(
        ssh_hosts: SshHosts, tmp_path: Path, via_checker_service: Path) -> None:
    inventory = ssh_hosts.inventory(tmp_path / "hosts.toml", ("n1", "n2", "bare"))
    command = [sys.executable, "-m", "harness", "nightly", "--hosts", str(inventory), "--only",
               "dledger-kill-sync,dledger-partition-sync", "--seed", "4", "--results-dir",
               str(tmp_path / "results"), "--sim-min", "0"]
    done = subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    (out,) = (tmp_path / "results").glob("nightly-*")
    summary = json.loads((out / "summary.json").read_text())
    assert summary["hosts"] == str(inventory)
    assert summary["counts"] == {"pass": 1, "fail": 0, "known-risk": 0, "interrupted": 0, "skipped": 2}
    rows = summary["rows"]
    assert [(r["cell"], r["verdict"], r["outcome"], r["message"]) for r in rows] == [
        ("dledger-kill-sync-3n", "valid", "pass", None),
        ("dledger-partition-sync-3n", "skipped", "skipped",
         "dledger-partition-sync-3n: bare: partition needs iptables, which is not installed (Debian package "
         "iptables)"),
        ("dledger-partition-sync-5n", "skipped", "skipped",
         f"dledger-partition-sync-5n: needs 5 nodes; {inventory} names 3 hosts")]
    for row in rows[:1]:
        test = json.loads((Path(row["run_dir"]) / "test.json").read_text())
        assert sorted(test["inventory"]["hosts"]) == ["bare", "n1", "n2"]
        assert f"--hosts {inventory}" in test["reproduce"]
        assert (out / row["report"]).is_file() and row["throughput"] > 0 and row["faults"][0]["faults"] >= 1
    suite = ET.parse(out / "junit.xml").getroot().find("testsuite")
    assert [suite.get(key) for key in ("tests", "failures", "errors", "skipped")] == ["3", "0", "0", "2"]
    skipped = {case.get("name"): case.find("skipped").get("message") for case in suite.findall("testcase")
               if case.find("skipped") is not None}
    assert skipped == {f"{row['cell']} seed 4": row["message"] for row in rows[1:]}
    assert "nightly: 1 runs: 1 pass, 2 skipped" in done.stdout
    ssh_hosts.assert_clean(inventory)
