"""What a seeded bug is: `Mutant`, a few exact-text `Edit`s to a copy of `nodes/`.

A mutant never switches anything in the product: its edits are applied to a copy of the
package (`harness.mutants.build`), which the simulator imports and a node image is built
from. An edit names its file under `nodes/`, the text it replaces (which must occur exactly
once, so a catalogue that no longer matches the code fails loudly) and the replacement.
"""

from __future__ import annotations

from dataclasses import dataclass

FAMILIES = ("election", "replication", "reads", "durability", "master-slave")


@dataclass(frozen=True)
class Edit:
    """Replace `old` (exactly one occurrence) with `new` in `nodes/<path>`."""

    path: str
    old: str
    new: str


@dataclass(frozen=True)
class Mutant:
    """One seeded bug and where the harness should catch it.

    `sim` holds `simulate-many` flags aimed at the bug (beyond the default rotation, which
    every hunt runs first), or None when the simulator cannot load what it breaks. `run`
    holds the `harness run` flags of the end-to-end run meant to catch it (its nightly cell).
    """

    name: str
    family: str
    what: str
    edits: tuple[Edit, ...]
    run: tuple[str, ...]
    sim: tuple[str, ...] | None = ()

    def __post_init__(self) -> None:
        if self.family not in FAMILIES:
            raise ValueError(f"mutant {self.name}: family {self.family!r} is not one of "
                             f"{', '.join(FAMILIES)}")
        if not self.edits:
            raise ValueError(f"mutant {self.name}: no edit")
