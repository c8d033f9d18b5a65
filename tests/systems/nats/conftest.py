"""Fixtures of the NATS tests: the NATS image (built once a session, progress shown) and a cluster."""

from __future__ import annotations

from collections.abc import Iterator

import docker
import pytest

from harness.cluster import connect
from harness.errors import EngineUnavailable
from harness.image import ensure_base
from systems.nats.image import ensure_nats_image
from tests.systems.nats.natscluster import NatsCluster, nats_cluster


@pytest.fixture(scope="session")
def docker_client() -> docker.DockerClient:
    try:
        return connect()
    except EngineUnavailable as e:
        pytest.fail(str(e))


@pytest.fixture(scope="session")
def nats_image(docker_client: docker.DockerClient, request: pytest.FixtureRequest) -> str:
    """The NATS image; the build's progress is shown even under output capture."""
    capture = request.config.pluginmanager.getplugin("capturemanager")
    with capture.global_and_fixture_disabled():
        def log(line: str) -> None:
            print(f"[image] {line}", flush=True)
        return ensure_nats_image(docker_client, ensure_base(docker_client, log), log)


@pytest.fixture(scope="module")
def cluster(docker_client: docker.DockerClient, nats_image: str) -> Iterator[NatsCluster]:
    """Three servers with the default `sync_interval`, shared by a module's tests."""
    yield from nats_cluster(docker_client, nats_image, "default")
