"""The simulation driver: N cores, their disks and clocks, a network, clients and faults, one seed.

A run has two phases. The fault phase processes `steps` events (ticks, deliveries,
flushes, client operations, faults) while faults come and go. Then everything heals
(partitions and link faults stop, crashed nodes restart, clocks run true, clients stop
sending; in half the runs the leader is left deaf, able to send but not to hear, until
another node leads, which must happen within `liveness_ms`: a leader that hears no quorum
steps down) and the liveness phase must, within `liveness_ms` of simulated time, elect a
leader and, idle, bring every node's commit index to the end of the leader's log (in half
the runs once more after a follower restarts then: it learns how far it matches only if
the leader asks, as no append will tell it), then commit a fresh probe append and bring
every node's commit index up to it, and answer every append that was pending when the
faults stopped. Invariants are checked on every step (log matching on every step that
changed a log, from the changed index on); a violation stops the run with the step, the
seed and the recent trace.

A master-slave run (`SimConfig.mode`, `nodes.sim.hamode`) drives `HaNode` logics instead of
cores on the same driver, disks, clock and clients, over links that deliver in order (as
the real peer links do); it checks election safety (one master per epoch), log matching and
answers in time from `nodes.sim.invariants`, and RocketMQ's guarantees from
`nodes.sim.hainvariants` instead of Raft's others. No master is left deaf at healing (a
master never steps down by itself); "leader" above is the master.
"""

from __future__ import annotations

import dataclasses
import heapq
import random
import traceback
from collections import Counter
from dataclasses import dataclass, field
from functools import partial
from typing import Any, TypeVar

from nodes import coverage
from nodes.core import Core, CoreConfig
from nodes.driver import Driver
from nodes.election import Role
from nodes.ha.node import HaNode
from nodes.logic import Flusher, Ready
from nodes.logview import Truncate
from nodes.messages import (
    AppendResponse,
    ClientResponse,
    PeerMessage,
    PushRequest,
    ReadMode,
    ReadResponse,
    ResponseCode,
    TransferRequest,
)
from nodes.replication import SafetyError
from nodes.sim.clock import SkewedClock
from nodes.sim.config import SimConfig
from nodes.sim.disk import DIRECTORY, UNCHANGED, SimDisk, disk_capacity
from nodes.sim.faults import (
    FAILOVER_GAP_MS,
    KILL_AFTER_MS,
    KILL_DOWN_MS,
    KILL_GAP_MS,
    KILL_SPELL_MS,
    OWN_SCHEDULE,
    PAUSE_GAP_MS,
    VOTE_CRASH_SHARE,
    VOTE_CUT_MS,
    Undo,
    start_fault,
    start_pause,
)
from nodes.sim.hamode import HaMode
from nodes.sim.handoffs import handoff_outcomes
from nodes.sim.invariants import Deadlines, Invariants, Violation, check_log_matching
from nodes.sim.modes import DLEDGER
from nodes.sim.network import Network, between
from nodes.sim.pause import Held
from nodes.sim.simfs import LossMode
from nodes.sim.simmap import NoSpace
from nodes.sim.trace import Trace
from nodes.store.logstore import Entry, StoreError
from nodes.timing import timing_profile

SEGMENT_SIZES = ((512, 320), (4096, 4096), (65536, 32768))  # (data, index) file sizes, drawn per run
BATCH_SIZES = (1, 1, 2, 3, 8, 64, 1024)  # max entries per push, drawn per run
INFLIGHT = (1, 2, 4)  # max unacknowledged pushes per follower, drawn per run
APPEND_TIMEOUTS = (2000.0, 400.0, 100.0)  # ms, drawn per run
READ_TIMEOUTS = (1000.0, 150.0, 40.0)
TRANSFER_TIMEOUTS = (1000.0, 100.0)
# per power loss
LOSS_MODE_DRAW: tuple[LossMode, ...] = ("reorder-tear", "reorder-tear", "reorder-tear", "lose-unsynced")
TAKE_VOTE_MS = ((10.0, 40.0), (150.0, 400.0))  # a transferee's vote interval: slow ones meet rivals
THINK_MS = ((1.0, 20.0), (1.0, 20.0), (50.0, 400.0))  # a client's pause between ops, drawn per run:
# some runs leave the leader idle between appends (idle-only paths: COMMIT pushes, restarts)
SLOW_FSYNC_SHARE = 0.02
GIVE_UP_MS = (50.0, 400.0)  # a client's RPC timeout: it fires only at a paused node (a running
# node answers by its own timeouts, well before), and the client moves on to its next request
BODY_PADDING = (0, 0, 150, 400)  # bytes after an append's id, per run: entries that span
# 512-byte sectors and 4 KiB pages, so a torn write can cut one in the middle (fits 512-byte segments)

READ_MODES = (ReadMode.READ_INDEX, ReadMode.READ_INDEX, ReadMode.COMMITTED, ReadMode.FOLLOWER,
              ReadMode.UNSAFE, ReadMode.LEASE)  # a DLedger client's, drawn per read
# an answer that leaves the outcome unknown (DLedger's, then master-slave's)
INDEFINITE = (ResponseCode.TERM_CHANGED, ResponseCode.WAIT_QUORUM_ACK_TIMEOUT,
              ResponseCode.FLUSH_SLAVE_TIMEOUT, ResponseCode.FLUSH_DISK_TIMEOUT,
              ResponseCode.SLAVE_NOT_AVAILABLE)

