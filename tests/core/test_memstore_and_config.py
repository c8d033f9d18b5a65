"""The in-memory store's durability model, and the core's configuration checks."""

from __future__ import annotations

import pytest

from nodes.core import Core
from nodes.logic import durability
from nodes.messages import ReadMode
from nodes.store.logstore import Entry, StoreError
from nodes.store.memstore import MemStore
from nodes.timing import PROFILES, parse_overrides, timing_profile
from tests.support.scripted import entries


def test_power_loss_keeps_only_what_was_flushed() -> None:
    store = MemStore()
    store.append(entries(1, 1))
    store.flush()
    store.append_leader(1, b"unflushed")
    assert (store.flushed_index, store.end_index) == (1, 2)
    store.power_loss()
    assert store.end_index == 1 and store.flushed_index == 1


def test_an_unflushed_truncation_comes_back_after_power_loss() -> None:
    store = MemStore()
    store.append(entries(1, 1, 1))
    store.flush()
    store.truncate_after(0)
    store.append([Entry(1, 2, b"new")])
    assert store.flushed_index == 0
    store.power_loss()
    assert [(e.index, e.term) for e in store.entries] == [(0, 1), (1, 1), (2, 1)]
    store.truncate_after(0)
    store.append([Entry(1, 2, b"new")])
    store.flush()
    store.power_loss()
    assert [(e.index, e.term) for e in store.entries] == [(0, 1), (1, 2)]


def test_store_refuses_what_would_break_the_log() -> None:
    store = MemStore()
    store.append(entries(1, 2))
    with pytest.raises(StoreError, match="does not continue"):
        store.append([Entry(3, 2, b"gap")])
    with pytest.raises(StoreError, match="does not continue"):
        store.append([Entry(2, 1, b"older term")])
    store.set_committed(1)
    with pytest.raises(StoreError, match="committed"):
        store.truncate_after(0)
    with pytest.raises(StoreError, match="not stored"):
        store.get(7)
    assert store.term_at(-1) == -1


def test_timing_profiles_and_overrides() -> None:
    assert PROFILES["dledger"].heartbeat_ms == 2000 and PROFILES["dledger"].heartbeat_leak == 3
    assert PROFILES["dledger"].leader_lost_ms == 6000
    assert (PROFILES["dledger"].min_vote_interval_ms, PROFILES["dledger"].max_vote_interval_ms) == (300, 1000)
    assert PROFILES["fast"].leader_lost_ms < 1000
    assert timing_profile("fast", heartbeat_ms=50.0).heartbeat_ms == 50.0
    with pytest.raises(ValueError, match="unknown timing profile 'slow'"):
        timing_profile("slow")
    with pytest.raises(ValueError, match="unknown timing field"):
        timing_profile("fast", heartbeat=1.0)
    with pytest.raises(ValueError, match="min_vote_interval_ms"):
        timing_profile("fast", min_vote_interval_ms=500.0)


def test_timing_overrides_from_text_keep_each_field_type() -> None:
    overrides = parse_overrides(["heartbeat_ms=500", " heartbeat_leak = 5 "])
    assert overrides == {"heartbeat_ms": 500.0, "heartbeat_leak": 5}
    assert isinstance(overrides["heartbeat_leak"], int)
    timing = timing_profile("dledger", **overrides)
    assert (timing.heartbeat_ms, timing.leader_lost_ms, timing.vote_wait_ms) == (500.0, 2500.0, 3000.0)
    with pytest.raises(ValueError, match=r"'heartbeat_leak=2\.5' is not FIELD=VALUE with an integer"):
        parse_overrides(["heartbeat_leak=2.5"])
    with pytest.raises(ValueError, match="'heartbeat_ms' is not FIELD=VALUE with a number"):
        parse_overrides(["heartbeat_ms"])
    with pytest.raises(ValueError, match="unknown timing field"):
        timing_profile("fast", **parse_overrides(["beat=1"]))


def test_configuration_errors_name_the_problem() -> None:
    with pytest.raises(ValueError, match="flush policy 'eventually'"):
        durability("eventually", master_slave=False)
    with pytest.raises(ValueError, match="not among the peers"):
        Core("n9", ["n1", "n2"], MemStore())
    with pytest.raises(ValueError, match="duplicates"):
        Core("n1", ["n1", "n1"], MemStore())
    assert ReadMode.parse("read-index") is ReadMode.READ_INDEX
    with pytest.raises(ValueError, match="use one of read-index, lease, committed, follower, unsafe"):
        ReadMode.parse("strong")
