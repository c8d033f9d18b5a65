"""Helpers of the end-to-end chaos tests: run the real CLI, or the sweep's cells, against real containers."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from harness.containers.cluster import LABEL_RUN, connect
from harness.sweeps import matrix, nightly
from harness.sweeps.matrix import Cell
from harness.sweeps.summary import Row

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


# What make test runs: the three designs under one fault (the master-slave-async one is a must-fail
# control), every family at once, etcd. The other controls run nightly: make test's must-fail runs are
# that one, NATS's published loss (test_system_runs.py), a seeded bug (test_mutant_runs.py) and unsafe
# reads (test_chaos_runs.py); dledger-power-loss-async-3n-all-nodes, a fifth, cost 215 s of a 32-minute
# suite (bench/README.md, "Test suite time").
MAKE_TEST_CELLS = ("master-slave-async-isolate-lose-sync-3n", "master-slave-sync-isolate-lose-sync-3n",
                   "dledger-isolate-lose-sync-3n", "dledger-all-sync-3n",
                   "etcd-kill+partition+pause+churn-5n")
SEED = 4
# Cells run through `harness nightly --only NAME` instead of in this process: the nightly command's
# own end-to-end test (tests/chaos/test_nightly_run.py) reads that sweep's folder, the cells' tests
# its row, so the cell runs once for both.
BY_NIGHTLY = frozenset({"master-slave-async-isolate-lose-sync-3n"})


def cell_named(name: str) -> Cell:
    (cell,) = [cell for cell in matrix.MATRIX if cell.name == name]
    return cell


class CellRuns:
    """The runs of this session's cells, each run once, on demand, into one folder, checked by
    the checker service at `checker` (the session's: no Spark of its own in the test process)."""

    def __init__(self, out: Path, checker: Path) -> None:
        self.out = out
        self.checker = checker
        self.rows: dict[str, Row] = {}
        self.sweeps: dict[str, tuple[subprocess.CompletedProcess[str], Path]] = {}

    def nightly(self, name: str) -> tuple[subprocess.CompletedProcess[str], Path]:
        """`harness nightly --only NAME` of one cell of BY_NIGHTLY (once): its output and folder."""
        if name not in self.sweeps:
            out = self.out / f"nightly-{name}"
            command = [sys.executable, "-m", "harness", "nightly", "--only", name, "--seed", str(SEED),
                       "--results-dir", str(out), "--sim-min", "0", "--mutants", "0"]
            process = subprocess.Popen(command, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                       text=True, env={**os.environ, "CHECKER_SOCKET": str(self.checker)})
            try:
                stdout, stderr = process.communicate(timeout=900)
            except BaseException:  # interrupted or too slow: SIGTERM tears the run down, SIGKILL would not
                process.terminate()
                process.communicate(timeout=300)
                raise
            done = subprocess.CompletedProcess(command, process.returncode, stdout, stderr)
            folders = list(out.glob("nightly-*"))
            assert len(folders) == 1, done.stdout[-3000:] + done.stderr[-3000:]
            rows = json.loads((folders[0] / "summary.json").read_text())["rows"]
            assert [row["cell"] for row in rows] == [name], rows
            self.sweeps[name] = done, folders[0]
            self.rows[name] = Row(**rows[0])
        return self.sweeps[name]

    def row(self, name: str) -> Row:
        if name in BY_NIGHTLY:
            self.nightly(name)
        if name not in self.rows:
            with pytest.MonkeyPatch.context() as patch:
                patch.setenv("CHECKER_SOCKET", str(self.checker))
                row, interrupted = nightly.run_one(cell_named(name), SEED, self.out, list(self.rows.values()))
            if interrupted or row is None:
                pytest.exit(f"the run of cell {name} was interrupted")
            self.rows[name] = row
        return self.rows[name]

    def run_dir(self, name: str) -> Path:
        return Path(self.row(name).run_dir or "")
