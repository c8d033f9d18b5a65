"""Healing and the liveness phase that follows the faults.

At healing partitions and link faults stop, crashed nodes restart, paused ones wake, clocks
run true and clients stop sending; in half the DLedger runs the leader is left deaf, able to
send but not to hear, until another node leads, which must happen within `liveness_ms` (a
leader that hears no quorum steps down; a master never steps down by itself, so master-slave
runs leave none deaf). Then, within `liveness_ms` of simulated time, a leader must be elected
and, idle, bring every node's commit index to the end of its log (in half the runs once more
after a follower restarts then: it learns how far it matches only if the leader asks, as no
append will tell it), then commit a fresh probe append and bring every node's commit index up
to it, and every append pending when the faults stopped must be answered.
"""

from __future__ import annotations

from nodes.election import Role
from nodes.sim.invariants import Violation
from nodes.sim.nemesis import Nemesis
from nodes.sim.nodes import Nodes
from nodes.sim.workload import Workload

PROBE_EVERY_MS = 50.0


class Liveness:
    """Heals `nodes` and waits for them to be live; `done` tells the run loop when they are."""

    def __init__(self, nodes: Nodes, workload: Workload, nemesis: Nemesis) -> None:
        self.nodes, self.workload, self.nemesis = nodes, workload, nemesis
        self.loop, self.rng, self.trace = nodes.loop, nodes.rng, nodes.trace
        config, ha = nodes.config, nodes.ha
        if ha is None:
            leader_lost_ms = nodes.core_config.timing.leader_lost_ms
            self.liveness_ms = config.liveness_ms or max(20000.0, 30 * leader_lost_ms)
        else:
            self.liveness_ms = config.liveness_ms or ha.liveness_ms
        self._deadline = float("inf")  # the current stage must end by then
        self._idle_caught_up = False  # every commit index at the leader's log end
        self._idle_restart = False  # restart a follower once the cluster caught up
        self._deaf: str | None = None  # the leader left able to send but not receive
        self._probe = self.loop.on(self._on_probe)

    def heal(self) -> None:
        nodes, network = self.nodes, self.nodes.network
        self.trace.add("sim", "heal: faults stop, crashed nodes restart")
        network.heal()
        self.nemesis.stop()
        nodes.wake_all()
        self._idle_restart = self.rng.random() < 0.5
        self.workload.stop()
        nodes.recover()
        leaders = nodes.leaders()
        if nodes.ha is None and leaders and self.rng.random() < 0.5:
            deaf = self._deaf = leaders[-1]
            network.block([(n, deaf) for n in nodes.names if n != deaf])
            self.trace.add("sim", f"but {deaf} hears nothing until another leads")
        self._deadline = self.loop.now + self.liveness_ms
        self.loop.after(0.0, self._probe, "", None)

    def done(self) -> bool:
        """Whether the healed cluster is live (a Violation once it is too late to be)."""
        if self._live():
            return True
        if self.loop.now > self._deadline:
            raise self._not_live()
        return False

    def _deaf_replaced(self) -> bool:
        """Whether another node leads than the leader left deaf; then the network heals fully."""
        cores = self.nodes.cores
        if any(c is not None and c.role is Role.LEADER for n, c in cores.items() if n != self._deaf):
            self.trace.add("sim", f"another leads: {self._deaf} hears again")
            self.nodes.network.heal()
            self._deaf = None
            self._deadline = self.loop.now + self.liveness_ms
            return True
        return False

    def _on_probe(self, _node: str, _payload: None) -> None:
        """Once the idle cluster has caught up, keep offering one probe append to whoever leads
        until one commits."""
        if self._deaf is not None and not self._deaf_replaced():
            self.loop.after(PROBE_EVERY_MS, self._probe, "", None)
            return
        nodes, workload = self.nodes, self.workload
        if workload.probed is None and not workload.probing():
            leaders = nodes.leaders()
            if leaders and not self._idle_caught_up:
                self._idle_caught_up = self._caught_up(leaders[-1])
                if self._idle_caught_up and self._idle_restart:
                    self._idle_restart = self._idle_caught_up = False
                    follower = self.rng.choice([n for n in nodes.names if n != leaders[-1]])
                    nodes.crash(follower, self.rng.random() < 0.5, self.rng.uniform(20.0, 400.0))
            if leaders and self._idle_caught_up:
                workload.probe(leaders[-1])
        if workload.probed is None:
            self.loop.after(PROBE_EVERY_MS, self._probe, "", None)

    def _caught_up(self, leader: str) -> bool:
        """Every node's commit index at the end of `leader`'s log."""
        core = self.nodes.cores[leader]
        assert core is not None
        end = core.log.end_index
        return all(c is not None and c.commit_index == end for c in self.nodes.cores.values())

    def _live(self) -> bool:
        probed = self.workload.probed
        if probed is None or self.workload.unanswered:
            return False
        return all(c is not None and c.commit_index >= probed[1] for c in self.nodes.cores.values())

    def _not_live(self) -> Violation:
        within = f"within {self.liveness_ms:.0f} ms after healing: {self.nodes.roles()}"
        if self._deaf is not None:
            deaf = f"no node but {self._deaf}, which could send but not hear, became leader"
            return Violation("liveness", f"{deaf} {within}")
        unanswered = self.workload.unanswered
        if unanswered:
            pending = sorted(unanswered)
            return Violation(
                "liveness", f"appends pending when the faults stopped (rids {pending}) got no answer {within}"
            )
        if not self._idle_caught_up:
            idle = "the idle cluster did not bring every commit index to its leader's log end"
            return Violation("liveness", f"{idle} {within}")
        return Violation("liveness", f"no leader committed a probe and caught every node up {within}")
