"""Helpers of the end-to-end chaos tests: run the real CLI against real containers."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from harness.cluster import LABEL_RUN, connect

REPO = Path(__file__).resolve().parents[2]


def harness_run(results: Path, *flags: str, timeout: float = 900) -> subprocess.CompletedProcess[str]:
    """`python -m harness run --results-dir RESULTS FLAGS...`, output captured."""
    return subprocess.run([sys.executable, "-m", "harness", "run", "--results-dir", str(results), *flags],
                          cwd=REPO, capture_output=True, text=True, timeout=timeout)


def only_run_dir(results: Path) -> Path:
    """The one run folder under `results`, found through `results/latest`."""
    latest = results / "latest"
    assert latest.is_symlink(), f"results/latest missing; results has {sorted(results.rglob('*'))[:20]}"
    return latest.resolve()


def read_json(path: Path) -> dict:
    return json.loads(path.read_text())


def leftovers(run_id: str) -> list[str]:
    """Containers and networks of the run that still exist."""
    client = connect()
    label = f"{LABEL_RUN}={run_id}"
    containers = client.containers.list(all=True, filters={"label": label})
    networks = client.networks.list(filters={"label": label})
    return [c.name for c in containers] + [n.name for n in networks]
