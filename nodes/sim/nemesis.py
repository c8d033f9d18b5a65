"""The simulator's nemesis: it runs a run's faults (`nodes.sim.faults`) until healing, and holds
what the lasting ones make of the nodes' elections, lost elections, truncations and sends.

The drawn faults come one every `fault_gap_ms` from the run's generator, each undone after
`fault_length_ms`; the own-scheduled ones begin at the run's start with generators of their
own. Crashes at a chosen moment: under leadercrash a new leader soon after its election (leader
churn, often before its no-op and the older entries it pushes reach a majority: Raft's Figure
8), under repaircrash a follower just after it truncated its log, with power loss, before the
truncation is on disk (the cut entries may come back: the leader's next push must repair them);
a leaderkill spell kills every new leader; a votecrash crashes a node that lost the election it
stood in.
"""

from __future__ import annotations

import random
from collections.abc import Callable

from nodes.core import Core
from nodes.election import Role
from nodes.logview import StoreWrite, Truncate
from nodes.sim.faults import BY_NAME, CATALOGUE, KILL_AFTER_MS, KILL_DOWN_MS, VOTE_CRASH_SHARE, VOTE_CUT_MS
from nodes.sim.network import between
from nodes.sim.nodes import Nodes
from nodes.sim.workload import Workload

Fire = Callable[["Nemesis", random.Random], None]  # one firing of an own-scheduled fault
Repeat = tuple[tuple[float, float], random.Random, Fire]  # (gap, its generator, what fires)


