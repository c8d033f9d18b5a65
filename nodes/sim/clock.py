"""Per-node simulated clocks: an offset and a rate relative to the simulation's true time.

A lease read trusts the clocks to drift apart by less than the lease's margin
(`Timing.lease_drift_ratio`): a leader's lease of `leader_lost_ms * (1 - ratio)` on its clock
must end before a follower's guard of `leader_lost_ms` on its own, so no two clocks may run at
rates further apart than a factor `1 / (1 - ratio)`. `drift_band` is the widest band of rates
within that contract: in a share of the runs every clock runs at one of its edges, slow or
fast (`drift_rates`), where a lease without the margin no longer holds, and a skew fault
sets a clock anywhere in it.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

BAND_USE = 0.95  # how much of the contract's band the simulated clocks use (its edge is a tie)


@dataclass(slots=True)
class SkewedClock:
    """A node's clock: `local = base_local + (true - base_true) * rate`; rate changes keep it continuous."""

    base_true: float = 0.0
    base_local: float = 0.0
    rate: float = 1.0

    def local(self, true_ms: float) -> float:
        return self.base_local + (true_ms - self.base_true) * self.rate

    def set_rate(self, true_ms: float, rate: float) -> None:
        """Run at `rate` from now on (the clock stays monotonic)."""
        self.base_local = self.local(true_ms)
        self.base_true = true_ms
        self.rate = rate


def drift_band(lease_drift_ratio: float) -> tuple[float, float]:
    """The slowest and fastest clock rates, around 1, whose ratio stays within the lease's bound
    `1 / (1 - lease_drift_ratio)` (by BAND_USE of the band: 0.95 to 1.05 for a ratio of 0.1)."""
    half = BAND_USE * lease_drift_ratio / (2.0 - lease_drift_ratio)
    return 1.0 - half, 1.0 + half


def drift_rates(seed: int, share: float, names: list[str], band: tuple[float, float]) -> dict[str, float]:
    """Each node's clock rate in run `seed`: an edge of `band` in `share` of the runs, else 1.0.
    Drawn from a generator of its own, so that the run's other draws stay as they were."""
    rng = random.Random(f"drift-{seed}")
    if rng.random() >= share:
        return dict.fromkeys(names, 1.0)
    return {n: rng.choice(band) for n in names}
