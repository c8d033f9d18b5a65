"""An interrupted test suite leaves nothing: SIGTERM tears down what its tests started (a compose
cluster, a checker service and its JVM), run in one process or on xdist workers (tests/conftest.py);
after kill -9 the service stops by itself and `python -m harness clean` removes the cluster."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import docker
import pytest

from harness.wait import wait_for
from tests.support.compose import NODE_NAMES, leftovers
from tests.support.processes import java_children, running

pytestmark = pytest.mark.docker
REPO = Path(__file__).resolve().parents[2]
SUITE = Path(__file__).with_name("interrupted_suite.py")
ALL = 2 * len(NODE_NAMES) + 1  # the compose cluster's containers, volumes and network


@contextmanager
def suite_holding_a_cluster(tmp_path: Path, runner: tuple[str, ...] = ("-p", "no:xdist")
                            ) -> Iterator[tuple[subprocess.Popen, dict[str, Any]]]:
    """A pytest of interrupted_suite.py (in this process, or `runner` "-n", "1": on an xdist
    worker, as `make test` runs), once its cluster and checker service are up: (the process,
    {"project", "service": pid})."""
    ready, log = tmp_path / "ready.json", tmp_path / "suite.log"
    # a short base folder: the suite's checker socket lies below it, and a socket path takes 107 bytes
    base = Path(tempfile.mkdtemp(prefix="isuite-"))
    with log.open("w") as out:
        suite = subprocess.Popen(
            [sys.executable, "-m", "pytest", str(SUITE), "-q", *runner, "-p", "no:cacheprovider",
             "--basetemp", str(base)],
            cwd=REPO, env={**os.environ, "READY_FILE": str(ready)}, stdout=out, stderr=subprocess.STDOUT)

    def held() -> dict[str, Any] | None:
        assert suite.poll() is None, f"the suite exited {suite.returncode}:\n{log.read_text()[-3000:]}"
        return json.loads(ready.read_text()) if ready.exists() else None

    try:
        yield suite, wait_for(held, 600, "the suite did not start its cluster and checker service")
    finally:
        if suite.poll() is None:
            suite.kill()
            suite.wait()
        shutil.rmtree(base, ignore_errors=True)


def gone(pids: list[int]) -> bool:
    return not any(running(pid) for pid in pids)


def test_sigterm_stops_a_suite_and_leaves_nothing(docker_client: docker.DockerClient, node_image: str,
                                                 tmp_path: Path) -> None:
    # on an xdist worker, as `make test` runs (the in-process path is the same teardown, one level down)
    with suite_holding_a_cluster(tmp_path, ("-n", "1")) as (suite, held):
        service = [held["service"], *java_children(held["service"])]
        assert len(service) == 2 and len(leftovers(docker_client, held["project"])) == ALL
        suite.send_signal(signal.SIGTERM)
        assert suite.wait(timeout=300) == pytest.ExitCode.INTERRUPTED, (tmp_path / "suite.log").read_text()
    assert leftovers(docker_client, held["project"]) == []
    wait_for(lambda: gone(service), 60, f"the checker service or its JVM {service} outlived the suite")


def test_a_killed_suites_service_stops_itself_and_clean_removes_its_cluster(
        docker_client: docker.DockerClient, node_image: str, tmp_path: Path) -> None:
    with suite_holding_a_cluster(tmp_path) as (suite, held):
        service = [held["service"], *java_children(held["service"])]
        assert len(service) == 2
        suite.kill()  # no teardown at all
        suite.wait()
    wait_for(lambda: gone(service), 60, f"the checker service or its JVM {service} outlived the suite")
    assert len(leftovers(docker_client, held["project"])) == ALL
    done = subprocess.run([sys.executable, "-m", "harness", "clean", "--run", held["project"]], cwd=REPO,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    n = len(NODE_NAMES)
    assert done.stdout.strip() == f"removed {n} containers, 1 networks, {n} volumes"
    assert leftovers(docker_client, held["project"]) == []
