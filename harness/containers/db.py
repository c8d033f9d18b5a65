"""The Db: a DLedger cluster in Docker containers and every lifecycle action on it (Jepsen's Db).

    with Db(nodes=5, key_dir=results / "ssh") as db:   # setup: images, network, containers, SSH
        db.start()                                      # every node, over SSH; waits until each listens
        leader = db.wait_for_leader()
        db.kill("n2"); db.start("n2")                   # SIGKILL, then start again (recovery)
        db.pause("n3"); db.resume("n3")                 # SIGSTOP / SIGCONT
        db.ssh("n1").exec("iptables -S", timeout=5)     # Result(status, stdout, stderr)
        db.collect(results)                             # results/nodes/<node>/{node.log, data/, ...}
    # teardown() has run: no container, network or volume of the run is left

`Db(..., fuse=True)` (what the power-loss fault needs) puts each node's data dir on the
power-loss file system (`nemesis/agents/lazyfs.py`), mounted by `start` before the node
runs, over a folder of the node's volume; `node.log`, `events.jsonl` and `stdout.log` then
go to `log_dir`, another folder of the volume, so a power loss never eats the evidence.

The node lifecycle (start, kill, pause, collect ...) is `harness.ssh.nodes.SshNodes`, shared
with the Db on machines of an inventory (`harness.hosts.db`); `harness.chaos.rundb.RunDb` is the
seam a run sees. The interface others use:
* `names` (n1..nN), `node(name)` -> `Node` (`address` inside the run network,
  `client_port` and `ssh_port` published on 127.0.0.1), `address(name)`,
  `client_peers()` -> {name: Address(127.0.0.1, client port)} for `nodes.client.Client`,
  `network_peers()` -> {name: Address(run-network address, 20911)} (reachable from the
  host too; a dead node refuses there, while docker's port proxy accepts and resets),
  `peers_arg()` -> the `--peers` value the nodes run with.
* `ssh(name)` -> `harness.ssh.control.Ssh`; `exec(name, command, timeout)` -> stdout, raising
  `CommandFailed` on a non-zero exit (the nemesis's `Nodes` protocol).
* `start(name=None)` (all nodes when None; a running node is left alone), `kill`, `stop`
  (SIGTERM, waits for the exit), `pause`, `resume`, `running(name)`, `leader()`,
  `wait_for_leader(timeout)`, `collect(results_dir)`, `teardown()`.
* `data_dir` (the node's `--data-dir`), `log_dir` (its `--log-dir`), `mount(name)` (with
  `fuse`: the power-loss file system at the data dir, unless it is mounted).

Teardown always runs: on leaving the `with` block normally, on an exception, on Ctrl-C
(SIGINT) and on SIGTERM (turned into KeyboardInterrupt while the Db is entered from the
main thread), and a failed `setup` tears down what it made. Signals arriving during
teardown are held until it is done. iptables rules and tc qdiscs live in the containers'
network namespaces and die with them. A run killed with SIGKILL leaves resources that
`python -m harness clean` removes (by label).
"""

from __future__ import annotations

import contextlib
import signal
import tempfile
import threading
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from types import FrameType
from typing import Any

from harness.containers.cluster import DATA_DIR, DISK_DIR, NODE_PORT, Cluster, Node, connect, new_run_id
from harness.errors import HarnessError
from harness.ssh.control import Ssh
from harness.ssh.keys import create_key_pair
from harness.ssh.nodes import SshNodes
from harness.system import System
from nodes.peers import Address
from systems.dledger import Dledger

PIDFILE = "/run/dledger-node.pid"
STORE_DIR = f"{DISK_DIR}/store"  # with `fuse`: what the power-loss file system keeps on the volume
FUSE_LOG_DIR = f"{DISK_DIR}/log"


