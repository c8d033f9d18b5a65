"""Seeded node bugs run as must-fail controls: the catalogue, the mutated copies of `nodes/`
they build, and the hunt that measures whether the simulator and end-to-end runs catch each."""
