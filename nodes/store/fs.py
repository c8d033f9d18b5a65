"""The file operations of the store and the term file, so that the simulator can swap the disk.

`RealFileSystem` is the os/mmap one; `nodes.sim.simfs.SimFileSystem` keeps the files in
memory and loses on a simulated power loss what was not made durable. The durability
points are explicit: `MappedFile.sync` (a byte range of a mapped file and its size),
`write_file` (a small file's content), `fsync_dir` (the names of a directory: files
created, removed or renamed in it).
"""

from __future__ import annotations

import mmap
import os
import shutil
from pathlib import Path
from typing import Protocol


class MappedFile(Protocol):
    """A whole file mapped writable. It is also a writable buffer (`struct.pack_into`,
    `unpack_from`), slices read as `bytes` and slice assignment keeps the length, like `mmap`."""

    def __len__(self) -> int: ...

    def __buffer__(self, flags: int, /) -> memoryview: ...

    def __getitem__(self, key: slice) -> bytes: ...

    def __setitem__(self, key: slice, value: bytes) -> None: ...

    def sync(self, start: int, stop: int) -> None:
        """Make bytes `start .. stop` and the file's size durable. Blocks on the disk."""
        ...

    def close(self) -> None:
        """Unmap (what was written stays in the page cache, durable or not)."""
        ...


class FileSystem(Protocol):
    """What the store and the term file do with files."""

    def make_dirs(self, path: Path) -> None:
        """Create `path` and its missing parents, durably."""
        ...

    def map(self, path: Path, size: int, *, truncate: bool = False) -> MappedFile:
        """Map `path`, created if missing and zeroed first if `truncate`, at `size` bytes."""
        ...

    def list_dir(self, path: Path) -> dict[str, int]:
        """The regular files in `path`: name -> length."""
        ...

    def remove(self, path: Path) -> None:
        """Delete `path` if it exists (for good once its directory is fsynced)."""
        ...

    def fsync_dir(self, path: Path) -> None:
        """Make the names in directory `path` durable."""
        ...

    def write_file(self, path: Path, data: bytes) -> None:
        """Create or overwrite `path` with `data` and fsync it (a new name is durable only once
        its directory is fsynced)."""
        ...

    def rename(self, src: Path, dst: Path) -> None:
        """Atomically rename `src` to `dst` in the same directory, replacing `dst`."""
        ...

    def read_file(self, path: Path) -> bytes:
        """The content of `path`; FileNotFoundError if there is none."""
        ...

    def modified_time(self, path: Path) -> float:
        """When `path` was last written (seconds, the clock the retention policy uses)."""
        ...

    def disk_use_ratio(self, path: Path) -> float:
        """Fraction of the file system holding `path` that is used."""
        ...


class _FileMap(mmap.mmap):
    """A shared `mmap` that owns its descriptor: `sync` is `fdatasync` of the whole file,
    which (unlike `mmap.flush`) releases the GIL, so appenders keep writing meanwhile."""

    fd = -1

    def sync(self, start: int, stop: int) -> None:
        os.fdatasync(self.fd)

    def close(self) -> None:
        super().close()
        os.close(self.fd)


class RealFileSystem:
    """The operating system's files."""

    def make_dirs(self, path: Path) -> None:
        missing = []
        while not path.is_dir():
            missing.append(path)
            path = path.parent
        for directory in reversed(missing):
            directory.mkdir(exist_ok=True)
            self.fsync_dir(directory.parent)

    def map(self, path: Path, size: int, *, truncate: bool = False) -> MappedFile:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | (os.O_TRUNC if truncate else 0), 0o644)
        try:
            if os.fstat(fd).st_size != size:
                os.ftruncate(fd, size)
            mapped = _FileMap(fd, size)
        except BaseException:
            os.close(fd)
            raise
        mapped.fd = fd
        return mapped

    def list_dir(self, path: Path) -> dict[str, int]:
        return {e.name: e.stat().st_size for e in os.scandir(path) if e.is_file()}

    def remove(self, path: Path) -> None:
        path.unlink(missing_ok=True)

    def fsync_dir(self, path: Path) -> None:
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)

    def write_file(self, path: Path, data: bytes) -> None:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
            os.fsync(fd)
        finally:
            os.close(fd)

    def rename(self, src: Path, dst: Path) -> None:
        os.replace(src, dst)

    def read_file(self, path: Path) -> bytes:
        return path.read_bytes()

    def modified_time(self, path: Path) -> float:
        return path.stat().st_mtime

    def disk_use_ratio(self, path: Path) -> float:
        usage = shutil.disk_usage(path)
        return usage.used / usage.total if usage.total else 0.0


REAL_FS: FileSystem = RealFileSystem()
