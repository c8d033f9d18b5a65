"""Our DLedger node (`nodes/`) as a system under test: Raft, or RocketMQ's classic master-slave HA.

Its options are the run's `--mode` (dledger, master-slave-sync, master-slave-async: how each
node is started, `harness.chaos.modes`), and the node's own flags (`--flush`, `--timing`,
`--read-mode`: `serve_args`). It takes every fault family, consumers, and leaves every kind
of evidence (final logs, events, store files).
"""

from __future__ import annotations

import argparse
import contextlib
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from harness.chaos.consumers import HaPuller, Puller, RaftPuller
from harness.chaos.final import read_final_logs, wait_for_catch_up
from harness.chaos.modes import MODES, Mode
from harness.chaos.workload import Acked, Served
from harness.containers.cluster import NODE_PORT
from harness.system import Finish, System
from nodes.client import Client, ClientError, ReadResult
from nodes.payload import payload_id
from nodes.serve import TIMING_NAMES
from nodes.timing import timing_profile

if TYPE_CHECKING:
    import docker

    from harness.chaos.workload import LogClient
    from harness.ssh.nodes import SshNodes


class DledgerLog:
    """The workers' `harness.chaos.workload.LogClient` over the node's own client (redirects to the
    leader, or asks the one node `node` of a directed read)."""

    def __init__(self, client: Client) -> None:
        self.client = client

    def append(self, body: bytes) -> Acked:
        done = self.client.append(body)
        return Acked(done.first_index, done.node, {"term": done.term})

    def read(self, first: int, last: int, node: str | None = None, mode: str = "",
             timeout: float | None = None) -> Served:
        result = self.client.get(first, last, node=node, mode=mode, timeout=timeout)
        return Served(read_value(first, result), result.node)

    def close(self) -> None:
        self.client.close()


def read_value(first: int, result: ReadResult) -> dict[str, Any]:
    """The history value of an ok read: the committed entries returned, as [index, id] pairs,
    and the range they answer for (`to` below the asked one when the node cut its answer)."""
    return {
        "from": first,
        "to": result.last_index,
        "commit_index": result.commit_index,
        "entries": [[e.index, payload_id(e.body)] for e in result.entries],
    }


@dataclass
class Dledger(System):
    """The node, started as `python3 -m nodes serve` with `serve_args` and each node's `node_args`."""

    serve_args: Sequence[str] = ()
    node_args: Mapping[str, Sequence[str]] = field(default_factory=dict)
    mode: Mode = MODES["dledger"]
    mutant: str | None = None
    timing: str = "default"
    name = "dledger"
    client_port = NODE_PORT
    consumers = True
    directed_reads = True
    disk_files = ("data", "index")
    preferred_leader = True

    @property
    def read_modes(self) -> tuple[str, ...]:  # type: ignore[override]
        return self.mode.read_modes

    def lease_quiet_s(self) -> float:
        """A lease taken on a stepped clock lasts at most a lease (a leader-lost time): twice that."""
        return 2 * timing_profile(TIMING_NAMES[self.timing]).leader_lost_ms / 1000

    def image(self, client: docker.DockerClient, log: Any = None) -> str:
        from harness.containers.image import ensure_images
        from harness.mutants.build import image_source

        return ensure_images(client, mutant=image_source(self.mutant), **({"log": log} if log else {}))

    def command(self, nodes: SshNodes, name: str) -> str:
        args = ["python3", "-m", "nodes", "serve", "--id", name, "--peers", nodes.peers_arg(),
                "--data-dir", nodes.data_dir, *(["--log-dir", nodes.log_dir] if nodes.fuse else []),
                *nodes.listen_args(name), *self.serve_args, *self.node_args.get(name, [])]
        return shlex.join(args)

    def leader(self, nodes: SshNodes, timeout: float = 1.0) -> str | None:
        """The node that claims leadership in the highest term among those that answer, if any."""
        claims: list[tuple[int, str]] = []
        with Client(nodes.client_peers(), timeout=timeout) as client:
            for name in nodes.names:
                with contextlib.suppress(ClientError):
                    meta = client.metadata(node=name, timeout=timeout)
                    if meta.role == "leader":
                        claims.append((meta.term, name))
        return max(claims)[1] if claims else None

    def client(self, nodes: SshNodes, timeout: float) -> LogClient:
        return DledgerLog(Client(nodes.network_peers(), timeout=timeout))

    def puller(self, nodes: SshNodes, timeout: float) -> Puller:
        """A consumer's client: DLedger's pull from the leader, or a master-slave consumer's failover."""
        wrap = HaPuller if self.mode.master_slave else RaftPuller
        return wrap(Client(nodes.network_peers(), timeout=timeout))

    def transfer(self, nodes: SshNodes, to: str, timeout: float) -> dict[str, Any]:
        try:
            with Client(nodes.network_peers(), timeout=timeout) as client:
                result = client.transfer(to, timeout=timeout)
        except ClientError as e:  # the cluster's answer, not a harness failure
            return {"result": f"refused: {e}"}
        return {"result": "transferred", "term": result.term}

    def finish(self, nodes: SshNodes, final_dir: Path, catch_up_s: float, op_timeout: float) -> Finish:
        with Client(nodes.network_peers(), timeout=op_timeout) as client:
            caught = wait_for_catch_up(client, nodes.names, catch_up_s)
            catch_up = {"leader": caught.leader, "commit_index": caught.commit_index,
                        "lagging": caught.lagging, "seconds": round(caught.seconds, 3)}
            return Finish(catch_up, read_final_logs(client, nodes.names, final_dir))

    def options(self) -> dict[str, Any]:
        return {"mode": self.mode.name}


def from_args(args: argparse.Namespace) -> Dledger:
    """The node as a run's flags describe it (`--mode`, `--flush`, `--timing`, `--read-mode`, `--mutant`)."""
    from harness.chaos.modes import node_read_mode

    mode = MODES[args.mode]
    names = [f"n{i + 1}" for i in range(args.nodes)] if args.inventory is None else args.inventory.names
    serve_args = ["--flush", args.flush, "--timing", args.timing,
                  "--read-mode", node_read_mode(args.read_mode), "--segment-mb", "64"]
    return Dledger(serve_args, mode.node_args(names), mode, args.mutant, args.timing)
