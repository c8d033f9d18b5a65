"""Deterministic simulation of a DLedger cluster: N cores, a simulated network, clocks and disks, one seed.

`cluster.run_seed(SimConfig(...))` runs one seed and returns a `SimResult`; the same
seed replays the same run exactly. The invariants are checked on every step.
"""
