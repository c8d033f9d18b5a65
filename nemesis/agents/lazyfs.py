"""LazyFS, our own: a FUSE file system that loses every write not fsynced when the power goes.

    python3 lazyfs.py mount BACKING MOUNTPOINT   # daemonise; returns once mounted (idempotent)
    python3 lazyfs.py crash MOUNTPOINT           # power loss: drop the unsynced, remount fresh
    python3 lazyfs.py status MOUNTPOINT          # exit 0 and say nothing when mounted and alive
    python3 lazyfs.py cut --at EPOCH MOUNTPOINT  # the disk dies at that instant (see below)

MOUNTPOINT passes through to the BACKING directory, except that file contents change only
in the daemon's memory: every write and every size change (truncate, O_TRUNC) of a file is
held in an overlay (4 KiB pages, a pending size) until that file is fsynced (fsync or
fdatasync: FUSE fsync), which writes the file's pending pages and size to the backing file
and fsyncs it. Closing a file (FUSE flush, release) makes nothing durable. Reads see the
backing file under the overlay. Shared writable mmap works (no direct_io): the kernel
writes dirty mapped pages back as write requests, and msync(MS_SYNC) becomes a FUSE fsync.

Metadata operations (create, mkdir, unlink, rmdir, rename, chmod, chown, utimes) are
applied to the backing directory at once and so survive a power loss, as LazyFS does: a
file created and written but never fsynced comes back empty; fsyncdir is accepted (it
fsyncs the backing directory).

`crash` is the power loss: it SIGKILLs every process using the mount (a file open, a
mapping or its working directory below it), as the power loss kills them, then signals the
daemon (SIGUSR1: write what is unsynced to the stats file and die at once, applying
nothing; SIGKILL if it does not), lazily unmounts the dead mount (`fusermount3 -uz`) and
mounts a fresh daemon over the same backing. The old daemon's memory and the old mount's
page cache are gone; the JSON it prints says what was dropped (`files`, `pages`, `bytes` at
4 KiB page granularity) and which processes it killed (`killed`).

`cut --at EPOCH` makes the power loss happen at one instant on every node it is given to
(all nodes share a clock: containers share the kernel's, machines run NTP). From that
wall-clock time on, the disk takes nothing more: every request that would make something
durable (fsync, fsyncdir, and the metadata changes create, mkdir, unlink, rmdir, rename,
chmod, chown) is held and never answered before the power loss, while plain writes and
size changes still land in the overlay, like a page cache whose disk is gone, and time
updates are answered and dropped (the kernel sends them on its own while it writes dirty
pages back, and holding them would keep those pages from the overlay); the `crash` that follows kills the
processes waiting on them (they die in the request: a process whose request the daemon has
read waits for the answer even with SIGKILL pending, and dies when the daemon does) and
drops the writes. No process learns that a write after the cut failed, so none can act on
it (a server that ignores a failed fsync would otherwise acknowledge what the power loss
then takes). A cut no crash follows fails the held requests with EIO after HOLD_S.
Without it a power loss "at once" on several nodes is as simultaneous as the commands
that kill them, and a node killed tens of milliseconds after the others has fsynced what
they lost. It prints `late_ms`, how long after EPOCH the cut was set (0 when set before).
The earliest cut set stays; a fresh mount (and so `crash`) forgets it, and until then
`status` reports the cut disk (a power loss that did not follow: healing remounts it).
The daemon counts the requests the dead disk refused (`held`: in the state dir's `.held`
file as it goes, and in what `crash` prints), which shows the cut took effect.

The overlay (`PendingFile`, `Overlay`) and the inode table (`Inodes`) are plain classes,
unit-tested without FUSE; pyfuse3 and trio (Debian's python3-pyfuse3) are needed only to
serve. State lives in /run/lazyfs/<mountpoint with / as _>.{json,log,dropped.json,cut,held}.
"""

from __future__ import annotations

