"""Recovery on open: check the files, walk the tail, cut a torn or corrupt tail, fix the index.

The data files are the source of truth; index slots are derived from them and are rebuilt
when missing or wrong. Entries up to `stable_index` (the highest index the caller knows
was committed and flushed in this store, e.g. from its checkpoint) cannot have changed
since: committed entries are never truncated and flushed bytes survive a power loss.
Anything after it may have been written since the last flush, or truncated and partly
rewritten, and a power loss keeps an arbitrary mix of that: new pages and old ones, and
old files that a truncation had deleted. So the walk starts at the data file holding the
stable index (the first file when there is none), at the latest WALK_FILES files from the
end (DLedger's), and earlier when an index slot there is missing or wrong; it checks
every entry: magic, size, pos, index continuity, non-decreasing term, body CRC and chain
CRC. At the first bad entry the data and the index are cut: the rest of that file is
zeroed and later files are deleted, however many there are. The chain CRC makes what is
kept one log that really existed: each entry's chain commits to every entry before it, so
an old entry cannot follow a rewritten one. A cut at or below the stable index is not a
torn tail but lost committed data: the store then refuses to open (`CorruptStoreError`)
and changes nothing. Otherwise recovery ends by making all the files durable, so that
the store's flushed index starts at the log's end.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from itertools import pairwise

from nodes.coverage import hit
from nodes.store.entrycodec import HEADER, INDEX, INDEX_SIZE
from nodes.store.entryscan import ENTRY_MAGICS, Scan, SegmentView, StoredEntry
from nodes.store.logstore import StoreError
from nodes.store.segments import SegmentList, segment_name

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
    index whose slot was lost (None if none): files of the wrong length are deleted, and
    missing ones are created empty by `SegmentList.load`, for recovery to refill."""
    size = index.segment_size
    present, dropped = [], []
    for offset, path, length in index.scan_files():
        if length != size or offset % size:
            index.remove_file(path)
            dropped.append(offset)
            report.notes.append(f"deleted index file {path.name} ({length} bytes, expected {size})")
        elif offset + size <= need_from:
            index.remove_file(path)
            report.notes.append(f"deleted index file {path.name} below the first entry")
        else:
            present.append(offset)
    if not present:
        return [], need_from // INDEX_SIZE
    first = min(present[0], need_from - need_from % size)
    offsets = list(range(first, present[-1] + size, size))
    missing = sorted(set(offsets).difference(present))
    report.notes += [f"created missing index file {segment_name(o)}" for o in missing]
    gone = missing + dropped
    return offsets, max(min(gone), need_from) // INDEX_SIZE if gone else None


def recover(data: SegmentList, index: SegmentList, stable_index: int = -1,
            refuse_lost: bool = True) -> tuple[LogState, RecoveryReport]:
    """Open both segment lists, check and repair them, make them durable, return the log bounds.

    A log that would end below `stable_index` has lost committed data: CorruptStoreError,
    unless `refuse_lost` is False (DLedger's way: cut at the damage, say so in the report,
    and let the node catch up from the others)."""
    report = RecoveryReport()
    data.load(check_data_files(data, report))
    state = LogState()
    if data.segments:
        begin = _header_index(data, data.first_offset)
        offsets, lost = check_index_files(index, max(begin, 0) * INDEX_SIZE, report)
        index.load(offsets)
        state = _walk(data, index, begin, lost, stable_index, report, refuse_lost)
    else:
        _refuse_below(stable_index, -1, f"{data.directory} holds no data files", data, refuse_lost, report)
        for _, path, _ in index.scan_files():
            index.remove_file(path)
    data.flush()
    index.flush()
    return state, report


def _walk(data: SegmentList, index: SegmentList, begin: int, lost: int | None, stable_index: int,
          report: RecoveryReport, refuse_lost: bool) -> LogState:
    """Walk the entries from where they may have changed; fix their index slots and cut at
    the first bad one, unless that drops a stable entry."""
    start, (prev_chain, prev_index, prev_term) = _walk_start(data, index, lost, stable_index)
    report.walked_from = start
    scan = Scan([SegmentView(s.offset, s.mm, s.size) for s in data.segments], start,
                prev_chain, prev_index, prev_term)
    state = LogState(begin, -1 if prev_index is None else prev_index, prev_term, prev_chain or 0, start)
    bad: StoredEntry | None = None
    stale: list[StoredEntry] = []  # entries whose index slot is wrong
    for entry in scan:
        if not entry.ok:
            bad = entry
            break
        report.entries_checked += 1
        if _slot(index, entry.index) != _slot_of(entry):
            stale.append(entry)
        state.end_index, state.end_term, state.end_chain = entry.index, entry.term, entry.chain_crc
        state.write_pos = entry.pos + entry.size
    cut: tuple[int, str] | None = None
    if bad is not None:
        cut = bad.pos, f"entry {bad.index} fails its {'body CRC' if not bad.body_crc_ok else 'chain CRC'}"
    elif scan.stop is not None and not scan.stop.clean:
        cut = scan.stop.pos, scan.stop.reason
    elif scan.stop is not None:
        state.write_pos = scan.stop.pos
    where = f"at pos {cut[0]} ({cut[1]})" if cut else "where its files end"
    _refuse_below(stable_index, state.end_index, f"the log stops at index {state.end_index} {where}", data,
                  refuse_lost, report)
    for entry in stale:
        _fix_slot(index, entry, report)
    if cut is not None:
        _cut(data, index, state, *cut, report)
    if state.end_index < 0:
        state.begin_index = -1
    return state


