"""The seam between a node's IO and its logic: the `NodeLogic` protocol.

The server (`nodes.server`) and the driver (`nodes.driver`) drive a node's logic only
through `NodeLogic`: sans-IO inputs (`tick`, `receive`, `store_progress`, the client
requests) and one output batch, `ready()`, that the driver carries out in the order
`nodes.core` documents. Two implementations: the DLedger consensus core (`nodes.core.Core`)
and RocketMQ's classic master-slave replication (`nodes.ha.node.HaNode`).

`HaControl` is what a logic offers beyond that for consumers and operators (pulls and
promotion); only the master-slave logic has it, and the server refuses those requests on
a logic without it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Protocol, runtime_checkable

if TYPE_CHECKING:
    from nodes.core import Ready
    from nodes.election import Role
    from nodes.messages import MetadataResponse, PeerMessage, ReadMode


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