import argparse
import errno
import functools
import json
import os
import signal
import stat
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

try:  # the node image has them; the host's venv, which unit-tests the overlay, does not
    import pyfuse3
    import trio

    _Operations: type = pyfuse3.Operations
except ImportError:
    pyfuse3 = trio = None
    _Operations = object

PAGE = 4096
HOLD_S = 30.0  # how long a request to a cut disk waits for the crash before it fails (see `cut`)
ROOT = 1  # pyfuse3.ROOT_INODE
FS_TYPE = "fuse.lazyfs"
STATE_DIR = Path("/run/lazyfs")
# Backing files are always opened for writing: a sync may come through any handle of the file.
OPEN_FLAGS = os.O_RDWR | os.O_CLOEXEC

Base = Callable[[int, int], bytes]  # reads `length` bytes at `offset` of the backing file (short at its end)


class PendingFile:
    """One file's unsynced changes.

    `size` is the file's size as the overlay shows it; `pages` are the 4 KiB pages written
    since the last sync (bytes past `size` in them are zero); below `floor` a byte in no
    page comes from the backing file, at or above it (cut off by a truncate since the last
    sync, or never written) it is zero.
    """

    def __init__(self, size: int) -> None:
        self.size = size
        self.floor = size
        self.pages: dict[int, bytearray] = {}

    def _page(self, number: int, base: Base) -> bytearray:
        page = self.pages.get(number)
        if page is None:
            page = bytearray(PAGE)
            start = number * PAGE
            if start < self.floor:
                old = base(start, min(PAGE, self.floor - start))
                page[:len(old)] = old
            self.pages[number] = page
        return page

    def read(self, offset: int, length: int, base: Base) -> bytes:
        end = min(offset + length, self.size)
        if offset >= end:
            return b""
        out = bytearray(end - offset)
        if offset < self.floor:
            old = base(offset, min(end, self.floor) - offset)
            out[:len(old)] = old
        first, last = offset // PAGE, (end - 1) // PAGE
        if len(self.pages) <= last - first:
            numbers = [n for n in self.pages if first <= n <= last]
        else:
            numbers = [n for n in range(first, last + 1) if n in self.pages]
        for number in numbers:
            lo, hi = max(offset, number * PAGE), min(end, (number + 1) * PAGE)
            out[lo - offset:hi - offset] = self.pages[number][lo - number * PAGE:hi - number * PAGE]
        return bytes(out)

    def write(self, offset: int, data: bytes, base: Base) -> None:
        end = offset + len(data)
        pos = offset
        while pos < end:
            number, within = divmod(pos, PAGE)
            take = min(PAGE - within, end - pos)
            chunk = data[pos - offset:pos - offset + take]
            if take == PAGE:
                self.pages[number] = bytearray(chunk)
            else:
                self._page(number, base)[within:within + take] = chunk
            pos += take
        self.size = max(self.size, end)

    def truncate(self, size: int) -> None:
        if size < self.size:
            for number in [n for n in self.pages if n * PAGE >= size]:
                del self.pages[number]
            number, within = divmod(size, PAGE)
            if number in self.pages:
                self.pages[number][within:] = bytes(PAGE - within)
            self.floor = min(self.floor, size)
        self.size = size

    def apply(self, fd: int) -> None:
        """Write the pending state into the backing file `fd` (no fsync)."""
        if os.fstat(fd).st_size > self.floor:
            os.ftruncate(fd, self.floor)
        for number in sorted(self.pages):
            start = number * PAGE
            if start < self.size:
                os.pwrite(fd, self.pages[number][:min(PAGE, self.size - start)], start)
        os.ftruncate(fd, self.size)


