"""The simulated nodes: each one's logic (DLedger's core, or master-slave's `HaNode`), driver,
disk and clock, and what happens to them: starts, crashes, ticks, deliveries, fsyncs, pauses.

Every batch a driver carries out is checked as it is applied (`nodes.sim.invariants`, or
`nodes.sim.hainvariants` in master-slave runs). The nodes tell their clients
(`nodes.sim.workload`) of answers, crashes and pauses, and the faults (`nodes.sim.nemesis`) of
elections, lost elections, truncations and sends.
"""

from __future__ import annotations

import random
from collections import Counter
from functools import partial
from typing import TYPE_CHECKING

from nodes.core import Core, CoreConfig
from nodes.driver import Driver
from nodes.election import Role
from nodes.ha.node import HaNode
from nodes.logic import Flusher, Ready
from nodes.messages import PeerMessage, PushRequest, TransferRequest
from nodes.sim.clock import SkewedClock, drift_band, drift_rates
from nodes.sim.config import SimConfig
from nodes.sim.disk import DIRECTORY, UNCHANGED, SimDisk, disk_capacity
from nodes.sim.hamode import HaMode
from nodes.sim.invariants import Invariants
from nodes.sim.loop import Loop
from nodes.sim.modes import DLEDGER
from nodes.sim.network import Network
from nodes.sim.pause import Held
from nodes.sim.simfs import LossMode
from nodes.sim.trace import Trace
from nodes.store.logstore import Entry

if TYPE_CHECKING:
    from nodes.sim.nemesis import Nemesis
    from nodes.sim.workload import Workload

SEGMENT_SIZES = ((512, 320), (4096, 4096), (65536, 32768))  # (data, index) file sizes, drawn per run
SLOW_FSYNC_SHARE = 0.02
# per power loss
LOSS_MODE_DRAW: tuple[LossMode, ...] = ("reorder-tear", "reorder-tear", "reorder-tear", "lose-unsynced")

Logic = Core | HaNode  # a node's logic: DLedger's core, or master-slave's (`nodes.sim.hamode`)


