"""Recovery on open: check the files, walk the tail, cut a torn or corrupt tail, fix the index.

The data files are the source of truth; index slots are derived from them and are rebuilt
when missing or wrong. The walk starts a few data files before the end (earlier when an
index slot there is missing or wrong) and checks every entry: magic, size, pos, index
continuity, non-decreasing term, body CRC and chain CRC. At the first bad entry the data
and the index are cut: the rest of that file is zeroed and later files are deleted. Damage
more than one data file before the last is not a torn tail but lost committed data: the
store then refuses to open (`CorruptStoreError`) and changes nothing.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from itertools import pairwise

from nodes.store.entrycodec import HEADER, INDEX, INDEX_SIZE
from nodes.store.entryscan import ENTRY_MAGICS, Scan, SegmentView, StoredEntry
from nodes.store.logstore import StoreError
from nodes.store.segments import Segment, SegmentList, segment_name

WALK_FILES = 3  # DLedger starts recovery three files from the end
ZERO_CHUNK = 1 << 20


class CorruptStoreError(StoreError):
    """The files are damaged beyond a torn tail; opening would silently drop committed data."""


@dataclass
class RecoveryReport:
    """What recovery found and changed."""

    walked_from: int = 0  # data offset the walk started at
    entries_checked: int = 0
    cut_pos: int | None = None  # data offset where the store was cut, None if nothing was cut
    cut_reason: str | None = None
    removed_files: list[str] = field(default_factory=list)
    index_slots_rebuilt: int = 0
    notes: list[str] = field(default_factory=list)

    def summary(self) -> str:
        parts = [f"walked {self.entries_checked} entries from pos {self.walked_from}"]
        if self.cut_pos is not None:
            parts.append(f"cut at pos {self.cut_pos} ({self.cut_reason})")
        if self.removed_files:
            parts.append(f"removed {', '.join(self.removed_files)}")
        if self.index_slots_rebuilt:
            parts.append(f"rebuilt {self.index_slots_rebuilt} index slots")
        return "; ".join(parts + self.notes)


@dataclass
class LogState:
    """The log bounds recovery hands to the store."""

    begin_index: int = -1
    end_index: int = -1
    end_term: int = -1
    end_chain: int = 0
    write_pos: int = 0


def check_data_files(data: SegmentList, report: RecoveryReport) -> list[int]:
    """Offsets of the data files, after checking their lengths and contiguity."""
    files = data.scan_files()
    size = data.segment_size
    for i, (offset, path, length) in enumerate(files):
        last = i == len(files) - 1
        if offset % size:
            raise CorruptStoreError(
                f"data file {path} starts at {offset}, not a multiple of data_segment_size={size}: "
                f"open the store with the segment size it was created with")
        if length > size or (length != size and not last):
            raise CorruptStoreError(
                f"data file {path} is {length} bytes, expected data_segment_size={size}: open the "
                f"store with the segment size it was created with, or restore the file from a replica")
        if i and offset != files[i - 1][0] + size:
            raise CorruptStoreError(
                f"data file {segment_name(files[i - 1][0] + size)} is missing in {data.directory} "
                f"(files jump from {files[i - 1][0]} to {offset}): committed data is gone; restore "
                f"the directory from a replica or move it aside")
        if length < size:
            report.notes.append(f"extended short last data file {path.name} from {length} bytes")
    return [f[0] for f in files]


def check_index_files(index: SegmentList, need_from: int,
                      report: RecoveryReport) -> tuple[list[int], int | None]:
    """Offsets of a contiguous run of index files covering `need_from`, and the lowest log
    index whose slot was lost (None if none): files of the wrong length are deleted and
    missing ones created empty, for recovery to refill."""
    size = index.segment_size
    present, dropped = [], []
    for offset, path, length in index.scan_files():
        if length != size or offset % size:
            path.unlink()
            dropped.append(offset)
            report.notes.append(f"deleted index file {path.name} ({length} bytes, expected {size})")
        elif offset + size <= need_from:
            path.unlink()
            report.notes.append(f"deleted index file {path.name} below the first entry")
        else:
            present.append(offset)
    if not present:
        return [], need_from // INDEX_SIZE
    first = min(present[0], need_from - need_from % size)
    offsets = list(range(first, present[-1] + size, size))
    missing = [o for o in offsets if o not in present]
    for offset in missing:
        Segment.open(index.directory / segment_name(offset), offset, size).close()
        report.notes.append(f"created missing index file {segment_name(offset)}")
    gone = missing + dropped
    return offsets, max(min(gone), need_from) // INDEX_SIZE if gone else None


def recover(data: SegmentList, index: SegmentList) -> tuple[LogState, RecoveryReport]:
    """Open both segment lists, check and repair them, and return the log bounds."""
    report = RecoveryReport()
    data.load(check_data_files(data, report))
    if not data.segments:
        for _, path, _ in index.scan_files():
            path.unlink()
        return LogState(), report
    begin = _header_index(data, data.first_offset)
    offsets, lost = check_index_files(index, max(begin, 0) * INDEX_SIZE, report)
    index.load(offsets)
    start = _walk_start(data, index, lost)
    report.walked_from = start
    scan = Scan([SegmentView(s.offset, s.mm, s.size) for s in data.segments], start,
                *_predecessor(data, index, start))
    state = LogState(begin_index=begin, write_pos=data.first_offset)
    bad: StoredEntry | None = None
    for entry in scan:
        if not entry.ok:
            bad = entry
            break
        report.entries_checked += 1
        _fix_slot(index, entry, report)
        state.end_index, state.end_term, state.end_chain = entry.index, entry.term, entry.chain_crc
        state.write_pos = entry.pos + entry.size
    if bad is not None:
        what = "body CRC" if not bad.body_crc_ok else "chain CRC"
        _cut(data, index, state, bad.pos, f"entry {bad.index} fails its {what}", report)
    elif scan.stop is not None and not scan.stop.clean:
        _cut(data, index, state, scan.stop.pos, scan.stop.reason, report)
    else:
        state.write_pos = scan.stop.pos if scan.stop else state.write_pos
    if state.end_index < 0:
        state.begin_index = -1
    if report.index_slots_rebuilt or report.notes:
        data.flush(data.first_offset, data.end_offset)
        index.flush(index.first_offset, index.end_offset)
    return state, report


def _header_index(data: SegmentList, pos: int) -> int:
    """The index in the header at `pos`, or -1 when no entry header is there."""
    seg = data.find(pos)
    magic, _, idx, *_ = HEADER.unpack_from(seg.mm, pos - seg.offset)
    return idx if magic in ENTRY_MAGICS else -1


def _slot(index: SegmentList, idx: int) -> tuple[int, int, int, int, int] | None:
    try:
        seg = index.find(idx * INDEX_SIZE)
    except IndexError:
        return None
    return INDEX.unpack_from(seg.mm, idx * INDEX_SIZE - seg.offset)


def _header_slot(data: SegmentList, pos: int) -> tuple[int, int, int, int, int, int] | None:
    """(magic, pos, size, index, term, chain) read from the header at `pos`."""
    seg = data.find(pos)
    magic, size, idx, term, epos, _, chain, _, _ = HEADER.unpack_from(seg.mm, pos - seg.offset)
    return (magic, epos, size, idx, term, chain) if magic in ENTRY_MAGICS else None


def _walk_start(data: SegmentList, index: SegmentList, lost: int | None) -> int:
    """The first data file holding a lost index slot or whose first entry's slot is wrong,
    else the file WALK_FILES from the end."""
    segments = data.segments
    fallback = segments[max(0, len(segments) - WALK_FILES)].offset
    for seg, following in pairwise(segments):
        if seg.offset >= fallback:
            break
        head = _header_slot(data, seg.offset)
        if head is None or _slot(index, head[3]) != head[:5]:
            return seg.offset
        following_head = _header_slot(data, following.offset)
        if lost is not None and (following_head is None or following_head[3] > lost):
            return seg.offset
    return fallback


def _predecessor(data: SegmentList, index: SegmentList, start: int) -> tuple[int | None, int | None, int]:
    """(prev_chain, prev_index, prev_term) for the entry at `start`, found through the index;
    the very first position of a store has chain seed 0 whatever its header says (a damaged
    index field must not turn the chain check off); unknown otherwise."""
    if start == 0:
        return 0, None, -1
    head = _header_slot(data, start)
    if head is None or head[3] <= 0:
        return None, None, -1
    slot = _slot(index, head[3] - 1)
    if slot is None or slot[1] >= start:
        return None, None, -1
    try:
        prev = _header_slot(data, slot[1])
    except IndexError:
        return None, None, -1
    if prev is None or prev[:5] != slot:
        return None, None, -1
    return prev[5], prev[3], prev[4]


def _fix_slot(index: SegmentList, entry: StoredEntry, report: RecoveryReport) -> None:
    want = (entry.magic, entry.pos, entry.size, entry.index, entry.term)
    if _slot(index, entry.index) == want:
        return
    off = entry.index * INDEX_SIZE
    seg = index.ensure(off)
    INDEX.pack_into(seg.mm, off - seg.offset, *want)
    report.index_slots_rebuilt += 1


def _cut(data: SegmentList, index: SegmentList, state: LogState, pos: int, reason: str,
         report: RecoveryReport) -> None:
    """Cut data at `pos` and the index after `state.end_index`, unless that is far from the end."""
    seg = data.find(min(pos, data.end_offset - 1))
    position = data.segments.index(seg)
    if position < len(data.segments) - 2:
        raise CorruptStoreError(
            f"damage at pos {pos} in data file {seg.path} ({reason}), "
            f"{len(data.segments) - 1 - position} files before the last: that is committed data, "
            f"not a torn tail. Nothing was changed. Inspect with `python -m nodes read-file --dir "
            f"{data.directory.parent}`, then restore the store from a replica or move it aside")
    report.cut_pos, report.cut_reason = pos, reason
    state.write_pos = pos
    zero_nonzero(data, pos, seg.end)
    report.removed_files += [f"data/{p.name}" for p in data.drop_after(seg.end)]
    islot = (state.end_index + 1) * INDEX_SIZE
    if index.segments:
        zero_nonzero(index, islot, index.find(min(islot, index.end_offset - 1)).end)
        report.removed_files += [f"index/{p.name}" for p in index.drop_after(
            islot - islot % index.segment_size + index.segment_size)]
    data.flush(data.first_offset, data.end_offset)
    index.flush(index.first_offset, index.end_offset)


def zero_nonzero(segments: SegmentList, start: int, stop: int) -> None:
    """Zero `start .. stop`, writing only the chunks that hold non-zero bytes."""
    for lo in range(start, stop, ZERO_CHUNK):
        hi = min(lo + ZERO_CHUNK, stop)
        seg = segments.find(lo)
        chunk = seg.mm[lo - seg.offset:hi - seg.offset]
        if chunk.count(0) != len(chunk):
            segments.write_zeros(lo, hi)
