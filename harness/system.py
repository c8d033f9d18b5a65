"""The system under test as a plug-in (Jepsen's Db and Client protocols): what a run asks of it.

A `System` says how its node process runs on a node of the run: `install` (once, before any
start: config files), `command` (the process the Db starts detached under its pid file, waits
on until it listens on `client_port`, and kills, pauses and collects), `prepare` (once every
node runs: a stream to create, say). Then who leads (`leader`), a client for the workers
(`client`: appends and reads, `harness.chaos.workload.LogClient`), leadership moved by hand for the
churn family (`transfer`), and after healing the wait for catch-up and the final reads
(`finish`). It declares the fault families it cannot take, each with the reason (`refused`), and the
choices of a family's options it cannot take (`refused_choice`: its kinds of file for the disk
family, churn's `prefer`),
the read modes its reads are held to (`read_modes`, the first the default), whether its nodes
take consumers, and the evidence its runs leave (`inputs`: a check needing other evidence is
"not applicable").

The harness, the nemesis and the checker see only this; `systems/` holds one package per
system (`systems.SYSTEMS`). docs/extending.md shows how to add one.
"""

from __future__ import annotations

import json
from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from checkers.layout import INPUTS

if TYPE_CHECKING:
    import docker

    from harness.chaos.consumers import Puller
    from harness.chaos.rundb import RunDb
    from harness.chaos.workload import LogClient
    from harness.ssh.nodes import SshNodes


_OURS = "needs our DLedger node: {}"
# What the fault families that work through our node's own files and calls cannot do elsewhere.
OUR_NODE_ONLY = {
    "stale-leader": _OURS.format("its clock mode steps the node's clock file, and a stale leader is "
                                 "recognised by the node's own metadata"),
    "lose-node": _OURS.format("losing a node acts as RocketMQ's operator, promoting a slave through the "
                              "node's admin call"),
    "isolate-lose": _OURS.format("losing a node acts as RocketMQ's operator, promoting a slave through the "
                                 "node's admin call"),
}

KERNEL_CLOCK = ("{} reads the kernel's clock, which containers share, and as a Go program reads it "
                "through the vDSO, never through libc, so faketime (an LD_PRELOAD library) cannot shift it; "
                "the clock family steps our node's own clock file")


@dataclass(frozen=True)
class Finish:
    """What a run records after healing: how catch-up ended (test.json `catch_up`) and each node's
    final read (`final_logs`: entries written, or why the node could not be read)."""

    catch_up: dict[str, Any]
    final_logs: dict[str, int | str]


class System(ABC):
    """One system under test; see the module doc. Instances carry the run's options for it."""

    name: str
    client_port: int
    refused: Mapping[str, str] = {}  # fault family -> why this system cannot take it
    disk_files: tuple[str, ...] = ()  # the kinds of file the disk family damages (`--disk-files`)
    preferred_leader: bool = False  # whether churn's `prefer` (a preferred-leader control file) applies
    read_modes: tuple[str, ...] = ("linearizable",)
    consumers: bool = False  # whether the run's consumers (RocketMQ's pull consumer) apply
    directed_reads: bool = False  # whether a read can ask one node of its choice, without redirect
    inputs: tuple[str, ...] = INPUTS

    def containers(self, nodes: int, key_dir: Path, fuse: bool) -> RunDb:
        """The run's cluster in containers (`harness.containers.db.Db`; a test's fake system gives its
        own)."""
        from harness.containers.db import Db

        return Db(nodes, system=self, key_dir=key_dir, fuse=fuse)

    @abstractmethod
    def image(self, client: docker.DockerClient, log: Any = None) -> str:
        """The image its containers run, built now when missing or stale; its reference."""

    def install(self, nodes: SshNodes) -> None:
        """Once, before the first start: what the nodes need besides the image (config files)."""
        return

    @abstractmethod
    def command(self, nodes: SshNodes, name: str) -> str:
        """The command line of node `name`'s process (one program: it is exec'ed)."""

    def prepare(self, nodes: SshNodes) -> None:
        """Once every node runs: what the workload needs to exist (a stream, say)."""
        return

    @abstractmethod
    def leader(self, nodes: SshNodes, timeout: float = 1.0) -> str | None:
        """The node that leads now, as the nodes say, or None."""

    @abstractmethod
    def client(self, nodes: SshNodes, timeout: float) -> LogClient:
        """A new client for one worker, with a per-op `timeout`."""

    def puller(self, nodes: SshNodes, timeout: float) -> Puller:
        """A consumer's client (only when `consumers`)."""
        raise NotImplementedError(f"{self.name} takes no consumers")

    @abstractmethod
    def transfer(self, nodes: SshNodes, to: str, timeout: float) -> dict[str, Any]:
        """Move leadership to `to` (or away from the leader when the system cannot aim it); the
        cluster's answer as history fields (`result`, ...). A refusal is an answer, not an error."""

    @abstractmethod
    def finish(self, nodes: SshNodes, final_dir: Path, catch_up_s: float, op_timeout: float) -> Finish:
        """After healing: wait (at most `catch_up_s`) for a leader and catch-up, then write each
        node's final log to `final_dir/<node>.jsonl` (docs/formats.md)."""

    def refused_choice(self, option: str, choice: str) -> str | None:
        """Why this system cannot take `choice` of a family's option (by `dest`), or None."""
        if option == "disk_files" and choice not in self.disk_files:
            return f"it keeps no {choice} files (its own: {', '.join(self.disk_files) or 'none'})"
        if option == "churn_modes" and choice == "prefer" and not self.preferred_leader:
            return _OURS.format("prefer writes the node's preferred-leader control file")
        return None

    def lease_quiet_s(self) -> float:
        """How long after a clock-stepping fault a `mixed` run sends no lease read (`LeaseGate`)."""
        return 0.0

    def options(self) -> dict[str, Any]:
        """The system's options as test.json records them."""
        return {}


def write_final_log(path: Path, ids: Mapping[int, str | None]) -> int:
    """Write a final log (docs/formats.md) of the entries `ids` (log index -> id) to `path`: one line
    an index from 0 to the highest, a null id where the node holds none; the entries written."""
    with path.open("w", encoding="utf-8") as out:
        for index in range(max(ids, default=-1) + 1):
            out.write(json.dumps({"log_index": index, "id": ids.get(index)}) + "\n")
    return len(ids)


def refusals(system: System, families: list[str]) -> dict[str, str]:
    """The families of `families` that `system` refuses -> why."""
    return {name: system.refused[name] for name in families if name in system.refused}
