"""Walk the entries of data segments and check each one, without changing anything.

Used by recovery (on the store's own mmaps) and by the read-only inspector (on copies of
a store, possibly taken from a node killed mid-write). The walk yields every entry whose
header is structurally sound, with its CRC verdicts, and stops at the first position it
cannot parse; `Scan.stop` then says where and why.
"""

from __future__ import annotations

import mmap
import zlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import NamedTuple

from nodes.store.entrycodec import BLANK, BLANK_SIZE, HEADER, HEADER_SIZE, MAGIC_BLANK, chain_crc
from nodes.store.fs import MappedFile
from nodes.store.logstore import MAGIC_NOOP, MAGIC_NORMAL

ENTRY_MAGICS = (MAGIC_NORMAL, MAGIC_NOOP)
BLANK_MAGIC = MAGIC_BLANK.to_bytes(4, "big", signed=True)


class StoredEntry(NamedTuple):
    """One entry as found on disk. `chain_crc_ok` is True for the walk's first entry when its
    predecessor is unknown (earlier files deleted by retention, or a walk started mid-store)."""

    index: int  # type: ignore[assignment]  # a field named as tuple.index: fine at run time
    term: int
    pos: int
    size: int
    magic: int
    channel: int
    body: bytes
    body_crc_ok: bool
    chain_crc_ok: bool
    chain_crc: int

    @property
    def ok(self) -> bool:
        return self.body_crc_ok and self.chain_crc_ok


@dataclass(frozen=True)
class Stop:
    """Where a walk ended: `clean` when it reached the zeroed end of the last file."""

    pos: int
    reason: str
    clean: bool


class SegmentView(NamedTuple):
    """A data file to walk: its starting offset, its bytes, and the configured file size."""

    offset: int
    buf: bytes | memoryview | mmap.mmap | MappedFile
    size: int


class Scan:
    """Iterate the entries of `views` from `start_pos`; afterwards `stop` tells how it ended."""

    def __init__(self, views: Sequence[SegmentView], start_pos: int | None = None,
                 prev_chain: int | None = None, prev_index: int | None = None,
                 prev_term: int = -1) -> None:
        self.views = views
        self.start_pos = views[0].offset if start_pos is None and views else (start_pos or 0)
        self.prev_chain = prev_chain
        self.prev_index = prev_index
        self.prev_term = prev_term
        self.stop: Stop | None = None
        self.end_pos = self.start_pos  # just after the last entry or blank record walked

    def __iter__(self) -> Iterator[StoredEntry]:
        views = self.views
        if not views:
            self.stop = Stop(0, "no data files", True)
            return
        k = next((i for i, v in enumerate(views) if v.offset <= self.start_pos < v.offset + v.size),
                 None)
        if k is None:
            self.stop = Stop(self.start_pos, "start position is in no data file", False)
            return
        pos = self.start_pos
        prev_chain, prev_index, prev_term = self.prev_chain, self.prev_index, self.prev_term
        while True:
            view = views[k]
            rel = pos - view.offset
            last = k == len(views) - 1
            room = view.size - rel
            hdr = bytes(view.buf[rel:rel + HEADER_SIZE])
            if room < BLANK_SIZE or (hdr[:4] == BLANK_MAGIC and self._blank(view, rel, room)):
                if room >= BLANK_SIZE:
                    pos = view.offset + view.size
                    self.end_pos = pos
                if last:
                    self.stop = Stop(pos, "end of the last data file", True)
                    return
                if views[k + 1].offset != view.offset + view.size:
                    self.stop = Stop(pos, f"data file starting at {view.offset + view.size} is missing",
                                     False)
                    return
                k += 1
                pos = views[k].offset
                continue
            if hdr.count(0) == len(hdr):
                self.stop = Stop(pos, "zeros: end of written data", last)
                return
            if len(hdr) < HEADER_SIZE:
                self.stop = Stop(pos, f"file cut short: {len(view.buf)} of {view.size} bytes"
                                 if len(view.buf) < view.size else "a partial header ends the file",
                                 False)
                return
            magic, size, index, term, epos, channel, chain, bcrc, blen = HEADER.unpack(hdr)
            problem = None
            if magic not in ENTRY_MAGICS:
                problem = f"bad magic {magic}"
            elif size != HEADER_SIZE + blen or blen < 0:
                problem = f"size {size} does not match body length {blen}"
            elif size > room:
                problem = f"size {size} overruns the file ({room} bytes left)"
            elif epos != pos:
                problem = f"pos field {epos} is not the entry's position"
            elif prev_index is not None and index != prev_index + 1:
                problem = f"index {index} does not follow {prev_index}"
            elif term < prev_term:
                problem = f"term {term} is below the previous term {prev_term}"
            elif len(view.buf) < rel + size:
                problem = f"file cut short: {len(view.buf)} of {view.size} bytes"
            if problem is not None:
                self.stop = Stop(pos, f"at pos {pos}: {problem}", False)
                return
            body = bytes(view.buf[rel + HEADER_SIZE:rel + size])
            chain_ok = prev_chain is None or chain_crc(hdr, prev_chain) == chain
            yield StoredEntry(index, term, pos, size, magic, channel, body,
                              zlib.crc32(body) == bcrc, chain_ok, chain)
            prev_chain, prev_index, prev_term = chain, index, term
            pos += size
            self.end_pos = pos

    @staticmethod
    def _blank(view: SegmentView, rel: int, room: int) -> bool:
        """Whether a blank record that fills the rest of the file starts at `rel`."""
        if len(view.buf) < rel + BLANK_SIZE:
            return False
        magic, length = BLANK.unpack_from(view.buf, rel)
        return magic == MAGIC_BLANK and length == room
