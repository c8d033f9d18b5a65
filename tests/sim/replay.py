"""Seeds' digests, to hold the simulator to the runs it made before a change (test_replay.py).

A digest covers everything that tells two runs of a seed apart: the summary (config, steps,
simulated time, stats, the violation and its trace), the rules fired, the last events of the
trace (violated or not), every node's log at the end and the state the run's generator ended
in (so a draw made in another order changes it even where the outcome would not show it).

`python -m tests.sim.replay` rewrites the saved digests from the current sources (only when
a change is meant to alter runs).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from pathlib import Path

from nodes.sim.cli import flush_policy
from nodes.sim.cluster import Simulation
from nodes.sim.config import SimConfig
from nodes.sim.many import MIXES, configs
from nodes.sim.modes import parse_rotation

SAVED = Path(__file__).parent / "data" / "replay_digests.json"
SEEDS = 320  # sync flush: every size, mix and mode; then async flush, whose power losses lose entries
ASYNC_SEEDS = 80
STEPS = 1500
ROTATION = parse_rotation("dledger*2,master-slave-sync,dledger,master-slave-async")
WIDE_MIXES = MIXES[:5]  # the default's five wide mixes: digests that do not move when narrow mixes join


def replay_configs() -> Iterator[SimConfig]:
    """The seeds digested: the five wide mixes on 3, 5 and 7 nodes, DLedger and both master-slave modes."""
    for flag, start, count in (("sync", 0, SEEDS), ("async", 10_000, ASYNC_SEEDS)):
        durability = flush_policy(flag)
        yield from configs(start, count, [3, 5, 7], list(WIDE_MIXES), STEPS, durability, "fast", 3, ROTATION)


def digest(config: SimConfig) -> str:
    """What one run of `config` did, as a short hash."""
    sim = Simulation(config)
    result = sim.run()
    h = hashlib.sha256(result.summary().encode())
    for part in (sorted(result.coverage.items()), sim.trace.lines(), repr(result.sim_ms), sim.rng.getstate()):
        h.update(b"\0" + repr(part).encode())
    for name, log in sorted(sim.nodes.logs().items()):
        h.update(f"\0{name}".encode())
        for entry in log:
            h.update(repr((entry.index, entry.term, entry.body)).encode())
    return h.hexdigest()[:16]


def digests() -> dict[str, str]:
    """`<seed>-<flush>` -> digest for every seed of `replay_configs`."""
    return {f"{c.seed}-{c.durability.flag}": digest(c) for c in replay_configs()}


if __name__ == "__main__":
    SAVED.parent.mkdir(exist_ok=True)
    SAVED.write_text(json.dumps(digests(), indent=0, sort_keys=True) + "\n")
    print(f"wrote {SAVED}")
