"""`MmapStore`: DLedger's mmap commit log (data and index segment files) as a `LogStore`.

Layout inside `directory`: `data/<20-digit offset>` data segments and `index/<20-digit
offset>` index segments (record formats in `nodes.store.entrycodec`). Other names in `directory`
(the server's `currterm`, `checkpoint`) are left alone.

Threads: every method is safe to call from several threads. Which calls block:

* appends (`append_leader`, `append_many`, `append`) copy into the mmaps and return; in
  `sync` flush mode they then wait until their bytes are fsynced (group commit: concurrent
  appenders share one fsync), unless called with `wait=False`. With `wait=False` the
  caller learns durability from `flushed_index`, or blocks on `sync_to(index)` / `flush()`
  (an asyncio caller runs those in an executor).
* `flush`, `sync_to`, `truncate_after` (it fsyncs the zeroed tail), `clean` and `close`
  block on disk IO.
* reads, `term_at`, `set_committed` and the properties only touch memory.

Reads of the latest entries this process wrote (the leader pushing what it just appended)
come from an in-memory tail of those `Entry` objects, not from the mmaps: the bytes are
the ones just written, so re-checking their CRCs would only cost time. Entries read from
the files (after a restart, or older than the tail) are CRC-checked.

In `async` flush mode (DLedger's) a background thread flushes every `flush_interval_ms`.
"""

from __future__ import annotations

import threading
import time
import zlib
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Literal

from nodes.store.entrycodec import (
    BLANK,
    BLANK_SIZE,
    CHAIN,
    CHAIN_OFFSET,
    HEADER,
    HEADER_SIZE,
    INDEX,
    INDEX_SIZE,
    MAGIC_BLANK,
    chain_crc,
)
from nodes.store.entryscan import ENTRY_MAGICS
from nodes.store.flush import Flusher, Ticker
from nodes.store.logstore import (
    MAGIC_NORMAL,
    DiskFullError,
    Entry,
    EntryTooLargeError,
    StoreError,
    within_bytes,
)
from nodes.store.recovery import LogState, RecoveryReport, recover
from nodes.store.retention import RetentionPolicy
from nodes.store.segments import SegmentList

DEFAULT_DATA_SEGMENT = 1 << 30  # DLedger: 1 GiB
DEFAULT_INDEX_SEGMENT = 160 << 20  # DLedger: 160 MiB
FlushMode = Literal["async", "sync"]
TAIL_ENTRIES = 8192  # the in-memory tail keeps at least this many of the latest entries ...
TAIL_BYTES = 32 << 20  # ... while their bodies take at most this many bytes


class CorruptEntryError(StoreError):
    """A stored entry fails a check when read back (its bytes changed after recovery)."""


