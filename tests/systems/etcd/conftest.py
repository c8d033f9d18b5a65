"""Fixtures of the etcd tests: the engine and the etcd image (built once a session, progress shown)."""

from __future__ import annotations

import docker  # type: ignore[import-untyped]
import pytest

from harness.cluster import connect
from harness.errors import EngineUnavailable
from harness.image import ensure_base
from systems.etcd.image import ensure_etcd_image


@pytest.fixture(scope="session")
def etcd_docker() -> docker.DockerClient:
    try:
        return connect()
    except EngineUnavailable as e:
        pytest.fail(str(e))


@pytest.fixture(scope="session")
def etcd_image(etcd_docker: docker.DockerClient, request: pytest.FixtureRequest) -> str:
    """The etcd image on the project's base image; the build's progress is shown even under capture."""
    capture = request.config.pluginmanager.getplugin("capturemanager")
    with capture.global_and_fixture_disabled():
        def log(line: str) -> None:
            print(f"[etcd image] {line}", flush=True)

        return ensure_etcd_image(etcd_docker, ensure_base(etcd_docker, log), log)
