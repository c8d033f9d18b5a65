"""The simulated clocks drift as far apart as the lease's contract allows, and no further: a lease
of `leader_lost_ms * (1 - ratio)` on the slowest clock ends before a guard of `leader_lost_ms`
on the fastest, and without the margin it would not."""

from __future__ import annotations

import pytest

from nodes.sim.clock import SkewedClock, drift_band, drift_rates
from nodes.sim.cluster import Simulation
from nodes.sim.config import SimConfig
from nodes.sim.faults import BY_NAME
from nodes.timing import Timing

NAMES = ["n1", "n2", "n3"]


def test_the_band_keeps_a_lease_inside_the_guard_but_not_without_its_margin() -> None:
    timing = Timing()
    slow, fast = drift_band(timing.lease_drift_ratio)
    lost = timing.leader_lost_ms
    leader, follower = SkewedClock(rate=slow), SkewedClock(rate=fast)
    guard_ends = lost / follower.rate  # true time at which the follower's guard runs out
    assert leader.local(guard_ends) >= lost * (1 - timing.lease_drift_ratio)  # the lease is over
    assert leader.local(guard_ends) < lost  # a lease without the margin still holds
    assert (slow, fast) == pytest.approx((0.95, 1.05))


def test_a_share_of_the_runs_drifts_each_clock_to_an_edge_of_the_band_by_the_seed_alone() -> None:
    band = drift_band(0.1)
    runs = [drift_rates(seed, 0.5, NAMES, band) for seed in range(200)]
    drifting = [r for r in runs if set(r.values()) != {1.0}]
    assert 60 < len(drifting) < 140
    assert all(set(r.values()) <= set(band) for r in drifting)
    assert drift_rates(7, 0.5, NAMES, band) == drift_rates(7, 0.5, NAMES, band)
    assert all(set(drift_rates(seed, 0.0, NAMES, band).values()) == {1.0} for seed in range(20))


def test_a_drifting_run_starts_its_clocks_at_their_rates_and_a_skew_ends_back_at_them() -> None:
    seed = next(s for s in range(100) if set(drift_rates(s, 0.5, NAMES, drift_band(0.1)).values()) != {1.0})
    sim = Simulation(SimConfig(seed=seed, nodes=3, faults=("skew",)))
    nodes = sim.nodes
    assert {n: c.rate for n, c in nodes.clocks.items()} == nodes.drift
    skew = BY_NAME["skew"]
    node = skew.start(sim.nemesis, sim.rng)
    assert node is not None and nodes.drift_band[0] <= nodes.clocks[node].rate <= nodes.drift_band[1]
    assert skew.undo is not None
    skew.undo(sim.nemesis, node)
    assert nodes.clocks[node].rate == nodes.drift[node]
