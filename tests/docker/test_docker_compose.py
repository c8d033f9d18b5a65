"""docker-compose.yml: a user's standalone 5-node cluster, driven with `python -m nodes` from the host."""

from __future__ import annotations

import json
import secrets
import shutil
import subprocess
import sys
from pathlib import Path

import docker
import pytest

from harness.wait import wait_for
from tests.support.localcluster import free_ports

pytestmark = pytest.mark.docker
REPO = Path(__file__).resolve().parents[2]
NAMES = [f"n{i}" for i in range(1, 6)]


def compose_command() -> list[str]:
    """`docker compose` (v2 plugin) where it exists, else `docker-compose` (v1, Debian's package)."""
    if subprocess.run(["docker", "compose", "version"], capture_output=True).returncode == 0:
        return ["docker", "compose"]
    if shutil.which("docker-compose"):
        return ["docker-compose"]
    pytest.fail("neither `docker compose` nor `docker-compose` is installed: apt-get install docker-compose")


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


def free_subnet(client: docker.DockerClient) -> str:
    """The first three octets of a 10.205.x.0/24 no Docker network uses (DLEDGER_NET)."""
    taken = {
        config.get("Subnet", "")
        for network in client.networks.list()
        for config in (network.attrs.get("IPAM") or {}).get("Config") or []
    }
    return next(f"10.205.{x}" for x in range(11, 255) if f"10.205.{x}.0/24" not in taken)


def test_compose_cluster_takes_appends_and_serves_reads_from_every_node(
        docker_client: docker.DockerClient, node_image: str, node_serve: None) -> None:
    ports = free_ports(len(NAMES))
    env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "DLEDGER_NET": free_subnet(docker_client),
           **{f"N{i}_PORT": str(p) for i, p in enumerate(ports, 1)}}
    project = f"dlc-compose-{secrets.token_hex(3)}"
    compose = [*compose_command(), "-p", project, "-f", str(REPO / "docker-compose.yml")]
    peers = ",".join(f"{name}=127.0.0.1:{port}" for name, port in zip(NAMES, ports, strict=True))
    try:
        up = subprocess.run([*compose, "up", "-d"], env=env, capture_output=True, text=True, timeout=120)
        assert up.returncode == 0, up.stderr
        wait_for(lambda: leader(peers), 30, "the compose cluster elected no leader")
        appended = nodes_cli("append", "--peers", peers, "--data", "from-the-host", "--count", "3")
        assert appended.returncode == 0, appended.stderr
        indexes = [json.loads(line)["index"] for line in appended.stdout.splitlines()]
        first, last = indexes[0], indexes[-1]
        assert last - first == 2
        for name in NAMES:
            assert wait_for(lambda name=name: bodies_on(peers, name, first, last), 20,
                            f"{name} did not serve the appended entries") == ["from-the-host"] * 3
    finally:
        down = subprocess.run([*compose, "down", "-v"], env=env, capture_output=True, text=True, timeout=120)
    assert down.returncode == 0, down.stderr
    project_label = {"label": f"com.docker.compose.project={project}"}
    assert docker_client.containers.list(all=True, filters=project_label) == []
    assert docker_client.volumes.list(filters=project_label) == []
