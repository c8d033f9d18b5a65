"""The simulated file system: what a crash and a power loss keep, with mmap's rules."""

from __future__ import annotations

import random
import struct
from pathlib import Path

import pytest

from nodes.sim.simfs import PAGE, SECTOR, SimFileSystem

ROOT = Path("/node")
FILE = ROOT / "f"


def fresh(**kwargs: object) -> SimFileSystem:
    fs = SimFileSystem(**kwargs)
    fs.make_dirs(ROOT)
    return fs


def test_a_mapping_behaves_like_mmap() -> None:
    fs = fresh()
    mm = fs.map(FILE, 100)
    mm[0:3] = b"abc"
    struct.pack_into(">i", mm, 4, 7)
    assert mm[0:3] == b"abc" and type(mm[0:3]) is bytes and mm[7] == 7
    with pytest.raises(IndexError):
        mm[0:3] = b"ab"
    mm.close()
    with pytest.raises(ValueError):
        mm[0:1]
    assert fs.read_file(FILE)[:8] == b"abc\x00\x00\x00\x00\x07"
    assert fs.list_dir(ROOT) == {"f": 100}


def test_a_crash_keeps_every_write_and_closes_the_mappings() -> None:
    fs = fresh()
    mm = fs.map(FILE, 10)
    mm[0:2] = b"hi"
    fs.crash()
    with pytest.raises(ValueError):
        mm.sync(0, 10)
    assert fs.read_file(FILE)[:2] == b"hi"


def test_a_power_loss_keeps_only_synced_pages_and_committed_names() -> None:
    fs = fresh()
    mm = fs.map(FILE, 3 * PAGE)
    mm[0:3 * PAGE] = b"a" * PAGE + b"b" * PAGE + b"c" * PAGE
    mm.sync(PAGE + 1, PAGE + 2)  # the whole second page, and the file's name and size
    mm[0:1] = b"z"
    fs.map(ROOT / "never-synced", 10).close()
    report = fs.power_loss(random.Random(1), "lose-unsynced")
    assert fs.read_file(FILE) == bytes(PAGE) + b"b" * PAGE + bytes(PAGE)
    assert fs.list_dir(ROOT) == {"f": 3 * PAGE}
    assert (report.pages_kept, report.pages_dropped, report.ops_dropped) == (0, 2, 2)


def test_removes_and_renames_need_a_directory_fsync() -> None:
    fs = fresh()
    fs.write_file(FILE, b"old")
    fs.write_file(ROOT / "g", b"new")
    fs.rename(ROOT / "g", FILE)
    fs.remove(ROOT / "f")  # removes the renamed file
    assert fs.list_dir(ROOT) == {}
    fs.power_loss(random.Random(1), "lose-unsynced")
    assert fs.list_dir(ROOT) == {"f": 3, "g": 3} and fs.read_file(FILE) == b"old"
    fs.rename(ROOT / "g", FILE)
    fs.fsync_dir(ROOT)
    fs.power_loss(random.Random(1), "lose-unsynced")
    assert fs.list_dir(ROOT) == {"f": 3} and fs.read_file(FILE) == b"new"


def test_reorder_tear_keeps_some_pages_whole_and_tears_at_most_one() -> None:
    seen_torn = seen_prefix = 0
    for seed in range(200):
        fs = fresh()
        mm = fs.map(FILE, 8 * PAGE)
        mm.sync(0, 8 * PAGE)
        mm[0:8 * PAGE] = b"\xff" * (8 * PAGE)
        fs.remove(ROOT / "other")
        fs.write_file(ROOT / "x", b"1")  # commits nothing after it: the journal stays ordered
        fs.remove(ROOT / "x")
        fs.map(ROOT / "y", 1).close()
        report = fs.power_loss(random.Random(seed), "reorder-tear")
        content = fs.read_file(FILE)
        pages = [content[lo:lo + PAGE] for lo in range(0, 8 * PAGE, PAGE)]
        whole = sum(p == b"\xff" * PAGE for p in pages)
        torn = [p for p in pages if p not in (b"\xff" * PAGE, bytes(PAGE))]
        assert len(torn) == report.pages_torn <= 1
        for page in torn:
            cut = page.index(0)
            assert cut % SECTOR == 0 and page[:cut] == b"\xff" * cut and not any(page[cut:])
        assert whole == report.pages_kept
        assert report.pages_kept + report.pages_dropped + report.pages_torn == 8
        names = fs.list_dir(ROOT)
        assert "y" not in names or "x" not in names  # a journal prefix: y was made after x went
        seen_torn += report.pages_torn
        seen_prefix += report.ops_kept not in (0, report.ops_kept + report.ops_dropped)
    assert seen_torn and seen_prefix


def test_power_losses_are_deterministic_per_seed() -> None:
    def run(seed: int) -> bytes:
        fs = fresh()
        mm = fs.map(FILE, 4 * PAGE)
        mm[0:4 * PAGE] = random.Random(0).randbytes(4 * PAGE)
        fs.power_loss(random.Random(seed))
        return fs.read_file(FILE) if "f" in fs.list_dir(ROOT) else b""

    assert run(3) == run(3)
    assert len({run(seed) for seed in range(20)}) > 1


def test_disk_use_ratio_counts_the_files_against_capacity() -> None:
    fs = fresh(capacity=1000)
    fs.map(FILE, 300).close()
    fs.write_file(ROOT / "g", b"x" * 200)
    assert fs.disk_use_ratio(ROOT) == 0.5


def test_modified_time_follows_the_clock_when_bytes_change() -> None:
    now = [5.0]
    fs = fresh(clock=lambda: now[0])
    mm = fs.map(FILE, 10)
    now[0] = 9.0
    mm.sync(0, 10)
    assert fs.modified_time(FILE) == 5.0
    mm[0:1] = b"x"
    mm.sync(0, 10)
    assert fs.modified_time(FILE) == 9.0


def test_missing_files_and_directories_are_named() -> None:
    fs = fresh()
    with pytest.raises(FileNotFoundError):
        fs.read_file(FILE)
    with pytest.raises(FileNotFoundError):
        fs.map(Path("/elsewhere/f"), 10)
