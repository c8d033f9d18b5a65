"""The client API requests on the node's port, and the error answer to any bad frame.

The answers are the core's response dataclasses (`nodes.messages`: AppendResponse,
ReadResponse, TransferResponse, MetadataResponse), each with DLedger's response code and
the leader this node knows, so a NOT_LEADER answer redirects. A request the node cannot
take (malformed, unknown type, wrong group, bad argument) is answered with `ErrorResponse`.
"""

from __future__ import annotations

from dataclasses import dataclass

from nodes.messages import ResponseCode as Code

# An append answered with one of these surely did not happen; any other non-success code
# leaves its fate unknown (the entry may be in the leader's log and commit later).
DEFINITE_APPEND_FAILURES = frozenset({
    Code.UNKNOWN_GROUP, Code.NOT_LEADER, Code.UNEXPECTED_ARGUMENT, Code.DISK_FULL,
    Code.LEADER_PENDING_FULL, Code.LEADER_TRANSFERRING, Code.UNSUPPORTED,
})

@dataclass(frozen=True, slots=True)
class MetadataRequest:
    group: str = ""


@dataclass(frozen=True, slots=True)
class AppendRequest:
    """Append one or more bodies; they get consecutive indexes, acked together."""

    bodies: list[bytes]
    group: str = ""


@dataclass(frozen=True, slots=True)
class GetRequest:
    """Entries `first..last`; `mode` "" means the node's configured read mode."""

    first: int
    last: int
    group: str = ""
    mode: str = ""


@dataclass(frozen=True, slots=True)
class LeadershipTransferRequest:
    """Ask the leader to hand leadership to peer `to`."""

    to: str
    group: str = ""


@dataclass(frozen=True, slots=True)
class ErrorResponse:
    """The answer to a frame the node could not decode or does not know."""

    code: Code
    leader: str | None
    message: str = ""


REQUEST_TYPES = (MetadataRequest, AppendRequest, GetRequest, LeadershipTransferRequest)
