"""NATS JetStream as a system under test: one nats-server per node, one replicated file stream.

Each node runs `nats-server -c /etc/nats/nats.conf` (written by `install`: JetStream on the
node's data dir, so the power-loss file system and `collect` reach `jetstream/`, routes to
every peer, `--nats-sync-interval`). `prepare` creates the stream `dlc` with as many replicas
as nodes (JetStream allows at most 5) and a dedup window. The workers publish with a
`Nats-Msg-Id` header and read by seq (`MSG.GET`, answered by the stream leader; history
mapping in `systems.nats`); the leader is the stream's; churn asks the stream leader to step
down (JetStream picks its successor). After healing, `finish` waits for a stream leader whose
replicas are current, then reads the stream through that leader into `final/<leader>.jsonl`
(a seq the stream does not hold is a line with a null id, so later entries keep their
index) and records each server's own state (`/jsz`) in `catch_up`.
"""

from __future__ import annotations

import contextlib
import shlex
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from harness.chaos.consumers import BATCH, Consumed, Pulled
from harness.chaos.workload import Acked, Served
from harness.errors import HarnessError
from harness.system import KERNEL_CLOCK, OUR_NODE_ONLY, Finish, System, write_final_log
from harness.wait import wait_for
from nodes.client import ClientError
from nodes.payload import payload_id
from systems.nats.client import Connection, JetStream, JetStreamError, StreamSpec, replica_state
from systems.nats.config import CLIENT_PORT, CONFIG_PATH, MONITOR_PORT, SYNC_DEFAULT, server_config

if TYPE_CHECKING:
    import docker

    from harness.ssh.nodes import SshNodes

MAX_REPLICAS = 5  # JetStream's limit on a stream's replicas
CREATE_WAIT_S = 60.0
T = TypeVar("T")
REFUSED = {**OUR_NODE_ONLY, "clock": KERNEL_CLOCK.format("nats-server")}


def spec_for(nodes: int) -> StreamSpec:
    return StreamSpec(replicas=min(nodes, MAX_REPLICAS))


