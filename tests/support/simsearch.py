"""Search simulator seeds for the first violation (the guard tests and the simulator's CLI tests)."""

from __future__ import annotations

from nodes.sim.cluster import SimConfig, SimResult, run_seed
from nodes.sim.faults import parse_faults

SEEDS = 60  # a broken guard must show within this many seeds


def first_violation(seeds: int = SEEDS, **config: object) -> SimResult | None:
    """The first of `seeds` seeds (3 and 5 nodes in turn, every fault) that ends in a violation."""
    for seed in range(seeds):
        sim = SimConfig(seed=seed, nodes=(3, 5)[seed % 2], faults=parse_faults("all"), steps=3000,
                        **config)  # type: ignore[arg-type]
        result = run_seed(sim)
        if result.violation is not None:
            return result
    return None
