"""A simulated node's disk: the real mmap store and term file on a simulated filesystem.

The node's persistence code is the server's own: `MmapStore` (with its recovery) and the
term/checkpoint files of `nodes.store.termfile`, written through `nodes.driver`; only
the filesystem underneath is simulated (`nodes.sim.simfs`), so a power loss loses,
reorders or tears what was not fsynced, as a real page cache can, and the store's
recovery has to cope. Segment sizes are small and drawn per run, so writes cross files.

The disk's size is drawn per run too (`disk_capacity`): in some runs it is small enough
for the log to fill it. The store applies DLedger's retention check on every tick
(`check_space`): above 90 % it flags the disk full and the driver refuses client appends
with DISK_FULL, which keeps the disk from filling up (a write past the capacity raises
`NoSpace`, which the simulator reports). Files never expire within a run (DLedger keeps
them 72 h) and force clean is off (DLedger's `enableDiskForceClean`): no log is cut from
the front, which replication could not repair (a follower behind the leader's first
entry would never catch up), so a full disk stays full.

Beside the store the disk keeps `log`, what the store holds as the simulator last saw it
(kept up to date from the writes the driver carried out, and read back from the store
after a restart), and `changed_from`, the lowest index changed since the invariants last
looked, so log matching is checked on every change from there on only. `durable_end()`
says how much of `log` a power loss would keep (the master-slave checks need it), and
`wipe()` loses the whole disk (master-slave failover, as the harness's lose-node).

Every restart checks the store's contract (as tests/store does for the store alone): the log
recovered is a prefix of a log the store held since it was last opened, and it keeps every
entry the store had made durable. A store that breaks it raises `Violation("store contract")`,
whether or not a consensus invariant would ever see the difference.
"""

from __future__ import annotations

import math
import random
import sys
from pathlib import Path

from nodes.logview import Append, StoreWrite
from nodes.sim.invariants import Violation
from nodes.sim.simfs import LossMode, SimFileSystem
from nodes.store.entrycodec import HEADER_SIZE, INDEX_SIZE
from nodes.store.logstore import Entry
from nodes.store.mmapstore import MmapStore
from nodes.store.retention import RetentionPolicy
from nodes.store.termfile import TermState, load_checkpoint, load_term

UNCHANGED = sys.maxsize
DIRECTORY = Path("/data")
ROOMY = 1 << 30  # bytes: a disk no run fills
RETENTION = RetentionPolicy(reserved_s=math.inf, force_clean=False, check_interval_s=None)
BURST = 6  # client appends a leader may take between two checks (the most seen in 150 seeds)


def disk_capacity(seed: int, small_share: float, data_segment_size: int, index_segment_size: int,
                  body_bytes: int) -> int:
    """The size of every disk of run `seed`: small in `small_share` of the runs, else ROOMY.

    A small disk keeps, above the disk-full ratio, 1-2 times room for what a node may write
    between two checks: a new data and index file, and a BURST of entries of `body_bytes`
    (each with its share of the files it fills), as a real disk's headroom dwarfs what one
    check interval writes. Drawn from a generator of its own, so that the run's other draws
    stay as they were."""
    rng = random.Random(f"disk-{seed}")
    if rng.random() >= small_share:
        return ROOMY
    per_file = data_segment_size // (HEADER_SIZE + body_bytes)
    entry = data_segment_size / per_file + INDEX_SIZE
    room = data_segment_size + index_segment_size + BURST * entry
    return int(rng.uniform(1.0, 2.0) * room / (1 - RETENTION.disk_full_ratio))


class SimDisk:
    """One node's simulated filesystem, its store while the node runs, and the log it holds."""

    def __init__(self, data_segment_size: int, index_segment_size: int, capacity: int = ROOMY) -> None:
        self.fs = SimFileSystem(capacity)
        self.retention = RETENTION if capacity < ROOMY else None  # a roomy disk needs no check
        self._checked = -1  # the disk's use at the last check
        self.data_segment_size = data_segment_size
        self.index_segment_size = index_segment_size
        self.store: MmapStore | None = None
        self.log: list[Entry] = []
        self.changed_from = UNCHANGED
        self._durable_down = -1  # while the node is down: its store's durable end when it stopped
        # every log held since the last open, as a trie: (id of the log before an entry, the entry)
        # -> id of the log through it; `_ids[i]` is the id of `log[:i + 1]`
        self._held: dict[tuple[int, Entry], int] = {}
        self._ids: list[int] = []

    def open(self) -> tuple[MmapStore, TermState]:
        """Start the node's persistence: recover the store, read term and vote."""
        fs = self.fs
        store = self.store = MmapStore(
            DIRECTORY,
            data_segment_size=self.data_segment_size,
            index_segment_size=self.index_segment_size,
            flush_interval_ms=None,
            retention=self.retention,
            stable_index=load_checkpoint(DIRECTORY, fs=fs),
            fs=fs,
        )
        recovered = store.get_range(0, store.end_index) if store.end_index >= 0 else []
        self._check_contract(recovered)
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
                self._hold(write.entries)
            else:
                del log[write.after + 1 :]
                del self._ids[write.after + 1 :]

    def _hold(self, entries: list[Entry]) -> None:
        """`entries` follow the log: remember the logs they make."""
        held, ids = self._held, self._ids
        last = ids[-1] if ids else 0
        for entry in entries:
            last = held.setdefault((last, entry), len(held) + 1)
            ids.append(last)

    def _check_contract(self, recovered: list[Entry]) -> None:
        """Violation unless `recovered` keeps the durable entries and is a prefix of a held log;
        then the logs held start again from it."""
        durable = self._durable_down + 1
        if recovered[:durable] != self.log[:durable]:
            raise Violation("store contract", f"recovery kept {len(recovered)} entries, not the {durable} "
                            f"it had made durable as they were (log end {len(self.log) - 1})")
        last = 0
        for entry in recovered:
            found = self._held.get((last, entry))
            if found is None:
                raise Violation("store contract", f"recovery kept {entry} after entries no log the store "
                                f"held had before it")
            last = found
        self._held, self._ids = {}, []
        self._hold(recovered)

    def check_space(self, now_ms: float) -> None:
        """The store's retention check (the server's store runs it every `check_interval_s`,
        the simulator on every tick), skipped while the disk's use is what it last checked:
        as nothing expires within a run, the check would find what it found then."""
        if self.retention is None or self.store is None:
            return
        used = self.fs.used()
        if used != self._checked:
            self._checked = used
            removed = self.store.clean(now_ms / 1000)
            assert not removed, f"retention deleted {removed}: `log` assumes that it never does"

    def dirty(self) -> bool:
        """The store holds entries that are not durable yet."""
        store = self.store
        return store is not None and store.flushed_index < store.end_index

    def durable_end(self) -> int:
        """The last index of `log` the node holds durably (fsynced: a power loss keeps it)."""
        store = self.store
        return store.flushed_index if store is not None else self._durable_down

    def wipe(self) -> None:
        """The disk is lost, with everything on it (the node is down): it comes back empty."""
        self.fs = SimFileSystem(self.fs.capacity)
        self.log = []
        self._held, self._ids = {}, []
        self._durable_down = -1
        self._checked = -1

    def crash(self, power_loss: bool, rng: random.Random, mode: LossMode) -> None:
        """The process dies; on a power loss the page cache is lost too (`mode`)."""
        if self.store is not None:
            self._durable_down = self.store.flushed_index
        self.store = None
        if power_loss:
            self.fs.power_loss(rng, mode)
        else:
            self.fs.crash()
