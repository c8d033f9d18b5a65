"""A simulated node's disk: the real mmap store and term file on a simulated filesystem.

The node's persistence code is the server's own: `MmapStore` (with its recovery) and the
term/checkpoint files of `nodes.store.termfile`, written through `nodes.driver`; only
the filesystem underneath is simulated (`nodes.sim.simfs`), so a power loss loses,
reorders or tears what was not fsynced, as a real page cache can, and the store's
recovery has to cope. Segment sizes are small and drawn per run, so writes cross files.

Beside the store the disk keeps `log`, what the store holds as the simulator last saw it
(kept up to date from the writes the driver carried out, and read back from the store
after a restart), and `changed_from`, the lowest index changed since the invariants last
looked, so log matching is checked on every change from there on only.
"""

from __future__ import annotations

import random
import sys
from pathlib import Path

from nodes.logview import Append, StoreWrite
from nodes.sim.simfs import LossMode, SimFileSystem
from nodes.store.logstore import Entry
from nodes.store.mmapstore import MmapStore
from nodes.store.termfile import TermState, load_checkpoint, load_term

UNCHANGED = sys.maxsize
DIRECTORY = Path("/data")


class SimDisk:
    """One node's simulated filesystem, its store while the node runs, and the log it holds."""

    def __init__(self, data_segment_size: int, index_segment_size: int) -> None:
        self.fs = SimFileSystem()
        self.data_segment_size = data_segment_size
        self.index_segment_size = index_segment_size
        self.store: MmapStore | None = None
        self.log: list[Entry] = []
        self.changed_from = UNCHANGED

    def open(self) -> tuple[MmapStore, TermState]:
        """Start the node's persistence: recover the store, read term and vote."""
        fs = self.fs
        store = self.store = MmapStore(
            DIRECTORY,
            data_segment_size=self.data_segment_size,
            index_segment_size=self.index_segment_size,
            flush_interval_ms=None,
            stable_index=load_checkpoint(DIRECTORY, fs=fs),
            fs=fs,
        )
        recovered = store.get_range(0, store.end_index) if store.end_index >= 0 else []
        old = self.log
        same = next((i for i, (a, b) in enumerate(zip(old, recovered, strict=False)) if a != b),
                    min(len(old), len(recovered)))
        if same < len(old) or same < len(recovered):
            self.changed_from = min(self.changed_from, same)
        self.log = recovered
        return store, load_term(DIRECTORY, fs=fs)

    def applied(self, writes: list[StoreWrite]) -> None:
        """The driver carried out `writes` on the store: follow them in `log`."""
        log = self.log
        for write in writes:
            if isinstance(write, Append):
                self.changed_from = min(self.changed_from, len(log))
                log.extend(write.entries)
            else:
                del log[write.after + 1 :]

    def dirty(self) -> bool:
        """The store holds entries that are not durable yet."""
        store = self.store
        return store is not None and store.flushed_index < store.end_index

    def crash(self, power_loss: bool, rng: random.Random, mode: LossMode) -> None:
        """The process dies; on a power loss the page cache is lost too (`mode`)."""
        self.store = None
        if power_loss:
            self.fs.power_loss(rng, mode)
        else:
            self.fs.crash()
