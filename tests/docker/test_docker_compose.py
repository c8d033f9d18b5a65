"""docker-compose.yml: a user's standalone 5-node cluster, driven with `python -m nodes` from the host."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import docker
import pytest

from harness.wait import wait_for
from tests.support.compose import NODE_NAMES, leftovers, node_cluster

pytestmark = pytest.mark.docker
REPO = Path(__file__).resolve().parents[2]


def nodes_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "nodes", *args], cwd=REPO, capture_output=True, text=True,
                          timeout=60)


def leader(peers: str) -> str | None:
    out = nodes_cli("metadata", "--peers", peers, "--timeout", "2").stdout
    return json.loads(out).get("leader") if out else None


def bodies_on(peers: str, node: str, first: int, last: int) -> list[str]:
    """The bodies `first..last` in `node`'s committed log, or [] while it lacks some."""
    got = nodes_cli("get", "--peers", peers, "--index", str(first), "--last", str(last), "--node", node,
                    "--mode", "follower", "--timeout", "2")
    bodies = [json.loads(line)["body"] for line in got.stdout.splitlines()]
    return bodies if len(bodies) == last - first + 1 else []


def test_compose_cluster_takes_appends_and_serves_reads_from_every_node(
        docker_client: docker.DockerClient, node_image: str, node_serve: None) -> None:
    with node_cluster(docker_client) as (project, peers):
        wait_for(lambda: leader(peers), 30, "the compose cluster elected no leader")
        appended = nodes_cli("append", "--peers", peers, "--data", "from-the-host", "--count", "3")
        assert appended.returncode == 0, appended.stderr
        indexes = [json.loads(line)["index"] for line in appended.stdout.splitlines()]
        first, last = indexes[0], indexes[-1]
        assert last - first == 2
        for name in NODE_NAMES:
            assert wait_for(lambda name=name: bodies_on(peers, name, first, last), 20,
                            f"{name} did not serve the appended entries") == ["from-the-host"] * 3
    assert leftovers(docker_client, project) == []
