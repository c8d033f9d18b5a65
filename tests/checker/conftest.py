"""One batch check of every test folder, shared by the checker tests (on the `spark` session
of tests/conftest.py).

Starting Spark and compiling its queries costs seconds, so every folder in `cases.build`
is checked in a single `check_many` call (one Spark job per check for all of them).
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))


@pytest.fixture(scope="session")
def checked(spark, tmp_path_factory):
    """name -> (Case, Spark verdict) for every folder of `cases.build`."""
    from cases import build

    from checkers.checks.check import check_many
    from checkers.layout import ResultsDir

    cases = build(tmp_path_factory.mktemp("checker-cases"))
    results = check_many([ResultsDir.open(c.path) for c in cases.values()], spark, witnesses=1000)
    return {name: (case, result) for (name, case), result in zip(cases.items(), results, strict=True)}