@dataclass
class Nats(System):
    """A JetStream cluster; `sync_interval` is the server's `sync_interval` (`default`: left out)."""

    sync_interval: str = SYNC_DEFAULT
    _clients: int = field(default=0, repr=False, compare=False)
    name = "nats"
    client_port = CLIENT_PORT
    refused = REFUSED
    disk_files = ("blk",)
    read_modes = ("committed",)  # MSG.GET answers from the stream leader's store: no linearizable read
    inputs = ("history", "final-logs")
    directed_reads = False
    consumers = True

    def image(self, client: docker.DockerClient, log: Any = None) -> str:
        from harness.containers.image import ensure_base
        from systems.nats.image import ensure_nats_image

        extra = {"log": log} if log else {}
        return ensure_nats_image(client, ensure_base(client, **extra), **extra)

    def install(self, nodes: SshNodes) -> None:
        peers = {name: nodes.address(name) for name in nodes.names}
        for name in nodes.names:
            config = server_config(name, peers, self.sync_interval, store_dir=nodes.data_dir)
            folder, path = shlex.quote(str(Path(CONFIG_PATH).parent)), shlex.quote(CONFIG_PATH)
            nodes.exec(name, f"mkdir -p {folder} && printf %s {shlex.quote(config)} > {path}")

    def command(self, nodes: SshNodes, name: str) -> str:
        return shlex.join(["nats-server", "-c", CONFIG_PATH])

    @contextlib.contextmanager
    def _js(self, nodes: SshNodes, name: str, timeout: float) -> Iterator[JetStream]:
        """The JetStream API on server `name`, its connection closed afterwards."""
        js = JetStream(Connection(nodes.address(name), CLIENT_PORT, timeout=timeout, name=name))
        try:
            yield js
        finally:
            js.connection.close()

    def _first_answer(self, nodes: SshNodes, timeout: float,
                      ask: Callable[[JetStream], T | None]) -> T | None:
        """`ask` of each server in turn: the first answer that is not None (a server that cannot be
        reached, or refuses, is passed over); None when no server gives one."""
        for name in nodes.names:
            with contextlib.suppress(ClientError), self._js(nodes, name, timeout) as js:
                answer = ask(js)
                if answer is not None:
                    return answer
        return None

    def prepare(self, nodes: SshNodes) -> None:
        spec = spec_for(len(nodes.names))

        def created() -> bool:  # no JetStream meta leader yet, or a server down: the next, or another round
            return self._first_answer(nodes, 5.0, lambda js: js.create_stream(spec)) is not None

        wait_for(created, CREATE_WAIT_S, f"the NATS cluster did not create stream {spec.name} in "
                                         f"{CREATE_WAIT_S:g} s; see stdout.log of each node", interval=0.5)

    def leader(self, nodes: SshNodes, timeout: float = 1.0) -> str | None:
        """The stream's leader as the first server that names one says (a server that cannot be
        reached, or knows none just now, is passed over)."""
        stream = spec_for(len(nodes.names)).name
        return self._first_answer(nodes, timeout, lambda js: js.info(stream).leader)

    def client(self, nodes: SshNodes, timeout: float) -> NatsLog:
        """A worker's client, on the next server in turn (the workers spread over the servers)."""
        hosts = {name: nodes.address(name) for name in nodes.names}
        self._clients += 1
        return NatsLog(hosts, spec_for(len(nodes.names)), timeout, first=self._clients)

    def puller(self, nodes: SshNodes, timeout: float) -> NatsPuller:
        return NatsPuller({name: nodes.address(name) for name in nodes.names}, spec_for(len(nodes.names)),
                          timeout)

    def transfer(self, nodes: SshNodes, to: str, timeout: float) -> dict[str, Any]:
        """A step-down of the stream leader: JetStream elects the successor (`to` is not asked for)."""
        stream = spec_for(len(nodes.names)).name

        def step_down(js: JetStream) -> str:
            try:
                js.step_down(stream)
            except JetStreamError as e:  # the cluster's answer; a server not reached is passed over
                return f"refused: {e}"
            return "stepped down"

        return {"result": self._first_answer(nodes, timeout, step_down) or "refused: no server answered"}

    def finish(self, nodes: SshNodes, final_dir: Path, catch_up_s: float, op_timeout: float) -> Finish:
        started = time.monotonic()
        stream = spec_for(len(nodes.names)).name
        seen: dict[str, Any] = {"leader": None, "last_seq": None, "lagging": {}, "ahead": {}}

        def current() -> bool:
            leader = self.leader(nodes, op_timeout)
            if leader is None:
                return False
            try:
                with self._js(nodes, leader, op_timeout) as js:
                    info = js.info(stream)
            except ClientError:
                return False
            lagging = {r.name: r.lag for r in info.replicas if not r.current or r.lag}
            # The leader reports a restarted replica current before it has caught up (seen after a
            # damaged message block): each server's own state must reach the last seq too.
            # A restarted server may answer for a leadership it lost while down, with its own stale
            # last seq (seen in CI): a replica holding more than that answer says it is stale.
            holders = {info.leader, *(r.name for r in info.replicas)} - {None, *lagging}
            ahead: dict[str, int] = {}
            for name in sorted(n for n in holders if n in nodes.names):
                with contextlib.suppress(ClientError):
                    behind = info.last_seq - (replica_state(nodes.address(name), MONITOR_PORT, stream)
                                              or {}).get("last_seq", 0)
                    if behind > 0:
                        lagging[name] = behind
                    elif behind < 0:
                        ahead[name] = -behind
            seen.update(leader=info.leader, last_seq=info.last_seq, lagging=lagging, ahead=ahead)
            return info.leader is not None and not lagging and not ahead

        with contextlib.suppress(HarnessError):
            wait_for(current, catch_up_s, "catch-up", interval=0.2)
        # A direct get is answered by a current replica, the asked server's own when it is one: with
        # every replica current each final log is that server's; otherwise another may have answered.
        exact = seen["leader"] is not None and not seen["lagging"] and not seen["ahead"]
        catch_up = {"leader": seen["leader"], "commit_index": None if seen["last_seq"] is None
                    else seen["last_seq"] - 1, "lagging": seen["lagging"],
                    **({"ahead_of_leader": seen["ahead"]} if seen["ahead"] else {}),
                    "seconds": round(time.monotonic() - started, 3),
                    "final_reads": "each server's own replica" if exact else
                    "a current replica per server (some were not: it may not be that server's own)"}
        timeout = max(op_timeout, 10.0)
        replicas: dict[str, Any] = {}
        outcomes: dict[str, int | str] = {}
        for name in nodes.names:
            path = final_dir / f"{name}.jsonl"
            try:
                state = replica_state(nodes.address(name), MONITOR_PORT, stream)
                replicas[name] = state or "no replica"
                last_seq = max((state or {}).get("last_seq", 0), seen["last_seq"] or 0)
                outcomes[name] = self._final(nodes, name, stream, last_seq if state else 0, path, timeout)
            except ClientError as e:
                path.unlink(missing_ok=True)
                replicas[name] = outcomes[name] = f"unreadable: {e}"
        return Finish({**catch_up, "replicas": replicas}, outcomes)

    def _final(self, nodes: SshNodes, name: str, stream: str, last_seq: int, path: Path,
               timeout: float) -> int:
        """Seqs 1..`last_seq` as server `name` holds them (a direct get on a server with a current
        replica is answered by that replica), one line each, a null id where it holds none; with
        `last_seq` 0 (the server holds no replica of the stream: it was lost) an empty log."""
        held: dict[int, str | None] = {}
        if last_seq:
            with self._js(nodes, name, timeout) as js:
                read = js.read_all(stream, direct=True, last_seq=last_seq)
            held = {m.log_index: m.msg_id for m in read.messages}
        return write_final_log(path, held)  # a replica's log ends at the last seq it holds

    def options(self) -> dict[str, Any]:
        return {"nats_sync_interval": self.sync_interval}


