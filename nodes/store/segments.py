"""Fixed-size mapped segment files named by their 20-digit zero-padded starting offset.

A `SegmentList` is one directory of such files covering a contiguous byte range
(`first_offset` .. `end_offset`). Data and index files are both kept this way. The list
remembers what is not durable yet: the byte range written since the last flush (writers
report it with `mark_dirty`) and whether file names changed. A flush is taken under the
store's lock (`take_sync`) and run outside it (`PendingSync.run`), so writers never wait
for the disk. The list does no locking: the store serialises access.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from nodes.store.fs import REAL_FS, FileSystem, MappedFile

NAME_DIGITS = 20


class SegmentError(Exception):
    """The segment files on disk are not what a store of this configuration can use."""


def segment_name(offset: int) -> str:
    return f"{offset:0{NAME_DIGITS}d}"


def is_segment_name(name: str) -> bool:
    return len(name) == NAME_DIGITS and name.isdigit()


@dataclass(eq=False)
class Segment:
    """One mapped file: bytes `offset .. offset + size` of the list's address space."""

    path: Path
    offset: int
    size: int
    mm: MappedFile = field(repr=False)

    @property
    def end(self) -> int:
        return self.offset + self.size

    def close(self) -> None:
        self.mm.close()


@dataclass(frozen=True)
class PendingSync:
    """One flush of a segment list: the ranges to sync (segment, start, stop relative to the
    segment), then the directory to fsync if names changed; `span` is the absolute range."""

    ranges: list[tuple[Segment, int, int]]
    directory: Path | None
    span: tuple[int, int] | None

    def run(self, fs: FileSystem) -> None:
        """Do the IO (blocks). File contents first: a name made durable names synced bytes."""
        for seg, start, stop in self.ranges:
            seg.mm.sync(start, stop)
        if self.directory is not None:
            fs.fsync_dir(self.directory)


class SegmentList:
    """Contiguous fixed-size segments in one directory."""

    def __init__(self, directory: Path, segment_size: int, kind: str, fs: FileSystem = REAL_FS) -> None:
        self.directory = directory
        self.segment_size = segment_size
        self.kind = kind
        self.fs = fs
        self.segments: list[Segment] = []
        self._dirty: tuple[int, int] | None = None
        self._names_changed = False
        fs.make_dirs(directory)

    def scan_files(self) -> list[tuple[int, Path, int]]:
        """(offset, path, length) of the segment files on disk, by offset; other names ignored."""
        return sorted((int(name), self.directory / name, length)
                      for name, length in self.fs.list_dir(self.directory).items()
                      if is_segment_name(name))

    def load(self, offsets: list[int]) -> None:
        """Map the files at `offsets` (already checked by the caller; missing ones are created).

        All of it counts as dirty: what a crashed process left in the page cache is durable
        only once the first flush has synced it.
        """
        self.segments = [self._map(o) for o in offsets]
        self.mark_dirty(self.first_offset, self.end_offset)
        self._names_changed = True

    def _map(self, offset: int, *, truncate: bool = False) -> Segment:
        path, size = self.directory / segment_name(offset), self.segment_size
        return Segment(path, offset, size, self.fs.map(path, size, truncate=truncate))

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
        seg = self._map(offset, truncate=True)
        self.segments.append(seg)
        self._names_changed = True
        return seg

    def ensure(self, offset: int) -> Segment:
        """The segment holding `offset`, creating segments up to it; an empty list starts at
        the segment boundary below `offset`."""
        if not self.segments:
            return self.create_at(offset - offset % self.segment_size)
        while offset >= self.end_offset:
            self.create_at(self.end_offset)
        return self.find(offset)

    def mark_dirty(self, start: int, stop: int) -> None:
        """Record that the absolute range `start .. stop` was written and is not durable."""
        if stop > start:
            self._dirty = (start, stop) if self._dirty is None else (
                min(start, self._dirty[0]), max(stop, self._dirty[1]))

    @property
    def dirty_from(self) -> int | None:
        """Lowest absolute offset written since the last flush, None if nothing was."""
        return self._dirty[0] if self._dirty else None

    def write_zeros(self, start: int, stop: int) -> None:
        """Zero the absolute range `start .. stop` across segments (in memory: dirty)."""
        for seg in self.segments:
            lo, hi = max(start, seg.offset), min(stop, seg.end)
            if hi > lo:
                seg.mm[lo - seg.offset:hi - seg.offset] = bytes(hi - lo)
        self.mark_dirty(start, stop)

    def drop_after(self, offset: int) -> list[Segment]:
        """Unlink the segments that start at or after `offset`, the last first, so that
        whichever of the removals a power loss keeps, the files left stay contiguous."""
        doomed = [s for s in self.segments if s.offset >= offset]
        return self._drop(doomed, reversed(doomed))

    def drop_before(self, offset: int) -> list[Segment]:
        """Unlink the segments that end at or before `offset`, the first first."""
        doomed = [s for s in self.segments if s.end <= offset]
        return self._drop(doomed, doomed)

    def _drop(self, doomed: list[Segment], order: Iterable[Segment]) -> list[Segment]:
        """Detach `doomed` and unlink their files in `order`; they stay mapped (a flush may be
        syncing them): the caller closes them when that is safe."""
        for seg in order:
            self.remove_file(seg.path)
        if doomed:
            self.segments = [s for s in self.segments if s not in doomed]
        return doomed

    def remove_file(self, path: Path) -> None:
        """Unlink a file of this directory; the name change is durable after the next flush."""
        self.fs.remove(path)
        self._names_changed = True

    def take_sync(self) -> PendingSync:
        """What a flush must make durable now; the list counts it as clean from here on."""
        span, self._dirty = self._dirty, None
        ranges = [] if span is None else [
            (s, max(span[0], s.offset) - s.offset, min(span[1], s.end) - s.offset)
            for s in self._overlapping(*span)]
        directory = self.directory if self._names_changed else None
        self._names_changed = False
        return PendingSync(ranges, directory, span)

    def _overlapping(self, start: int, stop: int) -> list[Segment]:
        """The segments holding a byte of the absolute range `start .. stop` (found by
        arithmetic: the segments are contiguous and of one size)."""
        if not self.segments:
            return []
        first, size = self.segments[0].offset, self.segment_size
        lo = max(0, (start - first) // size)
        return self.segments[lo : max(lo, -(-(stop - first) // size))]

    def restore(self, pending: PendingSync) -> None:
        """A flush taken with `take_sync` failed: count its work as dirty again."""
        if pending.span is not None:
            self.mark_dirty(*pending.span)
        self._names_changed |= pending.directory is not None

    def flush(self) -> None:
        """Make everything written durable now (single-threaded callers: recovery)."""
        self.take_sync().run(self.fs)

    def close(self) -> None:
        for seg in self.segments:
            seg.close()
        self.segments = []
