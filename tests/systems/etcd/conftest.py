"""Fixtures of the etcd tests: the etcd image (built once a session, progress shown) and clusters made
the way a run makes them, through the system seam: `harness.containers.db.Db(3, system=Etcd(...))`, every
member started over SSH, until one leads. A cluster's fixture checks, once it is torn down, that no
container, network or volume of its run is left."""

from __future__ import annotations

from collections.abc import Iterator

import docker  # type: ignore[import-untyped]
import pytest

from harness.containers.cluster import new_run_id
from harness.containers.db import Db
from harness.containers.image import ensure_base
from harness.wait import wait_for
from systems.etcd import Etcd
from systems.etcd.client import EtcdClient
from systems.etcd.image import ensure_etcd_image
from systems.etcd.system import endpoints
from tests.support.images import Log, shown_build
from tests.support.leftovers import leftovers

START_S = 60.0  # members of a fresh cluster find each other and elect within this, on a busy machine
EtcdCluster = tuple[Db, EtcdClient]


@pytest.fixture(scope="session")
def etcd_image(docker_client: docker.DockerClient, request: pytest.FixtureRequest) -> str:
    """The etcd image on the project's base image; the build's progress is shown even under capture."""
    def build(log: Log) -> str:
        return ensure_etcd_image(docker_client, ensure_base(docker_client, log), log)

    return shown_build(request, "etcd image", build)


def etcd_db(client: docker.DockerClient, image: str, system: Etcd, size: int = 3) -> Iterator[EtcdCluster]:
    """`size` members of `system` in a run's containers, started and prepared, once one leads; with
    our client on their endpoints. Afterwards nothing of the run is left."""
    with Db(size, system=system, image=image, run_id=f"etcd-{new_run_id()}") as db:
        db.start()
        system.prepare(db)
        wait_for(lambda: system.leader(db, 5.0), START_S, f"no etcd leader within {START_S} s")
        yield db, EtcdClient(endpoints(db), timeout=5.0)
    assert leftovers(client, db.run_id) == []


@pytest.fixture(scope="module")
def etcd3(docker_client: docker.DockerClient, etcd_image: str) -> Iterator[EtcdCluster]:
    """Three members with fsync, shared by a module's tests."""
    yield from etcd_db(docker_client, etcd_image, Etcd())


@pytest.fixture
def etcd3_no_fsync(docker_client: docker.DockerClient, etcd_image: str) -> Iterator[EtcdCluster]:
    """Three members started with `--unsafe-no-fsync`, for one test."""
    yield from etcd_db(docker_client, etcd_image, Etcd(unsafe_no_fsync=True))


@pytest.fixture
def fresh_etcd3(docker_client: docker.DockerClient, etcd_image: str) -> Iterator[EtcdCluster]:
    """Three members with fsync, for one test alone (a run's cluster)."""
    yield from etcd_db(docker_client, etcd_image, Etcd())
