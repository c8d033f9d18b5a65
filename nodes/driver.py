"""The one driver between a node's logic and IO, shared by the asyncio server and the simulator.

The logic ("the core" below) is any `NodeLogic` (`nodes.logic`): the DLedger consensus
core or the master-slave logic (`nodes.ha.node`). `Driver.drive()` takes the core's
`Ready` and carries it out in the order the core needs (`nodes.core`): persist term and
vote (the real term-file code, fsynced), write and truncate the store (never waiting for
an fsync), record the store's commit index, send the messages, complete the clients,
report role and commit changes. It also runs the flushes when it is the store's flusher
(`Flusher.GROUP_COMMIT`, `nodes.logic`): one group-commit flush whenever the store holds
entries that are not durable and no flush is running (the host runs `store.flush()` where
it likes, a thread or a simulated disk, then calls `flushed(now)`); with
`Flusher.STORE_THREAD` (DLedger's async flush) the store flushes itself in the background.
And it decides what a full disk means: a client append is refused with DISK_FULL while the
store says so.

The host (server or simulator) supplies the transport and the clients through `Host`.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Protocol

from nodes.coverage import hit
from nodes.logic import NOTHING, Flusher, NodeLogic, Ready
from nodes.logview import Append, StoreWrite
from nodes.messages import AppendResponse, ClientResponse, PeerMessage, ResponseCode
from nodes.store.fs import REAL_FS, FileSystem
from nodes.store.logstore import LogStore
from nodes.store.termfile import TermState, save_checkpoint, save_term

log = logging.getLogger(__name__)

CHECKPOINT_EVERY_MS = 1000.0


class Host(Protocol):
    """What a driver needs from the process around it."""

    def send(self, peer: str, message: PeerMessage) -> None:
        """Send `message` to `peer` (fire and forget)."""

    def complete(self, token: int, response: ClientResponse) -> None:
        """Answer the client request the core knows as `token`."""

    def start_flush(self) -> None:
        """Run `store.flush()` now or later, off the caller's path, then call `Driver.flushed`."""

    def applied(self, ready: Ready) -> None:
        """The ready's term and store writes were carried out (role changes, commit index,
        writes: for logs and checks); its messages and answers go out next."""


def apply_writes(store: LogStore, writes: Sequence[StoreWrite]) -> None:
    """Carry out a core's store writes in order (a StoreError here is an IO failure: fatal)."""
    for write in writes:
        if isinstance(write, Append):
            store.append(write.entries)
        else:
            store.truncate_after(write.after)


class Driver:
    """Carries out one core's outputs on its store, its term file and its host."""

    def __init__(
        self,
        core: NodeLogic,
        store: LogStore,
        data_dir: Path,
        persisted: TermState,
        flusher: Flusher,
        host: Host,
        fs: FileSystem = REAL_FS,
    ) -> None:
        self.core = core
        self.store = store
        self.data_dir = data_dir
        self.fs = fs
        self.host = host
        self._group_commit = flusher is Flusher.GROUP_COMMIT
        self._persisted = persisted
        self._checkpointed = store.stable_index
        self.flushing = False
        self._next_checkpoint = 0.0

    def append_refusal(self) -> ResponseCode | None:
        """DISK_FULL while the store reports its disk above the disk-full ratio, else None."""
        if not self.store.disk_full:
            return None
        hit("disk-full")
        return ResponseCode.DISK_FULL

    def client_append(self, token: int, bodies: Sequence[bytes], now: float) -> None:
        """A client's append: refused at once (`append_refusal`), else handed to the core."""
        refusal = self.append_refusal()
        if refusal is None:
            self.core.client_append(token, bodies, now)
            return
        core = self.core
        self.host.complete(token, AppendResponse(refusal, core.term, -1, -1, core.leader))

    def drive(self) -> Ready:
        """Take the core's outputs and carry them out; return them."""
        ready = self.core.ready()
        if ready is not NOTHING and ready:  # NOTHING: the shared empty batch
            self._carry_out(ready)
        store = self.store
        if self._group_commit and not self.flushing and store.flushed_index < store.end_index:
            self.flushing = True
            self.host.start_flush()
        return ready

    def _carry_out(self, ready: Ready) -> None:
        if ready.persist is not None:
            state = TermState(*ready.persist)
            if state != self._persisted:
                save_term(self.data_dir, state, fs=self.fs)
                self._persisted = state
        store = self.store
        if ready.writes:
            apply_writes(store, ready.writes)
        if ready.store_commit is not None:
            store.set_committed(ready.store_commit)
        host = self.host
        host.applied(ready)
        for peer, message in ready.messages:
            host.send(peer, message)
        for token, response in ready.completions:
            host.complete(token, response)

    def flushed(self, now: float) -> None:
        """The flush the host ran for us is over: release what waited for it, drive again."""
        self.flushing = False
        self.core.store_progress(now)
        self.drive()

    def flush_failed(self, exc: BaseException) -> None:
        """The host's flush raised: log it; the next drive tries again."""
        log.error("flush failed: %s", exc)
        self.flushing = False

    def tick(self, now: float) -> None:
        """Time passed: write the checkpoint at most once every CHECKPOINT_EVERY_MS."""
        if now >= self._next_checkpoint:
            self._next_checkpoint = now + CHECKPOINT_EVERY_MS
            self.checkpoint()

    def checkpoint(self) -> None:
        """Write DLedger's `checkpoint` file when the store's stable index (committed and
        durable) moved: recovery walks from it and notices (or refuses) a log that lost it."""
        stable = self.store.stable_index
        if stable != self._checkpointed:
            save_checkpoint(self.data_dir, stable, fs=self.fs)
            self._checkpointed = stable
