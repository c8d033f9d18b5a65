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
    """The client workload: appends with unique ids, and reads of single indexes and ranges."""

    payload_size: int = 100
    read_fraction: float = 0.25
    max_read_span: int = 20

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
            return Op("read", {"from": first, "to": last})
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
    """At `at` seconds into the workload, start or stop one fault."""

    at: float
    action: str
    fault: str


def nemesis_schedule(seed: int, faults: list[str], interval: float, time_limit: float) -> list[FaultStep]:
    """Alternate quiet and faulty periods of `interval` seconds each, faults drawn from `faults`.

    Faults come in rounds, each a seeded shuffle of all of `faults`, so every requested
    fault runs once before any runs again (a 60 s run with kill and partition gets both).
    Every fault started is stopped again before the time limit, so the workload's last
    period is always quiet and the cluster is healed when it ends.
    """
    if not faults or interval <= 0:
        return []
    rng = random.Random(f"{seed}/nemesis")
    steps: list[FaultStep] = []
    at = interval
    queue: list[str] = []
    while at + interval < time_limit:
        if not queue:
            queue = rng.sample(faults, len(faults))
        fault = queue.pop()
        steps.append(FaultStep(at, "start", fault))
        steps.append(FaultStep(at + interval, "stop", fault))
        at += 2 * interval
    return steps
