"""Fixtures for the mmap store tests: small segments so every test crosses file boundaries."""

from __future__ import annotations

import shutil
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from storefiles import DATA_SEGMENT, INDEX_SEGMENT, scratch_dir

from nodes.store.mmapstore import MmapStore

OpenStore = Callable[..., MmapStore]


@pytest.fixture
def store_dir() -> Iterator[Path]:
    """Where a test's store lives (on tmpfs when available); removed afterwards."""
    root = scratch_dir()
    yield root / "store"
    shutil.rmtree(root, ignore_errors=True)


@pytest.fixture
def open_store(store_dir: Path) -> Iterator[OpenStore]:
    """Open small-segment stores (no background flush thread) and close them after."""
    opened: list[MmapStore] = []

    def _open(directory: Path | None = None, **kwargs: object) -> MmapStore:
        options: dict = {"data_segment_size": DATA_SEGMENT, "index_segment_size": INDEX_SEGMENT,
                         "flush_interval_ms": None}
        options.update(kwargs)
        store = MmapStore(directory or store_dir, **options)
        opened.append(store)
        return store

    yield _open
    for store in opened:
        store.close()
