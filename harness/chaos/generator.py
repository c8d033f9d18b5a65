"""What each worker and the nemesis do next: operations, pacing and the fault schedule.

Every random choice comes from the run's seed: each worker has its own `random.Random`
derived from (seed, worker), and the nemesis schedule is derived from the seed alone, so
`--seed` replays the same schedule (not the same thread interleaving).
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass
from typing import Any

from nodes.payload import encode_payload


def parse_concurrency(text: str, nodes: int) -> int:
    """Jepsen's concurrency syntax: `10` workers, or `2n` for twice the node count."""
    match = re.fullmatch(r"\s*(\d+)\s*(n?)\s*", text)
    if not match or int(match.group(1)) == 0:
        raise ValueError(f"concurrency {text!r}: give a positive number of workers, like 10 or 2n")
    count = int(match.group(1))
    return count * nodes if match.group(2) else count


def worker_rng(seed: int, worker: int) -> random.Random:
    """The random stream of one worker."""
    return random.Random(f"{seed}/worker/{worker}")


@dataclass(frozen=True)
class Op:
    """One client operation to perform: `f` is `append` or `read`, `value` its invoke value."""

    f: str
    value: dict[str, Any]
    body: bytes = b""


@dataclass
class Mix:
    """The client workload: appends with unique ids, and reads of single indexes and ranges.

    A read names its mode when `read_modes` is set (one drawn per read), and with
    `direct_fraction` goes to a node of `nodes` drawn at random instead of the leader the
    client believes in (`"at"`, no redirect): a deposed leader that still serves reads is
    asked too, not only the node everyone agrees leads.
    """

    payload_size: int = 100
    read_fraction: float = 0.25
    max_read_span: int = 20
    read_modes: tuple[str, ...] = ()
    nodes: tuple[str, ...] = ()
    direct_fraction: float = 0.5

    def next_op(self, rng: random.Random, process: int, seq: int, known_end: int) -> Op:
        """The next op for `process`, its `seq`-th; `known_end` is the highest acknowledged index."""
        if known_end >= 0 and rng.random() < self.read_fraction:
            # Half the reads look at the tail, just before and past the highest acknowledged
            # index, where in-flight entries live (and where a faulty node exposes entries too
            # early); the others anywhere in the log.
            if rng.random() < 0.5:
                last = known_end + rng.randint(1, self.max_read_span)
            else:
                last = rng.randint(0, known_end)
            first = last if rng.random() < 0.3 else max(0, last - rng.randint(1, self.max_read_span))
            value: dict[str, Any] = {"from": first, "to": last}
            if self.read_modes:
                value["mode"] = rng.choice(self.read_modes)
            if self.nodes and rng.random() < self.direct_fraction:
                value["at"] = rng.choice(self.nodes)
            return Op("read", value)
        append_id = f"p{process}-{seq}"
        return Op("append", {"id": append_id}, encode_payload(append_id, self.payload_size))


def pacing_delay(rng: random.Random, rate: float, workers: int) -> float:
    """Seconds a worker waits before its next op so that all workers together make `rate` ops/s.

    Jepsen's stagger: uniformly random in [0, 2 * mean), so workers do not move in lockstep.
    """
    if rate <= 0:
        return 0.0
    return rng.uniform(0.0, 2.0 * workers / rate)


@dataclass(frozen=True)
class FaultStep:
    """At `at` seconds into the workload, `start` or `stop` one fault, or fire an `instant` one."""

    at: float
    action: str
    fault: str


@dataclass(frozen=True)
class Slotted:
    """What the schedule needs to know of a family."""

    name: str
    weight: float = 1.0
    instant: bool = False
    repeat_s: float | None = None


def _weighted_round(rng: random.Random, families: list[Slotted]) -> list[Slotted]:
    """All families in a seeded order where heavier ones tend to come first (weighted shuffle)."""
    keyed = [(rng.random() ** (1.0 / max(f.weight, 1e-6)), f) for f in families]
    return [f for _, f in sorted(keyed, key=lambda kf: -kf[0])]


PERIOD = (0.75, 1.25)  # a faulty or quiet period's length, in intervals
QUIET_END = 0.5  # intervals the last fault stops before the time limit


def sure_time_limit(interval: float) -> float:
    """The shortest time limit whose schedule holds a fault at every seed: lane 0's first
    period starts one interval in and may last the longest period."""
    return interval * (1 + PERIOD[1] + QUIET_END)


def nemesis_schedule(seed: int, families: list[Slotted], interval: float, time_limit: float,
                     concurrency: int = 1) -> list[FaultStep]:
    """Faulty and quiet periods of about `interval` seconds in `concurrency` staggered lanes.

    Lane 0 starts after one quiet interval, the others at a seeded random time within the
    next interval, so up to `concurrency` faults are in force at once. Periods last
    0.75-1.25 `interval`. Families come in rounds, each a weighted seeded shuffle of all of
    them, so every family runs once before any runs twice; a family never runs in two lanes
    at once. An instant family fires at the start of its slot (or every `repeat_s` seconds
    through it). Every fault stops at least half an interval before the time limit, so the
    workload ends quiet and healed.
    """
    if not families or interval <= 0:
        return []
    rng = random.Random(f"{seed}/nemesis")
    end = time_limit - interval * QUIET_END
    busy: dict[str, list[tuple[float, float]]] = {f.name: [] for f in families}
    steps: list[FaultStep] = []
    queue: list[Slotted] = []
    lanes = [interval if lane == 0 else interval + rng.uniform(0, interval) for lane in range(concurrency)]
    while True:
        lane = min(range(concurrency), key=lambda i: lanes[i])
        at = lanes[lane]
        length = interval * rng.uniform(*PERIOD)
        if at + length > end:
            break
        if not queue:
            queue = _weighted_round(rng, families)
        free = [f for f in queue if all(stop <= at or start >= at + length for start, stop in busy[f.name])]
        if free:
            family = free[0]
            queue.remove(family)
            busy[family.name].append((at, at + length))
            if not family.instant:
                steps += [FaultStep(at, "start", family.name), FaultStep(at + length, "stop", family.name)]
            else:
                repeat = family.repeat_s or length
                fire = at
                while fire < at + length:
                    steps.append(FaultStep(round(fire, 3), "instant", family.name))
                    fire += repeat
        lanes[lane] = at + length + interval * rng.uniform(*PERIOD)
    return sorted(steps, key=lambda s: (s.at, s.action != "stop"))