class Nemesis:
    """The faults of one run against `nodes` (and their clients, which transfers go through)."""

    def __init__(self, nodes: Nodes, workload: Workload) -> None:
        self.nodes, self.workload = nodes, workload
        self.network = nodes.network
        self.loop, self.rng, self.trace, self.stats = nodes.loop, nodes.rng, nodes.trace, nodes.stats
        self.config = config = nodes.config
        self.stopped = False  # healing began: no fault starts or acts again
        self.leader_crashes = False  # leadercrash lasts
        self.repair_crashes = False  # repaircrash lasts
        self.transfers = False  # transfer lasts
        self.kill_rng: random.Random | None = None  # leaderkill's own generator, in leaderkill runs
        self.kill_until = -1.0  # the last leaderkill spell lasts until then
        self.vote_rng: random.Random | None = None  # votecrash's own generator, in votecrash runs
        self.vote_cut_until = -1.0  # one vote crash at a time: the last one's cut lasts until then
        self._drawn = tuple(BY_NAME[f] for f in config.faults if not BY_NAME[f].own_schedule)
        self._own = tuple(f for f in CATALOGUE if f.own_schedule and f.name in config.faults)
        loop = self.loop
        self._fault = loop.on(self._on_fault)
        self._fault_end = loop.on(self._on_fault_end)
        self._repeat = loop.on(self._on_repeat)
        self._transfer = loop.on(self._on_transfer)
        self._moment_crash = loop.on(self._on_moment_crash)
        self._kill = loop.on(self._on_kill)
        self._vote_crash = loop.on(self._on_vote_crash)
        self._mend = loop.on(self._on_mend)

    def begin(self) -> None:
        """Schedule the first drawn fault, and begin the own-scheduled ones."""
        if self._drawn:
            self.loop.after(self.rng.uniform(*self.config.fault_gap_ms), self._fault, "", None)
        for fault in self._own:
            fault.start(self, random.Random(f"{fault.name}-{self.config.seed}"))

    def stop(self) -> None:
        """Healing: no fault starts again, and the lasting ones stop acting."""
        self.stopped = True
        self.leader_crashes = self.repair_crashes = self.transfers = False

    # ---- schedules ---------------------------------------------------------------------

    def _on_fault(self, _node: str, _payload: None) -> None:
        if self.stopped:
            return
        rng = self.rng
        fault = rng.choice(self._drawn)
        self.stats[f"fault-{fault.name}"] += 1
        self.trace.add("sim", f"fault {fault.name} starts")
        node = fault.start(self, rng)
        if fault.undo is not None:
            self.loop.after(rng.uniform(*self.config.fault_length_ms), self._fault_end, fault.name, node)
        self.loop.after(rng.uniform(*self.config.fault_gap_ms), self._fault, "", None)

    def _on_fault_end(self, name: str, node: str | None) -> None:
        undo = BY_NAME[name].undo
        if not self.stopped and undo is not None:
            self.trace.add("sim", f"fault {name} ends")
            undo(self, node)

    def repeat(self, gap_ms: tuple[float, float], rng: random.Random, fire: Fire) -> None:
        """`fire(self, rng)` every `gap_ms` (drawn from `rng`) until healing."""
        repeat: Repeat = (gap_ms, rng, fire)
        self.loop.after(rng.uniform(*gap_ms), self._repeat, "", repeat)

    def _on_repeat(self, _node: str, repeat: Repeat) -> None:
        if not self.stopped:
            gap_ms, rng, fire = repeat
            fire(self, rng)
            self.loop.after(rng.uniform(*gap_ms), self._repeat, "", repeat)

    def start_transfers(self) -> None:
        """Ask whoever leads to hand over, again every 20-200 ms until `transfers` is cleared."""
        self.transfers = True
        self.loop.after(0.0, self._transfer, "", None)

    def _on_transfer(self, _node: str, _payload: None) -> None:
        if self.transfers:
            self.workload.request_transfer()
            self.loop.after(self.rng.uniform(20.0, 200.0), self._transfer, "", None)

    # ---- what lasting faults make of the nodes' doings ---------------------------------

    def killing(self) -> random.Random | None:
        """leaderkill's generator while a spell lasts (every new leader dies soon after its election)."""
        return self.kill_rng if self.loop.now < self.kill_until and not self.stopped else None

    def churn(self) -> random.Random | None:
        """While leader churn lasts (leadercrash, a leaderkill spell), the generator that loses half
        of a leader's pushes of its own term's entries; else None."""
        return self.rng if self.leader_crashes else self.killing()

    def kill(self, node: str, delay: float) -> None:
        """Kill `node` in `delay` ms if it leads then (its process only: the page cache survives)."""
        self.loop.after(delay, self._kill, node, self.nodes.incarnation[node])

    def on_elected(self, node: str) -> None:
        """`node` leads now: in a leaderkill spell it dies soon, under leadercrash it crashes soon."""
        kills = self.killing()
        if kills is not None:
            self.kill(node, kills.uniform(*KILL_AFTER_MS))
        if self.leader_crashes:
            power = self.rng.random() < 0.3
            crash_at = (self.nodes.incarnation[node], True, power)
            self.loop.after(self.rng.uniform(0.0, 30.0), self._moment_crash, node, crash_at)

    def on_follows(self, node: str, leader: str) -> None:
        """`node` follows `leader`: if it voted for itself it lost the election it stood in, and a
        votecrash acts on it now and then."""
        rng = self.vote_rng
        core = self.nodes.cores[node]
        if (rng is not None and not self.stopped and self.loop.now >= self.vote_cut_until
                and isinstance(core, Core) and core.vote_for == node and rng.random() < VOTE_CRASH_SHARE):
            self._start_vote_crash(node, leader, rng)

    def on_writes(self, node: str, writes: list[StoreWrite]) -> None:
        """`node` carries out `writes`: under repaircrash, a truncation loses power within 3 ms."""
        if self.repair_crashes and any(isinstance(w, Truncate) for w in writes):
            crash_at = (self.nodes.incarnation[node], False, True)
            self.loop.after(self.rng.uniform(0.0, 3.0), self._moment_crash, node, crash_at)

    def _on_moment_crash(self, node: str, payload: tuple[int, bool, bool]) -> None:
        """A crash at a chosen moment (module doc)."""
        incarnation, only_leader, power = payload
        nodes = self.nodes
        core = nodes.cores[node]
        alive = core is not None and incarnation == nodes.incarnation[node]
        if self.stopped or core is None or not alive or (only_leader and core.role is not Role.LEADER):
            return
        # a repairing follower comes back before the leader's pushes to it time out, so the
        # leader streams on (APPEND) over the entries the lost truncation brought back
        rng = self.rng
        nodes.crash(node, power, rng.uniform(20.0, 400.0) if only_leader else rng.uniform(5.0, 60.0))

    def _on_kill(self, node: str, incarnation: int) -> None:
        nodes, rng = self.nodes, self.kill_rng
        core = nodes.cores[node]
        alive = core is not None and incarnation == nodes.incarnation[node]
        if self.stopped or rng is None or core is None or not alive or core.role is not Role.LEADER:
            return
        self.stats["leader-killed"] += 1
        nodes.crash(node, False, rng.uniform(*KILL_DOWN_MS), rng)

    def _start_vote_crash(self, node: str, leader: str, rng: random.Random) -> None:
        """`node` lost the election it stood in: it crashes with its vote for itself on disk.
        Either it comes back cut off from `leader` (so it stands again, through the others), or
        another follower is cut off from `leader` first and `node`, which keeps confirming the
        leader's lease until it dies, comes back once that follower no longer guards the lease."""
        nodes = self.nodes
        others = [n for n in nodes.names if n not in (node, leader)]
        if rng.random() < 0.5 or not others:
            cut, delay, downtime = node, rng.uniform(0.0, 30.0), rng.uniform(20.0, 300.0)
        else:
            cut, delay = rng.choice(others), nodes.core_config.timing.leader_lost_ms + rng.uniform(0.0, 100.0)
            downtime = rng.uniform(5.0, 150.0)  # back within the lease it confirmed
        links = between([cut], [leader])
        self.network.cut(links)
        length = delay + rng.uniform(*VOTE_CUT_MS)
        self.vote_cut_until = self.loop.now + length
        self.stats["fault-votecrash"] += 1
        self.trace.add("sim", f"vote crash: {node} lost to {leader}; {cut} cut off")
        self.loop.after(length, self._mend, "", links)
        crash = (nodes.incarnation[node], rng.random() < 0.3, downtime)
        self.loop.after(delay, self._vote_crash, node, crash)

    def _on_vote_crash(self, node: str, payload: tuple[int, bool, float]) -> None:
        incarnation, power, downtime = payload
        nodes = self.nodes
        if not self.stopped and nodes.cores[node] is not None and incarnation == nodes.incarnation[node]:
            nodes.crash(node, power, downtime, self.vote_rng)

    def _on_mend(self, _node: str, links: list[tuple[str, str]]) -> None:
        self.network.mend(links)
