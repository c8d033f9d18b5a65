"""A node's simulated disk: its log store, its fsynced term/vote file, and when flushes happen.

`sync` flush is a group commit: once entries are written, one fsync is issued and
completes `fsync_ms` later, covering everything written by then. `async` is DLedger's:
the log is forced every `async_interval_ms` in the background and acks do not wait.
The term and vote are fsynced before any message that depends on them (we do; DLedger
does not), so they always survive.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from nodes.memstore import MemStore


@dataclass(slots=True)
class SimDisk:
    """What survives a node's crash: the store (minus unflushed writes on power loss) and term/vote."""

    store: MemStore = field(default_factory=MemStore)
    term: int = 0
    vote: str | None = None
    flush_pending: bool = False

    def persist(self, term: int, vote: str | None) -> None:
        self.term, self.vote = term, vote

    def dirty(self) -> bool:
        return self.store.flushed_index < self.store.end_index

    def power_loss(self) -> None:
        self.store.power_loss()