class Overlay:
    """Every file's unsynced changes by inode; backing files change only in `sync`."""

    def __init__(self) -> None:
        self.files: dict[int, PendingFile] = {}

    @staticmethod
    def _base(fd: int) -> Base:
        return lambda offset, length: os.pread(fd, length, offset)

    def _pending(self, inode: int, fd: int) -> PendingFile:
        pending = self.files.get(inode)
        if pending is None:
            pending = self.files[inode] = PendingFile(os.fstat(fd).st_size)
        return pending

    def size(self, inode: int, backing_size: int) -> int:
        pending = self.files.get(inode)
        return backing_size if pending is None else pending.size

    def read(self, inode: int, fd: int, offset: int, length: int) -> bytes:
        pending = self.files.get(inode)
        if pending is None:
            return os.pread(fd, length, offset)
        return pending.read(offset, length, self._base(fd))

    def write(self, inode: int, fd: int, offset: int, data: bytes) -> None:
        self._pending(inode, fd).write(offset, data, self._base(fd))

    def truncate(self, inode: int, fd: int, size: int) -> None:
        self._pending(inode, fd).truncate(size)

    def sync(self, inode: int, fd: int) -> int:
        """Apply the file's pending changes to its backing file `fd`; the bytes of pages written.

        The caller fsyncs `fd` afterwards."""
        pending = self.files.pop(inode, None)
        if pending is None:
            return 0
        pending.apply(fd)
        return len(pending.pages) * PAGE

    def discard(self, inode: int) -> None:
        """Forget a deleted file's changes."""
        self.files.pop(inode, None)

    def stats(self) -> dict[str, int]:
        """What a power loss now drops: files with unsynced changes, their pages and bytes."""
        pages = sum(len(p.pages) for p in self.files.values())
        return {"files": len(self.files), "pages": pages, "bytes": pages * PAGE}


@dataclass
class Inode:
    parent: int
    name: bytes
    backing: int  # the backing file's st_ino
    lookups: int = 0
    linked: bool = True


class Inodes:
    """FUSE inode numbers for the backing files.

    Each inode records its parent and name (renaming a folder moves what is under it), the
    kernel's lookup count, and whether it is still linked. Numbers are never reused within
    one mount, so a backing inode number the backing file system reuses after a delete gets
    a fresh FUSE inode. Linked inodes stay in the table (the store has a few files); an
    unlinked one goes when the kernel forgets it.
    """

    def __init__(self, root: bytes, root_backing: int) -> None:
        self.root = root
        self.table = {ROOT: Inode(ROOT, b"", root_backing, lookups=1)}
        self.by_backing = {root_backing: ROOT}
        self._next = ROOT + 1

    def path(self, inode: int) -> bytes:
        parts = []
        while inode != ROOT:
            entry = self.table[inode]
            parts.append(entry.name)
            inode = entry.parent
        return os.path.join(self.root, *reversed(parts))

    def child_path(self, parent: int, name: bytes) -> bytes:
        return os.path.join(self.path(parent), name)

    def entry(self, parent: int, name: bytes, backing: int) -> int:
        """The inode of `name` in `parent` whose backing inode is `backing` (made if new)."""
        inode = self.by_backing.get(backing)
        if inode is None:
            inode, self._next = self._next, self._next + 1
            self.table[inode] = Inode(parent, name, backing)
            self.by_backing[backing] = inode
        else:
            self.moved(inode, parent, name)
        return inode

    def moved(self, inode: int, parent: int, name: bytes) -> None:
        if inode != ROOT:
            self.table[inode].parent, self.table[inode].name = parent, name

    def unlinked(self, backing: int) -> None:
        """The backing file `backing` lost its name."""
        inode = self.by_backing.pop(backing, None)
        if inode is not None:
            self.table[inode].linked = False

    def forget(self, inode: int, count: int) -> bool:
        """Lower the lookup count; True when an unlinked inode went (drop its overlay)."""
        entry = self.table.get(inode)
        if entry is None:
            return False
        entry.lookups = max(0, entry.lookups - count)
        if entry.lookups or entry.linked or inode == ROOT:
            return False
        del self.table[inode]
        return True


