"""The client API requests on the node's port, and the error answer to any bad frame.

The answers are the core's response dataclasses (`nodes.messages`: AppendResponse,
ReadResponse, TransferResponse, MetadataResponse, and in master-slave mode PullResponse
and PromoteResponse), each with a response code and the leader (master) this node knows,
so a NOT_LEADER answer redirects. A request the node cannot take (malformed, unknown type,
wrong group, bad argument, a master-slave request in DLedger mode) is answered with
`ErrorResponse`.

Append outcomes in master-slave mode: SLAVE_NOT_AVAILABLE, FLUSH_SLAVE_TIMEOUT and
FLUSH_DISK_TIMEOUT come after the master wrote the entry (as RocketMQ's broker does), so
they are indeterminate, like a timeout.
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


@dataclass(frozen=True, slots=True)
class PullRequest:
    """A consumer's pull (master-slave mode): up to `max_entries` entries from `offset` on."""

    offset: int
    max_entries: int
    group: str = ""


@dataclass(frozen=True, slots=True)
class PromoteRequest:
    """Make the node that gets this the master (master-slave mode); `role` is SYNC_MASTER or
    ASYNC_MASTER, "" for the flavour of the master it followed."""

    role: str = ""
    group: str = ""


REQUEST_TYPES = (MetadataRequest, AppendRequest, GetRequest, LeadershipTransferRequest, PullRequest,
                 PromoteRequest)
