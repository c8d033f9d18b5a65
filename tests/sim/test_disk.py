"""The simulated disk's space: writes past its capacity fail with ENOSPC, a small disk is
flagged full by the store's retention check and stays full, and its size is drawn per seed.
Its restarts check the store's contract: a recovered log is one the store held, durable part kept."""

from __future__ import annotations

import errno
import random
from pathlib import Path

import pytest

from nodes.logview import Append, Truncate
from nodes.sim.disk import BURST, DIRECTORY, RETENTION, ROOMY, SimDisk, disk_capacity
from nodes.sim.invariants import Violation
from nodes.sim.simfs import SimFileSystem
from nodes.sim.simmap import NoSpace
from nodes.store.entrycodec import HEADER_SIZE
from nodes.store.logstore import Entry


def test_a_file_cannot_grow_past_the_capacity_until_space_is_freed() -> None:
    fs = SimFileSystem(capacity=1000)
    fs.make_dirs(Path("/d"))
    fs.map(Path("/d/a"), 600).close()
    with pytest.raises(NoSpace) as caught:
        fs.write_file(Path("/d/b"), bytes(500))
    assert caught.value.errno == errno.ENOSPC
    fs.remove(Path("/d/a"))
    fs.write_file(Path("/d/b"), bytes(500))
    fs.write_file(Path("/d/c"), bytes(300))
    fs.rename(Path("/d/c"), Path("/d/b"))  # frees the replaced file's 500 bytes
    assert fs.used() == 300
    fs.map(Path("/d/e"), 700).close()
    fs.remove(Path("/d/b"))
    fs.power_loss(random.Random(1), "lose-unsynced")  # the unsynced rename, map and removal are undone
    assert fs.list_dir(Path("/d")) == {"b": 500, "c": 300}
    assert fs.used() == 800


def test_a_small_disk_is_flagged_full_and_nothing_is_deleted_to_make_room() -> None:
    disk = SimDisk(512, 320, capacity=20_000)
    store, _state = disk.open()
    while disk.fs.disk_use_ratio(Path("/")) <= RETENTION.disk_full_ratio:
        store.append_leader(1, bytes(300))
    disk.check_space(0.0)
    assert store.disk_full
    store.set_committed(store.end_index)
    disk.check_space(1e9)  # everything committed, and a long time later
    assert store.disk_full and store.begin_index == 0


def test_the_capacity_is_drawn_per_seed_with_room_for_what_a_check_interval_writes() -> None:
    assert {disk_capacity(seed, 0.0, 512, 320, 10) for seed in range(50)} == {ROOMY}
    small = [disk_capacity(seed, 1.0, 512, 320, 10) for seed in range(50)]
    assert small == [disk_capacity(seed, 1.0, 512, 320, 10) for seed in range(50)]
    per_entry = 512 / (512 // (HEADER_SIZE + 10)) + 32
    room = 512 + 320 + BURST * per_entry
    assert all(c * (1 - RETENTION.disk_full_ratio) >= room for c in small)
    assert len(set(small)) > 40


def _written(disk: SimDisk, entries: list[Entry], *, tell: bool = True) -> None:
    """Append `entries` to the running store, telling the disk (as the driver's writes do) or not."""
    assert disk.store is not None
    disk.store.append(entries)
    if tell:
        disk.applied([Append(entries)])


def test_a_restart_after_truncations_and_power_losses_keeps_the_contract() -> None:
    disk = SimDisk(512, 320)
    disk.open()
    for round_ in range(20):
        store = disk.store
        assert store is not None
        after = max(store.committed_index, store.end_index - 3)
        store.truncate_after(after)
        disk.applied([Truncate(after)])
        _written(disk, [Entry(after + 1 + k, round_ + 1, bytes([round_]) * 40) for k in range(6)])
        if round_ % 3 == 0:
            store.flush()
        disk.crash(round_ % 2 == 0, random.Random(round_), "reorder-tear")
        disk.open()  # raises Violation if the store broke its contract
    assert disk.log


def test_a_restart_that_recovers_entries_the_store_never_held_breaks_the_contract() -> None:
    disk = SimDisk(512, 320)
    disk.open()
    _written(disk, [Entry(0, 1, b"told")])
    _written(disk, [Entry(1, 1, b"never told")], tell=False)  # as if recovery made it up
    disk.crash(False, random.Random(1), "reorder-tear")
    with pytest.raises(Violation, match="no log the store held"):
        disk.open()


def test_a_restart_that_drops_a_durable_entry_breaks_the_contract() -> None:
    disk = SimDisk(512, 320)
    store, _state = disk.open()
    _written(disk, [Entry(i, 1, b"x" * 30) for i in range(5)])
    store.flush()
    disk.crash(True, random.Random(1), "lose-unsynced")
    for name in disk.fs.list_dir(DIRECTORY / "data"):  # the disk loses fsynced files
        disk.fs.remove(DIRECTORY / "data" / name)
    with pytest.raises(Violation, match="had made durable"):
        disk.open()