def _fuse_errors(method: Callable[..., Any]) -> Callable[..., Any]:
    """Answer an OSError of the backing file system with its errno."""
    @functools.wraps(method)
    async def handler(*args: Any) -> Any:
        try:
            return await method(*args)
        except OSError as e:
            raise pyfuse3.FUSEError(e.errno or errno.EIO) from None
    return handler


class LazyFs(_Operations):
    """The FUSE operations: a passthrough to `backing` with file contents in an `Overlay`."""

    def __init__(self, backing: str, cut_file: Path | None = None, held_file: Path | None = None) -> None:
        super().__init__()
        self.cut_file, self.held_file = cut_file, held_file
        self.held = 0  # requests the dead disk refused (see `cut`)
        root = os.fsencode(os.path.abspath(backing))
        self.inodes = Inodes(root, os.lstat(root).st_ino)
        self.overlay = Overlay()
        self.handles: dict[int, int] = {}  # open backing fd (the FUSE file handle) -> inode

    def _cut(self) -> bool:
        """Whether the disk has died (see `cut`)."""
        return self.cut_file is not None and disk_cut(self.cut_file, time.time())

    async def _disk(self) -> None:
        """Return when the disk still takes requests; after the cut, hold the request until the
        crash or HOLD_S, then fail with EIO (see `cut`)."""
        if self._cut():
            self.held += 1
            if self.held_file is not None:
                self.held_file.write_text(str(self.held))
            await trio.sleep(HOLD_S)
            raise pyfuse3.FUSEError(errno.EIO)

    def _attrs(self, inode: int, st: os.stat_result) -> pyfuse3.EntryAttributes:
        attrs = pyfuse3.EntryAttributes()
        for name in ("st_mode", "st_nlink", "st_uid", "st_gid", "st_rdev", "st_size", "st_blksize",
                     "st_blocks", "st_atime_ns", "st_mtime_ns", "st_ctime_ns"):
            setattr(attrs, name, getattr(st, name))
        attrs.st_ino = inode
        if stat.S_ISREG(st.st_mode):
            attrs.st_size = self.overlay.size(inode, st.st_size)
        return attrs

    def _stat(self, inode: int) -> os.stat_result:
        entry = self.inodes.table.get(inode)
        if entry is None:
            raise pyfuse3.FUSEError(errno.ENOENT)
        if not entry.linked:  # only open handles reach it still
            fd = next((fd for fd, ino in self.handles.items() if ino == inode), None)
            if fd is None:
                raise pyfuse3.FUSEError(errno.ENOENT)
            return os.fstat(fd)
        return os.lstat(self.inodes.path(inode))

    def _entry(self, parent: int, name: bytes) -> pyfuse3.EntryAttributes:
        """Attributes of a new or looked-up entry; counts one kernel lookup."""
        st = os.lstat(self.inodes.child_path(parent, name))
        inode = self.inodes.entry(parent, name, st.st_ino)
        self.inodes.table[inode].lookups += 1
        return self._attrs(inode, st)

    @_fuse_errors
    async def lookup(self, parent_inode: int, name: bytes, ctx: Any) -> pyfuse3.EntryAttributes:
        if name in (b".", b".."):
            inode = parent_inode if name == b"." else self.inodes.table[parent_inode].parent
            self.inodes.table[inode].lookups += 1
            return self._attrs(inode, self._stat(inode))
        return self._entry(parent_inode, name)

    async def forget(self, inode_list: list[tuple[int, int]]) -> None:
        for inode, count in inode_list:
            if self.inodes.forget(inode, count):
                self.overlay.discard(inode)

    @_fuse_errors
    async def getattr(self, inode: int, ctx: Any) -> pyfuse3.EntryAttributes:
        return self._attrs(inode, self._stat(inode))

    @_fuse_errors
    async def setattr(self, inode: int, attr: pyfuse3.EntryAttributes, fields: Any, fh: int | None,
                      ctx: Any) -> pyfuse3.EntryAttributes:
        if fields.update_mode or fields.update_uid or fields.update_gid:  # applied to the disk at once
            await self._disk()
        target: int | bytes = fh if fh is not None else self.inodes.path(inode)
        if fields.update_size:
            fd = target if isinstance(target, int) else os.open(target, OPEN_FLAGS)  # target is fh when given
            try:
                self.overlay.truncate(inode, fd, attr.st_size)
            finally:
                if fh is None:
                    os.close(fd)
        if fields.update_mode:
            os.chmod(target, stat.S_IMODE(attr.st_mode))
        if fields.update_uid or fields.update_gid:
            os.chown(target, attr.st_uid if fields.update_uid else -1,
                     attr.st_gid if fields.update_gid else -1)
        if (fields.update_atime or fields.update_mtime) and not self._cut():  # a dead disk keeps no times
            st = self._stat(inode)
            os.utime(target, ns=(attr.st_atime_ns if fields.update_atime else st.st_atime_ns,
                                 attr.st_mtime_ns if fields.update_mtime else st.st_mtime_ns))
        return self._attrs(inode, self._stat(inode))

    @_fuse_errors
    async def mkdir(self, parent_inode: int, name: bytes, mode: int, ctx: Any) -> pyfuse3.EntryAttributes:
        await self._disk()
        os.mkdir(self.inodes.child_path(parent_inode, name), stat.S_IMODE(mode))
        return self._entry(parent_inode, name)

    def _remove(self, parent: int, name: bytes, remove: Callable[[bytes], None]) -> None:
        path = self.inodes.child_path(parent, name)
        backing = os.lstat(path).st_ino
        remove(path)
        self.inodes.unlinked(backing)

    @_fuse_errors
    async def unlink(self, parent_inode: int, name: bytes, ctx: Any) -> None:
        await self._disk()
        self._remove(parent_inode, name, os.unlink)

    @_fuse_errors
    async def rmdir(self, parent_inode: int, name: bytes, ctx: Any) -> None:
        await self._disk()
        self._remove(parent_inode, name, os.rmdir)

    @_fuse_errors
    async def rename(self, parent_inode_old: int, name_old: bytes, parent_inode_new: int, name_new: bytes,
                     flags: int, ctx: Any) -> None:
        await self._disk()
        old = self.inodes.child_path(parent_inode_old, name_old)
        new = self.inodes.child_path(parent_inode_new, name_new)
        try:
            replaced: int | None = os.lstat(new).st_ino
        except FileNotFoundError:
            replaced = None
        if flags == pyfuse3.RENAME_NOREPLACE and replaced is not None:
            raise pyfuse3.FUSEError(errno.EEXIST)
        if flags not in (0, pyfuse3.RENAME_NOREPLACE):
            raise pyfuse3.FUSEError(errno.EINVAL)
        moved = os.lstat(old).st_ino
        os.rename(old, new)
        if replaced is not None and replaced != moved:
            self.inodes.unlinked(replaced)
        self.inodes.entry(parent_inode_new, name_new, moved)

    def _opened(self, inode: int, fd: int, flags: int) -> pyfuse3.FileInfo:
        self.handles[fd] = inode
        if flags & os.O_TRUNC:
            self.overlay.truncate(inode, fd, 0)
        return pyfuse3.FileInfo(fh=fd, keep_cache=True)  # nothing but this mount changes the files

    @_fuse_errors
    async def open(self, inode: int, flags: int, ctx: Any) -> pyfuse3.FileInfo:
        return self._opened(inode, os.open(self.inodes.path(inode), OPEN_FLAGS), flags)

    @_fuse_errors
    async def create(self, parent_inode: int, name: bytes, mode: int, flags: int,
                     ctx: Any) -> tuple[pyfuse3.FileInfo, pyfuse3.EntryAttributes]:
        await self._disk()
        path = self.inodes.child_path(parent_inode, name)
        fd = os.open(path, OPEN_FLAGS | os.O_CREAT | (flags & os.O_EXCL), stat.S_IMODE(mode))
        try:
            attrs = self._entry(parent_inode, name)
        except BaseException:
            os.close(fd)
            raise
        return self._opened(attrs.st_ino, fd, flags), self._attrs(attrs.st_ino, os.fstat(fd))

    @_fuse_errors
    async def read(self, fh: int, off: int, size: int) -> bytes:
        return self.overlay.read(self.handles[fh], fh, off, size)

    @_fuse_errors
    async def write(self, fh: int, off: int, buf: bytes) -> int:
        self.overlay.write(self.handles[fh], fh, off, buf)
        return len(buf)

    async def flush(self, fh: int) -> None:
        """close() makes nothing durable."""

    @_fuse_errors
    async def release(self, fh: int) -> None:
        del self.handles[fh]
        os.close(fh)

    @_fuse_errors
    async def fsync(self, fh: int, datasync: bool) -> None:
        await self._disk()
        self.overlay.sync(self.handles[fh], fh)  # applied at once: reads of the backing file stay right
        await trio.to_thread.run_sync(os.fdatasync if datasync else os.fsync, fh)

    @_fuse_errors
    async def opendir(self, inode: int, ctx: Any) -> int:
        self._stat(inode)
        return inode

    @_fuse_errors
    async def readdir(self, fh: int, start_id: int, token: Any) -> None:
        path = self.inodes.path(fh)
        names = sorted(os.listdir(path))
        for position, name in enumerate(names[start_id:], start_id):
            try:
                st = os.lstat(os.path.join(path, name))
            except FileNotFoundError:
                continue
            inode = self.inodes.entry(fh, name, st.st_ino)
            if not pyfuse3.readdir_reply(token, name, self._attrs(inode, st), position + 1):
                return
            self.inodes.table[inode].lookups += 1

    async def releasedir(self, fh: int) -> None:
        """Nothing is held open for a directory."""

    @_fuse_errors
    async def fsyncdir(self, fh: int, datasync: bool) -> None:
        await self._disk()
        fd = os.open(self.inodes.path(fh), os.O_RDONLY | os.O_DIRECTORY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)

    @_fuse_errors
    async def statfs(self, ctx: Any) -> pyfuse3.StatvfsData:
        st = os.statvfs(self.inodes.root)
        data = pyfuse3.StatvfsData()
        for name in ("f_bsize", "f_frsize", "f_blocks", "f_bfree", "f_bavail", "f_files", "f_ffree",
                     "f_favail", "f_namemax"):
            setattr(data, name, getattr(st, name))
        return data


