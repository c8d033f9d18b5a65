"""A static etcd cluster in containers of one run, for tests and benches until the system seam
starts etcd the harness's way (over SSH in the run's `harness.cluster.Cluster`).

One bridge network, one volume and one container per member, all labelled
`dledger-chaos.run=<run id>` and named `dlc-<run id>-...` as a run's are, so
`python -m harness clean` removes whatever a crash leaves. Each container runs its member's
etcd command (`systems.etcd.config`) under docker's init; members find each other by container
name (the network's DNS), since the command must be written before Docker gives out addresses.
The client port is published on 127.0.0.1 at a random host port; `docker kill` is a kill -9.
"""

from __future__ import annotations

from types import TracebackType

import docker  # type: ignore[import-untyped]
import docker.errors  # type: ignore[import-untyped]

from harness.cluster import DATA_DIR, LABEL_NODE, LABEL_RUN, Removed, new_run_id, remove_labelled
from systems.etcd.config import CLIENT_PORT, EtcdOptions, etcd_command


class EtcdContainers:
    """The network, volumes and containers of one etcd cluster; a context manager that removes them."""

    def __init__(self, client: docker.DockerClient, image: str, size: int = 3,
                 options: EtcdOptions | None = None, run_id: str | None = None) -> None:
        self.client = client
        self.image = image
        self.options = options or EtcdOptions()
        self.run_id = run_id or new_run_id()
        self.names = [f"n{i}" for i in range(1, size + 1)]
        self.network = f"dlc-{self.run_id}"
        self.labels = {LABEL_RUN: self.run_id}

    def container_name(self, name: str) -> str:
        return f"dlc-{self.run_id}-{name}"

    def start(self) -> dict[str, str]:
        """Create and start every member; their client endpoints (`127.0.0.1:port`) by name."""
        self.client.networks.create(self.network, driver="bridge", labels=self.labels, check_duplicate=True)
        hosts = {name: self.container_name(name) for name in self.names}
        for name in self.names:
            volume = self.client.volumes.create(f"{self.container_name(name)}-data",
                                                labels={**self.labels, LABEL_NODE: name})
            self.client.containers.create(  # create, unlike run, never pulls
                self.image, etcd_command(name, hosts, self.options), detach=True, init=True,
                name=self.container_name(name), hostname=name, network=self.network,
                ports={f"{CLIENT_PORT}/tcp": ("127.0.0.1", None)}, labels={**self.labels, LABEL_NODE: name},
                volumes={volume.name: {"bind": DATA_DIR, "mode": "rw"}}).start()
        return self.endpoints()

    def endpoints(self) -> dict[str, str]:
        """The client endpoint of every running member (a stopped one has no published port)."""
        found = {}
        for name in self.names:
            container = self.client.containers.get(self.container_name(name))
            for binding in container.attrs["NetworkSettings"]["Ports"].get(f"{CLIENT_PORT}/tcp") or []:
                if binding["HostIp"] == "127.0.0.1":
                    found[name] = f"127.0.0.1:{binding['HostPort']}"
        return found

    def kill(self, name: str) -> None:
        """SIGKILL the member's container (etcd and docker's init with it)."""
        self.client.containers.get(self.container_name(name)).kill()

    def restart(self, name: str) -> str:
        """Start a killed member again on its data; its new client endpoint."""
        self.client.containers.get(self.container_name(name)).start()
        return self.endpoints()[name]

    def logs(self, name: str) -> str:
        return self.client.containers.get(self.container_name(name)).logs().decode(errors="replace")

    def remove(self) -> Removed:
        """Remove everything of this cluster (idempotent)."""
        return remove_labelled(self.client, self.run_id)

    def __enter__(self) -> EtcdContainers:
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 trace: TracebackType | None) -> None:
        self.remove()
