"""The faults the simulator injects, each a start and (for most) an undo.

partition (two groups cut apart), oneway (one group cannot reach the other), bridge (two
groups that reach each other only through one node), loss, dup (duplication), delay
(large jitter, so heavy reordering), crash (process kill: the page cache survives),
powerloss (unflushed writes are lost, reordered or torn; one node, mostly one
that has writes not yet fsynced, or sometimes every node at once), skew
(a node's clock runs fast or slow, within the lease's drift bound), transfer (leadership
transfer requests to whoever leads, every 20-200 ms while it lasts), leadercrash (while it
lasts, every new leader crashes within 30 ms of its election, sometimes losing power:
leader churn), repaircrash (while it lasts, a node that truncates its log loses power
within 3 ms, before the truncation is on disk), pause (a process frozen, mostly the leader's,
as by SIGSTOP or a GC pause: either within a leader's lease or long enough for another to be
elected; what reaches it waits in its sockets until it wakes, see `nodes.sim.pause`),
leaderkill (Jepsen's "kill the leader": a spell that kills whoever leads at once, then every
new leader 1-40 ms after its election, mid catch-up, each back 20-300 ms later; while it
lasts, half of a leader's pushes of its own term's entries are lost, as with leadercrash),
votecrash (a node that stood for a term and lost it crashes, having voted for itself, and
either comes back cut off from the leader, reaching it only through the others, or crashes
once another follower, cut off from the leader, has stopped guarding its lease: the states
where a restarted candidate meets a leader's lease, seed 1128's).

Master-slave mode (`nodes.sim.hamode`) has these faults but transfer and votecrash (no
transfer, no election there), "leader" meaning the master, and one of its own: failover (the
operator's answer to a lost master, as the harness's lose-node: kill the master, promote
the most advanced live slave, bring the old master back later as that slave's slave).

Pauses, leader kills, vote crashes and failovers are drawn from generators of their own, on
schedules of their own, so adding them to a mix leaves the other faults' draws as they were.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Protocol

from nodes.sim.clock import SkewedClock
from nodes.sim.modes import DLEDGER
from nodes.sim.network import LinkModel, Network, between, split

FAULTS = ("partition", "oneway", "bridge", "loss", "dup", "delay", "crash", "powerloss", "skew", "transfer",
          "leadercrash", "repaircrash", "pause", "leaderkill", "votecrash")
MASTER_SLAVE_FAULTS = (*(f for f in FAULTS if f not in ("transfer", "votecrash")), "failover")
KNOWN = (*FAULTS, "failover")  # in some mode
OWN_SCHEDULE = ("pause", "leaderkill", "votecrash", "failover")  # not drawn from the run's generator
PAUSE_MS = ((20.0, 250.0), (800.0, 3000.0))  # within a leader's lease, or long enough for another to lead
PAUSE_GAP_MS = (300.0, 3000.0)  # from one pause's start to the next
KILL_GAP_MS = (300.0, 3000.0)  # from one leader-kill spell's start to the next
KILL_SPELL_MS = (200.0, 1500.0)  # how long a spell kills every new leader
KILL_AFTER_MS = (1.0, 40.0)  # a new leader dies this long after its election
KILL_DOWN_MS = (20.0, 300.0)  # and restarts this long after
VOTE_CRASH_SHARE = 0.5  # of the elections a self-voter loses, those a votecrash run acts on
VOTE_CUT_MS = (600.0, 2000.0)  # how long a vote crash keeps its node cut off from the leader
FAILOVER_GAP_MS = (500.0, 4000.0)  # from one failover to the next
FAILOVER_DOWN_MS = (100.0, 2500.0)  # the old master comes back, a slave, this long after


def mode_faults(mode: str) -> tuple[str, ...]:
    """The faults a run of `mode` (`nodes.sim.modes`) can inject: `all` there."""
    return FAULTS if mode == DLEDGER else MASTER_SLAVE_FAULTS


def parse_faults(text: str, mode: str | None = DLEDGER) -> tuple[str, ...]:
    """`partition,crash` -> the tuple; `all` -> every fault of `mode`; `none` -> no fault. A
    fault of another mode is left out (a mix for several modes); `mode` None keeps the faults
    of every mode. ValueError names unknown ones."""
    if text in ("", "none"):
        return ()
    catalog = KNOWN if mode is None else mode_faults(mode)
    if text == "all":
        return catalog
    names = tuple(t.strip() for t in text.split(",") if t.strip())
    bad = [n for n in names if n not in KNOWN]
    if bad:
        raise ValueError(f"unknown fault(s) {', '.join(bad)}: use a comma list of {', '.join(KNOWN)}, "
                         "or all / none")
    return tuple(n for n in names if n in catalog)


class FaultTarget(Protocol):
    """What a fault acts on: the simulation exposes these."""

    names: list[str]
    network: Network
    clocks: dict[str, SkewedClock]
    now: float

    leader_crashes: bool
    repair_crashes: bool
    transfers: bool

    def crash(self, node: str, power_loss: bool, downtime: float) -> None: ...
    def pause(self, node: str, duration: float) -> None: ...
    def leaders(self) -> list[str]: ...
    def start_transfers(self) -> None: ...
    def dirty_nodes(self) -> list[str]: ...


Undo = Callable[[], None] | None


def start_fault(kind: str, sim: FaultTarget, rng: random.Random) -> Undo:
    """Inject one fault of `kind` now; return how to undo it (None if it undoes itself)."""
    net = sim.network
    if kind == "partition":
        net.block(between(*split(sim.names, rng)))
        return _unblock(net)
    if kind == "oneway":
        a, b = split(sim.names, rng)
        net.block(between(a, b, both_ways=False))
        return _unblock(net)
    if kind == "bridge":
        others = list(sim.names)
        rng.shuffle(others)
        others.pop()  # the bridge node keeps every link
        if len(others) >= 2:
            net.block(between(*split(others, rng)))
        return _unblock(net)
    if kind in ("loss", "dup", "delay"):
        return _link_fault(kind, net, rng)
    if kind == "crash" or (kind == "powerloss" and rng.random() < 0.7):
        dirty = sim.dirty_nodes() if kind == "powerloss" and rng.random() < 0.8 else []
        sim.crash(rng.choice(dirty or sim.names), kind == "powerloss", rng.uniform(20.0, 1500.0))
        return None
    if kind == "powerloss":  # the whole cluster loses power at once
        for node in sim.names:
            sim.crash(node, True, rng.uniform(20.0, 1500.0))
        return None
    if kind == "skew":
        node = rng.choice(sim.names)
        clock = sim.clocks[node]
        clock.set_rate(sim.now, rng.uniform(0.96, 1.04))
        return lambda: clock.set_rate(sim.now, 1.0)
    if kind in ("leadercrash", "repaircrash"):
        flag = "leader_crashes" if kind == "leadercrash" else "repair_crashes"
        setattr(sim, flag, True)
        return lambda: setattr(sim, flag, False)
    if kind == "transfer":
        sim.start_transfers()
        return lambda: setattr(sim, "transfers", False)
    raise ValueError(f"unknown fault {kind!r}")


def start_pause(sim: FaultTarget, rng: random.Random) -> None:
    """Freeze a node, the leader four times in five when there is one, for a while."""
    leaders = sim.leaders()
    node = leaders[-1] if leaders and rng.random() < 0.8 else rng.choice(sim.names)
    sim.pause(node, rng.uniform(*rng.choice(PAUSE_MS)))


def _unblock(net: Network) -> Callable[[], None]:
    return lambda: net.block([])


def _link_fault(kind: str, net: Network, rng: random.Random) -> Callable[[], None]:
    normal = LinkModel()
    if kind == "loss":
        net.model.loss = rng.uniform(0.05, 0.4)
        return lambda: setattr(net.model, "loss", normal.loss)
    if kind == "dup":
        net.model.duplicate = rng.uniform(0.05, 0.4)
        return lambda: setattr(net.model, "duplicate", normal.duplicate)
    net.model.jitter_ms = rng.uniform(10.0, 80.0)
    return lambda: setattr(net.model, "jitter_ms", normal.jitter_ms)
