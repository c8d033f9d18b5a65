"""A simulated `FileSystem` for the store and the term file: in memory, and as forgetful on
a power loss as a real page cache is.

A file has two contents: what the process sees (`data`, the page cache) and what is on
the disk (`durable`). Writes through a mapping or `write_file` change `data`;
`MappedFile.sync(start, stop)` copies the 4 KiB pages of that range to `durable`, and
`write_file` (it fsyncs) all of it.

Metadata (names created, removed or renamed, file sizes) goes through one ordered
journal, as on ext4 or XFS: a change is durable once a journal prefix holding it is
committed. `fsync_dir(d)` commits the journal up to the last change in `d`; syncing a file
commits it up to that file's last change (an fsync makes the size durable, and commits
what came before). Directories are durable once made (`make_dirs` fsyncs their parents on
a real disk).

`crash()` is a process crash: the page cache survives, nothing is lost, open mappings die.
`power_loss(rng, mode)` loses the page cache:

* "lose-unsynced": only what was synced or committed survives.
* "reorder-tear": besides that, a random prefix of the uncommitted journal, a random subset
  of the dirty pages (write-back keeps no order), and at most one more page that was being
  written: only a prefix of its 512-byte sectors made it.

Space: a file takes its whole size from the moment it has it (no sparse files), so
growing one past the disk's `capacity` raises `NoSpace` (ENOSPC), as `fallocate` would.

Simplifications: a file is mapped once at a time; a removed file that is still mapped
takes no space; paths are split as strings (`/`-separated, no `..`). Deterministic: all
randomness comes from the `random.Random` given to `power_loss`.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, field, fields
from functools import partial
from pathlib import Path
from typing import Literal

from nodes.sim.simmap import NoSpace, SimMap

PAGE = 4096
SECTOR = 512
LossMode = Literal["lose-unsynced", "reorder-tear"]
LOSS_MODES: tuple[LossMode, ...] = ("lose-unsynced", "reorder-tear")


@dataclass
class LossReport:
    """What power losses did: one (`power_loss`'s answer) or all so far (`SimFileSystem.losses`)."""

    power_losses: int = 0
    pages_kept: int = 0  # dirty pages written back in time
    pages_dropped: int = 0  # dirty pages lost
    pages_torn: int = 0  # dirty pages written in part
    ops_kept: int = 0  # uncommitted journal entries that made it
    ops_dropped: int = 0  # uncommitted journal entries lost

    def add(self, other: LossReport) -> None:
        for f in fields(self):
            setattr(self, f.name, getattr(self, f.name) + getattr(other, f.name))


class _Inode:
    __slots__ = ("data", "durable", "handle", "last_op", "mtime")

    def __init__(self, mtime: float) -> None:
        self.data = bytearray()  # what the process sees
        self.durable = bytearray()  # what is on the disk
        self.handle: SimMap | None = None
        self.mtime = mtime
        self.last_op = -1  # the journal's number of the last change to the file's name or size


@dataclass
class _Dir:
    entries: dict[str, _Inode] = field(default_factory=dict)  # what the process sees
    durable: dict[str, _Inode] = field(default_factory=dict)
    last_op: int = -1  # the journal's number of the last change to a name in it


def _split(path: Path) -> tuple[str, str]:
    """`(str(path.parent), path.name)`, at a fraction of pathlib's cost."""
    text = str(path)
    head, _, name = text.rpartition("/")
    return head or ("/" if text.startswith("/") else "."), name


def _resize(buf: bytearray, size: int) -> None:
    if size < len(buf):
        del buf[size:]
    else:
        buf.extend(bytes(size - len(buf)))


def _rename_durable(entries: dict[str, _Inode], src: str, dst: str, inode: _Inode) -> None:
    entries.pop(src, None)
    entries[dst] = inode


def _write_back(inode: _Inode, start: int, stop: int) -> bool:
    """Copy `data[start:stop]` to `durable` (clipped to both); whether a byte changed."""
    stop = min(stop, len(inode.data), len(inode.durable))
    if stop <= start:
        return False
    new = memoryview(inode.data)[start:stop]
    if inode.durable[start:stop] == new:
        return False
    inode.durable[start:stop] = new
    return True


def _dirty_pages(inode: _Inode) -> list[int]:
    """Offsets of the pages whose cached bytes differ from the disk's (within both sizes)."""
    size = min(len(inode.data), len(inode.durable))
    data, durable = memoryview(inode.data)[:size], memoryview(inode.durable)[:size]
    if data == durable:
        return []
    return [lo for lo in range(0, size, PAGE) if data[lo:lo + PAGE] != durable[lo:lo + PAGE]]


class SimFileSystem:
    """In-memory files that a simulated power loss can take back to what was made durable."""

    def __init__(self, capacity: int = 1 << 30, clock: Callable[[], float] = lambda: 0.0) -> None:
        self.capacity = capacity
        self.clock = clock
        self.losses = LossReport()
        self.mapped: dict[int, SimMap] = {}  # open mappings by id
        self._dirs: dict[str, _Dir] = {}
        self._journal: list[Callable[[], object]] = []  # uncommitted metadata changes: a call applies one
        self._journal_start = 0  # the number of `_journal[0]`: changes are numbered from 0 on
        self._used = 0  # bytes the named files take

    # -- FileSystem -------------------------------------------------------------------------

    def make_dirs(self, path: Path) -> None:
        if str(path) in self._dirs:
            return  # and so are its parents
        for directory in (path, *path.parents):
            self._dirs.setdefault(str(directory), _Dir())

    def map(self, path: Path, size: int, *, truncate: bool = False) -> SimMap:
        inode = self._inode(path, create=True)
        if inode.handle is not None:
            raise RuntimeError(f"{path} is mapped already (the simulated disk maps a file once at a time)")
        if truncate and inode.data:
            self._set_size(path, inode, 0)
        if len(inode.data) != size:
            self._set_size(path, inode, size)
        return SimMap(self, inode)

    def list_dir(self, path: Path) -> dict[str, int]:
        return {name: len(inode.data) for name, inode in self._dir(str(path)).entries.items()}

    def remove(self, path: Path) -> None:
        parent, name = _split(path)
        directory = self._dir(parent)
        inode = directory.entries.pop(name, None)
        if inode is not None:
            self._used -= len(inode.data)
            self._log(partial(directory.durable.pop, name, None), directory)

    def fsync_dir(self, path: Path) -> None:
        self._commit_through(self._dir(str(path)).last_op)

    def write_file(self, path: Path, data: bytes) -> None:
        inode = self._inode(path, create=True)
        if inode.handle is not None:
            raise RuntimeError(f"{path} is mapped: write it through its mapping")
        self._set_size(path, inode, len(data))
        inode.data[:] = data
        self.sync_pages(inode, 0, len(data))

    def rename(self, src: Path, dst: Path) -> None:
        (parent, src_name), (dst_parent, dst_name) = _split(src), _split(dst)
        if parent != dst_parent:
            raise ValueError(f"rename {src} to {dst}: the simulated disk renames within a directory")
        directory = self._dir(parent)
        inode = directory.entries.pop(src_name, None)
        if inode is None:
            raise FileNotFoundError(src)
        replaced = directory.entries.get(dst_name)
        if replaced is not None:
            self._used -= len(replaced.data)
        directory.entries[dst_name] = inode
        self._log(partial(_rename_durable, directory.durable, src_name, dst_name, inode), directory, inode)

    def read_file(self, path: Path) -> bytes:
        return bytes(self._inode(path).data)

    def modified_time(self, path: Path) -> float:
        return self._inode(path).mtime

    def disk_use_ratio(self, path: Path) -> float:
        return self._used / self.capacity

    def used(self) -> int:
        """Bytes the files take (a file has one name: renames stay within a directory)."""
        return self._used

    # -- faults -----------------------------------------------------------------------------

    def crash(self) -> None:
        """The process dies: its mappings close; the page cache, and so every write, survives."""
        for handle in list(self.mapped.values()):
            handle.close()

    def power_loss(self, rng: random.Random, mode: LossMode = "reorder-tear") -> LossReport:
        """The machine loses power: the disk keeps what `mode` allows (see the module doc)."""
        if mode not in LOSS_MODES:
            raise ValueError(f"power loss mode {mode!r}: use one of {', '.join(LOSS_MODES)}")
        self.crash()
        report = LossReport(power_losses=1)
        keep = rng.randint(0, len(self._journal)) if mode == "reorder-tear" else 0
        report.ops_kept, report.ops_dropped = keep, len(self._journal) - keep
        self._commit(keep)
        self._journal_start += len(self._journal)
        self._journal.clear()
        inodes: dict[int, _Inode] = {}
        for directory in self._dirs.values():
            directory.entries = dict(directory.durable)
            inodes.update((id(inode), inode) for inode in directory.entries.values())
        dirty = [(inode, lo) for inode in inodes.values() for lo in _dirty_pages(inode)]
        if mode == "reorder-tear":
            dirty = self._write_back_some(rng, dirty, report)
        report.pages_dropped = len(dirty)
        for inode in inodes.values():
            inode.data = bytearray(inode.durable)
        self._used = sum(len(inode.data) for inode in inodes.values())
        self.losses.add(report)
        return report

    @staticmethod
    def _write_back_some(rng: random.Random, dirty: list[tuple[_Inode, int]],
                         report: LossReport) -> list[tuple[_Inode, int]]:
        """Write back a random subset of `dirty` and tear at most one more; return the rest."""
        lost = []
        for inode, lo in dirty:
            if rng.random() < 0.5:
                _write_back(inode, lo, lo + PAGE)
                report.pages_kept += 1
            else:
                lost.append((inode, lo))
        tearable = [k for k, (inode, lo) in enumerate(lost) if len(inode.durable) - lo > SECTOR]
        if tearable and rng.random() < 0.5:
            inode, lo = lost.pop(rng.choice(tearable))
            sectors = -(-min(PAGE, len(inode.durable) - lo) // SECTOR)
            _write_back(inode, lo, lo + rng.randint(1, sectors - 1) * SECTOR)
            report.pages_torn += 1
        return lost

    # -- internals --------------------------------------------------------------------------

    def sync_pages(self, inode: _Inode, start: int, stop: int) -> None:
        """fdatasync of a range: commit the journal through the file's size, copy the pages."""
        self._commit_through(inode.last_op)
        if _write_back(inode, start - start % PAGE, -(-stop // PAGE) * PAGE):
            inode.mtime = self.clock()

    def _dir(self, path: str) -> _Dir:
        try:
            return self._dirs[path]
        except KeyError:
            raise FileNotFoundError(f"no directory {path}") from None

    def _inode(self, path: Path, *, create: bool = False) -> _Inode:
        parent, name = _split(path)
        directory = self._dir(parent)
        inode = directory.entries.get(name)
        if inode is None:
            if not create:
                raise FileNotFoundError(path)
            inode = directory.entries[name] = _Inode(self.clock())
            self._log(partial(directory.durable.__setitem__, name, inode), directory, inode)
        return inode

    def _set_size(self, path: Path, inode: _Inode, size: int) -> None:
        """Resize `path`'s cached content (journaled); NoSpace if the disk cannot hold it."""
        grow = size - len(inode.data)
        if grow > 0 and self._used + grow > self.capacity:
            raise NoSpace(path, grow, self._used, self.capacity)
        self._used += grow
        _resize(inode.data, size)
        inode.mtime = self.clock()
        self._log(partial(_resize, inode.durable, size), None, inode)

    def _log(self, apply: Callable[[], object], directory: _Dir | None, inode: _Inode | None = None) -> None:
        """Journal a metadata change of a name in `directory` and/or of `inode`."""
        number = self._journal_start + len(self._journal)
        self._journal.append(apply)
        if directory is not None:
            directory.last_op = number
        if inode is not None:
            inode.last_op = number

    def _commit_through(self, number: int) -> None:
        """Commit the journal up to change `number` (if it is not committed yet)."""
        self._commit(number + 1 - self._journal_start)

    def _commit(self, count: int) -> None:
        if count <= 0:
            return
        for apply in self._journal[:count]:
            apply()
        del self._journal[:count]
        self._journal_start += count
