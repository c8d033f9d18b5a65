"""`MmapStore`: DLedger's mmap commit log (data and index segment files) as a `LogStore`.

Layout inside `directory`: `data/<20-digit offset>` data segments and `index/<20-digit
offset>` index segments (record formats in `nodes.store.entrycodec`). Other names in `directory`
(the server's `currterm`, `checkpoint`) are left alone. All file IO goes through a
`FileSystem` (`nodes.store.fs`): the real one, or the simulator's.

Threads: every method is safe to call from several threads. Which calls block:

* appends (`append_leader`, `append_many`, `append`) and `truncate_after` only write to the
  mappings and return; they never wait for the disk, nor for a flush running in another
  thread. Durability is the caller's business: `flushed_index` says how far the log is
  durable, `flush()` makes all of it durable (an asyncio caller runs it in an executor),
  and with `flush_interval_ms` a background thread calls `flush()` that often (DLedger's
  asynchronous policy). A synchronous policy (ack only what is durable) is the caller's:
  it acks up to `flushed_index` and calls `flush()` when that lags `end_index`.
* `flush`, `clean` and `close` block on disk IO; flushes run one at a time.
* reads, `term_at`, `set_committed` and the properties only touch memory.

Reads of the latest entries this process wrote (the leader pushing what it just appended)
come from an in-memory tail of those `Entry` objects, not from the mmaps: the bytes are
the ones just written, so re-checking their CRCs would only cost time. Entries read from
the files (after a restart, or older than the tail) are CRC-checked.
"""

from __future__ import annotations

import threading
import time
import zlib
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path

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
from nodes.store.flush import Ticker
from nodes.store.fs import REAL_FS, FileSystem
from nodes.store.logstore import (
    MAGIC_NORMAL,
    Entry,
    EntryTooLargeError,
    StoreError,
    within_bytes,
)
from nodes.store.recovery import LogState, RecoveryReport, recover
from nodes.store.retention import RetentionPolicy
from nodes.store.segments import Segment, SegmentList

DEFAULT_DATA_SEGMENT = 1 << 30  # DLedger: 1 GiB
DEFAULT_INDEX_SEGMENT = 160 << 20  # DLedger: 160 MiB
TAIL_ENTRIES = 8192  # the in-memory tail keeps at least this many of the latest entries ...
TAIL_BYTES = 32 << 20  # ... while their bodies take at most this many bytes


class CorruptEntryError(StoreError):
    """A stored entry fails a check when read back (its bytes changed after recovery)."""


