"""A test that tests/docker/test_docker_interrupted_suite.py runs in a pytest of its own and
interrupts: like a part-way `make test`, it holds docker-compose.yml's 5-node cluster and the
session's checker service; it says which in $READY_FILE, then waits (at most 10 minutes)."""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path

import docker
import pytest

from tests.support.compose import node_cluster

pytestmark = pytest.mark.docker


def test_holds_a_compose_cluster_and_a_checker_service(
        docker_client: docker.DockerClient, node_image: str, session_checker_service: tuple) -> None:
    _sock, service, _log = session_checker_service
    with node_cluster(docker_client) as (project, _peers):
        ready = Path(os.environ["READY_FILE"])
        staged = ready.with_suffix(".tmp")
        staged.write_text(json.dumps({"project": project, "service": service.pid}))
        staged.replace(ready)  # whole, never half
        threading.Event().wait(600)
