"""The core's log view: recorded writes read back at once, and carried out they give the same log."""

from __future__ import annotations

import random

import pytest

from nodes.core import Core, CoreConfig
from nodes.driver import apply_writes
from nodes.logic import Ack
from nodes.logview import Append, LogView, Truncate
from nodes.store.logstore import Entry, StoreError
from nodes.store.memstore import MemStore


class ReadOnly:
    """A store that only answers reads: proof that the core never writes its store."""

    def __init__(self, store: MemStore) -> None:
        self._store = store

    def __getattr__(self, name: str) -> object:
        if name in {"append", "append_many", "append_leader", "truncate_after", "set_committed", "flush"}:
            raise AssertionError(f"the core called store.{name}")
        return getattr(self._store, name)


def _random_writes(rng: random.Random, view: LogView, mirror: MemStore, count: int) -> None:
    """Do the same random appends and truncations on the view and, directly, on `mirror`."""
    for _ in range(count):
        end = view.end_index
        if rng.random() < 0.3 and end >= 0:
            after = rng.randint(-1, end)
            view.truncate_after(after)
            mirror.truncate_after(after)
        elif rng.random() < 0.5:
            term = max(view.end_term, 1) + rng.randint(0, 1)
            bodies = [bytes(rng.randint(0, 9)) for _ in range(rng.randint(1, 4))]
            assert view.append_many(term, bodies) == mirror.append_many(term, bodies)
        else:
            term = max(view.end_term, 1)
            batch = [Entry(end + 1 + k, term, bytes(rng.randint(0, 9))) for k in range(rng.randint(1, 3))]
            view.append(batch)
            mirror.append(batch)


def _same_reads(view: LogView, mirror: MemStore, rng: random.Random) -> None:
    assert (view.end_index, view.end_term) == (mirror.end_index, mirror.end_term)
    for index in range(-1, mirror.end_index + 1):
        assert view.term_at(index) == mirror.term_at(index)
    for _ in range(10):
        first = rng.randint(0, max(mirror.end_index, 0))
        last = rng.randint(first, mirror.end_index + 2)
        limit = rng.choice([None, 0, 5, 12, 30])
        assert view.get_range(first, last, limit) == mirror.get_range(first, last, limit)


@pytest.mark.parametrize("seed", range(40))
def test_the_view_reads_as_the_store_will_and_its_writes_make_the_store_so(seed: int) -> None:
    rng = random.Random(seed)
    store, mirror = MemStore(), MemStore()
    for _ in range(6):
        view = LogView(store)
        _random_writes(rng, view, mirror, rng.randint(1, 12))
        _same_reads(view, mirror, rng)
        apply_writes(store, view.take_writes())
        assert store.entries == mirror.entries
        assert view.take_writes() == []


def test_consecutive_appends_are_one_write_and_a_truncation_keeps_its_place() -> None:
    store = MemStore()
    store.append([Entry(0, 1, b"a"), Entry(1, 1, b"b"), Entry(2, 1, b"c")])
    store.flush()
    view = LogView(store)
    view.truncate_after(0)
    assert view.flushed_index == 0  # never the old entries the truncation drops
    view.append_many(2, [b"x", b"y"])
    view.append([Entry(3, 2, b"z")])
    writes = view.take_writes()
    assert writes == [Truncate(0), Append([Entry(1, 2, b"x"), Entry(2, 2, b"y"), Entry(3, 2, b"z")])]


def test_the_view_refuses_what_the_store_would() -> None:
    store = MemStore()
    store.append([Entry(0, 2, b"a"), Entry(1, 2, b"b")])
    store.set_committed(1)
    view = LogView(store)
    with pytest.raises(StoreError, match="committed"):
        view.truncate_after(0)
    with pytest.raises(StoreError, match="does not continue"):
        view.append([Entry(3, 2, b"gap")])
    with pytest.raises(StoreError, match="term 1"):
        view.append_many(1, [b"older term"])


def test_the_core_only_reads_its_store_and_returns_every_write_in_ready() -> None:
    store = MemStore()
    core = Core("n1", ["n1"], ReadOnly(store), config=CoreConfig(ack=Ack.FSYNCED))  # type: ignore[arg-type]
    core.tick(0.0)  # a single member elects itself and appends its no-op
    ready = core.ready()
    assert [type(w) for w in ready.writes] == [Append]
    apply_writes(store, ready.writes)
    core.client_append(7, [b"one", b"two"], 1.0)
    ready = core.ready()
    apply_writes(store, ready.writes)
    assert [e.body for e in store.entries] == [b"", b"one", b"two"]
    assert ready.completions == []  # sync flush: nothing is acknowledged before it is durable
    store.flush()
    core.store_progress(2.0)
    ready = core.ready()
    assert [(rid, r.code.name, r.first_index, r.last_index) for rid, r in ready.completions] == [
        (7, "SUCCESS", 1, 2)
    ]
    assert ready.store_commit == 2