# -- the daemon and its command line ---------------------------------------------------------


def _state_paths(mountpoint: str) -> dict[str, Path]:
    key = os.path.abspath(mountpoint).strip("/").replace("/", "_") or "root"
    return {kind: STATE_DIR / f"{key}.{kind}" for kind in ("json", "log", "dropped.json", "cut", "held")}


def cut_time(cut_file: Path) -> float | None:
    """The epoch time written to `cut_file`, or None when no cut is set."""
    try:
        return float(cut_file.read_text())
    except (OSError, ValueError):  # none set (never half written: `cut` renames it in whole)
        return None


def disk_cut(cut_file: Path, now: float) -> bool:
    """Whether the cut set in `cut_file` has come by `now`."""
    at = cut_time(cut_file)
    return at is not None and now >= at


def _read_state(mountpoint: str) -> dict[str, Any] | None:
    try:
        return json.loads(_state_paths(mountpoint)["json"].read_text())
    except (OSError, ValueError):
        return None


def _alive(pid: int) -> bool:
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return False
    return fields[0] != "Z"


def _mounted(mountpoint: str) -> bool:
    target = os.path.abspath(mountpoint)
    with open("/proc/self/mounts", encoding="utf-8") as mounts:
        return any(f[1] == target and f[2] == FS_TYPE for f in (line.split() for line in mounts))