(TICK, DELIVER, FLUSH, CLIENT, CLIENT_TIMEOUT, FAULT, FAULT_END, RESTART, PROBE, MOMENT_CRASH,
 TRANSFER, PAUSE, WAKE, GIVE_UP, KILL_SPELL, KILL, VOTE_CRASH, MEND, FAILOVER) = range(19)

Logic = Core | HaNode  # a node's logic: DLedger's core, or master-slave's (`nodes.sim.hamode`)


@dataclass(slots=True)
class SimResult:
    """What one run did, and the violation if one was found."""

    config: SimConfig
    steps: int
    sim_ms: float
    stats: Counter[str]
    violation: Violation | None = None
    trace: list[str] = field(default_factory=list)
    coverage: Counter[str] = field(default_factory=Counter)  # rule -> times it fired (nodes.coverage)

    def summary(self) -> str:
        """A deterministic, human-readable report (the same seed prints the same bytes)."""
        c = self.config
        mode = "" if c.mode == DLEDGER else f"{c.mode}, "
        head = (
            f"seed {c.seed}: {c.nodes} nodes, {mode}flush {c.durability.flag}, profile {c.profile}, "
            f"faults {','.join(c.faults) or 'none'}"
        )
        stats = " ".join(f"{k}={v}" for k, v in sorted(self.stats.items()))
        lines = [head, f"steps {self.steps}, simulated {self.sim_ms / 1000:.3f} s", f"stats: {stats}"]
        if self.violation is None:
            lines.append("result: no violation")
        else:
            lines.append(f"VIOLATION at step {self.steps}: {self.violation}")
            lines.append(
                f"replay: python -m nodes simulate --seed {c.seed} --steps {c.steps} "
                f"--nodes {c.nodes} --faults {','.join(c.faults) or 'none'} --flush {c.durability.flag} "
                f"--profile {c.profile}" + ("" if c.mode == DLEDGER else f" --mode {c.mode}")
            )
            lines.append("trace of the last events:")
            lines.extend(self.trace)
        return "\n".join(lines)


@dataclass(slots=True)
class _Op:
    client: int
    kind: str
    node: str
    body: bytes = b""
    mode: ReadMode = ReadMode.READ_INDEX
    first: int = 0
    last: int = 0
    before: tuple[int, int] = (-1, -1)  # reads: (max acked, max linearizable read) when invoked
    to: str = ""  # transfers: the transferee
    held: bool = False  # waiting in a paused node's socket
    abandoned: bool = False  # its client gave up waiting (the node may still answer: that is checked)


