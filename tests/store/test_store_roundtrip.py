"""Appends, reads, truncation and reopening of the mmap store across many segment files."""

from __future__ import annotations

from pathlib import Path

import pytest
from storefiles import DATA_SEGMENT, body_for

from nodes.store.logstore import MAGIC_NOOP, Entry, StoreError
from nodes.store.mmapstore import MmapStore


def fill(store: MmapStore, count: int, term: int = 1) -> list[Entry]:
    return [store.append_leader(term + i // 40, body_for(i)) for i in range(count)]


def test_round_trip_across_many_segments(open_store, store_dir: Path) -> None:
    store = open_store()
    written = fill(store, 300)
    assert len(list((store_dir / "data").iterdir())) > 10
    assert (store.begin_index, store.end_index, store.end_term) == (0, 299, 8)
    assert [store.get(i) for i in range(300)] == written
    assert store.get_range(-5, 1000) == written
    assert store.get_range(100, 120) == written[100:121]
    assert [store.term_at(i) for i in (-1, 0, 39, 40, 299)] == [-1, 1, 1, 2, 8]


def test_files_are_named_by_their_20_digit_offsets(open_store, store_dir: Path) -> None:
    fill(open_store(), 100)
    names = sorted(p.name for p in (store_dir / "data").iterdir())
    assert names[:2] == ["0" * 20, f"{DATA_SEGMENT:020d}"]
    assert all(p.stat().st_size == DATA_SEGMENT for p in (store_dir / "data").iterdir())
    assert sorted(p.name for p in (store_dir / "index").iterdir())[:2] == ["0" * 20, f"{320:020d}"]


def test_batch_append_assigns_consecutive_indexes(open_store) -> None:
    store = open_store()
    store.append_leader(1, b"a")
    assert store.append_many(2, [b"b", b"c", b"d"]) == range(1, 4)
    assert store.append_many(2, []) == range(4, 4)
    assert [(e.index, e.term, e.body) for e in store.get_range(0, 9)] == [
        (0, 1, b"a"), (1, 2, b"b"), (2, 2, b"c"), (3, 2, b"d")]


def test_noop_magic_and_channel_survive_reopen(open_store) -> None:
    store = open_store()
    store.append_leader(3, b"", MAGIC_NOOP)
    store.append([Entry(1, 3, b"x", channel=7)])
    store.close()
    again = open_store()
    assert again.get(0).is_noop and again.get(1).channel == 7


def test_reopen_after_clean_close_keeps_everything(open_store) -> None:
    store = open_store()
    written = fill(store, 150)
    store.close()
    again = open_store()
    assert again.recovery.cut_pos is None
    assert (again.begin_index, again.end_index, again.end_term) == (0, 149, 4)
    assert again.get_range(0, 149) == written
    again.append_leader(4, b"more")
    assert again.get(150).body == b"more"


def test_truncate_then_append_then_reopen(open_store) -> None:
    store = open_store()
    written = fill(store, 120)
    store.truncate_after(49)
    assert (store.end_index, store.end_term) == (49, 2)
    with pytest.raises(StoreError):
        store.get(50)
    replaced = [Entry(50 + i, 9, f"new{i}".encode()) for i in range(5)]
    store.append(replaced)
    store.close()
    again = open_store()
    assert again.end_index == 54
    assert again.get_range(0, 200) == written[:50] + replaced


def test_truncated_entries_do_not_come_back_after_reopen(open_store) -> None:
    store = open_store()
    written = fill(store, 60)
    store.truncate_after(29)
    store.close()
    again = open_store()
    assert again.end_index == 29 and again.get_range(0, 100) == written[:30]


def test_truncate_everything(open_store) -> None:
    store = open_store()
    fill(store, 30)
    store.truncate_after(-1)
    assert (store.begin_index, store.end_index, store.end_term) == (-1, -1, -1)
    store.append_leader(5, b"first")
    store.close()
    assert open_store().get_range(0, 10) == [Entry(0, 5, b"first")]


def test_truncate_refuses_committed_entries(open_store) -> None:
    store = open_store()
    fill(store, 10)
    store.set_committed(6)
    with pytest.raises(StoreError, match="committed"):
        store.truncate_after(5)
    store.truncate_after(6)
    assert store.end_index == 6


def test_committed_index_never_goes_back_or_past_the_end(open_store) -> None:
    store = open_store()
    fill(store, 5)
    store.set_committed(3)
    store.set_committed(1)
    assert store.committed_index == 3
    with pytest.raises(StoreError, match="past the log's end"):
        store.set_committed(5)


@pytest.mark.parametrize("entries, message", [
    ([Entry(4, 1, b"")], "expected 3"),
    ([Entry(3, 1, b""), Entry(5, 1, b"")], "expected 4"),
    ([Entry(3, 0, b"")], "below the previous term"),
])
def test_follower_append_must_be_consecutive(open_store, entries, message) -> None:
    store = open_store()
    store.append([Entry(i, 1, b"x") for i in range(3)])
    with pytest.raises(StoreError, match=message):
        store.append(entries)
    assert store.end_index == 2


def test_leader_term_may_not_go_down(open_store) -> None:
    store = open_store()
    store.append_leader(4, b"x")
    with pytest.raises(StoreError, match="below the log's end term 4"):
        store.append_leader(3, b"y")


def test_body_larger_than_a_segment_is_refused(open_store) -> None:
    store = open_store()
    store.append_leader(1, b"x" * (DATA_SEGMENT - 48))
    with pytest.raises(StoreError, match="raise data_segment_size"):
        store.append_many(1, [b"ok", b"x" * (DATA_SEGMENT - 47)])
    assert store.end_index == 0


def test_reads_outside_the_log_are_refused(open_store) -> None:
    store = open_store()
    assert store.get_range(0, 10) == []
    fill(store, 3)
    for bad in (-1, 3, 100):
        with pytest.raises(StoreError, match="not stored"):
            store.get(bad)
    with pytest.raises(StoreError):
        store.term_at(3)


def test_closed_store_refuses_work(open_store) -> None:
    store = open_store()
    fill(store, 3)
    store.close()
    store.close()
    with pytest.raises(StoreError, match="closed"):
        store.append_leader(1, b"x")
    with pytest.raises(StoreError, match="closed"):
        store.get(0)


@pytest.mark.parametrize("options, message", [
    ({"data_segment_size": 10}, "too small"),
    ({"index_segment_size": 100}, "multiple of 32"),
    ({"flush_interval_ms": 0}, "positive"),
])
def test_bad_configuration_is_named(tmp_path: Path, options, message) -> None:
    with pytest.raises(ValueError, match=message):
        MmapStore(tmp_path / "s", **options)
