"""The simulation driver: N nodes, their disks and clocks, a network, clients and faults, one seed.

A run has two phases. The fault phase processes `steps` events (ticks, deliveries,
flushes, client operations, faults) while faults come and go. Then everything heals and the
liveness phase must, within `liveness_ms` of simulated time, elect a leader, bring every
node up to it and commit a probe append everywhere (`nodes.sim.liveness`). Invariants are
checked on every step (log matching on every step that changed a log, from the changed index
on); a violation stops the run with the step, the seed and the recent trace.

The simulator is made of parts, each in a module of its own: the run loop (`nodes.sim.loop`),
the nodes (`nodes.sim.nodes`), the clients (`nodes.sim.workload`), the faults (the table in
`nodes.sim.faults`, run by `nodes.sim.nemesis`) and healing and liveness
(`nodes.sim.liveness`); `Simulation` draws the run's parameters from the seed and puts them
together.

A master-slave run (`SimConfig.mode`, `nodes.sim.hamode`) drives `HaNode` logics instead of
cores on the same driver, disks, clock and clients, over links that deliver in order (as
the real peer links do); it checks election safety (one master per epoch), log matching and
answers in time from `nodes.sim.invariants`, and RocketMQ's guarantees from
`nodes.sim.hainvariants` instead of Raft's others; "leader" is the master there.
"""

from __future__ import annotations

import dataclasses
import random
import traceback
from collections import Counter
from dataclasses import dataclass, field
from typing import TypeVar

from nodes import coverage
from nodes.core import CoreConfig
from nodes.replication import SafetyError
from nodes.sim.config import SimConfig
from nodes.sim.handoffs import handoff_outcomes
from nodes.sim.invariants import Violation, check_log_matching
from nodes.sim.liveness import Liveness
from nodes.sim.loop import Loop
from nodes.sim.modes import DLEDGER
from nodes.sim.nemesis import Nemesis
from nodes.sim.network import Network
from nodes.sim.nodes import Nodes
from nodes.sim.simmap import NoSpace
from nodes.sim.workload import BODY_PADDING, THINK_MS, Workload
from nodes.store.logstore import StoreError
from nodes.timing import Timing, timing_profile

BATCH_SIZES = (1, 1, 2, 3, 8, 64, 1024)  # max entries per push, drawn per run
INFLIGHT = (1, 2, 4)  # max unacknowledged pushes per follower, drawn per run
APPEND_TIMEOUTS = (2000.0, 400.0, 100.0)  # ms, drawn per run
READ_TIMEOUTS = (1000.0, 150.0, 40.0)
TRANSFER_TIMEOUTS = (1000.0, 100.0)
TAKE_VOTE_MS = ((10.0, 40.0), (150.0, 400.0))  # a transferee's vote interval: slow ones meet rivals


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


class Simulation:
    """One seeded run; `run()` returns its `SimResult`."""

    def __init__(self, config: SimConfig) -> None:
        self.config = config
        rng = self.rng = random.Random(config.seed)
        network = Network(random.Random(rng.getrandbits(64)), fifo=config.mode != DLEDGER)
        lease_guard = config.lease_guard if config.lease_guard is not None else rng.random() < 0.5
        timing = _timing(config, rng)
        think_ms, padding = rng.choice(THINK_MS), rng.choice(BODY_PADDING)
        coverage.take()  # the rules this run fires, from zero
        self.loop = Loop()
        core_config = CoreConfig(timing, config.durability.ack, lease_guard)
        longest_body = len(f"c{config.clients}-{config.steps}") + padding
        self.nodes = nodes = Nodes(config, self.loop, network, core_config, rng, longest_body)
        self.trace, self.stats = nodes.trace, nodes.stats
        self.workload = Workload(nodes, think_ms, padding)
        self.nemesis = Nemesis(nodes, self.workload)
        self.liveness = Liveness(nodes, self.workload, self.nemesis)
        nodes.connect(self.workload, self.nemesis)
        nodes.begin()
        self.workload.begin()
        self.nemesis.begin()

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

    def _run(self) -> None:
        self.loop.run(self.config.steps, self.liveness.heal, self.liveness.done, self.workload.deadlines)
        nodes = self.nodes
        check_log_matching(nodes.logs())
        if nodes.ha is not None:
            nodes.ha.checks.at_end(nodes.logs())

    def _result(self, violation: Violation | None) -> SimResult:
        trace = self.trace.lines(60) if violation else []
        self.stats.update(handoff_outcomes(self.nodes.handed, self.nodes.inv.leaders))
        loop = self.loop
        return SimResult(self.config, loop.step, loop.now, self.stats, violation, trace, coverage.take())


def _timing(config: SimConfig, rng: random.Random) -> Timing:
    """The run's timing: its profile's, with push batches and pipelining drawn per run (down to
    one entry per push, one in flight, so a new leader's no-op does not always travel with the
    older entries: Figure 8), and client-facing timeouts short enough in some runs to fire under
    faults (drawn in master-slave runs too, which use none of them: the later draws stay aligned)."""
    batch, inflight = rng.choice(BATCH_SIZES), rng.choice(INFLIGHT)
    append_timeout, read_timeout = rng.choice(APPEND_TIMEOUTS), rng.choice(READ_TIMEOUTS)
    transfer_timeout = _given(config.transfer_timeout_ms, rng.choice(TRANSFER_TIMEOUTS))
    take_vote_min, take_vote_max = _given(config.take_vote_ms, rng.choice(TAKE_VOTE_MS))
    return dataclasses.replace(
        timing_profile(config.profile),
        max_batch_entries=batch,
        max_inflight_pushes=inflight,
        append_timeout_ms=append_timeout,
        read_timeout_ms=read_timeout,
        transfer_timeout_ms=transfer_timeout,
        take_leadership_min_vote_ms=take_vote_min,
        take_leadership_max_vote_ms=take_vote_max,
    )


T = TypeVar("T")


def _given(value: T | None, drawn: T) -> T:
    """The config's `value` if it sets one, else the run's draw (drawn either way, so that the
    seed's later draws stay as they were)."""
    return drawn if value is None else value


def run_seed(config: SimConfig) -> SimResult:
    """Run one seed to its end or its first violation."""
    return Simulation(config).run()
