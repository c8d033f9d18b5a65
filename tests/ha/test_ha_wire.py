"""The master-slave messages on the wire: registered, round-tripping, malformed payloads refused,
and frame limits that leave room for a master's push and a pull answer of the largest body."""

from __future__ import annotations

import pytest

from nodes import messages as m
from nodes.clientapi import PromoteRequest, PullRequest
from nodes.codec import CodecError
from nodes.protocol import DLEDGER_PEER_TYPES, HA_PEER_TYPES, WIRE_TYPES, wire_codec, wire_limits
from nodes.store.logstore import Entry
from nodes.wire import frame_message

CODEC = wire_codec()
ENTRIES = [Entry(7, 3, b"body"), Entry(8, 4, b"", magic=2)]
MESSAGES = [
    m.HaReport(4, "n1", 6, 8, [m.EpochStart(3, 0), m.EpochStart(4, 8)]),
    m.HaPush(4, "n1", True, 8, ENTRIES),
    m.HaPush(4, "n1", False, 8, []),
    m.HaTruncate(4, "n1", 5),
    m.HaEpoch(5, "n2"),
    PullRequest(7, 32),
    m.PullResponse(m.ResponseCode.SUCCESS, ENTRIES, 9, 0, 8, "n2", "n1"),
    m.PullResponse(m.ResponseCode.SUCCESS, [], 9, 0, 8, None, None),
    PromoteRequest("SYNC_MASTER", "g"),
    m.PromoteResponse(m.ResponseCode.SUCCESS, 5, "n2"),
    m.AppendResponse(m.ResponseCode.SLAVE_NOT_AVAILABLE, 4, 9, 9, "n1"),
    m.MetadataResponse(["n1", "n2"], "n1", 4, "leader", 0, 0.0, "master-slave", "SYNC_MASTER", ["n2"]),
]


@pytest.mark.parametrize("message", MESSAGES, ids=lambda msg: type(msg).__name__)
def test_round_trip_and_truncation(message: object) -> None:
    type_id, payload = CODEC.encode(message)
    assert WIRE_TYPES[type_id] is type(message)
    assert CODEC.decode(type_id, payload) == message
    for cut in range(len(payload)):
        with pytest.raises(CodecError):
            CODEC.decode(type_id, payload[:cut])


def test_modes_take_disjoint_peer_messages_and_every_peer_type_belongs_to_one() -> None:
    assert not DLEDGER_PEER_TYPES & HA_PEER_TYPES
    peer_types = {cls for type_id, cls in WIRE_TYPES.items() if type_id >= 65}
    assert peer_types == DLEDGER_PEER_TYPES | HA_PEER_TYPES


def test_rocketmq_codes_keep_rocketmq_numbers() -> None:
    codes = m.ResponseCode
    assert (codes.FLUSH_DISK_TIMEOUT, codes.SLAVE_NOT_AVAILABLE, codes.FLUSH_SLAVE_TIMEOUT) == (10, 11, 12)


def test_limits_leave_room_for_the_largest_body_in_every_master_slave_message() -> None:
    members = ["n1", "a-much-longer-node-name"]
    dledger = wire_limits(CODEC, members, 10000)
    both = wire_limits(CODEC, members, 10000, master_slave=True)
    assert both.max_body <= dledger.max_body and both.max_read_bytes <= dledger.max_read_bytes
    body = b"x" * both.max_body
    leader = members[1]
    frame_message(CODEC, m.HaPush(2**62, leader, True, 2**62, [Entry(2**62, 2**62, body)]), 1)
    pull = m.PullResponse(m.ResponseCode.SUCCESS, [Entry(2**62, 2**62, body)], 0, 0, 0, leader, leader)
    frame_message(CODEC, pull, 1)
