"""A cluster of `python -m nodes serve` processes on loopback, for tests and benchmarks.

Stdlib only. Each node gets a free port on 127.0.0.1 and `<root>/<id>` as its data dir;
`kill` is SIGKILL, `stop` SIGTERM, `pause`/`resume` SIGSTOP/SIGCONT; `close` leaves no
process behind. With `master_role` the nodes run in master-slave mode: n1 is the master
with that role (SYNC_MASTER or ASYNC_MASTER), the others its slaves.
"""

from __future__ import annotations

import random
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from nodes.client import Client, ClientError
from nodes.peers import Address

# below Linux's ephemeral range (32768-60999), where the kernel picks the local port of every
# outgoing connection and Docker the host ports it publishes: a port picked here stays free
# while the Docker tests run beside the local clusters
PORT_RANGE = range(20000, 32000)


def free_ports(count: int) -> list[int]:
    """`count` distinct ports of PORT_RANGE that were free on 127.0.0.1 a moment ago."""
    draw = random.SystemRandom()
    ports: list[int] = []
    while len(ports) < count:
        port = draw.choice(PORT_RANGE)
        if port in ports:
            continue
        try:
            socket.create_server(("127.0.0.1", port)).close()
        except OSError:  # taken
            continue
        ports.append(port)
    return ports


class LocalCluster:
    """Node processes n1..nN on 127.0.0.1 (not started until `start`/`start_all`)."""

    def __init__(self, root: Path, size: int = 3, *, extra_args: Sequence[str] = (),
                 python: str = sys.executable, master_role: str | None = None) -> None:
        self.root = root
        self.master_role = master_role
        self.ids = [f"n{i + 1}" for i in range(size)]
        self.peers = {node: Address("127.0.0.1", port) for node, port in zip(self.ids, free_ports(size),
                                                                              strict=True)}
        self.extra_args = list(extra_args)
        self.python = python
        self.procs: dict[str, subprocess.Popen[bytes]] = {}

    @property
    def peers_arg(self) -> str:
        return ",".join(f"{node}={addr}" for node, addr in self.peers.items())

    def data_dir(self, node: str) -> Path:
        return self.root / node

    def mode_args(self, node: str) -> list[str]:
        """The mode's arguments for `node`: none for DLedger, its role (and master) otherwise."""
        if self.master_role is None:
            return []
        master = self.ids[0]
        if node == master:
            return ["--mode", "master-slave", "--role", self.master_role]
        return ["--mode", "master-slave", "--role", "SLAVE", "--master", str(self.peers[master])]

    def start(self, node: str, *extra: str) -> None:
        """Start `node` (again) with the cluster's arguments and `extra`."""
        if self.alive(node):
            raise RuntimeError(f"{node} is already running")
        data = self.data_dir(node)
        data.mkdir(parents=True, exist_ok=True)
        cmd = [self.python, "-m", "nodes", "serve", "--id", node, "--peers", self.peers_arg,
               "--data-dir", str(data), *self.mode_args(node), *self.extra_args, *extra]
        with open(data / "stderr.log", "ab") as err:
            self.procs[node] = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=err,
                                                cwd=Path(__file__).resolve().parents[2])

    def start_all(self) -> None:
        for node in self.ids:
            self.start(node)

    def alive(self, node: str) -> bool:
        proc = self.procs.get(node)
        return proc is not None and proc.poll() is None

    def kill(self, node: str) -> None:
        """SIGKILL `node` and reap it."""
        proc = self.procs[node]
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=10)

    def pause(self, node: str) -> None:
        """SIGSTOP `node`."""
        self.procs[node].send_signal(signal.SIGSTOP)

    def resume(self, node: str) -> None:
        """SIGCONT `node`."""
        self.procs[node].send_signal(signal.SIGCONT)

    def stop(self, node: str, timeout: float = 10) -> int:
        """SIGTERM `node`; its exit code (SIGKILL after `timeout`)."""
        proc = self.procs[node]
        proc.send_signal(signal.SIGTERM)
        try:
            return proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            return proc.wait(timeout=10)

    def client(self, timeout: float = 3.0, nodes: Sequence[str] | None = None) -> Client:
        chosen = nodes or self.ids
        return Client({n: self.peers[n] for n in chosen}, timeout=timeout)

    def wait_for_leader(self, timeout: float = 15.0, among: Sequence[str] | None = None) -> str:
        """The leader that every live node of `among` names; RuntimeError after `timeout`."""
        nodes = [n for n in (among or self.ids) if self.alive(n)]
        deadline = time.monotonic() + timeout
        seen: dict[str, str | None] = {}
        with self.client(timeout=0.5) as client:
            while time.monotonic() < deadline:
                for node in nodes:
                    try:
                        seen[node] = client.metadata(node=node, timeout=0.5).leader
                    except ClientError:
                        seen[node] = None
                leaders = set(seen.values())
                if len(leaders) == 1 and None not in leaders and leaders <= set(nodes):
                    return leaders.pop()  # type: ignore[return-value]
                time.sleep(0.05)
        raise RuntimeError(f"no agreed leader among {nodes} within {timeout}s: {seen}; "
                           f"see {self.root}/*/node.log")

    def close(self) -> None:
        """Kill every node still running."""
        for proc in self.procs.values():
            if proc.poll() is None:
                proc.kill()  # a paused process dies of SIGKILL too
                proc.wait(timeout=10)

    def __enter__(self) -> LocalCluster:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class Clusters:
    """Starts clusters in folders of `root` with `base_args` and closes every one of them."""

    def __init__(self, root: Path, base_args: Sequence[str] = ()) -> None:
        self.root = root
        self.base_args = list(base_args)
        self.made: list[LocalCluster] = []

    def start(self, size: int, *serve_args: str, master_role: str | None = None) -> LocalCluster:
        cluster = LocalCluster(self.root / f"cluster{len(self.made)}", size, master_role=master_role,
                               extra_args=[*self.base_args, *serve_args])
        self.made.append(cluster)
        cluster.start_all()
        return cluster

    def close(self) -> None:
        for cluster in self.made:
            cluster.close()

