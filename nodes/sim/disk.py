"""A node's simulated disk: its log store, its fsynced term/vote file, and when flushes happen.

`sync` flush is a group commit: once entries are written, one fsync is issued and
completes `fsync_ms` later, covering everything written by then. `async` is DLedger's:
the log is forced every `async_interval_ms` in the background and acks do not wait.
The term and vote are fsynced before any message that depends on them (we do; DLedger
does not), so they always survive. The store also remembers the lowest index it wrote (or
a power loss restored) since the simulator last checked it, so that log matching is
checked on every change from there on only.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from dataclasses import dataclass, field

from nodes.store.logstore import MAGIC_NORMAL, Entry
from nodes.store.memstore import MemStore

UNCHANGED = sys.maxsize


class TrackedStore(MemStore):
    """A `MemStore` that remembers where its log last changed.

    `changed_from` is the lowest index written (or restored by a power loss) since the
    simulator last checked the log and set it back to `UNCHANGED`.
    """

    def __init__(self) -> None:
        super().__init__()
        self.changed_from = 0

    def append_leader(self, term: int, body: bytes, magic: int = MAGIC_NORMAL) -> Entry:
        self.changed_from = min(self.changed_from, len(self.entries))
        return super().append_leader(term, body, magic)

    def append_many(self, term: int, bodies: Sequence[bytes], magic: int = MAGIC_NORMAL) -> range:
        self.changed_from = min(self.changed_from, len(self.entries))
        return super().append_many(term, bodies, magic)

    def append(self, entries: Sequence[Entry]) -> None:
        self.changed_from = min(self.changed_from, len(self.entries))
        super().append(entries)

    def power_loss(self) -> None:
        """Lose what was not flushed: what follows the flushed index may come back different."""
        self.changed_from = min(self.changed_from, self.flushed_index + 1)
        super().power_loss()


@dataclass(slots=True)
class SimDisk:
    """What survives a node's crash: the store (minus unflushed writes on power loss) and term/vote."""

    store: TrackedStore = field(default_factory=TrackedStore)
    term: int = 0
    vote: str | None = None
    flush_pending: bool = False

    def persist(self, term: int, vote: str | None) -> None:
        self.term, self.vote = term, vote

    def dirty(self) -> bool:
        return self.store.flushed_index < self.store.end_index

    def power_loss(self) -> None:
        self.store.power_loss()
