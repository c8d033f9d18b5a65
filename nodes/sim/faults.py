"""The faults the simulator injects: one table (`CATALOGUE`), each fault a value with its hooks.

Most faults are drawn from the run's generator, one every `fault_gap_ms` (`SimConfig`):
`start` injects it, and `undo` ends it `fault_length_ms` later (a fault without an undo, a
crash, ends by itself). The others run on a schedule and a generator of their own, seeded from
their name and the run's seed, so adding one to a mix leaves the other faults' draws as they
were: their `start` begins them when the run starts. `nodes.sim.nemesis` runs them, and holds
what the lasting ones do to the nodes' elections, truncations and sends. Every list of fault
names (FAULTS, MASTER_SLAVE_FAULTS, KNOWN, `mode_faults`) is read from the table.

Master-slave mode (`nodes.sim.hamode`) has no transfer and no election, so neither transfer nor
votecrash, and "leader" there means the master; failover is its own.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from nodes.sim.modes import DLEDGER, MASTER_ROLES, MODES
from nodes.sim.network import LinkModel, between, split

if TYPE_CHECKING:
    from nodes.sim.nemesis import Nemesis

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
CRASH_DOWN_MS = (20.0, 1500.0)  # a crashed node restarts this long after
NORMAL = LinkModel()  # how links behave without a link fault
MASTER_SLAVE = tuple(MASTER_ROLES)


@dataclass(frozen=True, slots=True)
class SimFault:
    """One fault: its name, its hooks, whether it runs on a schedule of its own, and the modes
    it applies to. `start(nemesis, rng)` injects a drawn fault now, returning the node it acted
    on when its undo needs it, or begins an own-scheduled one (with its own generator);
    `undo(nemesis, node)` ends a drawn fault, None if it ends by itself."""

    name: str
    start: Callable[[Nemesis, random.Random], str | None]
    undo: Callable[[Nemesis, str | None], None] | None = None
    own_schedule: bool = False
    modes: tuple[str, ...] = MODES


def _partition(nemesis: Nemesis, rng: random.Random) -> None:
    nemesis.network.block(between(*split(nemesis.nodes.names, rng)))


def _oneway(nemesis: Nemesis, rng: random.Random) -> None:
    a, b = split(nemesis.nodes.names, rng)
    nemesis.network.block(between(a, b, both_ways=False))


def _bridge(nemesis: Nemesis, rng: random.Random) -> None:
    others = list(nemesis.nodes.names)
    rng.shuffle(others)
    others.pop()  # the bridge node keeps every link
    if len(others) >= 2:
        nemesis.network.block(between(*split(others, rng)))


def _unblock(nemesis: Nemesis, _node: str | None) -> None:
    nemesis.network.block([])


def _loss(nemesis: Nemesis, rng: random.Random) -> None:
    nemesis.network.model.loss = rng.uniform(0.05, 0.4)


def _loss_ends(nemesis: Nemesis, _node: str | None) -> None:
    nemesis.network.model.loss = NORMAL.loss


def _dup(nemesis: Nemesis, rng: random.Random) -> None:
    nemesis.network.model.duplicate = rng.uniform(0.05, 0.4)


def _dup_ends(nemesis: Nemesis, _node: str | None) -> None:
    nemesis.network.model.duplicate = NORMAL.duplicate


def _delay(nemesis: Nemesis, rng: random.Random) -> None:
    nemesis.network.model.jitter_ms = rng.uniform(10.0, 80.0)


def _delay_ends(nemesis: Nemesis, _node: str | None) -> None:
    nemesis.network.model.jitter_ms = NORMAL.jitter_ms


def _crash(nemesis: Nemesis, rng: random.Random) -> None:
    nodes = nemesis.nodes
    nodes.crash(rng.choice(nodes.names), False, rng.uniform(*CRASH_DOWN_MS))


def _power_loss(nemesis: Nemesis, rng: random.Random) -> None:
    nodes = nemesis.nodes
    if rng.random() < 0.7:  # one node, mostly one with writes not yet fsynced
        dirty = nodes.dirty_nodes() if rng.random() < 0.8 else []
        nodes.crash(rng.choice(dirty or nodes.names), True, rng.uniform(*CRASH_DOWN_MS))
        return
    for node in nodes.names:  # the whole cluster at once
        nodes.crash(node, True, rng.uniform(*CRASH_DOWN_MS))


def _skew(nemesis: Nemesis, rng: random.Random) -> str:
    nodes = nemesis.nodes
    node = rng.choice(nodes.names)
    nodes.clocks[node].set_rate(nemesis.loop.now, rng.uniform(*nodes.drift_band))
    return node


def _unskew(nemesis: Nemesis, node: str | None) -> None:
    assert node is not None
    nodes = nemesis.nodes
    nodes.clocks[node].set_rate(nemesis.loop.now, nodes.drift[node])


def _transfers(nemesis: Nemesis, _rng: random.Random) -> None:
    nemesis.start_transfers()


def _transfers_end(nemesis: Nemesis, _node: str | None) -> None:
    nemesis.transfers = False


def _leader_crashes(nemesis: Nemesis, _rng: random.Random) -> None:
    nemesis.leader_crashes = True


def _leader_crashes_end(nemesis: Nemesis, _node: str | None) -> None:
    nemesis.leader_crashes = False


def _repair_crashes(nemesis: Nemesis, _rng: random.Random) -> None:
    nemesis.repair_crashes = True


def _repair_crashes_end(nemesis: Nemesis, _node: str | None) -> None:
    nemesis.repair_crashes = False


def _pauses(nemesis: Nemesis, rng: random.Random) -> None:
    nemesis.repeat(PAUSE_GAP_MS, rng, _pause)


def _pause(nemesis: Nemesis, rng: random.Random) -> None:
    """Freeze a node, the leader four times in five when there is one, for a while."""
    nodes = nemesis.nodes
    leaders = nodes.leaders()
    node = leaders[-1] if leaders and rng.random() < 0.8 else rng.choice(nodes.names)
    nodes.pause(node, rng.uniform(*rng.choice(PAUSE_MS)), rng)


def _leader_kills(nemesis: Nemesis, rng: random.Random) -> None:
    nemesis.kill_rng = rng
    nemesis.repeat(KILL_GAP_MS, rng, _kill_spell)


def _kill_spell(nemesis: Nemesis, rng: random.Random) -> None:
    """A leaderkill spell starts: whoever leads dies now, and so will every new leader for a while."""
    nemesis.kill_until = nemesis.loop.now + rng.uniform(*KILL_SPELL_MS)
    nemesis.stats["fault-leaderkill"] += 1
    nemesis.trace.add("sim", f"leader kills until {nemesis.kill_until:.0f}")
    for node in nemesis.nodes.leaders():
        nemesis.kill(node, 0.0)


def _vote_crashes(nemesis: Nemesis, rng: random.Random) -> None:
    nemesis.vote_rng = rng


def _failovers(nemesis: Nemesis, rng: random.Random) -> None:
    nemesis.repeat(FAILOVER_GAP_MS, rng, _failover)


def _failover(nemesis: Nemesis, rng: random.Random) -> None:
    ha = nemesis.nodes.ha
    assert ha is not None  # failover applies to master-slave runs only
    ha.failover(rng, nemesis.workload.next_rid)


CATALOGUE = (
    # two groups cut apart; one group that cannot reach the other; two groups that reach each
    # other only through one node
    SimFault("partition", _partition, _unblock),
    SimFault("oneway", _oneway, _unblock),
    SimFault("bridge", _bridge, _unblock),
    # every link loses, duplicates, or delays with large jitter (so reorders heavily)
    SimFault("loss", _loss, _loss_ends),
    SimFault("dup", _dup, _dup_ends),
    SimFault("delay", _delay, _delay_ends),
    # a process kill (the page cache survives); a power loss (unflushed writes are lost,
    # reordered or torn: one node, mostly one with writes not yet fsynced, or every node at once)
    SimFault("crash", _crash),
    SimFault("powerloss", _power_loss),
    # a node's clock runs fast or slow, anywhere within the lease's drift bound (`nodes.sim.clock`)
    SimFault("skew", _skew, _unskew),
    # leadership transfer requests to whoever leads, every 20-200 ms while it lasts
    SimFault("transfer", _transfers, _transfers_end, modes=(DLEDGER,)),
    # while it lasts, every new leader crashes within 30 ms of its election, sometimes losing
    # power (leader churn), and half of a leader's pushes of its own term's entries are lost
    SimFault("leadercrash", _leader_crashes, _leader_crashes_end),
    # while it lasts, a node that truncates its log loses power within 3 ms, before the
    # truncation is on disk
    SimFault("repaircrash", _repair_crashes, _repair_crashes_end),
    # a process frozen, mostly the leader's, as by SIGSTOP or a GC pause: within a leader's lease
    # or long enough for another to be elected; what reaches it waits until it wakes (`nodes.sim.pause`)
    SimFault("pause", _pauses, own_schedule=True),
    # Jepsen's "kill the leader": a spell kills whoever leads at once, then every new leader 1-40
    # ms after its election, mid catch-up, each back 20-300 ms later; while it lasts, half of a
    # leader's pushes of its own term's entries are lost, as with leadercrash
    SimFault("leaderkill", _leader_kills, own_schedule=True),
    # a node that stood for a term and lost it crashes, having voted for itself, and either comes
    # back cut off from the leader, reaching it only through the others, or crashes once another
    # follower, cut off from the leader, has stopped guarding its lease: the states where a
    # restarted candidate meets a leader's lease (seed 1128's)
    SimFault("votecrash", _vote_crashes, own_schedule=True, modes=(DLEDGER,)),
    # the operator's answer to a lost master, as the harness's lose-node: kill the master, promote
    # the most advanced live slave, bring the old master back later as that slave's slave
    SimFault("failover", _failovers, own_schedule=True, modes=MASTER_SLAVE),
)
BY_NAME = {f.name: f for f in CATALOGUE}
KNOWN = tuple(BY_NAME)  # in some mode


def mode_faults(mode: str) -> tuple[str, ...]:
    """The faults a run of `mode` (`nodes.sim.modes`) can inject: `all` there."""
    return tuple(f.name for f in CATALOGUE if mode in f.modes)


FAULTS = mode_faults(DLEDGER)
MASTER_SLAVE_FAULTS = mode_faults(MASTER_SLAVE[0])


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
