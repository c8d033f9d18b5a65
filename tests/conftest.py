"""Settings and fixtures every test shares."""

from __future__ import annotations

import functools
import os
import shutil
import signal
import tempfile
from pathlib import Path

import pytest

# A checker service a developer left running must not check the tests' folders: the tests
# point the default socket at a folder nobody creates; those that want a service start
# their own on a socket of their own.
os.environ["CHECKER_AUTOSTART"] = "0"  # a check in a test never leaves a service behind
os.environ["CHECKER_SOCKET"] = str(Path(tempfile.gettempdir()) / "no-checker-service" / f"{os.getpid()}.sock")


@pytest.fixture(scope="session")
def spark():
    """One local SparkSession for every test that checks folders in this process."""
    from checkers.engine.spark import session

    spark = session("local[2]", shuffle_partitions=2)
    yield spark
    spark.stop()


# Tests that start containers share the machine's Docker engine: under `pytest -n N` (make
# test) they all run on one worker, one after the other, while the other workers take the
# rest, local node clusters included (their ports come from below the range Docker publishes
# from: tests/support/localcluster.py). (xdist's own `--dist loadgroup` cannot do
# it under pytest 9, whose test ids it can no longer suffix.) The workers, which see the
# markers, write those tests' ids to a file; the controller's scheduler reads it.
SERIAL_MARKERS = frozenset({"docker", "chaos"})
ENGINE_TESTS = "DLEDGER_CHAOS_ENGINE_TESTS"  # the file's path, set by the controller for its workers


def pytest_configure(config: pytest.Config) -> None:
    controller = not hasattr(config, "workerinput") and bool(getattr(config.option, "numprocesses", None))
    if controller:
        os.environ[ENGINE_TESTS] = str(Path(tempfile.mkdtemp(prefix="engine-tests-")) / "ids")
    signal.signal(signal.SIGTERM, functools.partial(_interrupt, controller))


def _interrupt(controller: bool, signum: int, frame: object) -> None:
    """SIGTERM stops the tests as Ctrl-C does: the running test is interrupted and every fixture
    torn down (containers, compose projects, checker services), so a terminated `make test`
    leaves nothing behind. xdist's controller passes it on to its workers, which run the tests:
    once they have torn down, they report the interruption and the session ends as interrupted
    (were the controller itself interrupted, it would kill them mid-teardown). Further SIGTERMs
    are ignored meanwhile (kill -9 still ends it all; the checker services then stop by
    themselves and `python -m harness clean` removes the rest)."""
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    if not controller:
        raise KeyboardInterrupt(f"signal {signum}")
    from tests.support.processes import children

    for pid in children(os.getpid()):
        os.kill(pid, signal.SIGTERM)


def pytest_unconfigure(config: pytest.Config) -> None:
    if not hasattr(config, "workerinput") and ENGINE_TESTS in os.environ:
        shutil.rmtree(Path(os.environ.pop(ENGINE_TESTS)).parent, ignore_errors=True)


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    target = os.environ.get(ENGINE_TESTS)
    if target is None or not hasattr(config, "workerinput"):
        return
    ids = [item.nodeid for item in items if any(item.get_closest_marker(name) for name in SERIAL_MARKERS)]
    staged = Path(f"{target}.{os.getpid()}")
    staged.write_text("\n".join(ids))
    os.replace(staged, target)  # every worker writes the same list; whole, never half


@pytest.hookimpl(optionalhook=True)  # a hook of pytest-xdist (a dev dependency)
def pytest_xdist_make_scheduler(config: pytest.Config, log: object) -> object | None:
    """`-n N` (`--dist load`): the engine tests as one unit of work, every other test alone."""
    if config.getoption("dist") != "load":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class EngineScheduling(LoadScopeScheduling):
        engine: frozenset[str] | None = None

        def _split_scope(self, nodeid: str) -> str:
            if self.engine is None:  # read once every worker has collected (and so written it)
                self.engine = frozenset(Path(os.environ[ENGINE_TESTS]).read_text().splitlines())
            return "engine" if nodeid in self.engine else nodeid

    return EngineScheduling(config, log)


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--cells", metavar="SUBSTRING[,...]|all", default=None,
                     help="the nightly sweep's cells tests/chaos/test_sweep_cells.py runs: those whose name "
                          "contains one of these, or all (default: the short cells of make test)")


@pytest.fixture(scope="session")
def session_checker_service(tmp_path_factory: pytest.TempPathFactory):
    """One real checker service for the session: (socket, process, log); tests must not stop it.
    Not warmed up: beside a loaded suite the warm-up outlasted the readiness bound, and the
    tests' first checks compile what they need."""
    from tests.support.checkerservice import checker_service

    with checker_service(tmp_path_factory.mktemp("checker-service"), warm_lines=0) as running:
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


@pytest.fixture(scope="session")
def docker_client():
    """The Docker engine, for every test that starts containers (a test fails when it is missing)."""
    from harness.containers.cluster import connect
    from harness.errors import EngineUnavailable

    try:
        return connect()
    except EngineUnavailable as e:
        pytest.fail(str(e))