class MmapStore:
    """DLedger's mmap file store with CRC-checked recovery, async or group-commit flush and retention."""

    def __init__(
        self,
        directory: str | Path,
        *,
        data_segment_size: int = DEFAULT_DATA_SEGMENT,
        index_segment_size: int = DEFAULT_INDEX_SEGMENT,
        flush: FlushMode = "async",
        flush_interval_ms: float = 10,
        retention: RetentionPolicy | None = None,
    ) -> None:
        if data_segment_size < 2 * HEADER_SIZE:
            raise ValueError(
                f"data_segment_size={data_segment_size} is too small: use at least {2 * HEADER_SIZE} bytes"
            )
        if index_segment_size < INDEX_SIZE or index_segment_size % INDEX_SIZE:
            raise ValueError(
                f"index_segment_size={index_segment_size} must be a positive multiple of {INDEX_SIZE}"
            )
        if flush not in ("async", "sync"):
            raise ValueError(f"flush={flush!r}: use 'async' or 'sync'")
        if flush_interval_ms <= 0:
            raise ValueError(f"flush_interval_ms={flush_interval_ms} must be positive")
        self.directory = Path(directory)
        self.flush_mode: FlushMode = flush
        self._sync = flush == "sync"
        self._max_body = data_segment_size - HEADER_SIZE
        self._data = SegmentList(self.directory / "data", data_segment_size, "data")
        self._index = SegmentList(self.directory / "index", index_segment_size, "index")
        self._lock = threading.Lock()
        state, self.recovery = self._open()
        self._begin_index = state.begin_index
        self._end_index = state.end_index
        self._end_term = state.end_term
        self._end_chain = state.end_chain
        self._write_pos = state.write_pos
        self._synced_pos = state.write_pos
        self._index_synced = state.end_index
        self._committed = -1
        self._tail: list[Entry] = []  # the latest entries written, `_tail[0]` at `_tail_first`
        self._tail_first = state.end_index + 1
        self._tail_bytes = 0
        self._closed = False
        self._disk_full = False
        self._retention = retention
        self._flusher = Flusher(self._flush_once, state.end_index)
        self._tickers: list[Ticker] = []
        if retention is not None:
            self.clean()
            self._tickers.append(Ticker("store-retention", retention.check_interval_s, self.clean))
        if not self._sync:
            self._tickers.append(Ticker("store-flush", flush_interval_ms / 1000, self._flusher.flush))

    def _open(self) -> tuple[LogState, RecoveryReport]:
        try:
            return recover(self._data, self._index)
        except BaseException:
            self._data.close()
            self._index.close()
            raise

    # -- bounds -----------------------------------------------------------------------------

    @property
    def begin_index(self) -> int:
        return self._begin_index

    @property
    def end_index(self) -> int:
        return self._end_index

    @property
    def end_term(self) -> int:
        return self._end_term

    @property
    def committed_index(self) -> int:
        return self._committed

    @property
    def flushed_index(self) -> int:
        """Highest index whose bytes are durable (never above `end_index`). Does not block."""
        return min(self._flusher.flushed_index, self._end_index)

    @property
    def max_body(self) -> int:
        """The largest entry body a data segment holds."""
        return self._max_body

    @property
    def disk_full(self) -> bool:
        """Whether appends are refused with DiskFullError (set by the last `clean`)."""
        return self._disk_full

    # -- appends ----------------------------------------------------------------------------

    def append_leader(self, term: int, body: bytes, magic: int = MAGIC_NORMAL, *, wait: bool = True) -> Entry:
        """Append one entry at `end_index + 1` with `term`; see `append_many`."""
        first = self.append_many(term, (body,), magic, wait=wait)
        return Entry(first.start, term, body, magic)

    def append_many(
        self, term: int, bodies: Sequence[bytes], magic: int = MAGIC_NORMAL, *, wait: bool = True
    ) -> range:
        """Append `bodies` as leader at consecutive indexes with `term`; return their indexes.

        In `sync` mode this returns once they are fsynced, unless `wait` is False.
        """
        if not bodies:
            return range(self._end_index + 1, self._end_index + 1)
        self._check_bodies(bodies)
        with self._lock:
            self._check_writable()
            if term < self._end_term:
                raise StoreError(f"leader append at term {term} is below the log's end term {self._end_term}")
            first = self._end_index + 1
            last = self._write([Entry(i, term, body, magic) for i, body in enumerate(bodies, first)])
        if self._sync and wait:
            self._flusher.sync_to(last)
        return range(first, last + 1)

    def append(self, entries: Sequence[Entry], *, wait: bool = True) -> None:
        """Append as follower: `entries` must continue the log at `end_index + 1`, one index
        after another, with non-decreasing terms. In `sync` mode returns once fsynced,
        unless `wait` is False."""
        if not entries:
            return
        self._check_bodies([e.body for e in entries])
        with self._lock:
            self._check_writable()
            expect, term = self._end_index + 1, self._end_term
            for e in entries:
                if e.index != expect:
                    raise StoreError(
                        f"follower append must be consecutive: got index {e.index}, expected {expect}"
                    )
                if e.term < term:
                    raise StoreError(
                        f"follower append of index {e.index} at term {e.term} is below "
                        f"the previous term {term}"
                    )
                expect, term = expect + 1, e.term
            last = self._write(entries)
        if self._sync and wait:
            self._flusher.sync_to(last)

    def _check_bodies(self, bodies: Iterable[bytes]) -> None:
        longest = max(map(len, bodies))
        if longest > self._max_body:
            raise EntryTooLargeError(
                f"entry body of {longest} bytes exceeds the {self._max_body} bytes a data "
                f"segment of {self._data.segment_size} bytes holds: raise data_segment_size"
            )

    def _check_writable(self) -> None:
        if self._closed:
            raise StoreError("store is closed")
        if self._disk_full:
            raise DiskFullError(
                f"disk holding {self.directory} is above the disk-full ratio: "
                f"appends are refused until space is freed"
            )

    def _write(self, entries: Sequence[Entry]) -> int:
        """Write `entries` (indexes from `end_index + 1` on) after the end and keep them in
        the tail; return the last index. Caller holds the lock and has validated them."""
        data, index = self._data, self._index
        pos, idx, chain = self._write_pos, self._end_index + 1, self._end_chain
        first, wterm, nbytes = idx, self._end_term, 0
        seg = data.ensure(pos)
        mm, base, limit = seg.mm, seg.offset, seg.end
        ioff = idx * INDEX_SIZE
        iseg = index.ensure(ioff)
        imm, ibase, ilimit = iseg.mm, iseg.offset, iseg.end
        pack, ipack, cpack, crc = HEADER.pack, INDEX.pack_into, CHAIN.pack_into, zlib.crc32
        try:
            for entry in entries:
                magic, term, channel, body = entry.magic, entry.term, entry.channel, entry.body
                size = HEADER_SIZE + len(body)
                if pos + size > limit:
                    if limit - pos >= BLANK_SIZE:
                        BLANK.pack_into(mm, pos - base, MAGIC_BLANK, limit - pos)
                    seg = data.ensure(limit)
                    mm, base, pos, limit = seg.mm, seg.offset, limit, seg.end
                if ioff >= ilimit:
                    iseg = index.ensure(ioff)
                    imm, ibase, ilimit = iseg.mm, iseg.offset, iseg.end
                hdr = pack(magic, size, idx, term, pos, channel, 0, crc(body), len(body))
                chain = crc(hdr, chain)
                rel = pos - base
                mm[rel : rel + HEADER_SIZE] = hdr
                cpack(mm, rel + CHAIN_OFFSET, chain)
                mm[rel + HEADER_SIZE : rel + size] = body
                ipack(imm, ioff - ibase, magic, pos, size, idx, term)
                pos += size
                nbytes += size
                idx += 1
                ioff += INDEX_SIZE
                wterm = term
        finally:
            if idx > first:
                self._end_index, self._end_term, self._end_chain = idx - 1, wterm, chain
                self._write_pos = pos
                if self._begin_index < 0:
                    self._begin_index = first
                self._keep_tail(entries[: idx - first] if idx - first < len(entries) else entries, nbytes)
        return idx - 1

    def _keep_tail(self, entries: Sequence[Entry], nbytes: int) -> None:
        """Add just written `entries` (`nbytes` on disk) to the tail; drop its older half
        whenever it grows past twice TAIL_ENTRIES or past TAIL_BYTES (its byte count is
        then estimated from the entries kept, which is all a memory bound needs)."""
        tail = self._tail
        tail.extend(entries)
        self._tail_bytes += nbytes
        while tail and (len(tail) > 2 * TAIL_ENTRIES or self._tail_bytes > TAIL_BYTES):
            cut = max(1, len(tail) // 2)
            self._tail_bytes = self._tail_bytes * (len(tail) - cut) // len(tail)
            del tail[:cut]
            self._tail_first += cut

    def _drop_tail_after(self, index: int) -> None:
        """Forget tail entries after `index` (a truncation)."""
        keep = max(0, index + 1 - self._tail_first)
        if keep == 0:
            self._tail, self._tail_first, self._tail_bytes = [], index + 1, 0
        elif keep < len(self._tail):
            self._tail_bytes = self._tail_bytes * keep // len(self._tail)
            del self._tail[keep:]

    # -- reads ------------------------------------------------------------------------------

    def get(self, index: int) -> Entry:
        with self._lock:
            self._check_stored(index)
            if index >= self._tail_first:
                return self._tail[index - self._tail_first]
            return self._read(index, self._prev_chain(index))[0]

    def get_range(self, first: int, last: int, max_bytes: int | None = None) -> list[Entry]:
        with self._lock:
            if self._closed:
                raise StoreError("store is closed")
            first, last = max(first, self._begin_index), min(last, self._end_index)
            if first > last or self._end_index < 0:
                return []
            tail_first = self._tail_first
            if first >= tail_first:
                return within_bytes(self._tail[first - tail_first : last - tail_first + 1], max_bytes)
            return within_bytes(self._read_range(first, last), max_bytes)

    def _read_range(self, first: int, last: int) -> Iterator[Entry]:
        """Entries `first..last` read from the files one by one (the caller holds the lock)."""
        chain = self._prev_chain(first)
        for i in range(first, last + 1):
            entry, chain = self._read(i, chain)
            yield entry

    def term_at(self, index: int) -> int:
        if index == -1:
            return -1
        with self._lock:
            self._check_stored(index)
            return self._slot(index)[4]

    def _check_stored(self, index: int) -> None:
        if self._closed:
            raise StoreError("store is closed")
        if not self._begin_index <= index <= self._end_index or index < 0:
            raise StoreError(f"index {index} is not stored (stored: {self._begin_index}..{self._end_index})")

    def _slot(self, index: int) -> tuple[int, int, int, int, int]:
        off = index * INDEX_SIZE
        seg = self._index.find(off)
        slot = INDEX.unpack_from(seg.mm, off - seg.offset)
        if slot[3] != index:
            raise CorruptEntryError(f"index slot for {index} in {seg.path} holds index {slot[3]}")
        return slot

    def _chain_of(self, index: int) -> int:
        pos = self._slot(index)[1]
        seg = self._data.find(pos)
        return CHAIN.unpack_from(seg.mm, pos - seg.offset + CHAIN_OFFSET)[0]

    def _prev_chain(self, index: int) -> int | None:
        """chainCrc of the entry before `index` (0 at the very start, None if deleted)."""
        if index > self._begin_index:
            return self._chain_of(index - 1)
        return 0 if self._data.first_offset == 0 else None

    def _read(self, index: int, prev_chain: int | None) -> tuple[Entry, int]:
        magic, pos, size, _, term = self._slot(index)
        seg = self._data.find(pos)
        rel = pos - seg.offset
        hdr = seg.mm[rel : rel + HEADER_SIZE]
        hmagic, hsize, hindex, hterm, hpos, channel, chain, bcrc, _ = HEADER.unpack(hdr)
        where = f"entry {index} at pos {pos} in {seg.path}"
        if (hmagic, hsize, hindex, hterm, hpos) != (magic, size, index, term, pos):
            raise CorruptEntryError(f"{where}: header disagrees with its index slot")
        body = seg.mm[rel + HEADER_SIZE : rel + size]
        if zlib.crc32(body) != bcrc:
            raise CorruptEntryError(f"{where} fails its body CRC")
        if prev_chain is not None and chain_crc(hdr, prev_chain) != chain:
            raise CorruptEntryError(f"{where} fails its chain CRC")
        return Entry(index, term, body, magic, channel), chain

    # -- truncation, commit -----------------------------------------------------------------

    def truncate_after(self, index: int) -> None:
        """Drop every entry after `index`: zero their bytes and fsync that, so a restart
        cannot bring them back. Refuses to go below the committed index."""
        with self._flusher.lock, self._lock:
            if self._closed:
                raise StoreError("store is closed")
            if index >= self._end_index:
                return
            if index < self._committed:
                raise StoreError(f"cannot truncate after {index}: index {self._committed} is committed")
            if index < self._begin_index and self._begin_index > 0:
                raise StoreError(
                    f"cannot truncate after {index}: the log begins at {self._begin_index} "
                    f"(retention deleted the entries before it)"
                )
            new_pos = self._slot(index + 1)[1]
            old_pos, old_end = self._write_pos, self._end_index
            seg = self._data.find(new_pos)
            self._data.write_zeros(new_pos, min(old_pos, seg.end))
            self._data.drop_after(seg.end)
            ioff = (index + 1) * INDEX_SIZE
            iseg = self._index.find(ioff)
            self._index.write_zeros(ioff, min((old_end + 1) * INDEX_SIZE, iseg.end))
            self._index.drop_after(iseg.end)
            if index >= 0:
                self._end_term = self._slot(index)[4]
                self._end_chain = self._chain_of(index)
            else:
                self._begin_index = self._end_term = -1
                self._end_chain = 0
            self._end_index, self._write_pos = index, new_pos
            self._drop_tail_after(index)
            self._synced_pos = min(self._synced_pos, new_pos)
            self._flusher.flushed_index = min(self._flusher.flushed_index, index)
            self._index_synced = min(self._index_synced, index)
            self._data.flush(new_pos, min(old_pos, seg.end))
            self._index.flush(ioff, iseg.end)

    def set_committed(self, index: int) -> None:
        """Record the committed index; it never goes backwards and never passes `end_index`."""
        with self._lock:
            if index > self._end_index:
                raise StoreError(f"committed index {index} is past the log's end {self._end_index}")
            self._committed = max(self._committed, index)

    # -- durability -------------------------------------------------------------------------

    def _flush_once(self) -> int:
        """fdatasync the data written since the last flush, and the index when it holds
        unsynced slots of entries before the last data file. Slots of entries in the last
        file need no fsync: recovery walks that file and rebuilds them from the data."""
        with self._lock:
            if self._closed:
                return self._flusher.flushed_index
            end, wpos, start = self._end_index, self._write_pos, self._synced_pos
            islot = max(self._index_synced, self._begin_index - 1) + 1
            index_due = islot < self._last_file_first_index()
        self._data.flush(start, wpos)
        self._synced_pos = wpos
        if index_due:
            self._index.flush(islot * INDEX_SIZE, (end + 1) * INDEX_SIZE)
            self._index_synced = end
        return end

    def _last_file_first_index(self) -> int:
        """Index of the first entry in the last data file (end + 1 if it holds none)."""
        if not self._data.segments:
            return self._end_index + 1
        head = HEADER.unpack_from(self._data.segments[-1].mm, 0)
        return head[2] if head[0] in ENTRY_MAGICS else self._end_index + 1

    def flush(self) -> int:
        """Make everything appended durable; return the flushed index. Blocks."""
        return self._flusher.flush()

    def sync_to(self, index: int) -> int:
        """Block until `index` is durable, sharing fsyncs with concurrent callers."""
        return self._flusher.sync_to(index)

    # -- retention --------------------------------------------------------------------------

    def clean(self, now: float | None = None) -> list[str]:
        """Apply the retention policy: delete expired data files, and older ones while the
        disk is above the force-clean ratio, never the file holding the committed index or
        later ones; set `disk_full`. Returns the deleted file names. Blocks."""
        policy = self._retention
        if policy is None:
            return []
        now = time.time() if now is None else now
        removed: list[str] = []
        with self._flusher.lock, self._lock:
            if self._closed:
                return removed
            deletable = self._data.segments[: self._deletable()]
            mtimes = [seg.path.stat().st_mtime for seg in deletable]
            removed += self._drop_oldest(policy.expired(mtimes, now))
            ratio = policy.disk_usage(self.directory)
            while ratio > policy.force_clean_ratio and self._deletable():
                removed += self._drop_oldest(1)
                ratio = policy.disk_usage(self.directory)
            self._disk_full = ratio > policy.disk_full_ratio
        return removed

    def _deletable(self) -> int:
        """How many leading data files lie wholly before the file holding the committed index."""
        if self._committed < max(self._begin_index, 0):
            return 0
        seg = self._data.find(self._slot(self._committed)[1])
        return self._data.segments.index(seg)

    def _drop_oldest(self, count: int) -> list[str]:
        if count <= 0:
            return []
        gone = self._data.drop_before(self._data.segments[count].offset)
        seg = self._data.segments[0]
        self._begin_index = HEADER.unpack_from(seg.mm, 0)[2]
        gone += self._index.drop_before(self._begin_index * INDEX_SIZE)
        self._synced_pos = max(self._synced_pos, seg.offset)
        return [f"{p.parent.name}/{p.name}" for p in gone]

    # -- lifecycle --------------------------------------------------------------------------

    def close(self) -> None:
        """Stop the background threads, flush, and unmap the files."""
        if self._closed:
            return
        for ticker in self._tickers:
            ticker.stop()
        with self._flusher.lock:
            self._flush_once()
            self._index.flush(0, (self._end_index + 1) * INDEX_SIZE)
            with self._lock:
                self._closed = True
                self._data.close()
                self._index.close()

    def __enter__(self) -> MmapStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


__all__ = ["CorruptEntryError", "MmapStore", "RecoveryReport"]
