"""Search simulator seeds for the first violation (the guard tests and the simulator's CLI tests)."""

from __future__ import annotations

from nodes.sim.cluster import SimResult, run_seed
from nodes.sim.config import SimConfig
from nodes.sim.faults import parse_faults

SEEDS = 60  # a broken guard must show within this many seeds


def run_one(seed: int, **config: object) -> SimResult:
    """One seed as `first_violation` runs it: 3 and 5 nodes in turn, every fault, 3000 steps;
    `config` overrides those or sets other SimConfig fields (`faults` as text)."""
    faults = parse_faults(str(config.pop("faults", "all")))
    fields: dict[str, object] = {"nodes": (3, 5)[seed % 2], "steps": 3000, **config}
    return run_seed(SimConfig(seed=seed, faults=faults, **fields))  # type: ignore[arg-type]


def first_violation(seeds: int = SEEDS, **config: object) -> SimResult | None:
    """The first of `seeds` seeds (as `run_one` runs them) that ends in a violation."""
    for seed in range(seeds):
        result = run_one(seed, **config)
        if result.violation is not None:
            return result
    return None
