"""Fixtures of the NATS tests: the NATS image (built once a session, progress shown) and a cluster."""

from __future__ import annotations

from collections.abc import Iterator

import docker
import pytest

from harness.image import ensure_base
from systems.nats.image import ensure_nats_image
from tests.support.images import shown_build
from tests.systems.nats.natscluster import NatsCluster, nats_cluster


@pytest.fixture(scope="session")
def nats_image(docker_client: docker.DockerClient, request: pytest.FixtureRequest) -> str:
    """The NATS image; the build's progress is shown even under output capture."""
    return shown_build(
        request, "image", lambda log: ensure_nats_image(docker_client, ensure_base(docker_client, log), log)
    )


@pytest.fixture(scope="module")
def cluster(docker_client: docker.DockerClient, nats_image: str) -> Iterator[NatsCluster]:
    """Three servers with the default `sync_interval`, shared by a module's tests."""
    yield from nats_cluster(docker_client, nats_image, "default")