class Nodes:
    """The cluster's nodes, on `network`; `connect` them to their clients and faults before `begin`."""

    clients: Workload
    faults: Nemesis

    def __init__(self, config: SimConfig, loop: Loop, network: Network, core_config: CoreConfig,
                 rng: random.Random, longest_body: int) -> None:
        self.config = config
        self.loop = loop
        self.network = network
        self.core_config = core_config
        self.rng = rng
        self.trace = Trace(loop)  # the run's, as its stats
        self.stats: Counter[str] = Counter()
        self.names = [f"n{i + 1}" for i in range(config.nodes)]
        # each node's disk has its own speed, and every fsync its own time with slow outliers
        self._fsync_ms = {n: config.fsync_ms * rng.uniform(0.25, 4.0) for n in self.names}
        self.drift_band = drift_band(core_config.timing.lease_drift_ratio)
        # each clock's own rate (1.0 but in `config.drifting_clocks` of the runs): a skew returns to it
        self.drift = drift_rates(config.seed, config.drifting_clocks, self.names, self.drift_band)
        self.clocks = {n: SkewedClock(0.0, rng.uniform(0.0, 1e6), self.drift[n]) for n in self.names}
        data_segment, index_segment = rng.choice(SEGMENT_SIZES)
        capacity = disk_capacity(config.seed, config.small_disks, data_segment, index_segment, longest_body)
        self.disks = {n: SimDisk(data_segment, index_segment, capacity) for n in self.names}
        self.cores: dict[str, Logic | None] = dict.fromkeys(self.names)
        self.drivers: dict[str, Driver | None] = dict.fromkeys(self.names)
        self.incarnation = dict.fromkeys(self.names, 0)
        self.checked = dict.fromkeys(self.names, -1)
        self.paused: dict[str, Held] = {}
        self.handed: set[tuple[int, str]] = set()  # (term, transferee) of every transfer that took
        self.inv = Invariants()
        self.ha = None if config.mode == DLEDGER else HaMode(self, rng)
        self._tick = loop.on(self._on_tick)
        self._deliver = loop.on(self._on_deliver)
        self._flush = loop.on(self._on_flush)
        self._restart = loop.on(self._on_restart)
        self._wake = loop.on(self._on_wake)

    def connect(self, clients: Workload, faults: Nemesis) -> None:
        """Whom the nodes tell of answers, crashes and pauses, and of elections, truncations and sends."""
        self.clients = clients
        self.faults = faults

    def begin(self) -> None:
        """Start every node (and DLedger's periodic background flush, if the run flushes so)."""
        for name in self.names:
            self.start(name)
            if self.config.durability.flusher is Flusher.STORE_THREAD:
                self.loop.after(self.rng.uniform(0, self.config.async_flush_ms), self._flush, name, -1)

    def local(self, node: str) -> float:
        return self.clocks[node].local(self.loop.now)

    def leaders(self) -> list[str]:
        """The running nodes that think they lead."""
        return [n for n, c in self.cores.items() if c is not None and c.role is Role.LEADER]

    def dirty_nodes(self) -> list[str]:
        """Running nodes whose store holds writes not yet fsynced."""
        return [n for n in self.names if self.cores[n] is not None and self.disks[n].dirty()]

    def logs(self) -> dict[str, list[Entry]]:
        return {n: self.disks[n].log for n in self.names}

    def roles(self) -> str:
        return ", ".join(
            f"{n}:{c.role.value}/t{c.term}/c{c.commit_index}" if c else f"{n}:down"
            for n, c in self.cores.items()
        )

    # ---- starts and crashes ------------------------------------------------------------

    def start(self, name: str) -> None:
        """Start `name` on what its disk holds."""
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
            name,
            f"start t{state.term} vote {state.vote_for} log end {store.end_index} commit {core.commit_index}"
            f" ({store.recovery.summary()})",
        )
        self.loop.after(self.rng.uniform(0, self.config.tick_ms), self._tick, name, self.incarnation[name])
        self.drain(name)

    def crash(self, node: str, power_loss: bool, downtime: float, rng: random.Random | None = None) -> None:
        """Kill `node` (losing, reordering or tearing unsynced writes on power loss) and
        restart it after `downtime`; the loss draws from `rng` (default: the run's)."""
        if self.cores[node] is None:
            return
        rng = rng or self.rng
        self.cores[node] = self.drivers[node] = None
        self.incarnation[node] += 1
        self.paused.pop(node, None)  # what it held dies with it
        mode = rng.choice(LOSS_MODE_DRAW)
        self.disks[node].crash(power_loss, rng, mode)
        if self.ha is not None:
            self.ha.on_crash(node, power_loss)
        self.stats["powerloss" if power_loss else "crash"] += 1
        self.trace.add(node, f"power loss ({mode})" if power_loss else "crash")
        self.clients.on_crash(node)
        self.loop.after(downtime, self._restart, node, self.incarnation[node])

    def _on_restart(self, node: str, incarnation: int) -> None:
        if self.cores[node] is None and incarnation == self.incarnation[node]:
            self.start(node)

    def recover(self) -> None:
        """Healing: every clock runs true again and every crashed node starts."""
        for name in self.names:
            self.clocks[name].set_rate(self.loop.now, 1.0)
            if self.cores[name] is None:
                self.start(name)

    # ---- pauses ------------------------------------------------------------------------

    def pause(self, node: str, duration: float, rng: random.Random) -> None:
        """Freeze `node` for `duration` (see `nodes.sim.pause`; its wake draws from `rng`); a crash
        ends the pause for good."""
        if self.cores[node] is None or node in self.paused:
            return
        held = self.paused[node] = Held(self.loop.now, rng)
        self.stats["fault-pause"] += 1
        self.trace.add(node, f"paused for {duration:.0f} ms")
        self.clients.on_pause(node, duration)
        self.loop.after(duration, self._wake, node, held)

    def _on_wake(self, node: str, held: Held) -> None:
        if self.paused.get(node) is not held:
            return  # it crashed meanwhile, or healing woke it
        del self.paused[node]
        inputs = held.wake()
        self.trace.add(node, f"wakes after {self.loop.now - held.started:.0f} ms, {len(inputs)} inputs held")
        for handle in inputs:
            handle()

    def wake_all(self) -> None:
        """Healing: every paused node wakes now."""
        for node, held in list(self.paused.items()):
            self._on_wake(node, held)

    # ---- events ------------------------------------------------------------------------

    def _on_tick(self, node: str, incarnation: int) -> None:
        core = self.cores[node]
        if core is None or incarnation != self.incarnation[node]:
            return
        held = self.paused.get(node)
        if held is not None:  # the timer fires when it wakes, and runs on from there
            held.hold("timer", lambda: self._on_tick(node, incarnation))
            return
        local = self.clocks[node].local(self.loop.now)
        core.tick(local)
        driver = self.drivers[node]
        assert driver is not None
        driver.drive()
        self.disks[node].check_space(local)
        driver.tick(local)
        self.loop.after(self.config.tick_ms, self._tick, node, incarnation)

    def _on_deliver(self, node: str, payload: tuple[str, PeerMessage]) -> None:
        sender, message = payload
        core = self.cores[node]
        if core is None or not self.network.connected(sender, node):
            self.trace.add(node, f"drop from {sender}", message)
            return
        held = self.paused.get(node)
        if held is not None:
            self.trace.add(node, f"holds from {sender}", message)
            held.hold(sender, lambda: self._receive(node, sender, message))
            return
        self._receive(node, sender, message)

    def _receive(self, node: str, sender: str, message: PeerMessage) -> None:
        core = self.cores[node]
        assert core is not None
        self.trace.add(node, f"recv from {sender}", message)
        core.receive(sender, message, self.clocks[node].local(self.loop.now))
        if (isinstance(message, TransferRequest) and isinstance(core, Core)
                and core.taking_term == message.term + 1):
            self.handed.add((message.term + 1, node))
        self.drivers[node].drive()  # type: ignore[union-attr]  # a running node has a driver

    def _on_flush(self, node: str, incarnation: int) -> None:
        disk = self.disks[node]
        driver = self.drivers[node]
        if incarnation == -1:  # Flusher.STORE_THREAD: DLedger's periodic background flush
            self.loop.after(self.config.async_flush_ms, self._flush, node, -1)
            if disk.store is not None and node not in self.paused:  # its flush thread is frozen too
                disk.store.flush()
            return
        if incarnation != self.incarnation[node] or disk.store is None or driver is None:
            return
        held = self.paused.get(node)
        if held is not None:  # the fsync returns when it wakes
            held.hold("disk", lambda: self._on_flush(node, incarnation))
            return
        disk.store.flush()  # the group commit the driver asked for
        driver.flushed(self.local(node))

    # ---- what a driver calls back (`_Host`) --------------------------------------------

    def drain(self, node: str) -> None:
        """Carry out the core's outputs (the driver calls back `_Host`)."""
        driver = self.drivers[node]
        assert driver is not None
        driver.drive()

    def applied(self, node: str, ready: Ready) -> None:
        """The driver carried out `ready`'s writes: check what they and the outputs claim."""
        disk = self.disks[node]
        faults = self.faults
        for change in ready.role_changes:  # election safety first, before any log check
            self.trace.add(node, f"becomes {change.role.value} t{change.term} leader {change.leader}")
            if change.role is Role.LEADER:
                self.stats["elections"] += 1
                self.inv.on_election(node, change.term)
                self.inv.on_leases(node, change.term, {
                    n: c.term for n, c in self.cores.items()
                    if n != node and isinstance(c, Core) and c.serves_lease_reads(self.local(n))
                })
                faults.on_elected(node)
            elif change.role is Role.FOLLOWER and change.leader is not None:
                faults.on_follows(node, change.leader)
        faults.on_writes(node, ready.writes)
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

    def _check_changed(self, node: str) -> None:
        """Log matching for `node`'s entries written (or changed by a power loss) since the last check."""
        disk = self.disks[node]
        if disk.changed_from != UNCHANGED:
            start, disk.changed_from = disk.changed_from, UNCHANGED
            self.inv.on_write(node, disk.log, start, self.logs)
            if self.ha is not None:
                self.ha.checks.on_changed(node, start)

    def send(self, node: str, peer: str, message: PeerMessage) -> None:
        """`node` sends `message` to `peer` through the simulated network."""
        self.stats["messages"] += 1
        churn = self.faults.churn()
        if churn is not None and _carries_own_term(message) and churn.random() < 0.5:
            # leader churn: half of a leader's pushes of its own term's entries are lost, so
            # older entries can reach a majority while its no-op does not (Raft's Figure 8)
            self.trace.add(node, f"lost to {peer}", message)
            return
        loop, kind, payload = self.loop, self._deliver, (node, message)
        for at in self.network.arrivals(node, peer, loop.now):
            loop.at(at, kind, peer, payload)

    def start_flush(self, node: str) -> None:
        """`node`'s driver asks for a group-commit flush: the disk does it a while later."""
        self.loop.after(self._fsync_delay(node), self._flush, node, self.incarnation[node])

    def _fsync_delay(self, node: str) -> float:
        """How long this fsync takes: the node's disk speed, jittered, now and then 20-50x slower."""
        rng = self.rng
        delay = self._fsync_ms[node] * rng.uniform(0.5, 1.5)
        return delay * rng.uniform(20.0, 50.0) if rng.random() < SLOW_FSYNC_SHARE else delay


def _carries_own_term(message: PeerMessage) -> bool:
    return isinstance(message, PushRequest) and any(e.term == message.term for e in message.entries)


class _Host:
    """One simulated node's side of the driver: the network, the clients and the disk (bound
    once: a driver calls these on every event)."""

    __slots__ = ("applied", "complete", "send", "start_flush")

    def __init__(self, nodes: Nodes, node: str) -> None:
        self.send = partial(nodes.send, node)
        self.complete = nodes.clients.complete
        self.start_flush = partial(nodes.start_flush, node)
        self.applied = partial(nodes.applied, node)
