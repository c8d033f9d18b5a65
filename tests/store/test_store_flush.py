"""Flush policies: async background flushing, and sync group commit shared by appenders."""

from __future__ import annotations

import threading
from pathlib import Path

from tenacity import retry, stop_after_delay, wait_fixed

from nodes.store.mmapstore import MmapStore


def test_async_flush_makes_appends_durable_in_the_background(tmp_path: Path) -> None:
    with MmapStore(tmp_path / "s", data_segment_size=4096, index_segment_size=320,
                   flush="async", flush_interval_ms=5) as store:
        store.append_many(1, [b"x" * 50] * 40)
        assert store.end_index == 39

        @retry(stop=stop_after_delay(10), wait=wait_fixed(0.01), reraise=True)
        def flushed() -> None:
            assert store.flushed_index == 39

        flushed()


def test_sync_append_returns_only_when_durable(open_store) -> None:
    store = open_store(flush="sync")
    entry = store.append_leader(1, b"a")
    assert store.flushed_index == entry.index == 0
    assert store.append_many(1, [b"b", b"c"]) == range(1, 3)
    assert store.flushed_index == 2


def test_sync_append_without_waiting_leaves_durability_to_the_caller(open_store) -> None:
    store = open_store(flush="sync")
    store.append_many(1, [b"a", b"b"], wait=False)
    assert (store.end_index, store.flushed_index) == (1, -1)
    assert store.sync_to(1) == 1 and store.flushed_index == 1
    assert store.flush() == 1


def test_concurrent_sync_appenders_share_one_fsync(open_store) -> None:
    """The first flush is held until all 16 appenders have written: that single flush must
    then release every one of them, each with its entry durable."""
    store = open_store(flush="sync")
    appenders = 16
    real_flush = store._flusher._flush_once
    calls: list[int] = []

    @retry(stop=stop_after_delay(20), wait=wait_fixed(0.002), reraise=True)
    def everyone_appended() -> None:
        assert store.end_index == appenders - 1

    def held_flush() -> int:
        everyone_appended()
        calls.append(store.end_index)
        return real_flush()

    store._flusher._flush_once = held_flush
    durable: list[bool] = []

    def appender(n: int) -> None:
        entry = store.append_leader(1, f"t{n}".encode())
        durable.append(store.flushed_index >= entry.index)

    threads = [threading.Thread(target=appender, args=(n,)) for n in range(appenders)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert durable == [True] * appenders
    assert calls == [appenders - 1]
