"""The power-loss file system's overlay and inode table, without FUSE (nemesis/agents/lazyfs.py).

A "power loss" here is what the daemon's death does: the `Overlay` is thrown away and a
new one starts over the same backing files.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from harness.wait import wait_for
from nemesis.agents import lazyfs
from nemesis.agents.lazyfs import PAGE, ROOT, Inodes, Overlay

INODE = 7


@pytest.fixture
def backing(tmp_path: Path) -> Iterator[int]:
    """An fd of a backing file that already holds 3 pages and a bit of durable bytes."""
    path = tmp_path / "file"
    path.write_bytes(bytes(range(256)) * (3 * PAGE // 256) + b"tail")
    fd = os.open(path, os.O_RDWR)
    yield fd
    os.close(fd)


def on_disk(fd: int) -> bytes:
    return os.pread(fd, os.fstat(fd).st_size + 1, 0)


def view(overlay: Overlay, fd: int) -> bytes:
    size = overlay.size(INODE, os.fstat(fd).st_size)
    return overlay.read(INODE, fd, 0, size + PAGE)


def test_writes_are_seen_but_stay_in_memory_until_fsync(backing: int) -> None:
    before = on_disk(backing)
    overlay = Overlay()
    overlay.write(INODE, backing, 10, b"hello")
    overlay.write(INODE, backing, len(before) + 100, b"past the end")
    assert on_disk(backing) == before
    seen = view(overlay, backing)
    assert seen[10:15] == b"hello" and seen[:10] == before[:10] and seen[15:len(before)] == before[15:]
    assert seen[len(before):len(before) + 100] == bytes(100)
    assert seen.endswith(b"past the end")
    assert overlay.stats() == {"files": 1, "pages": 2, "bytes": 2 * PAGE}


def test_a_power_loss_drops_what_was_not_fsynced(backing: int) -> None:
    before = on_disk(backing)
    overlay = Overlay()
    overlay.write(INODE, backing, 0, b"x" * 3 * PAGE)
    overlay.truncate(INODE, backing, 5)
    assert view(Overlay(), backing) == before  # the daemon died: a new overlay, the old bytes


def test_fsync_makes_the_file_durable_and_later_writes_are_lost_again(backing: int) -> None:
    overlay = Overlay()
    overlay.write(INODE, backing, PAGE - 2, b"straddles")
    expected = view(overlay, backing)
    assert overlay.sync(INODE, backing) == 2 * PAGE
    assert on_disk(backing) == expected
    assert overlay.stats() == {"files": 0, "pages": 0, "bytes": 0}
    overlay.write(INODE, backing, 0, b"unsynced")
    assert view(Overlay(), backing) == expected


def test_a_truncate_hides_the_old_bytes_when_the_file_grows_again(backing: int) -> None:
    overlay = Overlay()
    overlay.truncate(INODE, backing, 100)
    overlay.truncate(INODE, backing, 2 * PAGE)
    overlay.write(INODE, backing, PAGE + 1, b"y")
    seen = view(overlay, backing)
    assert len(seen) == 2 * PAGE and seen[100:PAGE + 1] == bytes(PAGE - 99)
    assert seen[PAGE + 1:PAGE + 2] == b"y"
    overlay.sync(INODE, backing)
    assert on_disk(backing) == seen


def test_a_size_change_alone_is_pending_too(backing: int) -> None:
    before = on_disk(backing)
    overlay = Overlay()
    overlay.truncate(INODE, backing, 64 << 20)  # how a store segment is made: ftruncate, then mmap
    assert overlay.size(INODE, len(before)) == 64 << 20
    assert overlay.read(INODE, backing, (64 << 20) - 3, 10) == bytes(3)
    assert overlay.stats() == {"files": 1, "pages": 0, "bytes": 0}
    assert on_disk(backing) == before


@pytest.mark.parametrize("seed", range(20))
def test_random_operations_match_a_model_of_memory_and_disk(backing: int, seed: int) -> None:
    """Writes, truncates, fsyncs and power losses in any order: reads always show the model's
    file, and after a power loss the file is what the last fsync left."""
    rng = random.Random(seed)
    disk = bytearray(on_disk(backing))
    memory = bytearray(disk)
    overlay = Overlay()
    for _ in range(60):
        op = rng.choices(("write", "truncate", "sync", "lose"), (6, 2, 1, 1))[0]
        if op == "write":
            offset = rng.randrange(0, 6 * PAGE)
            data = rng.randbytes(rng.choice((1, 7, PAGE, PAGE + 3, 3 * PAGE)))
            overlay.write(INODE, backing, offset, data)
            memory.extend(bytes(max(0, offset + len(data) - len(memory))))
            memory[offset:offset + len(data)] = data
        elif op == "truncate":
            size = rng.randrange(0, 6 * PAGE)
            overlay.truncate(INODE, backing, size)
            memory = memory[:size] + bytearray(max(0, size - len(memory)))
        elif op == "sync":
            overlay.sync(INODE, backing)
            disk = bytearray(memory)
            assert on_disk(backing) == disk
        else:
            overlay = Overlay()
            memory = bytearray(disk)
        assert view(overlay, backing) == memory
        start = rng.randrange(0, len(memory) + 1)
        assert overlay.read(INODE, backing, start, 5000) == memory[start:start + 5000]


def test_inodes_follow_renames_of_folders_and_unlinks() -> None:
    inodes = Inodes(b"/backing", root_backing=100)
    folder = inodes.entry(ROOT, b"data", backing=101)
    file = inodes.entry(folder, b"00000", backing=102)
    assert inodes.path(file) == b"/backing/data/00000"
    inodes.moved(folder, ROOT, b"moved")
    assert inodes.path(file) == b"/backing/moved/00000"
    assert inodes.entry(folder, b"00000", backing=102) == file
    inodes.table[file].lookups = 2
    inodes.unlinked(102)
    assert not inodes.forget(file, 1)
    assert inodes.forget(file, 1)  # unlinked and forgotten: its overlay goes
    again = inodes.entry(folder, b"00000", backing=102)  # the backing file system reused the number
    assert again not in (folder, file)


def test_forgotten_linked_inodes_keep_their_number() -> None:
    inodes = Inodes(b"/backing", root_backing=100)
    file = inodes.entry(ROOT, b"currterm", backing=105)
    inodes.table[file].lookups = 1
    assert not inodes.forget(file, 1)
    assert inodes.entry(ROOT, b"currterm", backing=105) == file


def test_a_cut_keeps_the_earliest_moment_and_says_how_late_it_was_set(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """`lazyfs.py cut --at`: the disk dies at the earliest moment any cut named; `late_ms` is
    how long after its moment a cut was set."""
    monkeypatch.setattr(lazyfs, "STATE_DIR", tmp_path)
    mountpoint = "/var/lib/dledger"
    cut_file = lazyfs._state_paths(mountpoint)["cut"]
    assert lazyfs.cut(mountpoint, 1.0) == 1  # no daemon serves it: nothing to cut
    assert lazyfs.cut_time(cut_file) is None
    lazyfs._state_paths(mountpoint)["json"].write_text(json.dumps({"pid": os.getpid()}))
    capsys.readouterr()

    now = time.time()
    assert lazyfs.cut(mountpoint, now + 60) == 0
    assert json.loads(capsys.readouterr().out) == {"late_ms": 0.0}
    assert lazyfs.cut_time(cut_file) == now + 60 and not lazyfs.disk_cut(cut_file, now)
    assert lazyfs.cut(mountpoint, now - 2) == 0  # earlier: the disk dies sooner (already dead)
    assert json.loads(capsys.readouterr().out)["late_ms"] >= 2000
    assert lazyfs.cut(mountpoint, now + 120) == 0  # later: the earlier moment stays
    assert lazyfs.cut_time(cut_file) == now - 2 and lazyfs.disk_cut(cut_file, now)


@pytest.mark.parametrize("use", ["cwd", "open file", "mapping"])
def test_the_power_loss_kills_every_process_using_the_disk_and_spares_the_rest(
        tmp_path: Path, use: str) -> None:
    disk, elsewhere = tmp_path / "disk", tmp_path / "elsewhere"
    for folder in (disk, elsewhere):
        folder.mkdir()
        (folder / "file").write_bytes(b"x" * PAGE)
    holds = {"cwd": "import time; time.sleep(60)",
             "open file": "import time; f = open('disk/file', 'rb'); time.sleep(60)",
             "mapping": "import mmap, os, time; fd = os.open('disk/file', os.O_RDONLY); "
                        "m = mmap.mmap(fd, 0, prot=mmap.PROT_READ); os.close(fd); time.sleep(60)"}
    user = subprocess.Popen([sys.executable, "-c", holds[use]], cwd=disk if use == "cwd" else tmp_path)
    bystander = subprocess.Popen([sys.executable, "-c", holds["cwd"]], cwd=elsewhere)
    try:
        wait_for(lambda: lazyfs._uses(str(user.pid), str(disk)), 30, f"the {use} holder never used the disk")
        assert lazyfs.kill_users(str(disk), spare={os.getpid()}) == [user.pid]
        assert user.wait(timeout=30) == -signal.SIGKILL
        assert bystander.poll() is None
        assert lazyfs.kill_users(str(disk), spare={os.getpid()}) == []
    finally:
        for process in (user, bystander):
            process.kill()
            process.wait()
