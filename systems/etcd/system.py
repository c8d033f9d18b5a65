"""etcd as a system under test: one etcd member per node, a static cluster, the log over its keyspace.

Each node runs `etcd` with the static cluster's command line (`systems.etcd.config`), its data
in `<data dir>/etcd` (the power-loss file system and `collect` reach its WAL and snapshots);
`--etcd-unsafe-no-fsync` adds `--unsafe-no-fsync`. The workers append through the JSON gateway
(a transaction creating `log/<id>`; `log_index = create_revision - 2`) and read linearizably
(etcd's default range read); the leader is the one the members report in the highest term;
churn is etcd's move-leader. After healing, `finish` waits until a linearizable read answers and
every member's store revision reaches it, then reads each member's own log with a serializable
range on that member alone (`final/<node>.jsonl`).
"""

from __future__ import annotations

import contextlib
import shlex
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from harness.chaos.consumers import BATCH, Consumed, Pulled
from harness.chaos.workload import Acked, Served
from harness.errors import HarnessError
from harness.system import KERNEL_CLOCK, OUR_NODE_ONLY, Finish, System, write_final_log
from harness.wait import wait_for
from nodes.client import ClientError
from nodes.payload import payload_id
from systems.etcd.client import EtcdClient
from systems.etcd.config import CLIENT_PORT, EtcdOptions, etcd_command

if TYPE_CHECKING:
    import docker

    from harness.ssh.nodes import SshNodes


REFUSED = {**OUR_NODE_ONLY, "clock": KERNEL_CLOCK.format("etcd")}


def endpoints(nodes: SshNodes) -> dict[str, str]:
    """Each member's client endpoint on the run network (`host:port`)."""
    return {name: f"{nodes.address(name)}:{CLIENT_PORT}" for name in nodes.names}


@dataclass
class Etcd(System):
    """A static etcd cluster; `unsafe_no_fsync` starts every member with `--unsafe-no-fsync`."""

    unsafe_no_fsync: bool = False
    name = "etcd"
    client_port = CLIENT_PORT
    refused = REFUSED
    disk_files = ("wal",)
    read_modes = ("linearizable",)
    inputs = ("history", "final-logs")
    consumers = True

    def image(self, client: docker.DockerClient, log: Any = None) -> str:
        from harness.containers.image import ensure_base
        from systems.etcd.image import ensure_etcd_image

        extra = {"log": log} if log else {}
        return ensure_etcd_image(client, ensure_base(client, **extra), **extra)

    def command(self, nodes: SshNodes, name: str) -> str:
        options = EtcdOptions(data_dir=f"{nodes.data_dir}/etcd", unsafe_no_fsync=self.unsafe_no_fsync)
        return shlex.join(etcd_command(name, {n: nodes.address(n) for n in nodes.names}, options))

    def leader(self, nodes: SshNodes, timeout: float = 1.0) -> str | None:
        try:
            return EtcdClient(endpoints(nodes), timeout=timeout).leader()
        except ClientError:
            return None

    def client(self, nodes: SshNodes, timeout: float) -> EtcdLog:
        return EtcdLog(EtcdClient(endpoints(nodes), timeout=timeout))

    def puller(self, nodes: SshNodes, timeout: float) -> EtcdPuller:
        return EtcdPuller(EtcdClient(endpoints(nodes), timeout=timeout))

    def transfer(self, nodes: SshNodes, to: str, timeout: float) -> dict[str, Any]:
        try:
            EtcdClient(endpoints(nodes), timeout=timeout).move_leader(to)
        except ClientError as e:  # the cluster's answer, not a harness failure
            return {"result": f"refused: {e}"}
        return {"result": "transferred"}

    def finish(self, nodes: SshNodes, final_dir: Path, catch_up_s: float, op_timeout: float) -> Finish:
        started = time.monotonic()
        client = EtcdClient(endpoints(nodes), timeout=op_timeout)
        seen: dict[str, Any] = {"leader": None, "commit_index": -1, "lagging": {n: -1 for n in nodes.names}}

        def caught_up() -> bool:
            try:
                confirmed = client.read(0, -1)  # linearizable: the cluster's revision, no entries
            except ClientError:
                return False
            revisions = {}
            for name in nodes.names:
                with contextlib.suppress(ClientError):
                    revisions[name] = client.status(name).revision - 2  # as an index
            seen.update(leader=self.leader(nodes, op_timeout), commit_index=confirmed.commit_index,
                        lagging={n: revisions.get(n, -1) for n in nodes.names
                                 if revisions.get(n, -1) < confirmed.commit_index})
            return not seen["lagging"]

        with contextlib.suppress(HarnessError):
            wait_for(caught_up, catch_up_s, "catch-up", interval=0.2)
        catch_up = {**seen, "seconds": round(time.monotonic() - started, 3)}
        outcomes: dict[str, int | str] = {}
        for name in nodes.names:
            path = final_dir / f"{name}.jsonl"
            try:
                outcomes[name] = write_final_log(path, dict(client.read_all(name)))
            except ClientError as e:
                path.unlink(missing_ok=True)
                outcomes[name] = f"unreadable: {e}"
        return Finish(catch_up, outcomes)

    def options(self) -> dict[str, Any]:
        return {"etcd_unsafe_no_fsync": self.unsafe_no_fsync}


class EtcdLog:
    """The workers' `harness.chaos.workload.LogClient` over the JSON gateway: appends create `log/<id>`,
    reads are linearizable ranges (a member that cannot be reached is skipped for the next)."""

    def __init__(self, client: EtcdClient) -> None:
        self.client = client

    def append(self, body: bytes) -> Acked:
        append_id = payload_id(body)
        if append_id is None:
            raise ValueError("an etcd append needs a payload with an id (nodes.payload.encode_payload)")
        done = self.client.append(append_id, value=body)
        return Acked(done.log_index, done.node, {"duplicate": True} if done.duplicate else {})

    def read(self, first: int, last: int, node: str | None = None, mode: str = "",
             timeout: float | None = None) -> Served:
        done = self.client.read(first, last)
        return Served(done.history_value(), done.node)

    def close(self) -> None:
        self.client.close()


class EtcdPuller:
    """A consumer's client (`harness.chaos.consumers.Puller`): a pull from member `node` is a serializable
    range of the next `BATCH` indexes on that member alone, so it answers from what that member has
    applied (committed entries, whose end never moves back in a correct etcd: `end` None)."""

    def __init__(self, client: EtcdClient) -> None:
        self.client = client

    def pull(self, offset: int, node: str) -> Pulled:
        done = self.client.read(offset, offset + BATCH - 1, node=node, serializable=True)
        entries: list[Consumed] = list(done.entries)
        following = entries[-1][0] + 1 if entries else offset
        return Pulled(entries, following, None, done.node, None, None)

    def close(self) -> None:
        self.client.close()


def from_args(args: Any) -> Etcd:
    return Etcd(bool(args.etcd_unsafe_no_fsync))
