"""Recipes: several faults in a row inside one start, each recipe a family of its own.

`pause-kill` pauses the leader, waits (bounded) for the others to elect a new one, then kills
a random one of the others: what remains must carry on. Its stop restarts the killed node and
resumes the paused one, so the old leader wakes up stale next to a node that recovered from
its disk.

`part-kill` (Jepsen) partitions a minority off (never the leader) so it misses writes for a
step, crashes a node of the majority, and heals the partition: the survivors and the stale
minority form the new majority, which must keep every committed entry. Its stop restarts
the crashed node.

`swizzle-clog` (FoundationDB's swizzle) clogs a random majority or more of the nodes one at
a time, a step apart (each drops all traffic to and from its peers); its stop unclogs them in
a random order drawn at start, a step apart: the group must recover whatever order its links
come back in.

`stale-leader` makes a leader that still believes it leads while the others elect a new one
and commit more, cut off from its peers but not from clients: every read it answers must first
be confirmed by a majority it cannot reach. Two ways (`--stale-leader-modes`): `pause` pauses
the leader, cuts it off, waits (bounded) for a new leader and resumes it: it wakes with its
lease run out and steps down once a leader-lost time passes without replies; `clock` sets its
clock back first (its timers freeze: it never steps down) and then cuts it off, a window of
seconds, but outside the drift lease reads assume, so a `mixed` run sends no lease read
meanwhile (`"stepped_clock"` in the value). Its stop heals the cut (and resets the clock).

Each start and stop value lists its steps, `{"step", "targets", "at_s"}` (seconds since that
start or stop began). Both stay bounded: the pause between steps is `--recipe-step-ms`, and a
wait for a new leader gives up after `LEADER_WAIT_S` (the value then says `"new_leader": null`).
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from typing import Any

from nemesis import grudge
from nemesis.base import Family, Nodes, Option, comma_list, positive
from nemesis.clock import STROBE_CLEANUP, ClockFault
from nemesis.partition import CHAIN_CLEANUP, apply_grudge, clog, heal_all, lift_grudge, rules_left, unclog
from nemesis.targets import choose

LEADER_WAIT_S = 5.0
STALE_MODES = ("pause", "clock")
POLL_S = 0.1


class Steps:
    """The steps of one start or stop, timed from its beginning."""

    def __init__(self) -> None:
        self.began = time.monotonic()
        self.done: list[dict[str, Any]] = []

    def add(self, step: str, targets: list[str], **detail: Any) -> None:
        at = round(time.monotonic() - self.began, 3)
        self.done.append({"step": step, "targets": sorted(targets), "at_s": at, **detail})


def await_leader(nodes: Nodes, accept: Callable[[str], bool], wait_s: float) -> str | None:
    """The first leader that `accept` takes, asking until `wait_s` seconds pass; None if none came."""
    deadline = time.monotonic() + wait_s
    while True:
        leader = nodes.leader()
        if leader is not None and accept(leader):
            return leader
        if time.monotonic() >= deadline:
            return None
        time.sleep(POLL_S)


def lagging_minority(nodes: Nodes, rng: random.Random, step_s: float,
                     steps: Steps) -> tuple[str | None, list[str], list[str], grudge.Grudge]:
    """Cut a random largest minority (never the leader) off for `step_s`, so the others commit
    entries it never sees; the leader, the minority, the others, and the cut's grudge (in force)."""
    names = nodes.names
    leader = nodes.leader()
    size = len(names) - grudge.majority(len(names))
    minority = sorted(rng.sample([node for node in names if node != leader], size))
    rest = [node for node in names if node not in minority]
    drops = grudge.grudge(grudge.components([minority, rest]))
    apply_grudge(nodes, drops)
    steps.add("partition", minority, grudge=drops)
    time.sleep(step_s)
    return leader, minority, rest, drops


def revive_all(nodes: Nodes) -> None:
    """Resume every paused node process and start every one that is gone."""
    for node in nodes.names:
        state = nodes.state(node)
        if state == "T":
            nodes.resume(node)
        elif state is None:
            nodes.start(node)


def process_leftovers(nodes: Nodes) -> list[str]:
    """Every node process that is gone or paused."""
    left = []
    for node in nodes.names:
        state = nodes.state(node)
        if state is None:
            left.append(f"{node}: the node process is not running")
        elif state == "T":
            left.append(f"{node}: the node process is paused")
    return left