class MmapStore:
    """DLedger's mmap file store with CRC-checked recovery, caller-driven flushes and retention.

    `stable_index` is the highest index the caller knows was both committed and flushed in
    this store (its `stable_index` when last recorded durably, e.g. in the checkpoint);
    recovery walks from there and refuses to open if the log ends below it (with
    `refuse_lost` False it cuts there anyway and notes the loss, as DLedger does). -1
    (unknown) walks every file. `flush_interval_ms` starts a background flush thread (DLedger's
    asynchronous flush); None starts none. `fs` is where the files live.
    """

    def __init__(
        self,
        directory: str | Path,
        *,
        data_segment_size: int = DEFAULT_DATA_SEGMENT,
        index_segment_size: int = DEFAULT_INDEX_SEGMENT,
        flush_interval_ms: float | None = 10,
        retention: RetentionPolicy | None = None,
        stable_index: int = -1,
        refuse_lost: bool = True,
        fs: FileSystem = REAL_FS,
    ) -> None:
        if data_segment_size < 2 * HEADER_SIZE:
            raise ValueError(
                f"data_segment_size={data_segment_size} is too small: use at least {2 * HEADER_SIZE} bytes"
            )
        if index_segment_size < INDEX_SIZE or index_segment_size % INDEX_SIZE:
            raise ValueError(
                f"index_segment_size={index_segment_size} must be a positive multiple of {INDEX_SIZE}"
            )
        if flush_interval_ms is not None and flush_interval_ms <= 0:
            raise ValueError(f"flush_interval_ms={flush_interval_ms} must be positive (or None: no thread)")
        self.directory = Path(directory)
        self._fs = fs
        self._max_body = data_segment_size - HEADER_SIZE
        self._data = SegmentList(self.directory / "data", data_segment_size, "data", fs)
        self._index = SegmentList(self.directory / "index", index_segment_size, "index", fs)
        self._lock = threading.Lock()  # guards all state; never held across disk IO
        self._flush_lock = threading.Lock()  # one flush at a time
        state, self.recovery = self._open(stable_index, refuse_lost)
        self._begin_index = state.begin_index
        self._end_index = state.end_index
        self._end_term = state.end_term
        self._end_chain = state.end_chain
        self._write_pos = state.write_pos
        self._flushed = state.end_index  # recovery made everything durable
        self._flush_cap = state.end_index  # what the running flush may claim (see `_flush_once`)
        self._retired: list[Segment] = []  # truncated away, still mapped until no flush uses them
        self._committed = min(stable_index, state.end_index)  # recovery kept at least that much
        self._tail: list[Entry] = []  # the latest entries written, `_tail[0]` at `_tail_first`
        self._tail_first = state.end_index + 1
        self._tail_bytes = 0
        self._closed = False
        self._disk_full = False
        self._retention = retention
        self._tickers: list[Ticker] = []
        if retention is not None:
            self.clean()
            if retention.check_interval_s is not None:
                self._tickers.append(Ticker("store-retention", retention.check_interval_s, self.clean))
        if flush_interval_ms is not None:
            self._tickers.append(Ticker("store-flush", flush_interval_ms / 1000, self.flush))

    def _open(self, stable_index: int, refuse_lost: bool) -> tuple[LogState, RecoveryReport]:
        try:
            return recover(self._data, self._index, stable_index, refuse_lost)
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
        return self._flushed

    @property
    def stable_index(self) -> int:
        """Highest index both committed and durable: what to record for `stable_index` on reopen."""
        return min(self._committed, self._flushed)

    @property
    def max_body(self) -> int:
        """The largest entry body a data segment holds."""
        return self._max_body

    @property
    def disk_full(self) -> bool:
        """Whether the disk is above the disk-full ratio (set by the last `clean`). The store
        still takes every append: refusing client appends (DLedger's DISK_FULL) is the
        driver's decision; replication and a new leader's no-op must go on."""
        return self._disk_full

    # -- appends ----------------------------------------------------------------------------

    def append_leader(self, term: int, body: bytes, magic: int = MAGIC_NORMAL) -> Entry:
        """Append one entry at `end_index + 1` with `term`; see `append_many`."""
        first = self.append_many(term, (body,), magic)
        return Entry(first.start, term, body, magic)

    def append_many(self, term: int, bodies: Sequence[bytes], magic: int = MAGIC_NORMAL) -> range:
        """Append `bodies` as leader at consecutive indexes with `term`; return their indexes."""
        if not bodies:
            return range(self._end_index + 1, self._end_index + 1)
        self._check_bodies(bodies)
        with self._lock:
            self._check_writable()
            if term < self._end_term:
                raise StoreError(f"leader append at term {term} is below the log's end term {self._end_term}")
            first = self._end_index + 1
            last = self._write([Entry(i, term, body, magic) for i, body in enumerate(bodies, first)])
        return range(first, last + 1)

    def append(self, entries: Sequence[Entry]) -> None:
        """Append as follower: `entries` must continue the log at `end_index + 1`, one index
        after another, with non-decreasing terms."""
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
            self._write(entries)

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

    def _write(self, entries: Sequence[Entry]) -> int:
        """Write `entries` (indexes from `end_index + 1` on) after the end and keep them in
        the tail; return the last index. Caller holds the lock and has validated them."""
        data, index = self._data, self._index
        pos, idx, chain = self._write_pos, self._end_index + 1, self._end_chain
        first, first_pos, wterm, nbytes = idx, pos, self._end_term, 0
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
            data.mark_dirty(first_pos, pos)
            index.mark_dirty(first * INDEX_SIZE, ioff)
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
        if (hmagic, hsize, hindex, hterm, hpos) != (magic, size, index, term, pos):
            raise CorruptEntryError(f"entry {index} at pos {pos} in {seg.path}: header disagrees "
                                    "with its index slot")
        body = seg.mm[rel + HEADER_SIZE : rel + size]
        if zlib.crc32(body) != bcrc:
            raise CorruptEntryError(f"entry {index} at pos {pos} in {seg.path} fails its body CRC")
        if prev_chain is not None and chain_crc(hdr, prev_chain) != chain:
            raise CorruptEntryError(f"entry {index} at pos {pos} in {seg.path} fails its chain CRC")
        return Entry(index, term, body, magic, channel), chain

    # -- truncation, commit -----------------------------------------------------------------

    def truncate_after(self, index: int) -> None:
        """Drop every entry after `index` (never below the committed index).

        Memory only: the dropped bytes are zeroed in the mappings (dirty, for the next flush
        to make durable) and later files are unlinked; nothing here waits for the disk or
        for a flush running in another thread. `flushed_index` drops to `index` at once,
        and a flush already running claims no more than `index` when it ends (see
        `_flush_once`): the entries written after the truncation are not known durable
        until a flush that starts later.

        A power loss before the next flush may bring dropped entries back, wholly or in
        part: the zeroing, the unlinks and the entries written since reach the disk in any
        order. That is safe. Entries up to `index` are untouched; recovery keeps only a
        chain-consistent log, a prefix of one this store really held; the node acks (in
        sync mode) only what `flushed_index` covers, which never included an entry written
        after the truncation and not flushed since, so no acknowledged entry is lost; and
        the old entries that come back were never committed (Raft truncates only
        uncommitted ones): it is as if the truncation had not arrived, and the leader
        sends it again.
        """
        with self._lock:
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
            old_end = self._end_index
            seg = self._data.find(new_pos)
            self._data.write_zeros(new_pos, min(self._write_pos, seg.end))
            self._retired += self._data.drop_after(seg.end)
            ioff = (index + 1) * INDEX_SIZE
            iseg = self._index.find(ioff)
            self._index.write_zeros(ioff, min((old_end + 1) * INDEX_SIZE, iseg.end))
            self._retired += self._index.drop_after(iseg.end)
            if index >= 0:
                self._end_term = self._slot(index)[4]
                self._end_chain = self._chain_of(index)
            else:
                self._begin_index = self._end_term = -1
                self._end_chain = 0
            self._end_index, self._write_pos = index, new_pos
            self._drop_tail_after(index)
            self._flushed = min(self._flushed, index)
            self._flush_cap = min(self._flush_cap, index)

    def set_committed(self, index: int) -> None:
        """Record the committed index; it never goes backwards and never passes `end_index`."""
        with self._lock:
            if index > self._end_index:
                raise StoreError(f"committed index {index} is past the log's end {self._end_index}")
            self._committed = max(self._committed, index)

    # -- durability -------------------------------------------------------------------------

    def flush(self) -> int:
        """Make everything written so far durable; return the flushed index. Blocks, and
        waits for a flush running in another thread first."""
        with self._flush_lock:
            self._flush_once()
        return self._flushed

    def _flush_once(self, *, whole_index: bool = False) -> None:
        """Sync what was written since the last flush: the data, and the index when it holds
        unsynced slots of entries before the last data file (or `whole_index`). Slots of
        entries in the last file need no sync: recovery walks that file and rebuilds them.

        What to sync is taken under the lock, the IO runs without it. Entries up to the end
        at that moment are durable afterwards, unless a truncation ran meanwhile: it lowers
        `_flush_cap` to its index, as the entries after it may have been rewritten after
        the IO began. The caller holds `_flush_lock`."""
        with self._lock:
            if self._closed:
                return
            self._flush_cap = self._end_index
            data = self._data.take_sync()
            first_slot = self._index.dirty_from
            due = first_slot is not None and (
                whole_index or first_slot < self._last_file_first_index() * INDEX_SIZE)
            index = self._index.take_sync() if due else None
        try:
            data.run(self._fs)
            if index is not None:
                index.run(self._fs)
        except BaseException:
            with self._lock:
                self._data.restore(data)
                if index is not None:
                    self._index.restore(index)
            raise
        with self._lock:
            self._flushed = max(self._flushed, self._flush_cap)
            retired, self._retired = self._retired, []
        for seg in retired:  # no flush is using them any more
            seg.close()

    def _last_file_first_index(self) -> int:
        """Index of the first entry in the last data file (end + 1 if it holds none)."""
        if not self._data.segments:
            return self._end_index + 1
        head = HEADER.unpack_from(self._data.segments[-1].mm, 0)
        return head[2] if head[0] in ENTRY_MAGICS else self._end_index + 1

    # -- retention --------------------------------------------------------------------------

    def clean(self, now: float | None = None) -> list[str]:
        """Apply the retention policy: delete expired data files, and (with `force_clean`)
        older ones while the disk is above the force-clean ratio, never the file holding the
        committed index or later ones; set `disk_full`. Returns the deleted file names. Blocks
        (it waits for a running flush, so that deleted files are unmapped and their space
        freed at once)."""
        policy = self._retention
        if policy is None:
            return []
        now = time.time() if now is None else now
        usage = policy.disk_usage or self._fs.disk_use_ratio
        removed: list[str] = []
        with self._flush_lock, self._lock:
            if self._closed:
                return removed
            deletable = self._data.segments[: self._deletable()]
            mtimes = (self._fs.modified_time(seg.path) for seg in deletable)  # read up to the first kept
            removed += self._drop_oldest(policy.expired(mtimes, now))
            ratio = usage(self.directory)
            while policy.force_clean and ratio > policy.force_clean_ratio and self._deletable():
                removed += self._drop_oldest(1)
                ratio = usage(self.directory)
            self._disk_full = ratio > policy.disk_full_ratio
        return removed

    def _deletable(self) -> int:
        """How many leading data files lie wholly before the file holding the committed index."""
        if self._committed < max(self._begin_index, 0):
            return 0
        seg = self._data.find(self._slot(self._committed)[1])
        return self._data.segments.index(seg)

    def _drop_oldest(self, count: int) -> list[str]:
        """Delete the `count` oldest data files and the index files before the new first entry
        (the caller holds both locks, so no flush is syncing them)."""
        if count <= 0:
            return []
        gone = self._data.drop_before(self._data.segments[count].offset)
        self._begin_index = HEADER.unpack_from(self._data.segments[0].mm, 0)[2]
        gone += self._index.drop_before(self._begin_index * INDEX_SIZE)
        for seg in gone:
            seg.close()
        return [f"{seg.path.parent.name}/{seg.path.name}" for seg in gone]

    # -- lifecycle --------------------------------------------------------------------------

    def close(self) -> None:
        """Stop the background threads, flush everything, and unmap the files."""
        if self._closed:
            return
        for ticker in self._tickers:
            ticker.stop()
        with self._flush_lock:
            self._flush_once(whole_index=True)
            with self._lock:
                self._closed = True
                for seg in self._retired:
                    seg.close()
                self._retired = []
                self._data.close()
                self._index.close()

    def __enter__(self) -> MmapStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


__all__ = ["CorruptEntryError", "MmapStore", "RecoveryReport"]
