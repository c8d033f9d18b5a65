"""Fixtures of the Docker tests: the engine, the images (built once a session, progress shown), clusters."""

from __future__ import annotations

import importlib.util
from collections.abc import Iterator

import docker
import pytest

from harness.cluster import connect
from harness.db import Db
from harness.errors import EngineUnavailable
from harness.image import ensure_images

NO_SERVE = "`python -m nodes serve` (nodes/serve.py, issue 4) is not in the checkout yet"


@pytest.fixture(scope="session")
def docker_client() -> docker.DockerClient:
    try:
        return connect()
    except EngineUnavailable as e:
        pytest.fail(str(e))


@pytest.fixture(scope="session")
def node_image(docker_client: docker.DockerClient, request: pytest.FixtureRequest) -> str:
    """The node image for this checkout; the build's progress is shown even under output capture."""
    capture = request.config.pluginmanager.getplugin("capturemanager")
    with capture.global_and_fixture_disabled():
        return ensure_images(docker_client, log=lambda line: print(f"[image] {line}", flush=True))


@pytest.fixture(scope="session")
def node_serve() -> None:
    """Skips a test that runs the DLedger node until `nodes serve` exists."""
    if importlib.util.find_spec("nodes.serve") is None:
        pytest.skip(NO_SERVE)


@pytest.fixture(scope="module")
def cluster3(node_image: str) -> Iterator[Db]:
    """Three node containers with sshd up, no node process started; shared by a module's tests."""
    with Db(3, image=node_image) as db:
        yield db
