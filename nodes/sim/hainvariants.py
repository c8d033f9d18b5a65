"""RocketMQ's master-slave guarantees (`nodes.ha.node`), checked as a master-slave simulation
runs (`nodes.sim.hamode`).

A *master* here is a node taking writes (role leader) in an epoch. A master *acknowledges*
an index when an append there gets SUCCESS, or when its commit index passes the index (its
reads see up to there). "Durably" means fsynced: a power loss keeps it (`SimDisk.durable_end`).

* epochs: no two nodes master the same epoch, and a node masters an epoch at most once
  (checked by the simulator as DLedger's election safety, `Invariants.on_election`: an
  epoch's master is its "leader"); an entry carries its master's epoch, so log matching
  (`nodes.sim.invariants`) holds across all logs in both flavours: logs with an entry of one
  epoch at an index agree on everything up to it.
* replicated when acknowledged: a SYNC_MASTER acknowledges an index only when it holds the
  entries there (durably, with sync flush) and some other node holds the same entries up to
  that index durably, so a power loss of any one node keeps them. An ASYNC_MASTER needs
  only its own copy (durable with sync flush). An append's SUCCESS names the index where its
  body is, in the master's epoch.
* an acknowledged index never holds another entry on the master that serves it: while a
  node masters an epoch, its log does not change at or below its commit index.
* survival (SYNC_MASTER): an acknowledged entry stays at its index in the log of every later
  master, and after healing in every node's log, unless it was lost where RocketMQ promises
  nothing: a failover promoted a slave without it while no live slave that could have been
  promoted held it durably, or while the live slaves' durable logs were not each a prefix of
  the next longer (a slave not repaired yet after an earlier fault: the operator promotes by
  offset, not by content); or, with async flush, the master lost power before it fsynced it.
  An index acknowledged again after such a loss takes the new entry; any other change of an
  acknowledged index is a violation. An ASYNC_MASTER promises no survival.
* durable reads: a node that is not a master (a slave, or a master not taking writes yet)
  reports (its commit index) and serves only what it holds durably. A read (every mode but
  `unsafe`) answers with the serving node's own entries from the asked index on, none past
  the commit index it reports; on a master, entries up to its commit index when it took
  over (as `nodes.ha.node` says, a master keeps serving what it served before it took
  writes: what it held durably, or, an ASYNC_MASTER with async flush, what it wrote) and,
  beyond them, only acknowledged ones (replicated as above).
"""

from __future__ import annotations

from nodes.logic import Ack
from nodes.messages import AppendResponse, ReadMode, ReadResponse
from nodes.sim.disk import SimDisk
from nodes.sim.invariants import Violation
from nodes.store.logstore import Entry

ACKED = "acknowledged append"
LOST = "acknowledged append lost"


