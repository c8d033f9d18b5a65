"""Fixtures of the NATS tests: the NATS image (built once a session, progress shown) and clusters made
the way a run makes them, through the system seam: `harness.containers.db.Db(3, system=Nats(...))`, every
server started over SSH, the stream created by `Nats.prepare`. A cluster's fixture checks, once it
is torn down, that no container, network or volume of its run is left."""

from __future__ import annotations

from collections.abc import Iterator

import docker
import pytest

from harness.containers.cluster import new_run_id
from harness.containers.db import Db
from harness.containers.image import ensure_base
from systems.nats import Nats
from systems.nats.config import SYNC_ALWAYS
from systems.nats.image import ensure_nats_image
from tests.support.images import shown_build
from tests.support.leftovers import leftovers


@pytest.fixture(scope="session")
def nats_image(docker_client: docker.DockerClient, request: pytest.FixtureRequest) -> str:
    """The NATS image; the build's progress is shown even under output capture."""
    return shown_build(
        request, "image", lambda log: ensure_nats_image(docker_client, ensure_base(docker_client, log), log)
    )


def nats_db(client: docker.DockerClient, image: str, system: Nats, size: int = 3) -> Iterator[Db]:
    """`size` servers of `system` in a run's containers, started, the stream created; afterwards
    nothing of the run is left."""
    with Db(size, system=system, image=image, run_id=f"nats-{new_run_id()}") as db:
        db.start()
        system.prepare(db)
        yield db
    assert leftovers(client, db.run_id) == []


@pytest.fixture(scope="module")
def cluster(docker_client: docker.DockerClient, nats_image: str) -> Iterator[Db]:
    """Three servers with the default `sync_interval`, shared by a module's tests."""
    yield from nats_db(docker_client, nats_image, Nats())


@pytest.fixture(scope="module")
def always_cluster(docker_client: docker.DockerClient, nats_image: str) -> Iterator[Db]:
    """Three servers with `sync_interval: always`, shared by a module's tests."""
    yield from nats_db(docker_client, nats_image, Nats(sync_interval=SYNC_ALWAYS))


@pytest.fixture
def fresh_cluster(docker_client: docker.DockerClient, nats_image: str) -> Iterator[Db]:
    """Three servers with the default `sync_interval`, for one test alone (a run's cluster)."""
    yield from nats_db(docker_client, nats_image, Nats())