def problem(mountpoint: str) -> str | None:
    """Why the file system at `mountpoint` is not serving, or None when it is."""
    state = _read_state(mountpoint)
    if state is None:
        return f"lazyfs was never mounted at {mountpoint}"
    if not _mounted(mountpoint):
        return f"lazyfs is not mounted at {mountpoint}"
    if not _alive(state["pid"]):
        return f"the lazyfs daemon of {mountpoint} (pid {state['pid']}) is dead"
    try:
        os.stat(mountpoint)
    except OSError as e:
        return f"lazyfs at {mountpoint} does not answer: {e}"
    at = cut_time(_state_paths(mountpoint)["cut"])
    if at is not None:  # a power loss that did not finish: the disk takes nothing, remount it
        return f"the disk of lazyfs at {mountpoint} was cut at {at!r} and the power loss did not follow"
    return None


def _wait_dead(pid: int, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while _alive(pid):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)
    return True


def _detach(mountpoint: str) -> None:
    """SIGKILL a daemon of `mountpoint` that still runs and lazily unmount every lazyfs mount there."""
    state = _read_state(mountpoint)
    if state is not None and _alive(state["pid"]):
        os.kill(state["pid"], signal.SIGKILL)
        _wait_dead(state["pid"], 10.0)
    for _ in range(10):
        if not _mounted(mountpoint):
            return
        subprocess.run(["fusermount3", "-uz", os.path.abspath(mountpoint)], check=True)
    raise RuntimeError(f"{mountpoint} is still mounted after 10 unmounts")