class HaInvariants:
    """The record the master-slave properties are checked against (see the module doc)."""

    def __init__(self, disks: dict[str, SimDisk], sync: bool, ack: Ack) -> None:
        self._disks = disks
        self._sync = sync
        self._fsynced = ack is Ack.FSYNCED  # a master acknowledges only what it fsynced
        self._acked: dict[int, Entry] = {}  # SYNC_MASTER: index -> the entry acknowledged there last
        self._excused: set[int] = set()  # acknowledged indexes a failover or power loss may have lost
        self.max_acked = -1
        self._serving: dict[str, int] = {}  # master -> its commit index while it masters its epoch
        self._took_over: dict[str, int] = {}  # master -> its commit index when it took over

    # ---- masters -----------------------------------------------------------------------

    def on_master(self, node: str, epoch: int, commit: int) -> None:
        """`node` masters `epoch` from now on, serving up to `commit`."""
        self._serving[node] = self._took_over[node] = commit
        self._holds_acked(self._disks[node].log, f"{node} masters epoch {epoch}")

    def on_stop(self, node: str) -> None:
        """`node` no longer masters (it stepped down, or it is down)."""
        self._serving.pop(node, None)
        self._took_over.pop(node, None)

    def on_changed(self, node: str, start: int) -> None:
        """`node`'s log changed from `start` on."""
        served = self._serving.get(node, -1)
        if start <= served:
            raise Violation("acknowledged entry changed",
                            f"master {node} changed its log from {start} on, having served up to {served}")

    def on_commit(self, node: str, master: bool, old: int, new: int) -> None:
        """`node`'s commit index passed `old` to `new`."""
        if not master:
            durable = self._disks[node].durable_end()
            if new > durable:
                raise Violation("durable reads", f"{node} serves up to {new} but holds only up to {durable} "
                                                 "durably")
            return
        self._replicated(node, old + 1, new, f"{node} commits {old + 1}..{new}")
        self._serving[node] = new
        self._record(node, old + 1, new)

    def on_ack(self, node: str, body: bytes, resp: AppendResponse) -> None:
        """`node` answered an append of `body` with SUCCESS."""
        first, last, log = resp.first_index, resp.last_index, self._disks[node].log
        if not 0 <= first < len(log) or log[first].body != body or log[first].term != resp.term:
            got = log[first] if 0 <= first < len(log) else None
            raise Violation(ACKED, f"{node} acknowledged {body!r} at {first} in epoch {resp.term}; "
                                   f"its log holds {got} there")
        self._replicated(node, first, last, f"{node} acknowledged {first}..{last}")
        self._record(node, first, last)

    def _replicated(self, node: str, first: int, last: int, what: str) -> None:
        """Raise unless `node` holds `first..last` as acknowledging them needs (module doc)."""
        if first > last:
            return
        disk = self._disks[node]
        log = disk.log
        if last >= len(log):
            raise Violation(ACKED, f"{what}, beyond its log end {len(log) - 1}")
        durable = disk.durable_end()
        if self._fsynced and durable < last:
            raise Violation(ACKED, f"{what}, holding only up to {durable} durably")
        if not self._sync:
            return
        mine = log[first:last + 1]
        others = {n: d for n, d in self._disks.items() if n != node}
        if any(d.durable_end() >= last and d.log[first:last + 1] == mine for d in others.values()):
            return
        ends = ", ".join(f"{n} {d.durable_end()}" for n, d in sorted(others.items()))
        raise Violation(ACKED, f"{what}, which no other node holds durably (durable log ends: {ends})")

    def _record(self, node: str, first: int, last: int) -> None:
        self.max_acked = max(self.max_acked, last)
        if not self._sync:  # an ASYNC_MASTER promises no survival: nothing to keep
            return
        log, acked = self._disks[node].log, self._acked
        for i in range(first, last + 1):
            entry, before = log[i], acked.get(i)
            if before is not None and before != entry and i not in self._excused:
                raise Violation(LOST, f"{node} acknowledged {entry} at {i}, where {before} was acknowledged")
            acked[i] = entry
            self._excused.discard(i)

    def _holds_acked(self, log: list[Entry], who: str) -> None:
        for i, entry in self._acked.items():
            if i not in self._excused and (i >= len(log) or log[i] != entry):
                raise Violation(LOST, f"{who} without {entry}, acknowledged at {i}: "
                                      f"it holds {log[i] if i < len(log) else None} there")

    # ---- faults ------------------------------------------------------------------------

    def on_failover(self, promoted: str, candidates: dict[str, int]) -> int:
        """A failover promotes `promoted`, the candidate (live slave -> its commit index, its
        durable offset as it reports it) furthest along; excuse what it loses where RocketMQ
        promises nothing (module doc) and raise on any other loss. How many it loses."""
        disks = self._disks
        held = {n: disks[n].log[:min(c, disks[n].durable_end()) + 1] for n, c in candidates.items()}
        chain = sorted(held.values(), key=len)
        nested = all(chain[k + 1][:len(chain[k])] == chain[k] for k in range(len(chain) - 1))
        log, lost = disks[promoted].log, 0
        for i, entry in self._acked.items():
            if i in self._excused or (i < len(log) and log[i] == entry):
                continue
            holder = next((n for n, h in held.items() if i < len(h) and h[i] == entry), None)
            if holder is not None and nested:
                raise Violation(LOST, f"{promoted} promoted without {entry}, acknowledged at {i}, which "
                                      f"{holder} held durably while every live slave's log was a prefix "
                                      "of the next longer")
            self._excused.add(i)
            lost += 1
        return lost

    def on_power_loss(self, node: str) -> None:
        """The master `node` lost power: with async flush, what it had not fsynced may be gone."""
        if not self._fsynced:
            durable = self._disks[node].durable_end()
            self._excused.update(i for i in self._acked if i > durable)

    # ---- reads and the end -------------------------------------------------------------

    def on_read(self, node: str, master: bool, mode: ReadMode, first: int, resp: ReadResponse) -> None:
        """`node` (a master taking writes or not) answered a read from `first` with SUCCESS."""
        entries = resp.entries
        if mode is ReadMode.UNSAFE or not entries:
            return
        log = self._disks[node].log
        start, top = entries[0].index, entries[-1].index
        if start != max(first, 0) or top > resp.commit_index or entries != log[start:top + 1]:
            raise Violation(f"{mode.label} read",
                            f"{node} answered from {first} at commit {resp.commit_index} with "
                            f"{[(e.index, e.term) for e in entries]}, not its log's entries")
        durable_top = top
        if master:
            took_over = self._took_over[node]
            self._replicated(node, max(start, took_over + 1), top,
                             f"{node} served a {mode.label} read of {start}..{top}")
            durable_top = min(top, took_over) if self._sync or self._fsynced else -1
        durable = self._disks[node].durable_end()
        if durable_top > durable:
            raise Violation("durable reads", f"{node} served a {mode.label} read up to {durable_top}, "
                                             f"holding only up to {durable} durably")

    def at_end(self, logs: dict[str, list[Entry]]) -> None:
        """After healing: every log holds every acknowledged entry not excused (SYNC_MASTER)."""
        for node, log in logs.items():
            self._holds_acked(log, f"{node} ends")
