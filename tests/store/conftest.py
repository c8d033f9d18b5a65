"""Fixtures for the mmap store tests: small segments so every test crosses file boundaries."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from storefiles import DATA_SEGMENT, INDEX_SEGMENT

from nodes.mmapstore import MmapStore

OpenStore = Callable[..., MmapStore]


@pytest.fixture
def open_store(tmp_path: Path) -> Iterator[OpenStore]:
    """Open small-segment stores (sync flush: no background thread) and close them after."""
    opened: list[MmapStore] = []

    def _open(directory: Path | None = None, **kwargs: object) -> MmapStore:
        options: dict = {"data_segment_size": DATA_SEGMENT, "index_segment_size": INDEX_SEGMENT,
                         "flush": "sync"}
        options.update(kwargs)
        store = MmapStore(directory or tmp_path / "store", **options)
        opened.append(store)
        return store

    yield _open
    for store in opened:
        store.close()
