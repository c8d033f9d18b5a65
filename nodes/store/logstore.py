"""The log store interface that the consensus core, the server and the simulator share.

Two implementations: the mmap file store (DLedger's on-disk layout) and an in-memory
store used by the deterministic simulator. Log indexes start at 0; an empty log has
`end_index == -1` and `end_term == -1`, as in DLedger.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Protocol

MAGIC_NORMAL = 1
MAGIC_NOOP = 2


@dataclass(frozen=True, slots=True)
class Entry:
    """One log entry: what the leader assigned (index, term) and the client's body."""

    index: int
    term: int
    body: bytes
    magic: int = MAGIC_NORMAL
    channel: int = 0

    @property
    def is_noop(self) -> bool:
        return self.magic == MAGIC_NOOP


class StoreError(Exception):
    """A store operation that cannot be done (non-consecutive append, missing index ...)."""



class EntryTooLargeError(StoreError):
    """An entry body larger than the store can hold (nothing was appended)."""


def check_continues(entries: Iterable[Entry], next_index: int, last_term: int) -> None:
    """StoreError unless `entries` continue a log at `next_index`, terms non-decreasing."""
    for e in entries:
        if e.index != next_index or e.term < last_term:
            raise StoreError(
                f"append of index {e.index} term {e.term} does not continue "
                f"the log (next index {next_index}, last term {last_term})"
            )
        next_index, last_term = next_index + 1, e.term


def within_bytes(entries: Iterable[Entry], max_bytes: int | None) -> list[Entry]:
    """`entries` from the first on while their bodies add up to at most `max_bytes` (the
    first always); all of them when `max_bytes` is None. Stops reading at the first left out."""
    if max_bytes is None:
        return entries if isinstance(entries, list) else list(entries)
    out: list[Entry] = []
    total = 0
    for entry in entries:
        total += len(entry.body)
        if total > max_bytes and out:
            break
        out.append(entry)
    return out


class LogStore(Protocol):
    """A commit log: append, read, truncate, commit bookkeeping and durability."""

    @property
    def begin_index(self) -> int:
        """First index still stored (-1 when empty)."""
        ...

    @property
    def end_index(self) -> int:
        """Last index stored (-1 when empty)."""
        ...

    @property
    def end_term(self) -> int:
        """Term of the last entry (-1 when empty)."""
        ...

    @property
    def committed_index(self) -> int:
        """Highest index known committed (-1 when none)."""
        ...

    @property
    def flushed_index(self) -> int:
        """Highest index whose bytes are durable on disk."""
        ...

    @property
    def stable_index(self) -> int:
        """Highest index both committed and durable (what the checkpoint records)."""
        ...

    @property
    def disk_full(self) -> bool:
        """Whether leader appends must be refused for want of space (DLedger's DISK_FULL)."""
        ...

    def append_leader(self, term: int, body: bytes, magic: int = MAGIC_NORMAL) -> Entry:
        """Append as leader: the store assigns index `end_index + 1`."""
        ...

    def append_many(self, term: int, bodies: Sequence[bytes], magic: int = MAGIC_NORMAL) -> range:
        """Append `bodies` as leader at consecutive indexes (all or none); return the indexes."""
        ...

    def append(self, entries: Sequence[Entry]) -> None:
        """Append as follower: entries must continue the log consecutively, terms non-decreasing."""
        ...

    def get(self, index: int) -> Entry:
        """The entry at `index`; StoreError if it is not stored."""
        ...

    def get_range(self, first: int, last: int, max_bytes: int | None = None) -> list[Entry]:
        """Entries `first..last` inclusive, clipped to what is stored and cut as `within_bytes`
        does to bodies of at most `max_bytes` (the first entry always)."""
        ...

    def term_at(self, index: int) -> int:
        """Term of the entry at `index`; -1 for index -1; StoreError if not stored."""
        ...

    def truncate_after(self, index: int) -> None:
        """Drop every entry after `index` (never below the committed index)."""
        ...

    def set_committed(self, index: int) -> None:
        """Record the committed index (it never goes backwards)."""
        ...

    def flush(self) -> int:
        """Make everything appended durable; return the flushed index."""
        ...

    def close(self) -> None:
        """Flush and release files."""
        ...
