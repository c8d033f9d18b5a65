"""The run's Docker resources, made with the docker SDK: one bridge network, N node containers, their volumes.

Every resource carries the label `dledger-chaos.run=<run id>` and a name starting with
`dlc-<run id>`, so two runs never collide and `python -m harness clean` can find what a
crashed run left (the test suite's compose projects carry the same label, their project
name as the run id). Containers get `NET_ADMIN` (iptables, tc) and no `--privileged`, run
docker's init as PID 1 (it reaps the node after a kill), sshd as the main process, and
publish SSH (22) and the node's client port (20911) on 127.0.0.1 at random host ports.
Node-to-node traffic stays on the run's own network. With `fuse` (the power-loss fault) a
container also gets `/dev/fuse` and `SYS_ADMIN` (to mount; still no `--privileged`), and its
volume moves to `DISK_DIR`: the node's data dir is then the power-loss file system mounted
over a folder of it.
"""

from __future__ import annotations

import os
import secrets
import time
from dataclasses import dataclass

import docker
import docker.errors
from docker.models.containers import Container

from harness.errors import EngineUnavailable, HarnessError

LABEL_RUN = "dledger-chaos.run"
LABEL_NODE = "dledger-chaos.node"
NODE_PORT = 20911
SSH_PORT = 22
DATA_DIR = "/var/lib/dledger"
DISK_DIR = "/var/lib/dledger-disk"  # the volume, with `fuse`


def connect() -> docker.DockerClient:
    """A client for the local engine, negotiating the engine's API version (1.41 on Docker 20.10)."""
    try:
        client = docker.from_env(version="auto")
        client.ping()
    except docker.errors.DockerException as e:
        where = os.environ.get("DOCKER_HOST", "unix:///var/run/docker.sock")
        raise EngineUnavailable(
            f"The Docker engine is not reachable at {where}: start it (`systemctl start docker`, or run "
            "`dockerd` as root) and check that `docker info` works, then try again.") from e
    return client


def new_run_id() -> str:
    """A run id that sorts by time and does not collide between concurrent runs."""
    return f"{time.strftime('%Y%m%dT%H%M%S')}-{secrets.token_hex(3)}"


@dataclass(frozen=True)
class Node:
    """One node container: its name in the cluster, how the harness reaches it, its address inside the run."""

    name: str
    container: str
    address: str
    client_port: int
    ssh_port: int


@dataclass(frozen=True)
class Removed:
    """How many resources a clean-up removed."""

    containers: int
    networks: int
    volumes: int


FUSE_DEVICE = "/dev/fuse"  # the Docker host's FUSE device, given to each container of a power-loss run


class Cluster:
    """The network, volumes and containers of one run."""

    def __init__(self, client: docker.DockerClient, run_id: str, size: int, image: str, public_key: str,
                 fuse: bool = False):
        if size < 1:
            raise HarnessError(f"a cluster needs at least 1 node, not {size}")
        self.client = client
        self.run_id = run_id
        self.image = image
        self.public_key = public_key
        self.fuse = fuse
        self.names = [f"n{i}" for i in range(1, size + 1)]
        self.network_name = f"dlc-{run_id}"

    @property
    def labels(self) -> dict[str, str]:
        return {LABEL_RUN: self.run_id}

    def container_name(self, node: str) -> str:
        return f"dlc-{self.run_id}-{node}"

    def create(self) -> dict[str, Node]:
        """Create the network and start every container (sshd up soon after); return the nodes by name."""
        try:
            self.client.images.get(self.image)
        except docker.errors.ImageNotFound:
            raise HarnessError(f"image {self.image} is not built: run `make image` "
                               "(no registry is used, so it is never pulled)") from None
        self.client.networks.create(self.network_name, driver="bridge", labels=self.labels,
                                    check_duplicate=True)
        return {name: self._start_container(name) for name in self.names}

    def _start_container(self, name: str) -> Node:
        volume = self.client.volumes.create(f"{self.container_name(name)}-data",
                                            labels={**self.labels, LABEL_NODE: name})
        fuse = {"devices": [f"{FUSE_DEVICE}:/dev/fuse:rwm"]} if self.fuse else {}
        container = self.client.containers.create(  # create, unlike run, never pulls
            self.image, detach=True, name=self.container_name(name), hostname=name, init=True,
            cap_add=["NET_ADMIN", "SYS_ADMIN"] if self.fuse else ["NET_ADMIN"], **fuse,
            network=self.network_name,
            ports={f"{SSH_PORT}/tcp": ("127.0.0.1", None), f"{NODE_PORT}/tcp": ("127.0.0.1", None)},
            environment={"SSH_AUTHORIZED_KEY": self.public_key},
            labels={**self.labels, LABEL_NODE: name},
            volumes={volume.name: {"bind": DISK_DIR if self.fuse else DATA_DIR, "mode": "rw"}})
        try:
            container.start()
        except docker.errors.APIError as e:
            if self.fuse and FUSE_DEVICE in str(e):
                raise HarnessError(
                    f"the power-loss file system needs the FUSE device, and the Docker engine cannot give "
                    f"{FUSE_DEVICE} to a container ({e.explanation or e}): load the fuse module on the "
                    "Docker host (modprobe fuse), or run without the power-loss family") from None
            raise
        container.reload()
        settings = container.attrs["NetworkSettings"]
        address = settings["Networks"][self.network_name]["IPAddress"]
        return Node(name=name, container=container.name, address=address,
                    client_port=_host_port(settings, NODE_PORT), ssh_port=_host_port(settings, SSH_PORT))

    def container(self, node: str) -> Container:
        return self.client.containers.get(self.container_name(node))

    def remove(self) -> Removed:
        """Remove everything of this run (idempotent)."""
        return remove_labelled(self.client, self.run_id)


def _host_port(settings: dict, port: int) -> int:
    bindings = settings["Ports"].get(f"{port}/tcp") or []
    for binding in bindings:
        if binding["HostIp"] == "127.0.0.1":
            return int(binding["HostPort"])
    raise HarnessError(f"port {port} of the container is not published on 127.0.0.1: {bindings}")


def remove_labelled(client: docker.DockerClient, run_id: str | None = None) -> Removed:
    """Remove the containers, networks and volumes of one run, or of every run when `run_id` is None."""
    selector = {"label": f"{LABEL_RUN}={run_id}" if run_id else LABEL_RUN}
    counts = [0, 0, 0]
    for container in client.containers.list(all=True, filters=selector):
        counts[0] += _remove(lambda c=container: c.remove(force=True, v=True))
    for network in client.networks.list(filters=selector):
        counts[1] += _remove(network.remove)
    for volume in client.volumes.list(filters=selector):
        counts[2] += _remove(lambda v=volume: v.remove(force=True))
    return Removed(*counts)


def _remove(action) -> int:
    """Run one removal; something already gone (another clean-up was quicker) counts as nothing removed."""
    try:
        action()
    except docker.errors.NotFound:
        return 0
    return 1