class Simulation:
    """One seeded run; `run()` returns its `SimResult`."""

    def __init__(self, config: SimConfig) -> None:
        self.config = config
        rng = self.rng = random.Random(config.seed)
        self.names = [f"n{i + 1}" for i in range(config.nodes)]
        self.network = Network(random.Random(rng.getrandbits(64)), fifo=config.mode != DLEDGER)
        lease_guard = config.lease_guard if config.lease_guard is not None else rng.random() < 0.5
        # push batches and pipelining vary per run (down to one entry per push, one in flight),
        # so a new leader's no-op does not always travel with the older entries (Figure 8)
        # and so do the client-facing timeouts, short enough in some runs to fire under faults
        # (drawn in master-slave runs too, which use none of them: the later draws stay aligned)
        batch, inflight = rng.choice(BATCH_SIZES), rng.choice(INFLIGHT)
        append_timeout, read_timeout = rng.choice(APPEND_TIMEOUTS), rng.choice(READ_TIMEOUTS)
        transfer_timeout = _given(config.transfer_timeout_ms, rng.choice(TRANSFER_TIMEOUTS))
        take_vote_min, take_vote_max = _given(config.take_vote_ms, rng.choice(TAKE_VOTE_MS))
        timing = dataclasses.replace(
            timing_profile(config.profile),
            max_batch_entries=batch,
            max_inflight_pushes=inflight,
            append_timeout_ms=append_timeout,
            read_timeout_ms=read_timeout,
            transfer_timeout_ms=transfer_timeout,
            take_leadership_min_vote_ms=take_vote_min,
            take_leadership_max_vote_ms=take_vote_max,
        )
        self.core_config = CoreConfig(timing, config.durability.ack, lease_guard)
        self._think_ms = rng.choice(THINK_MS)
        self._padding = rng.choice(BODY_PADDING)
        # each node's disk has its own speed, and every fsync its own time with slow outliers
        self._fsync_ms = {n: config.fsync_ms * rng.uniform(0.25, 4.0) for n in self.names}
        self.clocks = {n: SkewedClock(0.0, rng.uniform(0.0, 1e6), 1.0) for n in self.names}
        data_segment, index_segment = rng.choice(SEGMENT_SIZES)
        capacity = disk_capacity(config.seed, config.small_disks, data_segment, index_segment,
                                 len(f"c{config.clients}-{config.steps}") + self._padding)
        self.disks = {n: SimDisk(data_segment, index_segment, capacity) for n in self.names}
        self.cores: dict[str, Logic | None] = dict.fromkeys(self.names)
        self.drivers: dict[str, Driver | None] = dict.fromkeys(self.names)
        self.incarnation = dict.fromkeys(self.names, 0)
        self.checked = dict.fromkeys(self.names, -1)
        self.now = 0.0
        self.step = 0
        self.healed = False
        self.leader_crashes = False  # set by the leadercrash fault
        self.repair_crashes = False  # set by the repaircrash fault
        self.transfers = False  # set by the transfer fault
        self.handed: set[tuple[int, str]] = set()  # (term, transferee) of every transfer that took
        self.stats: Counter[str] = Counter()
        coverage.take()  # the rules this run fires, from zero
        self.inv = Invariants()
        self.deadlines = Deadlines()
        self.trace = Trace()
        self._queue: list[tuple[float, int, int, str, Any]] = []
        self._seq = 0
        self._ops: dict[int, _Op] = {}
        self._next_rid = 0
        self._believed_leader: list[str | None] = [None] * config.clients
        self._append_count = 0
        self._probe: tuple[int, int] | None = None  # (request id, index once acknowledged)
        self._idle_caught_up = False  # after healing: every commit index at the leader's log end
        self._idle_restart = False  # after healing: restart a follower once the cluster caught up
        self._deaf: str | None = None  # after healing: the leader left able to send but not receive
        self._deadline: float | None = None  # the liveness phase's current stage must end by then
        self._unanswered: set[int] = set()  # appends pending at healing the core has not answered yet
        self._faults = tuple(f for f in config.faults if f not in OWN_SCHEDULE)  # drawn from `rng`
        self._pause_rng = random.Random(f"pause-{config.seed}")  # pauses: their own draws and schedule
        self._paused: dict[str, Held] = {}
        self._kill_rng = random.Random(f"leaderkill-{config.seed}")  # leader kills: the same
        self._kill_until = -1.0  # the leaderkill fault kills every new leader until then
        self._vote_rng = random.Random(f"votecrash-{config.seed}")  # vote crashes: the same
        self._vote_crash_until = -1.0  # one vote crash at a time: the last one's cut lasts until then
        self.ha = None if config.mode == DLEDGER else HaMode(self, rng)
        self._read_modes: tuple[ReadMode, ...]
        if self.ha is None:
            self._timeouts = (timing.append_timeout_ms, timing.read_timeout_ms, timing.transfer_timeout_ms)
            self._read_modes = READ_MODES
            self._liveness_ms = config.liveness_ms or max(20000.0, 30 * timing.leader_lost_ms)
        else:
            self._timeouts = self.ha.timeouts
            self._read_modes = self.ha.read_modes
            self._liveness_ms = config.liveness_ms or self.ha.liveness_ms
        self._handlers = (
            self._on_tick,
            self._on_deliver,
            self._on_flush,
            self._on_client,
            self._on_client_timeout,
            self._on_fault,
            self._on_fault_end,
            self._on_restart,
            self._on_probe,
            self._on_moment_crash,
            self._on_transfer,
            self._on_pause,
            self._on_wake,
            self._on_give_up,
            self._on_kill_spell,
            self._on_kill,
            self._on_vote_crash,
            self._on_mend,
            self._on_failover,
        )
        for name in self.names:
            self._start_node(name)
            if config.durability.flusher is Flusher.STORE_THREAD:
                self._schedule(rng.uniform(0, config.async_flush_ms), FLUSH, name, -1)
        for c in range(config.clients):
            self._schedule(rng.uniform(0, 50.0), CLIENT, "", c)
        if self._faults:
            self._schedule(rng.uniform(*config.fault_gap_ms), FAULT, "", None)
        if "pause" in config.faults:
            self._schedule(self._pause_rng.uniform(*PAUSE_GAP_MS), PAUSE, "", None)
        if "leaderkill" in config.faults:
            self._schedule(self._kill_rng.uniform(*KILL_GAP_MS), KILL_SPELL, "", None)
        if self.ha is not None and "failover" in config.faults:
            self._schedule(self.ha.rng.uniform(*FAILOVER_GAP_MS), FAILOVER, "", None)

    # ---- the event loop ----------------------------------------------------------------

    def _schedule(self, delay: float, kind: int, node: str, payload: Any) -> None:
        self._seq += 1
        heapq.heappush(self._queue, (self.now + delay, self._seq, kind, node, payload))

    def run(self) -> SimResult:
        try:
            self._run()
        except Violation as found:
            return self._result(found)
        except SafetyError as lost:  # asked to drop an entry it had committed: the cluster lost it
            return self._result(Violation("committed entry lost", str(lost)))
        except StoreError as refused:
            return self._result(Violation("store refused", str(refused)))
        except NoSpace as full:  # the DISK_FULL refusals should have kept the disk from filling
            # (a name of its own: compiled with mypyc, one name for two exception types fails)
            return self._result(Violation("disk overflow", str(full)))
        except Exception:  # a crash of the core is a finding too: report it with the trace
            return self._result(Violation("exception", traceback.format_exc()))
        return self._result(None)

    def _result(self, violation: Violation | None) -> SimResult:
        trace = self.trace.lines(60) if violation else []
        self.stats.update(handoff_outcomes(self.handed, self.inv.leaders))
        return SimResult(self.config, self.step, self.now, self.stats, violation, trace, coverage.take())

    def _run(self) -> None:
        cfg = self.config
        handlers = self._handlers
        queue = self._queue
        deadlines = self.deadlines
        heappop = heapq.heappop
        while queue:
            if not self.healed and self.step >= cfg.steps:
                self._heal()
            if self._deadline is not None:
                if self._live():
                    break
                if self.now > self._deadline:
                    raise self._not_live()
            self.now, _, kind, node, payload = heappop(queue)
            self.step += 1
            handlers[kind](node, payload)
            if deadlines.due_before(self.now):
                deadlines.check(self.now)
        check_log_matching(self._logs())
        if self.ha is not None:
            self.ha.checks.at_end(self._logs())

    def _logs(self) -> dict[str, list[Entry]]:
        return {n: self.disks[n].log for n in self.names}

    def _check_changed(self, node: str) -> None:
        """Log matching for `node`'s entries written (or changed by a power loss) since the last check."""
        disk = self.disks[node]
        if disk.changed_from != UNCHANGED:
            start, disk.changed_from = disk.changed_from, UNCHANGED
            self.inv.on_write(node, disk.log, start, self._logs)
            if self.ha is not None:
                self.ha.checks.on_changed(node, start)

    def _roles(self) -> str:
        return ", ".join(
            f"{n}:{c.role.value}/t{c.term}/c{c.commit_index}" if c else f"{n}:down"
            for n, c in self.cores.items()
        )

    # ---- nodes -------------------------------------------------------------------------

    def local(self, node: str) -> float:
        return self.clocks[node].local(self.now)

    def _start_node(self, name: str) -> None:
        disk = self.disks[name]
        store, state = disk.open()
        self._check_changed(name)
        core: Logic
        if self.ha is None:
            core = Core(name, self.names, store, state.term, state.vote_for, self.core_config,
                        random.Random(self.rng.getrandbits(64)), self.local(name))
            self.inv.on_commit(name, disk.log, -1, core.commit_index, core.term)  # what it calls committed
        else:
            core = self.ha.node(name, store, state, self.local(name))  # it serves its durable log
        self.cores[name] = core
        host = _Host(self, name)
        flusher = self.config.durability.flusher
        self.drivers[name] = Driver(core, store, DIRECTORY, state, flusher, host, disk.fs)
        self.checked[name] = core.commit_index
        self.trace.add(
            self.now,
            self.step,
            name,
            f"start t{state.term} vote {state.vote_for} log end {store.end_index} commit {core.commit_index}"
            f" ({store.recovery.summary()})",
        )
        self._schedule(self.rng.uniform(0, self.config.tick_ms), TICK, name, self.incarnation[name])
        self.drain(name)

    def crash(self, node: str, power_loss: bool, downtime: float, rng: random.Random | None = None) -> None:
        """Kill `node` (losing, reordering or tearing unsynced writes on power loss) and
        restart it after `downtime`; the loss draws from `rng` (default: the run's)."""
        if self.cores[node] is None:
            return
        rng = rng or self.rng
        self.cores[node] = self.drivers[node] = None
        self.incarnation[node] += 1
        self._paused.pop(node, None)  # what it held dies with it
        mode = rng.choice(LOSS_MODE_DRAW)
        self.disks[node].crash(power_loss, rng, mode)
        if self.ha is not None:
            self.ha.on_crash(node, power_loss)
        self.stats["powerloss" if power_loss else "crash"] += 1
        self.trace.add(self.now, self.step, node, f"power loss ({mode})" if power_loss else "crash")
        for rid in [rid for rid, op in self._ops.items() if op.node == node]:
            self._finish_op(rid, "info")
        self._schedule(downtime, RESTART, node, self.incarnation[node])

    def _on_restart(self, node: str, incarnation: int) -> None:
        if self.cores[node] is None and incarnation == self.incarnation[node]:
            self._start_node(node)

    def _on_tick(self, node: str, incarnation: int) -> None:
        core = self.cores[node]
        if core is None or incarnation != self.incarnation[node]:
            return
        held = self._paused.get(node)
        if held is not None:  # the timer fires when it wakes, and runs on from there
            held.hold("timer", lambda: self._on_tick(node, incarnation))
            return
        local = self.clocks[node].local(self.now)
        core.tick(local)
        driver = self.drivers[node]
        assert driver is not None
        driver.drive()
        self.disks[node].check_space(local)
        driver.tick(local)
        self._schedule(self.config.tick_ms, TICK, node, incarnation)

    def _on_deliver(self, node: str, payload: tuple[str, PeerMessage]) -> None:
        sender, message = payload
        core = self.cores[node]
        if core is None or not self.network.connected(sender, node):
            self.trace.add(self.now, self.step, node, f"drop from {sender}", message)
            return
        held = self._paused.get(node)
        if held is not None:
            self.trace.add(self.now, self.step, node, f"holds from {sender}", message)
            held.hold(sender, lambda: self._receive(node, sender, message))
            return
        self._receive(node, sender, message)

    def _receive(self, node: str, sender: str, message: PeerMessage) -> None:
        core = self.cores[node]
        assert core is not None
        self.trace.add(self.now, self.step, node, f"recv from {sender}", message)
        core.receive(sender, message, self.clocks[node].local(self.now))
        if (isinstance(message, TransferRequest) and isinstance(core, Core)
                and core.taking_term == message.term + 1):
            self.handed.add((message.term + 1, node))
        self.drivers[node].drive()  # type: ignore[union-attr]  # a running node has a driver

    def _on_flush(self, node: str, incarnation: int) -> None:
        disk = self.disks[node]
        driver = self.drivers[node]
        if incarnation == -1:  # Flusher.STORE_THREAD: DLedger's periodic background flush
            self._schedule(self.config.async_flush_ms, FLUSH, node, -1)
            if disk.store is not None and node not in self._paused:  # its flush thread is frozen too
                disk.store.flush()
            return
        if incarnation != self.incarnation[node] or disk.store is None or driver is None:
            return
        held = self._paused.get(node)
        if held is not None:  # the fsync returns when it wakes
            held.hold("disk", lambda: self._on_flush(node, incarnation))
            return
        disk.store.flush()  # the group commit the driver asked for
        driver.flushed(self.local(node))

    def drain(self, node: str) -> None:
        """Carry out the core's outputs (the driver calls back `_Host`)."""
        driver = self.drivers[node]
        assert driver is not None
        driver.drive()

    def applied(self, node: str, ready: Ready) -> None:
        """The driver carried out `ready`'s writes: check what they and the outputs claim."""
        disk = self.disks[node]
        for change in ready.role_changes:  # election safety first, before any log check
            self.trace.add(
                self.now,
                self.step,
                node,
                f"becomes {change.role.value} t{change.term} leader {change.leader}",
            )
            if change.role is Role.LEADER:
                self.stats["elections"] += 1
                self.inv.on_election(node, change.term)
                self.inv.on_leases(node, change.term, {
                    n: c.term for n, c in self.cores.items()
                    if n != node and isinstance(c, Core) and c.serves_lease_reads(self.local(n))
                })
                if self._killing_leaders():
                    self._schedule(self._kill_rng.uniform(*KILL_AFTER_MS), KILL, node, self.incarnation[node])
                if self.leader_crashes and not self.healed:
                    power = self.rng.random() < 0.3
                    self._schedule(self.rng.uniform(0.0, 30.0), MOMENT_CRASH, node,
                                   (self.incarnation[node], True, power))
            elif change.role is Role.FOLLOWER and change.leader is not None and self._lost_own_vote(node):
                self._start_vote_crash(node, change.leader)
        if self.repair_crashes and not self.healed and any(isinstance(w, Truncate) for w in ready.writes):
            crash_at = (self.incarnation[node], False, True)
            self._schedule(self.rng.uniform(0.0, 3.0), MOMENT_CRASH, node, crash_at)
        disk.applied(ready.writes)
        self._check_changed(node)
        ha = self.ha
        for change in ready.role_changes:
            if ha is not None:
                ha.on_role(node, change)
            elif change.role is Role.LEADER:
                self.inv.on_leader(node, change.term, disk.log)
        if ready.commit_index is not None:
            core = self.cores[node]
            assert core is not None
            if ha is not None:
                ha.checks.on_commit(node, core.role is Role.LEADER, self.checked[node], ready.commit_index)
            else:
                self.inv.on_commit(node, disk.log, self.checked[node], ready.commit_index, core.term)
            self.checked[node] = ready.commit_index

    def send(self, node: str, peer: str, message: PeerMessage) -> None:
        """`node` sends `message` to `peer` through the simulated network."""
        self.stats["messages"] += 1
        churn = self.leader_crashes or self._killing_leaders()
        rng = self.rng if self.leader_crashes else self._kill_rng  # leaderkill runs: the same
        if churn and _carries_own_term(message) and rng.random() < 0.5:
            # leader churn: half of a leader's pushes of its own term's entries are lost, so
            # older entries can reach a majority while its no-op does not (Raft's Figure 8)
            self.trace.add(self.now, self.step, node, f"lost to {peer}", message)
            return
        queue, payload = self._queue, (node, message)
        for at in self.network.arrivals(node, peer, self.now):
            self._seq += 1
            heapq.heappush(queue, (at, self._seq, DELIVER, peer, payload))

    def start_flush(self, node: str) -> None:
        """`node`'s driver asks for a group-commit flush: the disk does it a while later."""
        self._schedule(self._fsync_delay(node), FLUSH, node, self.incarnation[node])

    def _fsync_delay(self, node: str) -> float:
        """How long this fsync takes: the node's disk speed, jittered, now and then 20-50x slower."""
        rng = self.rng
        delay = self._fsync_ms[node] * rng.uniform(0.5, 1.5)
        return delay * rng.uniform(20.0, 50.0) if rng.random() < SLOW_FSYNC_SHARE else delay

    # ---- clients -----------------------------------------------------------------------

    def next_rid(self) -> int:
        self._next_rid += 1
        return self._next_rid

    def _pick_node(self, client: int) -> str:
        believed = self._believed_leader[client]
        if believed is not None and self.rng.random() < 0.85:
            return believed
        return self.rng.choice(self.names)

    def _on_client(self, _node: str, client: int) -> None:
        if self.healed:
            return  # the cluster is left idle (see the module docstring)
        rng = self.rng
        node = self._pick_node(client)
        core = self.cores[node]
        if core is None:
            self._believed_leader[client] = None
            self._schedule(rng.uniform(*self._think_ms), CLIENT, "", client)
            return
        rid = self.next_rid()
        roll = rng.random()
        if roll < self.config.append_share:
            self._append_count += 1
            name = f"c{client}-{self._append_count}"
            body = name.encode() + b"." * self._padding
            self._ops[rid] = _Op(client, "append", node, body)
            self.trace.add(self.now, self.step, node, f"client {client} append {name} rid {rid}")
        else:
            mode = rng.choice(self._read_modes)
            top = max(len(self.inv.committed) - 1 if self.ha is None else self.ha.checks.max_acked, 0)
            first = rng.randint(max(0, top - 30), top + 3)
            last = first + rng.randint(0, 40)
            self._ops[rid] = _Op(
                client,
                "read",
                node,
                mode=mode,
                first=first,
                last=last,
                before=(self.inv.max_acked, self.inv.max_read),
            )
            self.trace.add(
                self.now, self.step, node, f"client {client} read {mode.label} {first}..{last} rid {rid}"
            )
        self._schedule(5000.0, CLIENT_TIMEOUT, "", rid)
        self._submit(rid)

    def _submit(self, rid: int) -> None:
        """The request reaches its node: the node takes it now, or holds it while paused (and
        the client, if one waits, gives up after its RPC timeout)."""
        op = self._ops[rid]
        node = op.node
        held = self._paused.get(node)
        if held is not None:
            op.held = True
            # a connection of its own: a client that gives up on a request drops its connection
            held.hold(f"rid {rid}", lambda: self._submit(rid) if rid in self._ops else None)
            if op.client >= 0:
                self._schedule(self._pause_rng.uniform(*GIVE_UP_MS), GIVE_UP, "", rid)
            return
        op.held = False
        core, driver = self.cores[node], self.drivers[node]
        local, (append_ms, read_ms, transfer_ms) = self.local(node), self._timeouts
        assert core is not None and driver is not None
        if op.kind == "append":
            self._answer_by(rid, append_ms)
            driver.client_append(rid, [op.body], local)  # refused with DISK_FULL, as the server does
        elif op.kind == "read":
            self._answer_by(rid, read_ms)
            core.client_read(rid, op.first, op.last, op.mode, local)
        else:
            self._answer_by(rid, transfer_ms)
            core.client_transfer(rid, op.to, local)
        self.drain(node)

    def _on_give_up(self, _node: str, rid: int) -> None:
        """A client stops waiting for a request its paused node holds and goes on (the answer,
        if the node gives one when it wakes, is still checked)."""
        op = self._ops.get(rid)
        if op is None or not op.held or op.abandoned:
            return
        self.trace.add(self.now, self.step, op.node, f"client {op.client} gives up on rid {rid}")
        self.stats[f"{op.kind}-info"] += 1
        op.abandoned = True
        self._schedule(self.rng.uniform(*self._think_ms), CLIENT, "", op.client)

    def _answer_by(self, rid: int, timeout_ms: float) -> None:
        """The node owes an answer to `rid` within its `timeout_ms`, plus a tick or two and
        clock rates within the lease's drift bound."""
        op = self._ops[rid]
        due = self.now + timeout_ms * 1.05 + 2 * self.config.tick_ms
        self.deadlines.on_request(rid, due, f"{op.kind} rid {rid} at {op.node} ({timeout_ms:.0f} ms timeout)")

    def _on_client_timeout(self, _node: str, rid: int) -> None:
        if rid in self._ops:
            self._finish_op(rid, "info")

    def _finish_op(self, rid: int, outcome: str) -> None:
        op = self._ops.pop(rid)
        self.deadlines.on_answer(rid)
        if op.abandoned:  # counted when its client gave up
            return
        self.stats[f"{op.kind}-{outcome}"] += 1
        if op.client >= 0:
            self._schedule(self.rng.uniform(*self._think_ms), CLIENT, "", op.client)

    def complete(self, rid: int, response: ClientResponse) -> None:
        self._unanswered.discard(rid)
        op = self._ops.get(rid)
        if op is None:
            return
        self.trace.add(self.now, self.step, op.node, f"client {op.client} rid {rid} gets", response)
        leader = getattr(response, "leader", None)
        if op.client >= 0 and not op.abandoned:
            self._believed_leader[op.client] = leader
        code = response.code
        if code is ResponseCode.SUCCESS:
            ha = self.ha
            if isinstance(response, AppendResponse):
                if ha is None:
                    self.inv.on_append_ok(op.body, response.first_index)
                else:
                    ha.checks.on_ack(op.node, op.body, response)
                if op.kind == "probe":
                    self._probe = (rid, response.last_index)
            elif isinstance(response, ReadResponse):
                if ha is None:
                    self.inv.on_read_ok(op.node, op.mode, op.first, op.last, op.before, response)
                else:
                    core = self.cores[op.node]
                    master = core is not None and core.role is Role.LEADER
                    ha.checks.on_read(op.node, master, op.mode, op.first, response)
            self._finish_op(rid, "ok")
        elif code in INDEFINITE:
            self._finish_op(rid, "info")
        else:
            self._finish_op(rid, "fail")

    def request_transfer(self) -> None:
        """Ask the current leader, if any, to hand over to a random other member."""
        leaders = self.leaders()
        if not leaders:
            return
        node = leaders[-1]
        to = self.rng.choice([n for n in self.names if n != node])
        rid = self.next_rid()
        self._ops[rid] = _Op(-1, "transfer", node, to=to)
        self.trace.add(self.now, self.step, node, f"transfer to {to} rid {rid}")
        self._submit(rid)

    def leaders(self) -> list[str]:
        """The running nodes that think they lead."""
        return [n for n, c in self.cores.items() if c is not None and c.role is Role.LEADER]

    # ---- faults and healing ------------------------------------------------------------

    def _on_fault(self, _node: str, _payload: None) -> None:
        if self.healed:
            return
        rng = self.rng
        kind = rng.choice(self._faults)
        self.stats[f"fault-{kind}"] += 1
        self.trace.add(self.now, self.step, "sim", f"fault {kind} starts")
        undo = start_fault(kind, self, rng)
        if undo is not None:
            self._schedule(rng.uniform(*self.config.fault_length_ms), FAULT_END, kind, undo)
        self._schedule(rng.uniform(*self.config.fault_gap_ms), FAULT, "", None)

    def _on_fault_end(self, kind: str, undo: Undo) -> None:
        if not self.healed and undo is not None:
            self.trace.add(self.now, self.step, "sim", f"fault {kind} ends")
            undo()

    def _on_moment_crash(self, node: str, payload: tuple[int, bool, bool]) -> None:
        """A crash at a chosen moment: a new leader soon after its election (leader churn, often
        before its no-op and the older entries it pushes reach a majority: Raft's Figure 8), or
        a follower just after it truncated its log, with power loss, before the truncation is
        on disk (the cut entries may come back: the leader's next push must repair them)."""
        incarnation, only_leader, power = payload
        core = self.cores[node]
        alive = core is not None and incarnation == self.incarnation[node]
        if self.healed or core is None or not alive or (only_leader and core.role is not Role.LEADER):
            return
        # a repairing follower comes back before the leader's pushes to it time out, so the
        # leader streams on (APPEND) over the entries the lost truncation brought back
        self.crash(node, power, self.rng.uniform(20.0, 400.0) if only_leader else self.rng.uniform(5.0, 60.0))

    def _killing_leaders(self) -> bool:
        """Whether a leaderkill spell lasts (every new leader dies soon after its election)."""
        return self.now < self._kill_until and not self.healed

    def _on_kill_spell(self, _node: str, _payload: None) -> None:
        """A leaderkill spell starts: whoever leads dies now, and so will every new leader
        for a while; the next spell is scheduled."""
        if self.healed:
            return
        rng = self._kill_rng
        self._kill_until = self.now + rng.uniform(*KILL_SPELL_MS)
        self.stats["fault-leaderkill"] += 1
        self.trace.add(self.now, self.step, "sim", f"leader kills until {self._kill_until:.0f}")
        for node in self.leaders():
            self._schedule(0.0, KILL, node, self.incarnation[node])
        self._schedule(rng.uniform(*KILL_GAP_MS), KILL_SPELL, "", None)

    def _on_kill(self, node: str, incarnation: int) -> None:
        """Kill `node` if it still leads (the process only: the page cache survives)."""
        core = self.cores[node]
        alive = core is not None and incarnation == self.incarnation[node]
        if self.healed or core is None or not alive or core.role is not Role.LEADER:
            return
        self.stats["leader-killed"] += 1
        self.crash(node, False, self._kill_rng.uniform(*KILL_DOWN_MS), self._kill_rng)

    def _lost_own_vote(self, node: str) -> bool:
        """Whether a votecrash acts on `node`, which voted for itself and follows another now."""
        core = self.cores[node]
        return ("votecrash" in self.config.faults and not self.healed and self.now >= self._vote_crash_until
                and isinstance(core, Core) and core.vote_for == node
                and self._vote_rng.random() < VOTE_CRASH_SHARE)

    def _start_vote_crash(self, node: str, leader: str) -> None:
        """`node` lost the election it stood in: it crashes with its vote for itself on disk.
        Either it comes back cut off from `leader` (so it stands again, through the others), or
        another follower is cut off from `leader` first and `node`, which keeps confirming the
        leader's lease until it dies, comes back once that follower no longer guards the lease."""
        rng = self._vote_rng
        others = [n for n in self.names if n not in (node, leader)]
        if rng.random() < 0.5 or not others:
            cut, delay, downtime = node, rng.uniform(0.0, 30.0), rng.uniform(20.0, 300.0)
        else:
            cut, delay = rng.choice(others), self.core_config.timing.leader_lost_ms + rng.uniform(0.0, 100.0)
            downtime = rng.uniform(5.0, 150.0)  # back within the lease it confirmed
        links = between([cut], [leader])
        self.network.cut(links)
        length = delay + rng.uniform(*VOTE_CUT_MS)
        self._vote_crash_until = self.now + length
        self.stats["fault-votecrash"] += 1
        self.trace.add(self.now, self.step, "sim", f"vote crash: {node} lost to {leader}; {cut} cut off")
        self._schedule(length, MEND, "", links)
        self._schedule(delay, VOTE_CRASH, node, (self.incarnation[node], rng.random() < 0.3, downtime))

    def _on_vote_crash(self, node: str, payload: tuple[int, bool, float]) -> None:
        incarnation, power, downtime = payload
        if not self.healed and self.cores[node] is not None and incarnation == self.incarnation[node]:
            self.crash(node, power, downtime, self._vote_rng)

    def _on_mend(self, _node: str, links: list[tuple[str, str]]) -> None:
        self.network.mend(links)

    def _on_failover(self, _node: str, _payload: None) -> None:
        ha = self.ha
        if not self.healed and ha is not None:
            ha.failover()
            self._schedule(ha.rng.uniform(*FAILOVER_GAP_MS), FAILOVER, "", None)

    def _on_pause(self, _node: str, _payload: None) -> None:
        if not self.healed:
            start_pause(self, self._pause_rng)
            self._schedule(self._pause_rng.uniform(*PAUSE_GAP_MS), PAUSE, "", None)

    def pause(self, node: str, duration: float) -> None:
        """Freeze `node` for `duration` (see `nodes.sim.pause`); a crash ends the pause for good."""
        if self.cores[node] is None or node in self._paused:
            return
        held = self._paused[node] = Held(self.now)
        self.stats["fault-pause"] += 1
        self.trace.add(self.now, self.step, node, f"paused for {duration:.0f} ms")
        for rid, op in self._ops.items():  # what it owes answers later by as much
            if op.node == node and not op.held:
                self.deadlines.postpone(rid, duration)
        self._schedule(duration, WAKE, node, held)

    def _on_wake(self, node: str, held: Held) -> None:
        if self._paused.get(node) is not held:
            return  # it crashed meanwhile, or healing woke it
        del self._paused[node]
        inputs = held.wake(self._pause_rng)
        self.trace.add(self.now, self.step, node, f"wakes after {self.now - held.started:.0f} ms, "
                       f"{len(inputs)} inputs held")
        for handle in inputs:
            handle()

    def start_transfers(self) -> None:
        """Ask whoever leads to hand over, again every 20-200 ms until `transfers` is cleared."""
        self.transfers = True
        self._schedule(0.0, TRANSFER, "", None)

    def _on_transfer(self, _node: str, _payload: None) -> None:
        if self.transfers and not self.healed:
            self.request_transfer()
            self._schedule(self.rng.uniform(20.0, 200.0), TRANSFER, "", None)

    def dirty_nodes(self) -> list[str]:
        """Running nodes whose store holds writes not yet fsynced."""
        return [n for n in self.names if self.cores[n] is not None and self.disks[n].dirty()]

    def _heal(self) -> None:
        self.healed = True
        self.trace.add(self.now, self.step, "sim", "heal: faults stop, crashed nodes restart")
        self.network.heal()
        self.leader_crashes = self.repair_crashes = self.transfers = False
        for node, held in list(self._paused.items()):
            self._on_wake(node, held)
        self._idle_restart = self.rng.random() < 0.5
        self._unanswered = {rid for rid, op in self._ops.items() if op.kind == "append"}
        self.stats["pending-at-heal"] = len(self._unanswered)
        for name in self.names:
            self.clocks[name].set_rate(self.now, 1.0)
            if self.cores[name] is None:
                self._start_node(name)
        leaders = self.leaders()
        if self.ha is None and leaders and self.rng.random() < 0.5:  # a master never steps down by itself
            self._deaf = leaders[-1]
            self.network.block([(n, self._deaf) for n in self.names if n != self._deaf])
            self.trace.add(self.now, self.step, "sim", f"but {self._deaf} hears nothing until another leads")
        self._deadline = self.now + self._liveness_ms
        self._schedule(0.0, PROBE, "", None)

    def _deaf_replaced(self) -> bool:
        """Whether another node leads than the leader left deaf; then the network heals fully."""
        if any(c is not None and c.role is Role.LEADER for n, c in self.cores.items() if n != self._deaf):
            self.trace.add(self.now, self.step, "sim", f"another leads: {self._deaf} hears again")
            self.network.heal()
            self._deaf = None
            self._deadline = self.now + self._liveness_ms
            return True
        return False

    def _on_probe(self, _node: str, _payload: None) -> None:
        """After healing: once the idle cluster has caught up, keep offering one probe append to
        whoever leads until one commits."""
        if self._deaf is not None and not self._deaf_replaced():
            self._schedule(50.0, PROBE, "", None)
            return
        if self._probe is None and not any(op.kind == "probe" for op in self._ops.values()):
            leaders = self.leaders()
            if leaders and not self._idle_caught_up:
                self._idle_caught_up = self._caught_up(leaders[-1])
                if self._idle_caught_up and self._idle_restart:
                    self._idle_restart = self._idle_caught_up = False
                    follower = self.rng.choice([n for n in self.names if n != leaders[-1]])
                    self.crash(follower, self.rng.random() < 0.5, self.rng.uniform(20.0, 400.0))
            if leaders and self._idle_caught_up:
                node = leaders[-1]
                core = self.cores[node]
                assert core is not None
                rid = self.next_rid()
                self._ops[rid] = _Op(-1, "probe", node, b"probe")
                self._answer_by(rid, self._timeouts[0])
                core.client_append(rid, [b"probe"], self.local(node))
                self.drain(node)
        if self._probe is None:
            self._schedule(50.0, PROBE, "", None)

    def _caught_up(self, leader: str) -> bool:
        """Every node's commit index at the end of `leader`'s log."""
        core = self.cores[leader]
        assert core is not None
        end = core.log.end_index
        return all(c is not None and c.commit_index == end for c in self.cores.values())

    def _not_live(self) -> Violation:
        within = f"within {self._liveness_ms:.0f} ms after healing: {self._roles()}"
        if self._deaf is not None:
            deaf = f"no node but {self._deaf}, which could send but not hear, became leader"
            return Violation("liveness", f"{deaf} {within}")
        if self._unanswered:
            pending = sorted(self._unanswered)
            return Violation(
                "liveness", f"appends pending when the faults stopped (rids {pending}) got no answer {within}"
            )
        if not self._idle_caught_up:
            idle = "the idle cluster did not bring every commit index to its leader's log end"
            return Violation("liveness", f"{idle} {within}")
        return Violation("liveness", f"no leader committed a probe and caught every node up {within}")

    def _live(self) -> bool:
        if self._probe is None or self._unanswered:
            return False
        index = self._probe[1]
        return all(c is not None and c.commit_index >= index for c in self.cores.values())


T = TypeVar("T")


def _given(value: T | None, drawn: T) -> T:
    """The config's `value` if it sets one, else the run's draw (drawn either way, so that the
    seed's later draws stay as they were)."""
    return drawn if value is None else value


def _carries_own_term(message: PeerMessage) -> bool:
    return isinstance(message, PushRequest) and any(e.term == message.term for e in message.entries)


class _Host:
    """One simulated node's side of the driver: the simulation's network, clients and disk
    (bound once: a driver calls these on every event)."""

    __slots__ = ("applied", "complete", "send", "start_flush")

    def __init__(self, sim: Simulation, node: str) -> None:
        self.send = partial(sim.send, node)
        self.complete = sim.complete
        self.start_flush = partial(sim.start_flush, node)
        self.applied = partial(sim.applied, node)


def run_seed(config: SimConfig) -> SimResult:
    """Run one seed to its end or its first violation."""
    return Simulation(config).run()
