"""The store's in-memory tail of the latest entries agrees with the files around trims and truncations."""

from __future__ import annotations

import pytest
from storefiles import body_for

from nodes.store import mmapstore
from nodes.store.logstore import Entry


@pytest.fixture
def small_tail(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(mmapstore, "TAIL_ENTRIES", 4)


def test_reads_agree_across_the_tail_boundary(open_store, store_dir, small_tail) -> None:
    store = open_store()
    for start in range(0, 100, 10):
        store.append_many(1 + start // 30, [body_for(i) for i in range(start, start + 10)])
    expected = [Entry(i, 1 + (i // 10 * 10) // 30, body_for(i)) for i in range(100)]
    assert store.get_range(0, 99) == expected  # from the files (CRC-checked)
    assert store.get_range(95, 120) == expected[95:]  # from the tail
    assert [store.get(i) for i in (0, 50, 99)] == [expected[0], expected[50], expected[99]]
    store.close()
    assert open_store(store_dir).get_range(0, 99) == expected


def test_truncation_inside_and_before_the_tail(open_store, small_tail) -> None:
    store = open_store()
    store.append_many(1, [body_for(i) for i in range(20)])
    store.truncate_after(17)
    store.append_many(2, [b"new-18", b"new-19"])
    assert [(e.index, e.term, e.body) for e in store.get_range(16, 30)] == [
        (16, 1, body_for(16)), (17, 1, body_for(17)), (18, 2, b"new-18"), (19, 2, b"new-19")]
    store.truncate_after(3)  # below everything the tail holds
    store.append_many(3, [b"again"])
    assert store.get_range(2, 30) == [Entry(2, 1, body_for(2)), Entry(3, 1, body_for(3)),
                                      Entry(4, 3, b"again")]
    assert store.get(4) == Entry(4, 3, b"again")


def test_follower_appends_are_served_from_the_tail(open_store) -> None:
    store = open_store()
    entries = [Entry(i, 1, body_for(i), channel=i % 3) for i in range(10)]
    store.append(entries)
    assert store.get_range(0, 9) == entries
