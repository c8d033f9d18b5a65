"""The simulated disk's space: writes past its capacity fail with ENOSPC, a small disk is
flagged full by the store's retention check and stays full, and its size is drawn per seed."""

from __future__ import annotations

import errno
import random
from pathlib import Path

import pytest

from nodes.sim.disk import BURST, RETENTION, ROOMY, SimDisk, disk_capacity
from nodes.sim.simfs import SimFileSystem
from nodes.sim.simmap import NoSpace
from nodes.store.entrycodec import HEADER_SIZE


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
