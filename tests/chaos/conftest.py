"""The nightly sweep's cells as pytest tests: `pytest -m chaos` runs short cells of
`harness/sweeps/matrix.py`, one test a run, so `--junitxml`, `-k` and a team's plugins apply.

`--cells SUBSTRING[,...]` picks other cells by name (as `harness nightly --only`), `--cells all`
the whole matrix. A cell runs at most once a session, through the sweep's own code in this
process (`harness.sweeps.nightly.run_one`; the cells of `chaosrun.BY_NIGHTLY` through `harness nightly`,
whose own test reads that sweep), and the session's warm checker service checks every run; tests
that assert more of a cell's run (tests/chaos/test_mode_runs.py) share that run.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from chaosrun import MAKE_TEST_CELLS, CellRuns, cell_named

from harness.sweeps import matrix


@pytest.fixture(scope="session")
def cell_runs(tmp_path_factory: pytest.TempPathFactory, warm_checker_socket: Path) -> CellRuns:
    """Runs of sweep cells, checked by the session's warm checker service."""
    return CellRuns(tmp_path_factory.mktemp("cells"), warm_checker_socket)


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "cell" not in metafunc.fixturenames:
        return
    words = metafunc.config.getoption("cells")
    if words is None:
        cells = [cell_named(name) for name in MAKE_TEST_CELLS]
    else:
        cells = list(matrix.MATRIX) if words == "all" else matrix.chosen(words)
        if not cells:
            raise pytest.UsageError(f"--cells {words}: no cell's name contains that "
                                    "(python -m harness nightly --dry-run lists them)")
    metafunc.parametrize("cell", cells, ids=[cell.name for cell in cells])
