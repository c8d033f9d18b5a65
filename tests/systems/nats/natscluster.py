"""A JetStream cluster of our own for the NATS tests: `size` nats-server containers on a fresh network.

Every container, network and volume carries `dledger-chaos.run` (so `python -m harness clean`
removes what an interrupted test left); `nats_cluster` removes them when it ends.
"""

from __future__ import annotations

import io
import tarfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import PurePosixPath

import docker

from harness.cluster import DATA_DIR, LABEL_NODE, LABEL_RUN, new_run_id, remove_labelled
from harness.wait import wait_for
from nodes.client import ClientError
from systems.nats.client import Connection, JetStream, StreamSpec
from systems.nats.config import CLIENT_PORT, CONFIG_PATH, MONITOR_PORT, server_config

SPEC = StreamSpec(name="dlc", subject="dlc.log", replicas=3, duplicate_window_s=120)


@dataclass(frozen=True)
class NatsNode:
    name: str
    container: str
    client_port: int  # on 127.0.0.1
    monitor_port: int


class NatsCluster:
    """`size` nats-server containers on a network of their own, each server named after its node."""

    def __init__(self, client: docker.DockerClient, image: str, size: int = 3,
                 sync_interval: str = "default") -> None:
        self.client, self.image, self.sync_interval = client, image, sync_interval
        self.run_id = f"nats-{new_run_id()}"
        self.names = [f"n{i}" for i in range(1, size + 1)]
        self.nodes: dict[str, NatsNode] = {}

    def container_name(self, name: str) -> str:
        return f"dlc-{self.run_id}-{name}"

    def config(self, name: str) -> str:
        return server_config(name, {n: self.container_name(n) for n in self.names}, self.sync_interval)

    def start(self) -> NatsCluster:
        labels = {LABEL_RUN: self.run_id}
        network = f"dlc-{self.run_id}"
        self.client.networks.create(network, driver="bridge", labels=labels, check_duplicate=True)
        for name in self.names:
            volume = self.client.volumes.create(f"{self.container_name(name)}-data",
                                                labels={**labels, LABEL_NODE: name})
            container = self.client.containers.create(
                self.image, ["nats-server", "-c", CONFIG_PATH], detach=True, name=self.container_name(name),
                hostname=name, init=True, cap_add=["NET_ADMIN"], network=network,
                ports={f"{CLIENT_PORT}/tcp": ("127.0.0.1", None), f"{MONITOR_PORT}/tcp": ("127.0.0.1", None)},
                labels={**labels, LABEL_NODE: name}, volumes={volume.name: {"bind": DATA_DIR, "mode": "rw"}})
            config = PurePosixPath(CONFIG_PATH)
            container.put_archive(str(config.parent), _tar(config.name, self.config(name)))
            container.start()
            container.reload()
            ports = container.attrs["NetworkSettings"]["Ports"]
            self.nodes[name] = NatsNode(name, container.name, int(ports[f"{CLIENT_PORT}/tcp"][0]["HostPort"]),
                                        int(ports[f"{MONITOR_PORT}/tcp"][0]["HostPort"]))
        return self

    def js(self, name: str, timeout: float = 5.0) -> JetStream:
        return JetStream(Connection("127.0.0.1", self.nodes[name].client_port, timeout=timeout, name=name))

    def container(self, name: str):
        return self.client.containers.get(self.nodes[name].container)

    def logs(self, name: str) -> str:
        return self.container(name).logs().decode(errors="replace")

    def remove(self) -> None:
        remove_labelled(self.client, self.run_id)


def _tar(name: str, text: str) -> bytes:
    data = text.encode()
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        member = tarfile.TarInfo(name)
        member.size, member.mode = len(data), 0o644
        tar.addfile(member, io.BytesIO(data))
    return buffer.getvalue()


def create_stream(js: JetStream, spec: StreamSpec = SPEC, timeout: float = 60) -> str:
    """Create the stream once the cluster takes it (bounded); return its leader once known."""
    def created() -> bool:
        try:
            js.create_stream(spec)
        except ClientError:
            return False  # no JetStream meta leader yet, or not enough servers
        return True

    wait_for(created, timeout, f"the NATS cluster did not create stream {spec.name} in {timeout} s",
             interval=0.5)
    return stream_leader(js, spec.name, timeout)


def stream_leader(js: JetStream, stream: str, timeout: float = 30, other_than: str | None = None) -> str:
    def leader() -> str | None:
        try:
            found = js.info(stream).leader
        except ClientError:
            return None
        return found if found != other_than else None

    but = f" but {other_than}" if other_than else ""
    return wait_for(leader, timeout, f"stream {stream} has no leader{but} after {timeout} s", interval=0.2)


def nats_cluster(client: docker.DockerClient, image: str, sync_interval: str) -> Iterator[NatsCluster]:
    cluster = NatsCluster(client, image, sync_interval=sync_interval)
    try:
        yield cluster.start()
    finally:
        cluster.remove()
