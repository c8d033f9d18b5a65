"""Retention: expired and forced deletion of old data files, never past the committed one;
DISK_FULL above the reject ratio."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from storefiles import body_for

from nodes.store.logstore import StoreError
from nodes.store.mmapstore import MmapStore
from nodes.store.readfile import read_entries
from nodes.store.retention import RetentionPolicy

NOW = 1_000_000_000.0
HOUR = 3600.0


class FakeDisk:
    """Disk use ratios to report, one per measurement; the last repeats."""

    def __init__(self, *ratios: float) -> None:
        self.ratios = list(ratios)

    def __call__(self, _path: Path) -> float:
        return self.ratios.pop(0) if len(self.ratios) > 1 else self.ratios[0]


def make(open_store, disk: FakeDisk, count: int = 200) -> MmapStore:
    policy = RetentionPolicy(reserved_s=72 * HOUR, check_interval_s=3600, disk_usage=disk)
    store = open_store(retention=policy)
    store.append_many(1, [body_for(i) for i in range(count)])
    return store


def age_all(directory: Path, hours: float) -> None:
    for p in (directory / "data").iterdir():
        os.utime(p, (NOW - hours * HOUR, NOW - hours * HOUR))


def data_names(directory: Path) -> list[str]:
    return sorted(p.name for p in (directory / "data").iterdir())


def data_only(removed: list[str]) -> list[str]:
    return [r for r in removed if r.startswith("data/")]


def first_index_of_file(store: MmapStore, name: str) -> int:
    return next(e.index for e in read_entries(store.directory) if e.pos >= int(name))


def test_expired_files_before_the_committed_one_are_deleted(open_store, store_dir: Path) -> None:
    directory = store_dir
    store = make(open_store, FakeDisk(0.1))
    names = data_names(directory)
    committed_file = names[4]
    committed = first_index_of_file(store, committed_file) + 1
    store.set_committed(committed)
    age_all(directory, 100)
    removed = store.clean(now=NOW)
    assert data_only(removed) == [f"data/{n}" for n in names[:4]]
    assert any(r.startswith("index/") for r in removed)
    assert data_names(directory) == names[4:]
    begin = first_index_of_file(store, committed_file)
    assert store.begin_index == begin
    with pytest.raises(StoreError, match="not stored"):
        store.get(begin - 1)
    kept = store.get_range(0, 10_000)
    store.close()
    again = open_store(retention=None)
    assert again.begin_index == begin and again.get_range(0, 10_000) == kept
    with pytest.raises(StoreError, match=f"the log begins at {begin}"):
        again.truncate_after(begin - 1)
    again.truncate_after(begin)
    assert again.get_range(0, 10_000) == kept[:1]
    assert min(int(p.name) for p in (directory / "index").iterdir()) <= begin * 32


def test_young_files_stay_while_disk_is_fine(open_store, store_dir: Path) -> None:
    store = make(open_store, FakeDisk(0.5))
    store.set_committed(store.end_index)
    age_all(store_dir, 10)
    assert store.clean(now=NOW) == []


def test_nothing_is_deleted_without_a_committed_index(open_store, store_dir: Path) -> None:
    store = make(open_store, FakeDisk(0.1, 0.99))
    age_all(store_dir, 100)
    assert store.clean(now=NOW) == []
    assert store.begin_index == 0


def test_force_clean_deletes_young_files_until_below_the_ratio(open_store, store_dir: Path) -> None:
    directory = store_dir
    store = make(open_store, FakeDisk(0.1))
    names = data_names(directory)
    store.set_committed(store.end_index)
    age_all(directory, 1)
    store._retention = RetentionPolicy(disk_usage=FakeDisk(0.88, 0.87, 0.84))
    assert data_only(store.clean(now=NOW)) == [f"data/{n}" for n in names[:2]]
    assert not store.disk_full


def test_disk_full_is_flagged_until_space_returns_and_appends_still_go_in(open_store) -> None:
    disk = FakeDisk(0.1)
    store = make(open_store, disk, count=3)
    disk.ratios = [0.95]
    store.clean(now=NOW)
    assert store.disk_full
    assert store.append_leader(1, b"x").index == 3  # the driver refuses client appends, not the store
    disk.ratios = [0.5]
    store.clean(now=NOW)
    assert not store.disk_full


@pytest.mark.parametrize("kwargs", [{"force_clean_ratio": 0.95, "disk_full_ratio": 0.9},
                                    {"reserved_s": -1}, {"check_interval_s": 0}])
def test_bad_policies_are_named(kwargs) -> None:
    with pytest.raises(ValueError):
        RetentionPolicy(**kwargs)