class Db(SshNodes):
    """A cluster of N DLedger nodes in containers of one run; see the module doc."""

    def __init__(self, nodes: int = 3, *, system: System | None = None, serve_args: Sequence[str] = (),
                 run_id: str | None = None, key_dir: Path | None = None, image: str | None = None,
                 fuse: bool = False, node_args: Mapping[str, Sequence[str]] | None = None):
        """`system` (default: our DLedger node, started with `serve_args` and each node's `node_args`)
        runs in containers of `image` (default: the system's own image, built when stale)."""
        system = system or Dledger(serve_args, node_args or {})
        super().__init__(system, fuse, pidfile=PIDFILE, data_dir=DATA_DIR, store_dir=STORE_DIR,
                         fuse_log_dir=FUSE_LOG_DIR)
        self.run_id = run_id or new_run_id()
        self.size = nodes
        self._image = image
        self._key_dir = key_dir
        self._own_key_dir: tempfile.TemporaryDirectory[str] | None = None
        self._cluster: Cluster | None = None
        self._nodes: dict[str, Node] = {}
        self._ssh: dict[str, Ssh] = {}
        self._previous_sigterm: Any = None

    # -- lifecycle -------------------------------------------------------------------

    def setup(self) -> None:
        """Build or reuse the images, create the network and containers, open one SSH connection per node."""
        try:
            client = connect()
            image = self._image or self.system.image(client)
            key_dir = self._key_dir
            if key_dir is None:
                self._own_key_dir = tempfile.TemporaryDirectory(prefix=f"dlc-{self.run_id}-ssh-")
                key_dir = Path(self._own_key_dir.name)
            keys = create_key_pair(key_dir, f"dledger-chaos-{self.run_id}")
            self._cluster = Cluster(client, self.run_id, self.size, image, keys.public_line, fuse=self.fuse)
            self._nodes = self._cluster.create()
            pkey = keys.pkey()
            for name, node in self._nodes.items():
                self._ssh[name] = Ssh("127.0.0.1", node.ssh_port, pkey, name=name)
                self._ssh[name].connect()
            self.system.install(self)
        except BaseException:
            self.teardown()
            raise

    def teardown(self) -> None:
        """Close SSH, remove the run's containers, volumes and network; safe at any point, and twice."""
        with signals_held():
            for ssh in self._ssh.values():
                ssh.close()
            self._ssh.clear()
            if self._cluster is not None:
                self._cluster.remove()
            if self._own_key_dir is not None:
                self._own_key_dir.cleanup()
                self._own_key_dir = None

    def __enter__(self) -> Db:
        if threading.current_thread() is threading.main_thread():
            self._previous_sigterm = signal.signal(signal.SIGTERM, _interrupt)
        try:
            self.setup()
        except BaseException:
            self.__exit__()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        try:
            self.teardown()
        finally:
            if threading.current_thread() is threading.main_thread():
                signal.signal(signal.SIGTERM, self._previous_sigterm or signal.SIG_DFL)

    # -- the nodes -------------------------------------------------------------------

    @property
    def names(self) -> list[str]:
        return list(self._nodes)

    def node(self, name: str) -> Node:
        try:
            return self._nodes[name]
        except KeyError:
            raise HarnessError(f"no node {name!r} in this run; nodes are {self.names}") from None

    def address(self, name: str) -> str:
        """The node's IP address inside the run's network."""
        return self.node(name).address

    def network_peers(self) -> dict[str, Address]:
        """Each node's client address inside the run's network (the host reaches it too).

        Unlike a published port, where docker's proxy accepts a connection to a dead node and
        then resets it, a dead node's own address refuses the connection: a definite failure.
        """
        return {n: Address(node.address, NODE_PORT) for n, node in self._nodes.items()}

    def peers_arg(self) -> str:
        """The `--peers` value the nodes run with: their addresses inside the run's network."""
        return ",".join(f"{n}={address}" for n, address in self.network_peers().items())

    def client_peers(self) -> dict[str, Address]:
        """Each node's client port as published on 127.0.0.1, for `nodes.client.Client`."""
        return {n: Address("127.0.0.1", node.client_port) for n, node in self._nodes.items()}

    def ssh(self, name: str) -> Ssh:
        self.node(name)
        return self._ssh[name]

    def left_running(self) -> str:
        """How to reach the cluster left running, and how to remove it."""
        return (f"cluster {self.run_id} left running; client ports {self.client_peers()}; "
                "remove it with: python -m harness clean")


def _interrupt(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


@contextlib.contextmanager
def signals_held() -> Iterator[None]:
    """Hold SIGINT and SIGTERM until the block is done, then raise KeyboardInterrupt if one came."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    received: list[int] = []
    previous = {s: signal.signal(s, lambda signum, frame: received.append(signum))
                for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
        if received:
            raise KeyboardInterrupt(f"signal {received[0]} during teardown")

