"""Compose projects the tests start (docker-compose.yml's 5-node cluster, tests/hosts' SSH hosts).

Each gets, through an override file, the label a run's resources carry (`dledger-chaos.run=<project>`)
on every service, network and volume, so `python -m harness clean` removes a project an
interrupted test left, as it removes a crashed run's containers; a user's own
`docker compose up` carries no such label and is never touched.
"""

from __future__ import annotations

import json
import secrets
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import docker
import pytest
import yaml

from harness.containers.cluster import LABEL_RUN
from tests.support.leftovers import leftovers
from tests.support.localcluster import free_ports

REPO = Path(__file__).resolve().parents[2]
NODES_FILE = REPO / "docker-compose.yml"
NODE_NAMES = [f"n{i}" for i in range(1, 6)]
PATH_ONLY = {"PATH": "/usr/local/bin:/usr/bin:/bin"}


def compose_command() -> list[str]:
    """`docker compose` (v2 plugin) where it exists, else `docker-compose` (v1, Debian's package)."""
    if subprocess.run(["docker", "compose", "version"], capture_output=True).returncode == 0:
        return ["docker", "compose"]
    if shutil.which("docker-compose"):
        return ["docker-compose"]
    pytest.fail("neither `docker compose` nor `docker-compose` is installed: apt-get install docker-compose")


def run_labels(compose_file: Path, project: str) -> dict[str, dict[str, dict[str, Any]]]:
    """An override giving each service, network and volume of `compose_file` the run label.

    A network or volume keeps its whole definition (docker-compose v1 replaces a top-level
    network with an override's, where services are merged key by key)."""
    spec = yaml.safe_load(compose_file.read_text())
    override: dict[str, dict[str, dict[str, Any]]] = {"services": {}, "networks": {}, "volumes": {}}
    for kind, entries in override.items():
        for name, definition in (spec.get(kind) or {}).items():
            kept = {} if kind == "services" else dict(definition or {})
            entries[name] = {**kept, "labels": {**_labels(kept.get("labels")), LABEL_RUN: project}}
    return override


def _labels(labels: dict[str, str] | list[str] | None) -> dict[str, str]:
    """Compose labels, a mapping or a list of `key=value`, as a mapping."""
    if isinstance(labels, list):
        return dict(label.split("=", 1) for label in labels)
    return dict(labels or {})


@contextmanager
def compose_project(compose_file: Path, prefix: str, env: dict[str, str]) -> Iterator[str]:
    """`compose_file` up as a project of its own (named `prefix`-<random>), labelled; down -v after.
    Yields the project's name (also its run label)."""
    project = f"{prefix}-{secrets.token_hex(3)}"
    with tempfile.TemporaryDirectory(prefix="compose-") as folder:
        override = Path(folder, "labels.yml")  # JSON is YAML
        override.write_text(json.dumps(run_labels(compose_file, project)))
        compose = [*compose_command(), "-p", project, "-f", str(compose_file), "-f", str(override)]
        env = {**PATH_ONLY, **env}
        try:
            up = subprocess.run([*compose, "up", "-d"], env=env, capture_output=True, text=True, timeout=120)
            assert up.returncode == 0, up.stderr
            yield project
        finally:
            down = subprocess.run([*compose, "down", "-v"], env=env, capture_output=True, text=True,
                                  timeout=120)
        assert down.returncode == 0, down.stderr


def free_subnet(client: docker.DockerClient) -> str:
    """The first three octets of a 10.205.x.0/24 no Docker network uses (DLEDGER_NET)."""
    taken = {
        config.get("Subnet", "")
        for network in client.networks.list()
        for config in (network.attrs.get("IPAM") or {}).get("Config") or []
    }
    return next(f"10.205.{x}" for x in range(11, 255) if f"10.205.{x}.0/24" not in taken)


@contextmanager
def node_cluster(client: docker.DockerClient) -> Iterator[tuple[str, str]]:
    """docker-compose.yml's 5 nodes up, on a free subnet and free host ports; yields (project, the
    `--peers` value that reaches them from the host); each container, volume and the network carries
    the run label."""
    ports = free_ports(len(NODE_NAMES))
    env = {"DLEDGER_NET": free_subnet(client), **{f"N{i}_PORT": str(p) for i, p in enumerate(ports, 1)}}
    peers = ",".join(f"{name}=127.0.0.1:{port}" for name, port in zip(NODE_NAMES, ports, strict=True))
    with compose_project(NODES_FILE, "dlc-compose", env) as project:
        labelled = leftovers(client, project)
        assert len(labelled) == 2 * len(NODE_NAMES) + 1, f"not all labelled: {labelled}"
        yield project, peers
