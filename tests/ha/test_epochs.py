"""The epoch map of a log and the consistency point between a slave's log and the master's."""

from __future__ import annotations

import pytest

from nodes.ha.config import BrokerRole, HaConfig, MasterVote
from nodes.ha.epochs import EpochMap, last_consistent
from nodes.messages import EpochStart
from nodes.store.logstore import Entry
from nodes.store.memstore import MemStore


def log_of(*terms: int) -> MemStore:
    store = MemStore()
    store.append([Entry(i, t, b"x") for i, t in enumerate(terms)])
    return store


def starts(*pairs: tuple[int, int]) -> list[EpochStart]:
    return [EpochStart(e, i) for e, i in pairs]


def test_the_map_of_a_log_lists_where_each_epoch_starts() -> None:
    assert EpochMap.of(MemStore()).starts == []
    assert EpochMap.of(log_of(0, 0, 0)).starts == starts((0, 0))
    assert EpochMap.of(log_of(1, 1, 3, 3, 3, 4, 7)).starts == starts((1, 0), (3, 2), (4, 5), (7, 6))


def test_the_map_follows_appends_and_truncations() -> None:
    epochs = EpochMap.of(log_of(1, 1))
    epochs.appended([Entry(2, 1, b""), Entry(3, 2, b""), Entry(4, 2, b""), Entry(5, 5, b"")])
    assert epochs.starts == starts((1, 0), (2, 3), (5, 5))
    epochs.appended_run(5, 6)
    epochs.appended_run(6, 7)
    assert epochs.starts == starts((1, 0), (2, 3), (5, 5), (6, 7))
    epochs.truncated(4)
    assert epochs.starts == starts((1, 0), (2, 3))
    epochs.truncated(2)
    assert epochs.starts == starts((1, 0))
    epochs.truncated(-1)
    assert epochs.starts == []


@pytest.mark.parametrize(("theirs", "their_end", "mine", "my_end", "point"), [
    ([], -1, [], -1, -1),  # both empty
    ([], -1, starts((1, 0)), 9, -1),  # an empty slave is a prefix
    (starts((1, 0)), 4, starts((1, 0)), 9, 4),  # a shorter log of the same epoch
    (starts((1, 0)), 12, starts((1, 0), (2, 11)), 20, 10),  # the old master's tail the new one lacks
    (starts((1, 0)), 12, starts((1, 0)), 10, 10),  # promoted before it wrote: its end is the point
    (starts((1, 0), (2, 5)), 8, starts((1, 0), (3, 5)), 9, 4),  # a deposed master's own epoch
    (starts((1, 0), (2, 5)), 8, starts((1, 0), (2, 5), (3, 7)), 9, 6),
    (starts((2, 0)), 3, starts((1, 0)), 9, -1),  # nothing in common
    (starts((1, 0), (2, 4)), 8, starts((1, 0), (2, 6)), 9, 3),  # same epoch, other start: earlier one
])
def test_last_consistent(theirs, their_end, mine, my_end, point) -> None:
    assert last_consistent(theirs, their_end, mine, my_end) == point


def test_master_vote_round_trips_and_plain_ids_stay_plain() -> None:
    assert MasterVote.decode(None) is None and MasterVote.decode("") is None
    assert MasterVote.decode("n2") == MasterVote("n2")
    vote = MasterVote("n/1", BrokerRole.SYNC_MASTER)
    assert MasterVote.decode(vote.encode()) == vote
    assert MasterVote.decode("n1/other") == MasterVote("n1/other")


def test_config_refuses_what_cannot_work() -> None:
    with pytest.raises(ValueError, match="needs its master"):
        HaConfig(role=BrokerRole.SLAVE)
    with pytest.raises(ValueError, match="must not be negative"):
        HaConfig(role=BrokerRole.SYNC_MASTER, sync_timeout_ms=-1)
    with pytest.raises(ValueError, match="unknown broker role"):
        BrokerRole.parse("MASTER")
    assert BrokerRole.parse("sync_master") is BrokerRole.SYNC_MASTER
