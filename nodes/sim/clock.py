"""Per-node simulated clocks: an offset and a rate relative to the simulation's true time."""

from __future__ import annotations

from dataclasses import dataclass


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
