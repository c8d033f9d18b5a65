"""The node's wire protocol: which message travels under which frame type id.

Type ids 1..63 are the client API, 64 and up peer traffic. A peer opens its connection with
`PeerHello` so the receiver knows who sends the messages that follow (the core's peer
messages do not name their sender). Each node sends everything it has for a peer (requests
and responses alike) over its own outbound connection to that peer.
"""

from __future__ import annotations

from dataclasses import dataclass

from nodes import messages as m
from nodes.clientapi import (
    AppendRequest,
    ErrorResponse,
    GetRequest,
    LeadershipTransferRequest,
    MetadataRequest,
    PromoteRequest,
    PullRequest,
)
from nodes.codec import MessageCodec
from nodes.store.logstore import Entry
from nodes.wire import frame_room


@dataclass(frozen=True, slots=True)
class PeerHello:
    """First frame on a peer connection: the sender's id and group."""

    node: str
    group: str


WIRE_TYPES: dict[int, type] = {
    1: MetadataRequest,
    2: m.MetadataResponse,
    3: AppendRequest,
    4: m.AppendResponse,
    5: GetRequest,
    6: m.ReadResponse,
    7: LeadershipTransferRequest,
    8: m.TransferResponse,
    9: ErrorResponse,
    10: PullRequest,
    11: m.PullResponse,
    12: PromoteRequest,
    13: m.PromoteResponse,
    64: PeerHello,
    65: m.VoteRequest,
    66: m.VoteResponse,
    67: m.HeartbeatRequest,
    68: m.HeartbeatResponse,
    69: m.PushRequest,
    70: m.PushResponse,
    71: m.TransferRequest,
    72: m.HaReport,
    73: m.HaPush,
    74: m.HaTruncate,
    75: m.HaEpoch,
}
FIRST_PEER_TYPE = 64
# The peer messages each mode's logic takes; the server drops any other with a warning.
DLEDGER_PEER_TYPES = frozenset({m.VoteRequest, m.VoteResponse, m.HeartbeatRequest, m.HeartbeatResponse,
                                m.PushRequest, m.PushResponse, m.TransferRequest})
HA_PEER_TYPES = frozenset({m.HaReport, m.HaPush, m.HaTruncate, m.HaEpoch})


def wire_codec() -> MessageCodec:
    """A codec that knows every message of the protocol."""
    codec = MessageCodec()
    for type_id, cls in WIRE_TYPES.items():
        codec.register(type_id, cls)
    return codec


@dataclass(frozen=True, slots=True)
class WireLimits:
    """What one frame can carry whichever member leads.

    `max_body`: the largest entry body that every re-encoding of it fits in a frame (a push
    carrying it alone, a read answering with it alone). `max_read_bytes`: the body bytes a
    read answer of the most entries a read may ask for can carry.
    """

    max_body: int
    max_read_bytes: int


def wire_limits(
    codec: MessageCodec, members: list[str], max_read_entries: int, master_slave: bool = False
) -> WireLimits:
    """The limits for a group of `members` whose reads ask for at most `max_read_entries`,
    measured by encoding the messages with the longest member id as the leader (with
    `master_slave`, also the master's pushes and the pull answers)."""
    leader = max(members, key=lambda node: len(node.encode()))
    empty = Entry(0, 0, b"")
    carriers: list[object] = [m.PushRequest(0, leader, 0, m.PushType.APPEND, 0, 0, 0, [empty])]
    answers: list[tuple[object, object]] = [(m.ReadResponse(m.ResponseCode.SUCCESS, [], 0, leader, 0),
                m.ReadResponse(m.ResponseCode.SUCCESS, [empty], 0, leader, 0))]
    if master_slave:
        carriers.append(m.HaPush(0, leader, False, 0, [empty]))
        answers.append((m.PullResponse(m.ResponseCode.SUCCESS, [], 0, 0, 0, leader, leader),
                        m.PullResponse(m.ResponseCode.SUCCESS, [empty], 0, 0, 0, leader, leader)))
    room = [frame_room(codec, c) for c in carriers] + [frame_room(codec, one) for _, one in answers]
    read_bytes = []
    for none, one in answers:
        per_entry = frame_room(codec, none) - frame_room(codec, one)
        read_bytes.append(frame_room(codec, none) - max_read_entries * per_entry)
    return WireLimits(max_body=min(room), max_read_bytes=min(read_bytes))
