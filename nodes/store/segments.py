"""Fixed-size mmap segment files named by their 20-digit zero-padded starting offset.

A `SegmentList` is one directory of such files covering a contiguous byte range
(`first_offset` .. `end_offset`). Data and index files are both kept this way. The list
does no locking: the store serialises access.
"""

from __future__ import annotations

import mmap
import os
from dataclasses import dataclass, field
from pathlib import Path

NAME_DIGITS = 20


class SegmentError(Exception):
    """The segment files on disk are not what a store of this configuration can use."""


def segment_name(offset: int) -> str:
    return f"{offset:0{NAME_DIGITS}d}"


def is_segment_name(name: str) -> bool:
    return len(name) == NAME_DIGITS and name.isdigit()


def fsync_dir(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


@dataclass(eq=False)
class Segment:
    """One mapped file: bytes `offset .. offset + size` of the list's address space.

    The file descriptor stays open for `fdatasync`, which (unlike `mmap.flush`) releases
    the GIL, so appenders keep writing while a flush waits for the disk.
    """

    path: Path
    offset: int
    size: int
    fd: int
    mm: mmap.mmap = field(repr=False)

    @classmethod
    def open(cls, path: Path, offset: int, size: int) -> Segment:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            if os.fstat(fd).st_size != size:
                os.ftruncate(fd, size)
            mm = mmap.mmap(fd, size)
        except BaseException:
            os.close(fd)
            raise
        return cls(path, offset, size, fd, mm)

    @property
    def end(self) -> int:
        return self.offset + self.size

    def sync(self) -> None:
        """Write the file's dirty pages (those written through the map too) to disk."""
        os.fdatasync(self.fd)

    def close(self) -> None:
        self.mm.close()
        os.close(self.fd)


class SegmentList:
    """Contiguous fixed-size segments in one directory."""

    def __init__(self, directory: Path, segment_size: int, kind: str) -> None:
        self.directory = directory
        self.segment_size = segment_size
        self.kind = kind
        self.segments: list[Segment] = []
        self.created_since_sync = False
        directory.mkdir(parents=True, exist_ok=True)

    def scan_files(self) -> list[tuple[int, Path, int]]:
        """(offset, path, length) of the segment files on disk, by offset; other names ignored."""
        found = []
        for entry in os.scandir(self.directory):
            if entry.is_file() and is_segment_name(entry.name):
                found.append((int(entry.name), Path(entry.path), entry.stat().st_size))
        return sorted(found)

    def load(self, offsets: list[int]) -> None:
        """Map the existing files at `offsets` (already checked by the caller)."""
        self.segments = [
            Segment.open(self.directory / segment_name(o), o, self.segment_size) for o in offsets
        ]

    @property
    def first_offset(self) -> int:
        return self.segments[0].offset if self.segments else 0

    @property
    def end_offset(self) -> int:
        return self.segments[-1].end if self.segments else 0

    def find(self, offset: int) -> Segment:
        """The segment holding absolute byte `offset`; IndexError if none does."""
        if not self.segments:
            raise IndexError(offset)
        k = (offset - self.segments[0].offset) // self.segment_size
        if k < 0 or k >= len(self.segments):
            raise IndexError(offset)
        return self.segments[k]

    def create_at(self, offset: int) -> Segment:
        """Map a new zeroed segment starting at `offset` (which must follow the last one)."""
        if self.segments and offset != self.end_offset:
            raise SegmentError(f"{self.kind} segment at {offset} does not follow {self.end_offset}")
        path = self.directory / segment_name(offset)
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
        os.close(fd)
        seg = Segment.open(path, offset, self.segment_size)
        self.segments.append(seg)
        self.created_since_sync = True
        return seg

    def ensure(self, offset: int) -> Segment:
        """The segment holding `offset`, creating segments up to it; an empty list starts at
        the segment boundary below `offset`."""
        if not self.segments:
            return self.create_at(offset - offset % self.segment_size)
        while offset >= self.end_offset:
            self.create_at(self.end_offset)
        return self.find(offset)

    def write_zeros(self, start: int, stop: int) -> None:
        """Zero the absolute range `start .. stop` across segments."""
        for seg in self.segments:
            lo, hi = max(start, seg.offset), min(stop, seg.end)
            if hi > lo:
                seg.mm[lo - seg.offset:hi - seg.offset] = bytes(hi - lo)

    def drop_after(self, offset: int) -> list[Path]:
        """Delete the segments that start at or after `offset`; return their paths."""
        return self._drop([s for s in self.segments if s.offset >= offset])

    def drop_before(self, offset: int) -> list[Path]:
        """Delete the segments that end at or before `offset`; return their paths."""
        return self._drop([s for s in self.segments if s.end <= offset])

    def _drop(self, doomed: list[Segment]) -> list[Path]:
        for seg in doomed:
            seg.close()
            seg.path.unlink(missing_ok=True)
        if doomed:
            self.segments = [s for s in self.segments if s not in doomed]
            self.created_since_sync = True  # the directory changed: fsync it on next flush
        return [s.path for s in doomed]

    def flush(self, start: int, stop: int) -> None:
        """Make the absolute range `start .. stop` durable, and new or deleted file names."""
        if stop > start:
            for seg in list(self.segments):
                if seg.end > start and seg.offset < stop:
                    seg.sync()
        if self.created_since_sync:
            self.created_since_sync = False
            fsync_dir(self.directory)

    def close(self) -> None:
        for seg in self.segments:
            seg.close()
        self.segments = []
