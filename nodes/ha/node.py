"""RocketMQ's classic master-slave replication as a sans-IO `NodeLogic` (`HaNode`).

One master, slaves that copy its log; no election. The same driver, store, wire and
server run it as run the DLedger core (`nodes.core`), with the same `Ready` outputs
(`nodes.logic`).

Roles (`metadata().broker_role`): SYNC_MASTER, ASYNC_MASTER, SLAVE. `role` maps them to
the events.jsonl spellings: `leader` for the master taking writes, `follower` for a
slave, `candidate` for a master that started and is not yet sure it still is one.

Replication (seed 003; messages in `nodes.messages`). A slave reports (HaReport) the
last index it holds durably, after each batch it flushed and every `report_interval_ms`;
the master checks the report against its epoch map (`nodes.ha.epochs`), tells a slave
whose log diverges where to cut it (HaTruncate), and streams a verified slave entries
from its log end on (HaPush; an empty HaPush, every `heartbeat_ms` to every peer, is the
heartbeat that also tells the peers the master's epoch). See `nodes.ha.master` and
`nodes.ha.slave`. A stream (re)starts with the slave's last entry, which the slave checks
against its own: a push only continues its log after one that overlaps it agreed with it
(the stream is *anchored*), and every restart, truncation or new master unanchors it. A push
sent before the slave's log changed (a power loss that undid a truncation brings back the
entries it cut) may arrive after the change: without the check, the slave would append the
master's entries after ones the master never had (the simulator found it: seed 57 of
master-slave-sync).

What is acknowledged, and what reads see (`commit_index`):

* ASYNC_MASTER: an append succeeds as soon as the master wrote it (with `Ack.FSYNCED`:
  fsynced it). SYNC_MASTER: once the master has it (fsynced with `Ack.FSYNCED`) and some
  slave reported it durable; if no live slave lags the new entries by at most
  `max_slave_lag` it answers SLAVE_NOT_AVAILABLE at once, and FLUSH_SLAVE_TIMEOUT (or
  FLUSH_DISK_TIMEOUT, its own fsync) when `sync_timeout_ms` passes first. As in RocketMQ,
  those three come after the master wrote the entries: they stay in its log and reach
  the slaves, so their outcome is unknown, not failed.
* The master's `commit_index` is the highest index so acknowledged (never lowered): reads
  (`get`, any mode but `unsafe`) and pulls on the master see entries up to it. A slave's
  (and a master's before it takes writes) is its durable log end: reads and pulls there
  see what it holds durably. The `unsafe` read mode sees every entry written. There is no
  linearizable read in this mode.

Epochs. An entry's term is the epoch of the master that wrote it. A master takes a new
epoch (one above the highest it knows) whenever it starts taking writes, so that entries
it lost in a crash and writes again never share an index and an epoch with the ones a
slave kept. Any message carries its sender's (epoch, master) claim; a node that hears a
newer claim (higher epoch, then higher master id) follows that master, a master included:
it steps down to slave, fails its waiting appends with TERM_CHANGED (unknown outcome), and
its log is cut back to what it shares with the new master. A node that hears an older
claim answers with its own (HaEpoch). The epoch and master persist in `currterm`
(`nodes.ha.config`).

No election, and promotion by an operator only: a dead master stays dead until it is
restarted, and meanwhile appends fail (NOT_LEADER from a slave, naming the master).
`client_promote` makes a slave the master at a new epoch, with the flavour asked for, else
its own (its `--role` if that is a master role, else that of the master it followed). A
master that starts (a restart, or the first start) does not take writes until a slave
reported to it for its epoch, or `housekeeping_ms` passed without any peer telling it of a
newer master; then it takes a new epoch. So an old master that comes back after a
promotion learns of the new master from the first peer that answers and becomes its slave
instead of taking writes; only if no peer answers within `housekeeping_ms` (it is cut off
from all of them), or the only peers that answer still follow it (they missed the
promotion too), does it take writes at an epoch of its own, until it hears of the
promoted master (then the newer claim wins, ties broken by the higher node id, and the
writes the other took meanwhile are lost: classic mode has no consensus).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, ClassVar

from nodes.election import Role
from nodes.ha.config import BrokerRole, HaConfig, MasterVote
from nodes.ha.epochs import EpochMap
from nodes.ha.master import GroupTransfer, Streams
from nodes.ha.slave import Reporter
from nodes.logic import Ack, Ready, RoleChange, member_list
from nodes.logview import LogView, ReadableLog
from nodes.messages import (
    AppendResponse,
    ClientResponse,
    HaEpoch,
    HaPush,
    HaReport,
    HaTruncate,
    MetadataResponse,
    PeerMessage,
    PromoteResponse,
    PullResponse,
    ReadMode,
    ReadResponse,
    ResponseCode,
    TransferResponse,
)
from nodes.reads import read_range
from nodes.store.logstore import Entry, StoreError

MODE = "master-slave"


class HaNode:
    """One master-slave node: master or slave, switching on promotion or a newer master."""

    def __init__(
        self,
        node_id: str,
        peers: Sequence[str],
        store: ReadableLog,
        config: HaConfig,
        epoch: int = 0,
        vote: str | None = None,
        now: float = 0.0,
    ) -> None:
        self.node_id = node_id
        self.peers = member_list(node_id, peers)
        self.members = frozenset(peers)
        self.others = [p for p in peers if p != node_id]
        self.config = config
        self.log = LogView(store)
        self.epochs = EpochMap.of(store)
        self._now = now
        self._out = Ready()
        self._streams = Streams(config)
        self._waiting = GroupTransfer()
        self._reporter = Reporter(config, now)
        self._emitted_commit = -1
        self._anchored = False  # a slave: the master's pushes are known to continue its log
        self.term = epoch
        persisted = MasterVote.decode(vote)
        if persisted is None:
            self.master: str = node_id if config.role.is_master else str(config.master)
        else:
            self.master = persisted.master
        # the flavour it masters with: its --role, else the one it was promoted to (else ASYNC
        # until it hears a master's)
        self.flavour = config.role if config.role.is_master else BrokerRole.ASYNC_MASTER
        if not config.role.is_master and persisted is not None and persisted.flavour is not None:
            self.flavour = persisted.flavour
        if self.master not in self.members:
            raise ValueError(f"master {self.master!r} is not among the peers {list(peers)}")
        self.commit_index = -1
        self._set_commit(self._durable())
        self._fenced_until: float | None = None
        self._next_heartbeat = now
        self.role = Role.CANDIDATE
        self.leader: str | None = None
        if self.master == node_id:
            self._fenced_until = now + config.housekeeping_ms if self.others else now
            self._set_role(Role.CANDIDATE)
        else:
            self._set_role(Role.FOLLOWER)

    # ---- driver API ------------------------------------------------------------------

    def ready(self) -> Ready:
        out, self._out = self._out, Ready()
        out.writes = self.log.take_writes()
        return out

    def tick(self, now: float) -> None:
        self._now = now
        if self.master == self.node_id:
            if self._fenced_until is not None and now >= self._fenced_until:
                self._take_mastership(self.term + 1, self.flavour)  # nobody told of a newer master
            if now >= self._next_heartbeat:
                self._heartbeat()
            if self._active:
                self._expire(now)
                self._pump()
        else:
            self._set_commit(self._durable())
            self._report()

    def receive(self, sender: str, message: PeerMessage, now: float) -> None:
        self._now = now
        if sender not in self.members or sender == self.node_id:
            return
        handler = self._handlers.get(type(message))
        if handler is not None:
            handler(self, sender, message)

    def store_progress(self, now: float) -> None:
        self._now = now
        if self._active:
            self._advance()
        else:
            self._set_commit(self._durable())
            self._report()

    def client_append(self, request_id: int, bodies: Sequence[bytes], now: float) -> None:
        self._now = now
        refusal = self._append_refusal(len(bodies))
        if refusal is not None:
            self._complete(request_id, AppendResponse(refusal, self.term, -1, -1, self.leader))
            return
        first, last = self._write(bodies)
        if self.flavour is BrokerRole.SYNC_MASTER and not self._streams.slave_ok(last, now):
            response = AppendResponse(ResponseCode.SLAVE_NOT_AVAILABLE, self.term, first, last, self.node_id)
            self._complete(request_id, response)
        else:
            self._waiting.add(request_id, first, last, now + self.config.sync_timeout_ms)
            self._advance()
        self._pump()

    def client_read(self, request_id: int, first: int, last: int, mode: ReadMode, now: float) -> None:
        """Entries `first..last` up to the commit index (the log end for `unsafe`), on any node."""
        self._now = now
        top = self.log.end_index if mode is ReadMode.UNSAFE else self.commit_index
        entries, covered = read_range(self.log, first, last, top, self.config.max_read_bytes)
        self._complete(
            request_id, ReadResponse(ResponseCode.SUCCESS, entries, self.commit_index, self.leader, covered)
        )

    def client_pull(self, request_id: int, offset: int, max_entries: int, now: float) -> None:
        """A consumer's pull: what a read from `offset` sees, and which node to pull from next."""
        self._now = now
        top = self.commit_index
        entries, _ = read_range(self.log, offset, offset + max_entries - 1, top, self.config.max_read_bytes)
        next_offset = entries[-1].index + 1 if entries else offset
        first = max(self.log.begin_index, 0)
        suggest = self._suggest(offset, now)
        self._complete(
            request_id,
            PullResponse(ResponseCode.SUCCESS, entries, next_offset, first, top, suggest, self.leader),
        )

    def client_transfer(self, request_id: int, transferee: str, now: float) -> None:
        """No leadership transfer in this mode (promote a slave instead)."""
        self._complete(request_id, TransferResponse(ResponseCode.UNSUPPORTED, self.term, self.leader))

    def client_promote(self, request_id: int, role: str, now: float) -> None:
        """Make this node the master with flavour `role` ("": the flavour it knows)."""
        self._now = now
        try:
            flavour = BrokerRole.parse(role) if role else self.flavour
        except ValueError:
            flavour = BrokerRole.SLAVE
        if not flavour.is_master:
            refusal = PromoteResponse(ResponseCode.UNEXPECTED_ARGUMENT, self.term, self.leader)
            self._complete(request_id, refusal)
            return
        if self._active:
            if flavour is not self.flavour:
                self.flavour = flavour
                self._out.persist = (self.term, MasterVote(self.node_id, flavour).encode())
                self._advance()
        else:
            self._take_mastership(self.term + 1, flavour)
        self._complete(request_id, PromoteResponse(ResponseCode.SUCCESS, self.term, self.node_id))

    def set_preferred_leader(self, peer: str | None) -> None:
        if peer is not None:
            raise ValueError("master-slave mode has no preferred leader: promote a slave instead")

    def metadata(self) -> MetadataResponse:
        slaves = sorted(st.peer for st in self._streams.live(self._now)) if self._active else []
        return MetadataResponse(
            list(self.peers), self.leader, self.term, self.role.value,
            mode=MODE, broker_role=self.broker_role.value, slaves=slaves,
        )

    @property
    def broker_role(self) -> BrokerRole:
        return self.flavour if self.master == self.node_id else BrokerRole.SLAVE

    # ---- state -----------------------------------------------------------------------

    @property
    def _active(self) -> bool:
        """Whether this node is the master and takes writes."""
        return self.master == self.node_id and self._fenced_until is None

    def _durable(self) -> int:
        return min(self.log.flushed_index, self.log.end_index)

    def _send(self, peer: str, message: PeerMessage) -> None:
        self._out.messages.append((peer, message))

    def _complete(self, request_id: int, response: ClientResponse) -> None:
        self._out.completions.append((request_id, response))

    def _set_role(self, role: Role) -> None:
        self.role = role
        self.leader = None if role is Role.CANDIDATE else self.master
        self._out.role_changes.append(RoleChange(self.term, role, self.leader))

    def _set_commit(self, index: int) -> None:
        """What reads see now; a commit event when it passes every earlier one."""
        self.commit_index = index
        if index > self._emitted_commit:
            self._emitted_commit = index
            self._out.commit_index = index

    def _order(self, epoch: int, master: str) -> int:
        """How the claim (epoch, master) compares with this node's: -1 older, 0 same, 1 newer."""
        theirs, mine = (epoch, master), (self.term, self.master)
        return (theirs > mine) - (theirs < mine)

    def _heed(self, sender: str, epoch: int, master: str) -> bool:
        """Weigh the claim a message from `sender` makes: answer an older one with this
        node's (False: ignore the message), follow a newer one; True to go on with it."""
        order = self._order(epoch, master)
        if order < 0:
            self._send(sender, HaEpoch(self.term, self.master))
            return False
        if order > 0:
            self._learn(epoch, master)
        return True

    def _learn(self, epoch: int, master: str) -> None:
        """A newer claim: follow its master (or, if it names this node, be the master again)."""
        was_master = self.master == self.node_id
        self.term, self.master = epoch, master
        if was_master:
            for p in self._waiting.drain():
                response = AppendResponse(ResponseCode.TERM_CHANGED, epoch, p.first, p.last, master)
                self._complete(p.request_id, response)
            self._streams.clear()
        if master == self.node_id:  # it lost its currterm: start over as a master
            self._out.persist = (epoch, MasterVote(master, self.flavour).encode())
            self._fenced_until = self._now
            self._set_role(Role.CANDIDATE)
            return
        self._out.persist = (epoch, MasterVote(master, self.flavour).encode())  # its flavour until a push
        self._fenced_until = None
        self._anchored = False
        self._reporter.restart(self._now)
        self._set_role(Role.FOLLOWER)
        self._set_commit(self._durable())
        self._report()

    def _take_mastership(self, epoch: int, flavour: BrokerRole) -> None:
        self.term, self.master, self.flavour = epoch, self.node_id, flavour
        self._out.persist = (epoch, MasterVote(self.node_id, flavour).encode())
        self._fenced_until = None
        self._streams.clear()
        self._set_role(Role.LEADER)
        self._heartbeat()
        self._advance()

    # ---- master ----------------------------------------------------------------------

    def _heartbeat(self) -> None:
        self._next_heartbeat = self._now + self.config.heartbeat_ms
        msg = HaPush(self.term, self.node_id, self.flavour is BrokerRole.SYNC_MASTER, self.log.end_index, [])
        for peer in self.others:
            self._send(peer, msg)

    def _append_refusal(self, count: int) -> ResponseCode | None:
        if not self._active:
            return ResponseCode.NOT_LEADER
        if count < 1:
            return ResponseCode.UNEXPECTED_ARGUMENT
        if self._waiting.entries + count > self.config.max_pending_appends:
            return ResponseCode.LEADER_PENDING_FULL
        return None

    def _write(self, bodies: Sequence[bytes]) -> tuple[int, int]:
        """Append `bodies` as master; their first and last index."""
        indexes = self.log.append_many(self.term, bodies)
        self.epochs.appended_run(self.term, indexes.start)
        return indexes.start, indexes.stop - 1

    def _advance(self) -> None:
        """Acknowledge what the flavour allows; the commit index follows (never lowered)."""
        own = self._durable() if self.config.ack is Ack.FSYNCED else self.log.end_index
        acked = own
        if self.flavour is BrokerRole.SYNC_MASTER:
            acked = min(own, self._streams.max_acked())
        for p in self._waiting.release(acked):
            response = AppendResponse(ResponseCode.SUCCESS, self.term, p.first, p.last, self.node_id)
            self._complete(p.request_id, response)
        if acked > self.commit_index:
            self._set_commit(acked)

    def _expire(self, now: float) -> None:
        for p in self._waiting.expired(now):
            own_done = self.config.ack is Ack.WRITTEN or self._durable() >= p.last
            code = ResponseCode.FLUSH_SLAVE_TIMEOUT if own_done else ResponseCode.FLUSH_DISK_TIMEOUT
            self._complete(p.request_id, AppendResponse(code, self.term, p.first, p.last, self.node_id))

    def _pump(self) -> None:
        if not self._active:
            return
        sync = self.flavour is BrokerRole.SYNC_MASTER

        def send(peer: str, entries: list[Entry]) -> None:
            self._send(peer, HaPush(self.term, self.node_id, sync, self.log.end_index, entries))

        self._streams.pump(self.log, self._now, send)

    def _on_report(self, sender: str, rep: HaReport) -> None:
        if not self._heed(sender, rep.epoch, rep.master) or self.master != self.node_id:
            return  # a report for the master this node follows: not for it
        if self._fenced_until is not None:
            self._take_mastership(self.term + 1, self.flavour)  # a slave still follows it
            return
        point = self._streams.on_report(sender, rep, self.epochs, self.log.end_index, self._now)
        if point is not None:
            self._send(sender, HaTruncate(self.term, self.node_id, point))
            return
        self._advance()
        self._pump()

    # ---- slave -----------------------------------------------------------------------

    def _report(self) -> None:
        """Report the durable offset to the master when it moved or the interval passed."""
        if self.master == self.node_id:
            return
        durable = self._durable()
        if self._reporter.due(durable, self._now):
            report = HaReport(self.term, self.master, durable, self.log.end_index, list(self.epochs.starts))
            self._send(self.master, report)
            self._reporter.sent(durable, self._now)

    def _on_push(self, sender: str, push: HaPush) -> None:
        if push.master != sender or not self._heed(sender, push.epoch, push.master):
            return
        self._reporter.heard(self._now, push.end_index)
        flavour = BrokerRole.SYNC_MASTER if push.sync else BrokerRole.ASYNC_MASTER
        if flavour is not self.flavour:  # kept across restarts: a promotion takes it (module doc)
            self.flavour = flavour
            self._out.persist = (self.term, MasterVote(self.master, flavour).encode())
        if push.entries:
            self._append_pushed(push.entries)

    def _append_pushed(self, entries: list[Entry]) -> None:
        """Append what continues the log, once the push is known to continue it (module doc,
        "Replication"): a gap is ignored and a repeat skipped (the master resends)."""
        end, first = self.log.end_index, entries[0].index
        if first > end + 1 or (first == end + 1 and end >= 0 and not self._anchored):
            return
        if first <= end:
            last = min(entries[-1].index, end)
            if entries[last - first].term != self.log.term_at(last):  # it holds what the master does not
                self._unanchor()
                return
        fresh = entries[end + 1 - first:]
        try:
            self.log.append(fresh)
        except StoreError:  # not a continuation after all (terms going down)
            self._unanchor()
            return
        self._anchored = True
        self.epochs.appended(fresh)

    def _unanchor(self) -> None:
        """The master's pushes do not continue this log: report, for the master to check it again."""
        self._anchored = False
        self._reporter.force(self._now)

    def _on_truncate(self, sender: str, cut: HaTruncate) -> None:
        if cut.master != sender or not self._heed(sender, cut.epoch, cut.master) or self.master != sender:
            return
        if cut.after < self.log.end_index:
            try:
                self.log.truncate_after(cut.after)
            except StoreError:
                return  # below its committed index (a DLedger store): it cannot follow this master
            self.epochs.truncated(cut.after)
            self._set_commit(self._durable())
        self._anchored = False
        self._reporter.force(self._now)
        self._report()

    def _on_epoch(self, sender: str, notice: HaEpoch) -> None:
        if self._order(notice.epoch, notice.master) > 0:
            self._learn(notice.epoch, notice.master)

    def _suggest(self, offset: int, now: float) -> str:
        """RocketMQ's suggestWhichBrokerId: the master sends a consumer that lags its end by
        more than `suggest_slave_lag` to its most caught-up live slave; a slave sends a
        consumer that caught up back to a live master; otherwise the node itself."""
        lag = self.config.suggest_slave_lag
        if self._active:
            if self.log.end_index - offset > lag:
                return self._streams.best(now) or self.node_id
            return self.node_id
        caught_up = self._durable() - offset <= lag
        if self.master != self.node_id and self._reporter.master_alive(now) and caught_up:
            return self.master
        return self.node_id

    _handlers: ClassVar[dict[type, Callable[[HaNode, str, Any], None]]] = {
        HaReport: _on_report,
        HaPush: _on_push,
        HaTruncate: _on_truncate,
        HaEpoch: _on_epoch,
    }
