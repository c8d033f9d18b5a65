"""The simulated file system's classes that extend built-in types: a mapping (a
`bytearray`) and the full-disk error (an `OSError`, as ENOSPC is).

Their own module, outside the compiled simulator (`nodes.sim.compiled`): mypyc compiles no
class that extends a built-in type other than `Exception`.
"""

from __future__ import annotations

import errno
from pathlib import Path
from typing import TYPE_CHECKING, Any, SupportsIndex, overload

if TYPE_CHECKING:
    from nodes.sim.simfs import SimFileSystem, _Inode


class NoSpace(OSError):
    """ENOSPC: a file had to grow past what the simulated disk holds."""

    def __init__(self, path: Path, need: int, used: int, capacity: int) -> None:
        super().__init__(errno.ENOSPC, f"no space left for {need} more bytes of {path}: "
                                       f"{used} of {capacity} bytes used")


class SimMap(bytearray):
    """A mapping of a simulated file: it is the file's page cache (a bytearray, so `struct`
    writes into it), with `mmap`'s rules: slices read as bytes, slice assignment keeps the
    length, and nothing works once closed."""

    def __init__(self, fs: SimFileSystem, inode: _Inode) -> None:
        super().__init__(inode.data)
        self._fs, self._inode, self.closed = fs, inode, False
        inode.data = inode.handle = self
        fs.mapped[id(self)] = self

    def _check_open(self) -> None:
        if self.closed:
            raise ValueError("mmap closed or invalid")

    @overload  # type: ignore[override]
    def __getitem__(self, key: SupportsIndex) -> int: ...

    @overload
    def __getitem__(self, key: slice) -> bytes: ...

    def __getitem__(self, key: SupportsIndex | slice) -> int | bytes:
        self._check_open()
        if isinstance(key, slice):
            return bytes(memoryview(self)[key])
        return bytearray.__getitem__(self, key)

    def __setitem__(self, key: SupportsIndex | slice, value: Any) -> None:  # type: ignore[override]
        self._check_open()
        if isinstance(key, slice):
            start, stop, step = key.indices(len(self))
            if step != 1 or len(value) != max(0, stop - start):
                raise IndexError("mmap slice assignment is wrong size")
        bytearray.__setitem__(self, key, value)

    def sync(self, start: int, stop: int) -> None:
        self._check_open()
        self._fs.sync_pages(self._inode, start, stop)

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            self._inode.data = bytearray(self)
            self._inode.handle = None
            del self._fs.mapped[id(self)]  # by identity: equal bytes are not the same mapping