def _refuse_below(stable_index: int, end_index: int, what: str, data: SegmentList, refuse: bool,
                  report: RecoveryReport) -> None:
    """CorruptStoreError (before anything was changed) if the log would end below `stable_index`;
    with `refuse` False only a note in the report."""
    if end_index < stable_index and not refuse:
        report.notes.append(f"{what}: committed entries up to {stable_index} are lost on this node")
    elif end_index < stable_index:
        raise CorruptStoreError(
            f"{what}, but entries up to {stable_index} were committed and flushed here: that is "
            f"committed data lost, not a torn tail. Nothing was changed. Inspect with `python -m "
            f"nodes read-file --dir {data.directory.parent}`, then restore the store from a replica "
            f"or move it aside")


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


def _slot_of(entry: StoredEntry) -> tuple[int, int, int, int, int]:
    return entry.magic, entry.pos, entry.size, entry.index, entry.term


def _header_slot(data: SegmentList, pos: int) -> tuple[int, int, int, int, int, int] | None:
    """(magic, pos, size, index, term, chain) read from the header at `pos`."""
    seg = data.find(pos)
    magic, size, idx, term, epos, _, chain, _, _ = HEADER.unpack_from(seg.mm, pos - seg.offset)
    return (magic, epos, size, idx, term, chain) if magic in ENTRY_MAGICS else None


Predecessor = tuple[int | None, int | None, int]  # (chain, index, term) before the walk


def _walk_start(data: SegmentList, index: SegmentList, lost: int | None,
                stable_index: int) -> tuple[int, Predecessor]:
    """Where to walk from and what precedes it; the first file when the predecessor of the
    chosen one cannot be found through the index (its chain could not be checked)."""
    start = _walk_file(data, index, lost, stable_index)
    prev = _predecessor(data, index, start)
    if prev is None:
        start = data.first_offset
        prev = (0 if start == 0 else None), None, -1
    return start, prev


def _walk_file(data: SegmentList, index: SegmentList, lost: int | None, stable_index: int) -> int:
    """The data file holding the stable index or the lowest index whose slot was lost
    (whichever is lower), or an earlier one whose first entry's slot is wrong; at the latest
    the file WALK_FILES from the end."""
    segments = data.segments
    latest = segments[max(0, len(segments) - WALK_FILES)].offset
    need = max(stable_index, 0) if lost is None else min(lost, max(stable_index, 0))
    for seg, following in pairwise(segments):
        if seg.offset >= latest:
            break
        head = _header_slot(data, seg.offset)
        if head is None or _slot(index, head[3]) != head[:5]:
            return seg.offset
        following_head = _header_slot(data, following.offset)
        if following_head is None or following_head[3] > need:
            return seg.offset
    return latest


def _predecessor(data: SegmentList, index: SegmentList, start: int) -> Predecessor | None:
    """(chain, index, term) of the entry before `start`, found through the index; the very
    first position of a store has chain seed 0 whatever its header says (a damaged index
    field must not turn the chain check off); None when it cannot be found."""
    if start == 0:
        return 0, None, -1
    head = _header_slot(data, start)
    if head is None or head[3] <= 0:
        return None
    slot = _slot(index, head[3] - 1)
    if slot is None or slot[1] >= start:
        return None
    try:
        prev = _header_slot(data, slot[1])
    except IndexError:
        return None
    if prev is None or prev[:5] != slot:
        return None
    return prev[5], prev[3], prev[4]


def _fix_slot(index: SegmentList, entry: StoredEntry, report: RecoveryReport) -> None:
    off = entry.index * INDEX_SIZE
    seg = index.ensure(off)
    INDEX.pack_into(seg.mm, off - seg.offset, *_slot_of(entry))
    index.mark_dirty(off, off + INDEX_SIZE)
    report.index_slots_rebuilt += 1


def _cut(data: SegmentList, index: SegmentList, state: LogState, pos: int, reason: str,
         report: RecoveryReport) -> None:
    """Cut data at `pos` and the index after `state.end_index`."""
    hit("recovery.cut-tail")
    report.cut_pos, report.cut_reason = pos, reason
    state.write_pos = pos
    _cut_list(data, pos, report)
    if index.segments:
        _cut_list(index, (state.end_index + 1) * INDEX_SIZE, report)


def _cut_list(segments: SegmentList, pos: int, report: RecoveryReport) -> None:
    """Zero `segments` from `pos` to the end of its file and delete the later files."""
    end = segments.find(min(pos, segments.end_offset - 1)).end
    zero_nonzero(segments, pos, end)
    for seg in segments.drop_after(end):
        seg.close()
        report.removed_files.append(f"{segments.kind}/{seg.path.name}")


def zero_nonzero(segments: SegmentList, start: int, stop: int) -> None:
    """Zero `start .. stop`, writing only the chunks that hold non-zero bytes."""
    for lo in range(start, stop, ZERO_CHUNK):
        hi = min(lo + ZERO_CHUNK, stop)
        seg = segments.find(lo)
        chunk = seg.mm[lo - seg.offset:hi - seg.offset]
        if chunk.count(0) != len(chunk):
            segments.write_zeros(lo, hi)