class PauseKillFault:
    """Pause the leader, kill one of the others once they elect a new leader; see the module doc."""

    def __init__(self, nodes: Nodes, wait_s: float = LEADER_WAIT_S) -> None:
        self.nodes = nodes
        self.wait_s = wait_s
        self.paused: str | None = None
        self.killed: str | None = None

    def start(self, rng: random.Random) -> dict[str, Any]:
        steps = Steps()
        names = self.nodes.names
        leader = self.nodes.leader()
        paused = choose("leader", names, leader, rng)[0]
        self.nodes.pause(paused)
        self.paused = paused
        steps.add("pause", [paused])
        new_leader = await_leader(self.nodes, lambda node: node != paused, self.wait_s)
        victim = rng.choice([node for node in names if node != paused])
        self.nodes.kill(victim)
        self.killed = victim
        steps.add("kill", [victim])
        return {"leader": leader, "new_leader": new_leader, "steps": steps.done,
                "targets": sorted([paused, victim])}

    def stop(self) -> dict[str, Any]:
        steps = Steps()
        if self.killed is not None:
            self.nodes.start(self.killed)
            steps.add("start", [self.killed])
        if self.paused is not None:
            self.nodes.resume(self.paused)
            steps.add("resume", [self.paused])
        targets = sorted({node for node in (self.killed, self.paused) if node is not None})
        self.paused = self.killed = None
        return {"steps": steps.done, "targets": targets}

    def heal(self) -> None:
        revive_all(self.nodes)
        self.paused = self.killed = None

    def leftovers(self) -> list[str]:
        return process_leftovers(self.nodes)


class PartKillFault:
    """Partition a minority off, crash a node of the majority, heal the partition; see the module doc."""

    def __init__(self, nodes: Nodes, step_s: float, wait_s: float = LEADER_WAIT_S) -> None:
        self.nodes = nodes
        self.step_s = step_s
        self.wait_s = wait_s
        self.killed: str | None = None

    def start(self, rng: random.Random) -> dict[str, Any]:
        steps = Steps()
        names = self.nodes.names
        leader, minority, rest, drops = lagging_minority(self.nodes, rng, self.step_s, steps)
        victim = rng.choice(rest)
        self.nodes.kill(victim)
        self.killed = victim
        steps.add("kill", [victim])
        lift_grudge(self.nodes, drops)
        steps.add("heal", names)
        new_leader = await_leader(self.nodes, lambda node: node != victim, self.wait_s)
        return {"leader": leader, "minority": minority, "new_leader": new_leader, "steps": steps.done,
                "targets": sorted([*minority, victim])}

    def stop(self) -> dict[str, Any]:
        restarted = [] if self.killed is None else [self.killed]
        for node in restarted:
            self.nodes.start(node)
        self.killed = None
        return {"targets": restarted}

    def heal(self) -> None:
        heal_all(self.nodes)
        revive_all(self.nodes)
        self.killed = None

    def leftovers(self) -> list[str]:
        return rules_left(self.nodes) + process_leftovers(self.nodes)


class StaleLeaderFault:
    """A leader cut off from its peers that still believes it leads; see the module doc."""

    def __init__(self, nodes: Nodes, modes: tuple[str, ...], max_skew_ms: float,
                 wait_s: float = LEADER_WAIT_S) -> None:
        self.nodes = nodes
        self.modes = modes
        self.wait_s = wait_s
        self.clock = ClockFault(nodes, ("leader",), ("bump",), max_skew_ms, strobe_ms=0.0)
        self.drops: grudge.Grudge = {}
        self.stale: list[str] = []

    def start(self, rng: random.Random) -> dict[str, Any]:
        steps = Steps()
        mode = rng.choice(self.modes)
        if mode == "clock":  # first, so the leader's timers are frozen before it misses a reply
            clock = self.clock.start(rng)
            (old,), leader = clock["targets"], clock["leader"]
            steps.add("clock-back", [old], offsets_ms=clock["offsets_ms"])
        else:
            leader = self.nodes.leader()
            old = choose("leader", self.nodes.names, leader, rng)[0]
            self.nodes.pause(old)
            steps.add("pause", [old])
        rest = [node for node in self.nodes.names if node != old]
        self.drops = grudge.grudge(grudge.components([[old], rest]))
        apply_grudge(self.nodes, self.drops)
        self.stale = [old]
        steps.add("isolate", [old], grudge=self.drops)
        value = {"mode": mode, "leader": leader, "stepped_clock": mode == "clock", "targets": [old]}
        if mode == "pause":
            value["new_leader"] = await_leader(self.nodes, lambda node: node != old, self.wait_s)
            self.nodes.resume(old)
            steps.add("resume", [old])
        return {**value, "steps": steps.done}

    def stop(self) -> dict[str, Any]:
        steps = Steps()
        lift_grudge(self.nodes, self.drops)
        steps.add("heal", self.stale)
        reset = self.clock.stop()["targets"]
        if reset:
            steps.add("clock-reset", reset)
        stale, self.stale, self.drops = self.stale, [], {}
        return {"steps": steps.done, "targets": stale}

    def heal(self) -> None:
        heal_all(self.nodes)
        self.clock.heal()
        revive_all(self.nodes)
        self.drops, self.stale = {}, []

    def leftovers(self) -> list[str]:
        return rules_left(self.nodes) + self.clock.leftovers() + process_leftovers(self.nodes)


