"""An in-memory `LogStore` with a flushed watermark, for the simulator and tests.

What was flushed survives `power_loss()`; what was appended or truncated since does not
(a truncation not yet flushed comes back, as it would from a real disk). A process crash
without power loss keeps everything (the page cache survives), so it needs no call here.
The committed index is kept as DLedger's checkpoint file would be.
"""

from __future__ import annotations

from collections.abc import Sequence

from nodes.store.logstore import MAGIC_NORMAL, Entry, StoreError, check_continues, within_bytes


class MemStore:
    """A list of entries plus the durable copy a power loss falls back to."""

    def __init__(self) -> None:
        self._log: list[Entry] = []
        self._durable: list[Entry] = []
        self._dirty_from = 0  # lowest index changed since the last flush
        self._flushed = -1
        self._committed = -1

    @property
    def begin_index(self) -> int:
        return 0 if self._log else -1

    @property
    def end_index(self) -> int:
        return len(self._log) - 1

    @property
    def end_term(self) -> int:
        return self._log[-1].term if self._log else -1

    @property
    def committed_index(self) -> int:
        return self._committed

    @property
    def flushed_index(self) -> int:
        return self._flushed

    @property
    def stable_index(self) -> int:
        return min(self._committed, self._flushed)

    @property
    def disk_full(self) -> bool:
        return False

    def append_leader(self, term: int, body: bytes, magic: int = MAGIC_NORMAL) -> Entry:
        if term < self.end_term:
            raise StoreError(f"leader append in term {term} after an entry of term {self.end_term}")
        entry = Entry(len(self._log), term, body, magic)
        self._log.append(entry)
        return entry

    def append_many(self, term: int, bodies: Sequence[bytes], magic: int = MAGIC_NORMAL) -> range:
        if term < self.end_term:
            raise StoreError(f"leader append in term {term} after an entry of term {self.end_term}")
        first = len(self._log)
        self._log.extend(Entry(i, term, body, magic) for i, body in enumerate(bodies, first))
        return range(first, len(self._log))

    def append(self, entries: Sequence[Entry]) -> None:
        check_continues(entries, len(self._log), self.end_term)
        self._log.extend(entries)

    def get(self, index: int) -> Entry:
        if not 0 <= index < len(self._log):
            raise StoreError(f"index {index} is not stored (log ends at {self.end_index})")
        return self._log[index]

    def get_range(self, first: int, last: int, max_bytes: int | None = None) -> list[Entry]:
        return within_bytes(self._log[max(first, 0) : last + 1], max_bytes)

    def term_at(self, index: int) -> int:
        if index == -1:
            return -1
        return self.get(index).term

    def truncate_after(self, index: int) -> None:
        if index < self._committed:
            raise StoreError(
                f"truncate after {index} would drop committed entries (committed {self._committed})"
            )
        del self._log[index + 1 :]
        self._dirty_from = min(self._dirty_from, index + 1)
        self._flushed = min(self._flushed, index)

    def set_committed(self, index: int) -> None:
        self._committed = max(self._committed, index)

    def flush(self) -> int:
        start = self._dirty_from
        del self._durable[start:]
        self._durable.extend(self._log[start:])
        self._dirty_from = len(self._log)
        self._flushed = len(self._log) - 1
        return self._flushed

    def close(self) -> None:
        self.flush()

    def power_loss(self) -> None:
        """Lose everything not flushed: the log becomes the durable copy."""
        self._log = list(self._durable)
        self._dirty_from = len(self._log)
        self._flushed = len(self._log) - 1

    @property
    def entries(self) -> list[Entry]:
        """The whole log (for invariant checks; do not modify)."""
        return self._log
