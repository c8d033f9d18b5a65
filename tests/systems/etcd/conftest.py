"""Fixtures of the etcd tests: the etcd image (built once a session, progress shown)."""

from __future__ import annotations

import docker  # type: ignore[import-untyped]
import pytest

from harness.image import ensure_base
from systems.etcd.image import ensure_etcd_image
from tests.support.images import Log, shown_build


@pytest.fixture(scope="session")
def etcd_image(docker_client: docker.DockerClient, request: pytest.FixtureRequest) -> str:
    """The etcd image on the project's base image; the build's progress is shown even under capture."""
    def build(log: Log) -> str:
        return ensure_etcd_image(docker_client, ensure_base(docker_client, log), log)

    return shown_build(request, "etcd image", build)