class SwizzleClogFault:
    """Clog a majority or more one by one, unclog them in a random order; see the module doc."""

    def __init__(self, nodes: Nodes, step_s: float) -> None:
        self.nodes = nodes
        self.step_s = step_s
        self.clogged: list[str] = []
        self.unclog_order: list[str] = []

    def _clog(self, node: str) -> None:
        clog(self.nodes, node)
        self.clogged.append(node)

    def _unclog(self, node: str) -> None:
        unclog(self.nodes, node)
        self.clogged.remove(node)

    def _one_by_one(self, step: str, order: list[str], act: Callable[[str], None]) -> list[dict[str, Any]]:
        steps = Steps()
        for i, node in enumerate(order):
            if i:
                time.sleep(self.step_s)
            act(node)
            steps.add(step, [node])
        return steps.done

    def start(self, rng: random.Random) -> dict[str, Any]:
        names = self.nodes.names
        order = rng.sample(names, rng.randint(grudge.majority(len(names)), len(names)))
        self.unclog_order = rng.sample(order, len(order))
        steps = self._one_by_one("clog", order, self._clog)
        return {"order": order, "steps": steps, "targets": sorted(order)}

    def stop(self) -> dict[str, Any]:
        order = [node for node in self.unclog_order if node in self.clogged]
        steps = self._one_by_one("unclog", order, self._unclog)
        self.unclog_order = []
        return {"order": order, "steps": steps, "targets": sorted(order)}

    def heal(self) -> None:
        heal_all(self.nodes)
        self.clogged, self.unclog_order = [], []

    def leftovers(self) -> list[str]:
        return rules_left(self.nodes)


def step_s(options: dict[str, Any]) -> float:
    """The `--recipe-step-ms` option in seconds."""
    return options["recipe_step_ms"] / 1000


STEP = Option("recipe-step-ms", "500", "pause between the steps of a recipe (part-kill's partition before "
                                       "its crash, swizzle-clog's clogs and unclogs), ms", parse=positive)

PAUSE_KILL = Family(
    name="pause-kill", label="pause+kill", start_f="start-pause-kill", stop_f="stop-pause-kill",
    make=lambda nodes, options: PauseKillFault(nodes),
    help="pause the leader, kill one of the others once they elect a new leader; restart it and resume "
         "the old leader at stop",
    weight=0.5)

PART_KILL = Family(
    name="part-kill", label="partition+kill", start_f="start-part-kill", stop_f="stop-part-kill",
    make=lambda nodes, options: PartKillFault(nodes, step_s(options)),
    help="partition a minority off, crash a node of the majority, heal so the stale minority joins the "
         "new majority; restart the crashed node at stop",
    options=(STEP,), weight=0.5, needs=frozenset({"root", "iptables"}), host_cleanup=(CHAIN_CLEANUP,))

STALE_LEADER = Family(
    name="stale-leader", label="stale leader", start_f="start-stale-leader", stop_f="stop-stale-leader",
    make=lambda nodes, options: StaleLeaderFault(nodes, options["stale_leader_modes"],
                                                 options["stale_leader_ms"]),
    help="cut the leader off from its peers while clients still reach it, and keep it believing it "
         "leads: paused until the others elect, or its clock set back; heal the cut at stop",
    options=(Option("stale-leader-modes", "pause,clock",
                    f"how the leader is kept stale: {', '.join(STALE_MODES)}", choices=STALE_MODES,
                    parse=comma_list),
             Option("stale-leader-ms", "12000", "clock mode: the leader's clock goes back a quarter to all "
                    "of this, ms; its timers stay frozen that long (clients first time out on it, then "
                    "write to the new leader while it is still stale)", parse=positive)),
    weight=0.5, needs=frozenset({"root", "iptables"}), steps_clocks=True,
    host_cleanup=(CHAIN_CLEANUP, STROBE_CLEANUP))  # its clock heal kills a strobe too

SWIZZLE_CLOG = Family(
    name="swizzle-clog", label="swizzle clog", start_f="start-swizzle-clog", stop_f="stop-swizzle-clog",
    make=lambda nodes, options: SwizzleClogFault(nodes, step_s(options)),
    help="clog a majority or more of the nodes one by one (all traffic to and from each dropped), "
         "unclog them in a random order at stop",
    options=(STEP,), weight=0.5, needs=frozenset({"root", "iptables"}), host_cleanup=(CHAIN_CLEANUP,))
