"""What one simulated run is: `SimConfig`, the seed and the knobs around it.

Its own module, outside the compiled simulator (`nodes.sim.compiled`): `simulate-many`
pickles configs to its worker processes, which mypyc's frozen native classes do not allow.
"""

from __future__ import annotations

from dataclasses import dataclass

from nodes.logic import SYNC_FLUSH, Durability
from nodes.sim.faults import FAULTS, mode_faults
from nodes.sim.modes import DLEDGER, check_mode


@dataclass(frozen=True, slots=True)
class SimConfig:
    """One simulated run. `lease_guard` None: chosen from the seed. `mode`: see
    `nodes.sim.modes`; `faults` must be faults of that mode (`parse_faults(text, mode)`).
    `durability`: `--flush` as `nodes.sim.cli.flush_policy` reads it."""

    seed: int
    nodes: int = 5
    steps: int = 4000
    faults: tuple[str, ...] = FAULTS
    durability: Durability = SYNC_FLUSH
    profile: str = "fast"
    clients: int = 3
    append_share: float = 0.6  # of client operations; the rest are reads
    lease_guard: bool | None = None
    tick_ms: float = 10.0
    fsync_ms: float = 2.0
    async_flush_ms: float = 10.0
    liveness_ms: float | None = None  # None: 20 s, or 30 leader-loss timeouts (master-slave: 10
    # housekeeping periods) if longer
    small_disks: float = 0.3  # share of the runs with small disks (about 1 in 11 of those fills up)
    drifting_clocks: float = 0.5  # share of the runs whose clocks drift, each as slow or as fast as
    # the lease's drift bound allows (`nodes.sim.clock.drift_band`)
    fault_gap_ms: tuple[float, float] = (50.0, 600.0)
    fault_length_ms: tuple[float, float] = (100.0, 1500.0)
    # a leader's transfer timeout and a transferee's vote interval; None: drawn per run
    transfer_timeout_ms: float | None = None
    take_vote_ms: tuple[float, float] | None = None
    mode: str = DLEDGER

    def __post_init__(self) -> None:
        catalog = mode_faults(check_mode(self.mode))
        bad = [f for f in self.faults if f not in catalog]
        if bad:
            raise ValueError(f"fault(s) {', '.join(bad)} do not apply to {self.mode} mode: "
                             f"use some of {', '.join(catalog)}")