def from_args(args: Any) -> Nats:
    return Nats(args.nats_sync_interval)


def held(js: JetStream, stream: str, first: int, last: int, direct: bool = False) -> list[Consumed]:
    """Log indexes `first..last` (seqs `first + 1 ..`) as `(log_index, Nats-Msg-Id)`, up to the first
    seq the stream does not hold; `direct`: answered by a replica (`DIRECT.GET`)."""
    found: list[Consumed] = []
    for message in js.get_many(stream, range(first + 1, last + 2), direct):
        if message is None:
            break
        found.append((message.log_index, message.msg_id or payload_id(message.data)))
    return found


class NatsLog:
    """The workers' `harness.chaos.workload.LogClient` on one server at a time (the next after a failure):
    a publish with `Nats-Msg-Id` = the payload's id, reads by seq through the stream leader."""

    def __init__(self, hosts: dict[str, str], spec: StreamSpec, timeout: float, first: int = 0) -> None:
        self.hosts = hosts
        self.spec = spec
        self.timeout = timeout
        self._order = list(hosts)
        self._at = first
        self._js: JetStream | None = None

    def _server(self) -> JetStream:
        if self._js is None:
            name = self._order[self._at % len(self._order)]
            self._js = JetStream(Connection(self.hosts[name], CLIENT_PORT, timeout=self.timeout, name=name))
        return self._js

    def _failed(self) -> None:
        self.close()
        self._at += 1

    def append(self, body: bytes) -> Acked:
        msg_id = payload_id(body)
        if msg_id is None:
            raise ValueError("a NATS append needs a payload with an id (nodes.payload.encode_payload)")
        try:
            ack = self._server().publish(self.spec.subject, body, msg_id)
        except ClientError:
            self._failed()
            raise
        return Acked(ack.log_index, ack.node, {"duplicate": True} if ack.duplicate else {})

    def read(self, first: int, last: int, node: str | None = None, mode: str = "",
             timeout: float | None = None) -> Served:
        """Seqs `first + 1 ..` up to `last + 1` or the first the stream does not hold (`to` says where)."""
        js = self._server()
        try:
            entries = [list(entry) for entry in held(js, self.spec.name, first, last)]
        except ClientError:
            self._failed()
            raise
        to = entries[-1][0] if entries else first - 1
        return Served({"from": first, "to": to, "entries": entries}, js.node)

    def close(self) -> None:
        if self._js is not None:
            self._js.connection.close()
            self._js = None


class NatsPuller:
    """A consumer's client (`harness.chaos.consumers.Puller`): a pull from server `node` is a direct get of
    the next `BATCH` seqs, answered by that server's replica when it is current, up to the first the
    stream does not hold. An empty answer also asks the stream's leader where the stream ends
    (`end`), so a consumer past the end of a stream that lost its tail rewinds, as RocketMQ's does."""

    def __init__(self, hosts: dict[str, str], spec: StreamSpec, timeout: float) -> None:
        self.hosts = hosts
        self.spec = spec
        self.timeout = timeout
        self._servers: dict[str, JetStream] = {}

    def _server(self, node: str) -> JetStream:
        if node not in self._servers:
            self._servers[node] = JetStream(Connection(self.hosts[node], CLIENT_PORT, timeout=self.timeout,
                                                       name=node))
        return self._servers[node]

    def pull(self, offset: int, node: str) -> Pulled:
        js = self._server(node)
        end = leader = None
        try:
            entries = held(js, self.spec.name, offset, offset + BATCH - 1, direct=True)
            if not entries:
                info = js.info(self.spec.name)
                end, leader = info.last_seq - 1, info.leader
        except ClientError:
            self._servers.pop(node).connection.close()
            raise
        following = entries[-1][0] + 1 if entries else offset
        return Pulled(entries, following, end, node, leader, None)

    def close(self) -> None:
        for js in self._servers.values():
            js.connection.close()
        self._servers.clear()
