"""Fixtures of the Docker tests: the engine, the images (built once a session, progress shown), clusters."""

from __future__ import annotations

import importlib.util
from collections.abc import Iterator

import docker
import pytest

from harness.containers.db import Db
from harness.containers.image import ensure_images
from tests.support.images import shown_build

NO_SERVE = "`python -m nodes serve` (nodes/serve.py, issue 4) is not in the checkout yet"


@pytest.fixture(scope="session")
def node_image(docker_client: docker.DockerClient, request: pytest.FixtureRequest) -> str:
    """The node image for this checkout; the build's progress is shown even under output capture."""
    return shown_build(request, "image", lambda log: ensure_images(docker_client, log=log))


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
