"""Settings and fixtures every test shares."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pytest

# A checker service a developer left running must not check the tests' folders: the tests
# point the default socket at a folder nobody creates; those that want a service start
# their own on a socket of their own.
os.environ["CHECKER_SOCKET"] = str(Path(tempfile.gettempdir()) / "no-checker-service" / f"{os.getpid()}.sock")


@pytest.fixture(scope="session")
def spark():
    """One local SparkSession for every test that checks folders in this process."""
    from checkers.spark import session

    spark = session("local[2]", shuffle_partitions=2)
    yield spark
    spark.stop()


# Tests that start containers or node processes share the machine's Docker engine and
# loopback ports: under `pytest -n N --dist loadgroup` (make test) they all run on one
# worker, one after the other, while the other workers take the rest.
SERIAL_MARKERS = frozenset({"docker", "chaos", "cluster"})


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if any(item.get_closest_marker(name) for name in SERIAL_MARKERS):
            item.add_marker(pytest.mark.xdist_group("engine"))


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--cells", metavar="SUBSTRING[,...]|all", default=None,
                     help="the nightly sweep's cells tests/chaos/test_sweep_cells.py runs: those whose name "
                          "contains one of these, or all (default: the short cells of make test)")


@pytest.fixture(scope="session")
def session_checker_service(tmp_path_factory: pytest.TempPathFactory):
    """One real checker service for the session: (socket, process, log); tests must not stop it."""
    from tests.support.checkerservice import checker_service

    with checker_service(tmp_path_factory.mktemp("checker-service"), warm_lines=1000) as running:
        yield running


@pytest.fixture(scope="session")
def warm_checker_socket(session_checker_service: tuple[Path, object, Path]) -> Path:
    """The session's checker service, for its `harness run` subprocesses (see `via_checker_service`)."""
    return session_checker_service[0]


@pytest.fixture
def via_checker_service(warm_checker_socket: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The test's subprocesses check through the session's warm service (a cold Spark start each
    otherwise); the service is the same checker (tests/checker/test_checker_service.py)."""
    monkeypatch.setenv("CHECKER_SOCKET", str(warm_checker_socket))
    return warm_checker_socket
