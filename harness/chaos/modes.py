"""The designs a run can test (`--mode`): DLedger's Raft, and RocketMQ's classic master-slave
HA with a synchronous or an asynchronous master.

A mode says how each node is started (`node_args`), how reads are held by the checker
(`read_mode`: master-slave has no linearizable read) and whether an operator must promote
a slave when the master is lost (`promotes`). In master-slave modes the first node is the
master and the others its slaves.
"""

from __future__ import annotations

from dataclasses import dataclass

from checkers.layout import MIXED
from nodes.messages import ReadMode

MIXED_MODES = (ReadMode.READ_INDEX.label, ReadMode.LEASE.label)


def node_read_mode(read_mode: str) -> str:
    """The `--read-mode` the nodes start with: `lease` for mixed runs (its guards on; each read
    names its own mode), the run's mode otherwise."""
    return ReadMode.LEASE.label if read_mode == MIXED else read_mode


def read_choices(read_mode: str) -> tuple[str, ...]:
    """The modes a run's reads name, one drawn per read; () sends reads in the nodes' own mode."""
    return MIXED_MODES if read_mode == MIXED else ()


@dataclass(frozen=True)
class Mode:
    """One design under test; see the module doc."""

    name: str
    help: str
    master_role: str | None = None  # None: DLedger (every node a Raft peer)

    @property
    def master_slave(self) -> bool:
        return self.master_role is not None

    @property
    def promotes(self) -> bool:
        """Whether losing the master needs an operator to promote a slave."""
        return self.master_slave

    @property
    def read_modes(self) -> tuple[str, ...]:
        """The run's read modes in this mode (`--read-mode`); the first is the default."""
        if self.master_slave:  # reads see the master's acknowledged or a slave's durable entries
            return (ReadMode.COMMITTED.label, ReadMode.FOLLOWER.label, ReadMode.UNSAFE.label)
        return (MIXED, *(m.label for m in ReadMode))

    def node_args(self, names: list[str]) -> dict[str, list[str]]:
        """The `serve` arguments of each node that say its role ({} entries in DLedger mode)."""
        if self.master_role is None:
            return {name: [] for name in names}
        master = names[0]
        return {name: ["--mode", "master-slave", "--role", self.master_role if name == master else "SLAVE",
                       *([] if name == master else ["--master", master])] for name in names}


MODES: dict[str, Mode] = {m.name: m for m in (
    Mode("dledger", "DLedger: Raft election and majority commit (the default)"),
    Mode("master-slave-sync", "RocketMQ master-slave, SYNC_MASTER: an append waits for a slave",
         "SYNC_MASTER"),
    Mode("master-slave-async",
         "RocketMQ master-slave, ASYNC_MASTER: an append returns once the master has it", "ASYNC_MASTER"),
)}
