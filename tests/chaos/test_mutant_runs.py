"""End to end, a seeded bug caught by the run meant for it: `harness run --mutant` builds the
mutant's node image from its copy of nodes/ and the cluster runs it, so the run ends invalid
where the same run of the checkout's code is valid (every other chaos test)."""

from __future__ import annotations

import pytest
from chaosrun import harness_run, leftovers, only_run_dir, read_json

from harness.containers.image import MUTANT_REPO
from harness.mutants.catalogue import mutant
from harness.mutants.cells import mutant_cell

pytestmark = [pytest.mark.docker, pytest.mark.chaos]


def test_a_leader_that_acknowledges_before_a_quorum_is_caught_by_its_cell(
        tmp_path, via_checker_service) -> None:
    cell = mutant_cell(mutant("ack-before-quorum"))
    argv = cell.argv()
    # shorter than the nightly's 60 s: at 20 s the cell caught it at seeds 5 and 6, not 7; at 40 s at 7 and 8
    argv[argv.index("--time-limit") + 1] = "40"
    done = harness_run(tmp_path, *argv, "--seed", "5")
    assert done.returncode == 1, done.stdout[-3000:] + done.stderr[-3000:]
    run_dir = only_run_dir(tmp_path)
    test, results = read_json(run_dir / "test.json"), read_json(run_dir / "results.json")
    assert test["mutant"] == "ack-before-quorum" and test["name"].startswith("mutant-ack-before-quorum-")
    assert results["valid"] is False
    assert any(c.get("valid") is False for c in results["checks"].values())
    assert f"{MUTANT_REPO}:ack-before-quorum-" in done.stderr  # the image it built or reused
    assert leftovers(test["run_id"]) == []
