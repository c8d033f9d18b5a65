"""The seam between a node's IO and its logic: the `NodeLogic` protocol and the words it speaks.

The server (`nodes.server`) and the driver (`nodes.driver`) drive a node's logic only
through `NodeLogic`: sans-IO inputs (`tick`, `receive`, `store_progress`, the client
requests) and one output batch, `ready()`, a `Ready` that the driver carries out in the
order `nodes.core` documents. Two implementations: the DLedger consensus core
(`nodes.core.Core`) and RocketMQ's classic master-slave replication (`nodes.ha.node.HaNode`).

Durability is decided once, from the `--flush` flag and the mode, by `durability()`: what
an acknowledgement requires (`Ack`, for the logic) and who flushes the store (`Flusher`,
for the driver and the store). `sync` acks only what is fsynced and flushes by group
commit. `async` acks what is written and leaves flushing to the store's own thread
(DLedger's), except on a master-slave node, which still flushes by group commit so that a
slave reports its durable offset as soon as it can.

`HaControl` is what a logic offers beyond that for consumers and operators (pulls and
promotion); only the master-slave logic has it, and the server refuses those requests on
a logic without it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import Enum
from typing import Protocol, runtime_checkable

from nodes.election import Role
from nodes.logview import StoreWrite
from nodes.messages import ClientResponse, MetadataResponse, PeerMessage, ReadMode

FLUSH_FLAGS = ("sync", "async")  # the values of `--flush`


class Ack(Enum):
    """What an entry needs before it counts toward a commit and is acknowledged."""

    FSYNCED = "fsynced"  # flushed to disk (fsync before ack)
    WRITTEN = "written"  # written to the store (DLedger's async flush: a power loss can lose acked entries)


class Flusher(Enum):
    """Who flushes the store to disk."""

    GROUP_COMMIT = "group-commit"  # the driver: one flush at a time while written entries are not durable
    STORE_THREAD = "store-thread"  # the store's own background thread, every few ms (DLedger's)


@dataclass(frozen=True, slots=True)
class Durability:
    """A node's flush policy: what an acknowledgement requires, and who flushes the store."""

    ack: Ack
    flusher: Flusher

    @property
    def flag(self) -> str:
        """The `--flush` value that asks for this policy."""
        return "sync" if self.ack is Ack.FSYNCED else "async"


SYNC_FLUSH = Durability(Ack.FSYNCED, Flusher.GROUP_COMMIT)  # `--flush sync`
ASYNC_FLUSH = Durability(Ack.WRITTEN, Flusher.STORE_THREAD)  # `--flush async` on a DLedger node


def durability(flush: str, master_slave: bool) -> Durability:
    """What `--flush` (`sync` or `async`) means for a node of a mode (see the module doc);
    ValueError for another value."""
    if flush == "sync":
        return SYNC_FLUSH
    if flush == "async":
        return Durability(Ack.WRITTEN, Flusher.GROUP_COMMIT) if master_slave else ASYNC_FLUSH
    raise ValueError(f"unknown flush policy {flush!r}: use one of {', '.join(FLUSH_FLAGS)}")


@dataclass(frozen=True, slots=True)
class RoleChange:
    """One line of events.jsonl: the node took `role` in `term`, knowing `leader`, with its Raft
    log ending at `end_index` (None: a logic without Raft's leader completeness, master-slave)."""

    term: int
    role: Role
    leader: str | None
    end_index: int | None = None


@dataclass(slots=True)
class Ready:
    """One batch of outputs; `nodes.core`'s module doc gives the order a driver must keep."""

    persist: tuple[int, str | None] | None = None
    writes: list[StoreWrite] = field(default_factory=list)
    store_commit: int | None = None
    messages: list[tuple[str, PeerMessage]] = field(default_factory=list)
    completions: list[tuple[int, ClientResponse]] = field(default_factory=list)
    role_changes: list[RoleChange] = field(default_factory=list)
    commit_index: int | None = None

    def __bool__(self) -> bool:
        """Whether there is anything to carry out."""
        return bool(
            self.messages or self.completions or self.writes or self.role_changes
            or self.persist is not None or self.store_commit is not None or self.commit_index is not None
        )


NOTHING = Ready()  # the empty batch, shared: a driver only reads a Ready


class NodeLogic(Protocol):
    """One node's logic, driven by a driver; every input takes the driver's clock `now` (ms)."""

    role: Role  # "leader" is the node that takes appends (DLedger's leader, the master)
    term: int  # DLedger's term; the master-slave epoch
    leader: str | None  # the node appends go to, as far as this node knows
    commit_index: int  # what this node serves to reads (see each logic for what it means)

    def ready(self) -> Ready:
        """The outputs accumulated since the last call, for the driver to carry out."""
        ...

    def tick(self, now: float) -> None:
        """Time passed: run timers."""
        ...

    def receive(self, sender: str, message: PeerMessage, now: float) -> None:
        """A peer message arrived from `sender`."""
        ...

    def store_progress(self, now: float) -> None:
        """The store flushed more (`flushed_index` moved)."""
        ...

    def client_append(self, request_id: int, bodies: Sequence[bytes], now: float) -> None:
        """Append `bodies` at consecutive indexes; completes with an AppendResponse."""
        ...

    def client_read(self, request_id: int, first: int, last: int, mode: ReadMode, now: float) -> None:
        """Read `first..last`; completes with a ReadResponse."""
        ...

    def client_transfer(self, request_id: int, transferee: str, now: float) -> None:
        """Hand leadership to `transferee`; completes with a TransferResponse."""
        ...

    def set_preferred_leader(self, peer: str | None) -> None:
        """Change the preferred leader (ValueError when the logic cannot take it)."""
        ...

    def metadata(self) -> MetadataResponse:
        """The members, the known leader, this node's role."""
        ...


def member_list(node_id: str, peers: Sequence[str]) -> list[str]:
    """The group's members, checked: `node_id` among them, none twice (else ValueError)."""
    members = list(peers)
    if node_id not in members:
        raise ValueError(f"node id {node_id!r} is not among the peers {members}")
    if len(set(members)) != len(members):
        raise ValueError(f"peers {members} contain duplicates")
    return members


@runtime_checkable
class HaControl(Protocol):
    """Consumer pulls and operator promotion (the master-slave logic only)."""

    def client_pull(self, request_id: int, offset: int, max_entries: int, now: float) -> None:
        """Entries from `offset` on; completes with a PullResponse (entries and a suggestion
        of which node to pull from next)."""
        ...

    def client_promote(self, request_id: int, role: str, now: float) -> None:
        """Make this node the master; completes with a PromoteResponse."""
        ...