def _start(fs: LazyFs, mountpoint: str) -> None:
    options = set(pyfuse3.default_options) | {"fsname=lazyfs", "subtype=lazyfs"}
    pyfuse3.init(fs, mountpoint, options)


async def _run(fs: LazyFs, dropped: Path) -> None:
    """Serve until unmounted; SIGUSR1 is the power switch (see the module doc)."""
    async def power_switch() -> None:
        with trio.open_signal_receiver(signal.SIGUSR1) as signals:
            async for _ in signals:
                dropped.write_text(json.dumps({**fs.overlay.stats(), "held": fs.held}))
                os._exit(0)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(power_switch)
        await pyfuse3.main()
        nursery.cancel_scope.cancel()


def mount(backing: str, mountpoint: str) -> int:
    """Daemonise a fresh file system over `backing` at `mountpoint`, unless one serves there."""
    if problem(mountpoint) is None:
        return 0
    _detach(mountpoint)
    os.makedirs(backing, exist_ok=True)
    os.makedirs(mountpoint, exist_ok=True)
    paths = _state_paths(mountpoint)
    STATE_DIR.mkdir(parents=True, exist_ok=True)
    paths["cut"].unlink(missing_ok=True)  # a fresh disk
    paths["held"].unlink(missing_ok=True)
    ready_r, ready_w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the daemon
        os.close(ready_r)
        os.setsid()
        log = os.open(paths["log"], os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.dup2(log, 1)
        os.dup2(log, 2)
        try:
            fs = LazyFs(backing, paths["cut"], paths["held"])
            _start(fs, mountpoint)
            state = {"pid": os.getpid(), "backing": os.path.abspath(backing),
                     "mountpoint": os.path.abspath(mountpoint)}
            paths["json"].write_text(json.dumps(state))
        except BaseException as e:
            os.write(ready_w, f"cannot mount {mountpoint}: {e}".encode())
            os._exit(1)
        os.write(ready_w, b"ok")
        os.close(ready_w)
        try:
            trio.run(_run, fs, paths["dropped.json"])
        finally:
            pyfuse3.close(unmount=False)
        os._exit(0)
    os.close(ready_w)
    with os.fdopen(ready_r, "rb") as ready:
        answer = ready.read().decode(errors="replace")
    if answer != "ok":
        print(answer or f"the lazyfs daemon died before mounting {mountpoint}; see {paths['log']}",
              file=sys.stderr)
        return 1
    return 0


def _paths(proc: Path) -> Iterator[str]:
    """The paths process `proc` uses: its working directory, its open files, then its mappings."""
    yield os.readlink(proc / "cwd")
    for fd in (proc / "fd").iterdir():
        try:
            yield os.readlink(fd)
        except FileNotFoundError:  # closed meanwhile
            continue
    for line in (proc / "maps").read_text().splitlines():
        fields = line.split(None, 5)
        if len(fields) == 6:
            yield fields[5]


def _uses(pid: str, below: str) -> bool:
    """Whether process `pid` has its working directory, a file open or a mapping below `below`."""
    try:
        return any(path == below or path.startswith(below + "/") for path in _paths(Path("/proc", pid)))
    except OSError:  # gone, or a kernel thread: not a user of the mount
        return False


def kill_users(mountpoint: str, spare: set[int]) -> list[int]:
    """SIGKILL every process using `mountpoint` but those in `spare`; their pids."""
    below = os.path.abspath(mountpoint)
    killed = []
    for entry in os.listdir("/proc"):
        if entry.isdigit() and int(entry) not in spare and _uses(entry, below):
            try:
                os.kill(int(entry), signal.SIGKILL)
            except ProcessLookupError:
                continue
            killed.append(int(entry))
    return killed


def crash(mountpoint: str) -> int:
    """Power loss: kill the mount's users, drop everything unsynced, remount fresh; print what
    was dropped and who was killed as JSON."""
    state = _read_state(mountpoint)
    if state is None:
        print(f"lazyfs was never mounted at {mountpoint}: nothing to crash", file=sys.stderr)
        return 1
    paths = _state_paths(mountpoint)
    paths["dropped.json"].unlink(missing_ok=True)
    dropped = None
    killed = kill_users(mountpoint, {os.getpid(), os.getppid(), state["pid"]})
    if _alive(state["pid"]):
        os.kill(state["pid"], signal.SIGUSR1)
        if _wait_dead(state["pid"], 5.0):
            try:
                dropped = json.loads(paths["dropped.json"].read_text())
            except (OSError, ValueError):
                dropped = None
    _detach(mountpoint)
    status = mount(state["backing"], mountpoint)
    print(json.dumps({"dropped": dropped, "killed": killed}))
    return status


def cut(mountpoint: str, at: float) -> int:
    """Set the instant the disk of `mountpoint` dies; print how late that was set."""
    state = _read_state(mountpoint)
    if state is None or not _alive(state["pid"]):
        print(f"no lazyfs daemon serves {mountpoint}: nothing to cut", file=sys.stderr)
        return 1
    target = _state_paths(mountpoint)["cut"]
    earlier = cut_time(target)
    if earlier is None or at < earlier:
        staged = target.with_suffix(".cut-staged")
        staged.write_text(repr(at))
        os.replace(staged, target)
    print(json.dumps({"late_ms": round(max(0.0, time.time() - at) * 1000, 1)}))
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    command = commands.add_parser("mount")
    command.add_argument("backing")
    command.add_argument("mountpoint")
    for name in ("crash", "status"):
        commands.add_parser(name).add_argument("mountpoint")
    command = commands.add_parser("cut")
    command.add_argument("--at", type=float, required=True, help="epoch seconds the disk dies at")
    command.add_argument("mountpoint")
    args = parser.parse_args(argv)
    if args.command == "mount":
        return mount(args.backing, args.mountpoint)
    if args.command == "crash":
        return crash(args.mountpoint)
    if args.command == "cut":
        return cut(args.mountpoint, args.at)
    text = problem(args.mountpoint)
    if text:
        print(text)
    return 1 if text else 0


if __name__ == "__main__":
    sys.exit(main())
