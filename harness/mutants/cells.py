"""Seeded bugs as nightly cells: each mutant's run (`Mutant.run`) as a `Cell` that expects invalid,
and the rotating subset a night runs.

A mutant its cell has caught before (`harness.mutants.record`) is a control: valid fails the sweep.
The others expect invalid too, but a valid verdict is only reported (a known risk) until measured.
"""

from __future__ import annotations

from harness.mutants.catalogue import CATALOGUE
from harness.mutants.model import Mutant
from harness.mutants.record import CAUGHT_BY_CELL
from harness.sweeps.matrix import Cell

NOT_YET = ("its cell has not caught it end to end yet (harness/mutants/record.py), so a valid verdict "
           "is reported")
CELL_FIELDS = {"--mode": "mode", "--nodes": "nodes", "--flush": "flush", "--time-limit": "time_limit",
               "--nemesis": "nemesis"}


def mutant_cell(mutant: Mutant) -> Cell:
    """The nightly cell of `mutant`: its run's flags, the mutant's node image, expecting invalid."""
    fields: dict[str, object] = {"nemesis": "default"}
    extra: list[str] = []
    argv = list(mutant.run)
    while argv:
        flag = argv.pop(0)
        if flag in CELL_FIELDS and argv:
            value = argv.pop(0)
            fields[CELL_FIELDS[flag]] = {"nodes": int, "time_limit": float}.get(CELL_FIELDS[flag], str)(value)
        else:
            extra.append(flag)
    caught = mutant.name in CAUGHT_BY_CELL
    return Cell(why=f"seeded bug: {mutant.what}", expect="invalid", extra=(*extra, "--mutant", mutant.name),
                variant=f"mutant-{mutant.name}", control=caught, known_risk=None if caught else NOT_YET,
                **fields)  # type: ignore[arg-type]


def tonight(seed: int, count: int) -> list[Cell]:
    """`count` mutant cells, a different run of the catalogue each night (from the night's seed)."""
    if count <= 0:
        return []
    cells = [mutant_cell(m) for m in sorted(CATALOGUE, key=lambda m: m.name)]
    first = seed % len(cells)
    return [cells[(first + k) % len(cells)] for k in range(min(count, len(cells)))]
