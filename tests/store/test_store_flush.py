"""Flushing: the caller decides when (or a background thread does, DLedger's async policy);
appends and truncations never wait for the disk."""

from __future__ import annotations

from pathlib import Path

from tenacity import retry, stop_after_delay, wait_fixed

from nodes.store.logstore import Entry
from nodes.store.mmapstore import MmapStore


def test_background_flush_makes_appends_durable(tmp_path: Path) -> None:
    with MmapStore(tmp_path / "s", data_segment_size=4096, index_segment_size=320,
                   flush_interval_ms=5) as store:
        store.append_many(1, [b"x" * 50] * 40)
        assert store.end_index == 39

        @retry(stop=stop_after_delay(10), wait=wait_fixed(0.01), reraise=True)
        def flushed() -> None:
            assert store.flushed_index == 39

        flushed()


def test_appends_leave_durability_to_flush(open_store) -> None:
    store = open_store()
    assert store.flushed_index == -1
    store.append_many(1, [b"a", b"b"])
    store.append([Entry(2, 1, b"c")])
    assert (store.end_index, store.flushed_index) == (2, -1)
    assert store.flush() == 2 and store.flushed_index == 2
    assert store.flush() == 2


def test_reopened_store_counts_what_it_recovered_as_flushed(open_store) -> None:
    store = open_store()
    store.append_many(1, [b"a", b"b", b"c"])
    open_store().close()  # another process opened the files meanwhile: recovery synced them
    store.close()
    assert open_store().flushed_index == 2


def test_stable_index_is_committed_and_flushed(open_store) -> None:
    store = open_store()
    store.append_many(1, [b"x"] * 5)
    store.set_committed(3)
    assert store.stable_index == -1
    store.flush()
    assert store.stable_index == 3
    store.set_committed(4)
    assert store.stable_index == 4


def test_truncation_lowers_the_flushed_index_at_once(open_store) -> None:
    store = open_store()
    store.append_many(1, [b"x"] * 10)
    store.flush()
    store.truncate_after(6)
    assert (store.end_index, store.flushed_index) == (6, 6)
    store.append_many(2, [b"y"] * 3)
    assert store.flushed_index == 6
    assert store.flush() == 9
