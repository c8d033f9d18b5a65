"""The consensus core's view of its log: the store read-only, plus the writes not yet carried out.

The core never writes its store. When it decides to append or truncate, the `LogView`
records the write (an `Append` or a `Truncate`, in order) and shows it at once to the
core's own reads, the way etcd's raft keeps its "unstable" entries. The driver takes the
writes with `take_writes()` (the core puts them in its `Ready`) and carries them out on
the store before it feeds the core anything else; from then on the store itself shows them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from nodes.store.logstore import MAGIC_NORMAL, Entry, StoreError, check_continues, within_bytes


class ReadableLog(Protocol):
    """The read side of a `LogStore`: all the core needs of its store."""

    @property
    def begin_index(self) -> int: ...

    @property
    def end_index(self) -> int: ...

    @property
    def end_term(self) -> int: ...

    @property
    def committed_index(self) -> int: ...

    @property
    def flushed_index(self) -> int: ...

    def get(self, index: int) -> Entry: ...

    def get_range(self, first: int, last: int, max_bytes: int | None = None) -> list[Entry]: ...

    def term_at(self, index: int) -> int: ...


@dataclass(frozen=True, slots=True)
class Append:
    """Append `entries` (consecutive, continuing the log as it is after the writes before)."""

    entries: list[Entry]


@dataclass(frozen=True, slots=True)
class Truncate:
    """Drop every entry after index `after`."""

    after: int


StoreWrite = Append | Truncate


class LogView:
    """The store as it will be once the recorded writes are carried out.

    Invariant: the view is the store's entries up to `_cut` followed by `_unstable`
    (which starts at `_cut + 1`); `_cut` is None while nothing was truncated or appended.
    """

    __slots__ = ("_cut", "_store", "_unstable", "_writes")

    def __init__(self, store: ReadableLog) -> None:
        self._store = store
        self._writes: list[StoreWrite] = []
        self._cut: int | None = None
        self._unstable: list[Entry] = []

    # -- writes ----------------------------------------------------------------------------

    def take_writes(self) -> list[StoreWrite]:
        """The writes recorded since the last call, in order; the driver must carry them out
        before the core gets another input."""
        writes = self._writes
        if not writes:
            return []
        self._writes, self._cut, self._unstable = [], None, []
        return writes

    def append_leader(self, term: int, body: bytes, magic: int = MAGIC_NORMAL) -> Entry:
        """Append one entry as leader at `end_index + 1`."""
        return self.get(self.append_many(term, [body], magic).start)

    def append_many(self, term: int, bodies: Sequence[bytes], magic: int = MAGIC_NORMAL) -> range:
        """Append `bodies` as leader at consecutive indexes; return the indexes."""
        if term < self.end_term:
            raise StoreError(f"leader append in term {term} after an entry of term {self.end_term}")
        first = self.end_index + 1
        self._add([Entry(i, term, body, magic) for i, body in enumerate(bodies, first)])
        return range(first, first + len(bodies))

    def append(self, entries: Sequence[Entry]) -> None:
        """Append as follower: `entries` must continue the log, terms non-decreasing."""
        check_continues(entries, self.end_index + 1, self.end_term)
        self._add(list(entries))

    def _add(self, entries: list[Entry]) -> None:
        if not entries:
            return
        if self._cut is None:
            self._cut = self._store.end_index
        self._unstable.extend(entries)
        last = self._writes[-1] if self._writes else None
        if isinstance(last, Append):
            last.entries.extend(entries)
        else:
            self._writes.append(Append(list(entries)))

    def truncate_after(self, index: int) -> None:
        """Drop every entry after `index`."""
        if index >= self.end_index:
            return
        committed = self._store.committed_index
        if index < committed:
            raise StoreError(f"truncate after {index} would drop committed entries (committed {committed})")
        cut = self._store.end_index if self._cut is None else self._cut
        if index >= cut:
            del self._unstable[index - cut :]
        else:
            self._cut, self._unstable = index, []
        self._writes.append(Truncate(index))

    # -- reads -----------------------------------------------------------------------------

    @property
    def begin_index(self) -> int:
        begin = self._store.begin_index
        return begin if begin >= 0 or self.end_index < 0 else 0

    @property
    def end_index(self) -> int:
        if self._cut is None:
            return self._store.end_index
        return self._cut + len(self._unstable)

    @property
    def end_term(self) -> int:
        if self._unstable:
            return self._unstable[-1].term
        if self._cut is None:
            return self._store.end_term
        return self._store.term_at(self._cut)

    @property
    def committed_index(self) -> int:
        return self._store.committed_index

    @property
    def flushed_index(self) -> int:
        """What the store has made durable, never past a truncation point not yet carried out."""
        flushed = self._store.flushed_index
        return flushed if self._cut is None else min(flushed, self._cut)

    def get(self, index: int) -> Entry:
        cut = self._cut
        if cut is None or index <= cut:
            return self._store.get(index)
        if index > self.end_index:
            raise StoreError(f"index {index} is not stored (log ends at {self.end_index})")
        return self._unstable[index - cut - 1]

    def get_range(self, first: int, last: int, max_bytes: int | None = None) -> list[Entry]:
        cut = self._cut
        if cut is None or last <= cut:
            return self._store.get_range(first, last, max_bytes)
        head = self._store.get_range(first, cut, max_bytes) if first <= cut else []
        if max_bytes is not None and head and head[-1].index < cut:
            return head  # the byte limit already cut the stored part
        tail = self._unstable[max(first, cut + 1) - cut - 1 : last - cut]
        if max_bytes is None:
            return head + tail
        if not head:
            return within_bytes(tail, max_bytes)
        room = max_bytes - sum(len(e.body) for e in head)
        for n, e in enumerate(tail):
            room -= len(e.body)
            if room < 0:
                return head + tail[:n]
        return head + tail


    def term_at(self, index: int) -> int:
        if index == -1:
            return -1
        return self.get(index).term
