"""Nemesis names accepted on the command line, and how to build each against a cluster."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from nemesis.base import Nemesis, Nodes
from nemesis.kill import TARGETS, KillNemesis
from nemesis.partition import SHAPES, PartitionNemesis


@dataclass(frozen=True)
class NemesisOptions:
    """Per-family choices from the command line."""

    partition_shapes: tuple[str, ...] = ("isolate-leader", "halves")
    kill_targets: tuple[str, ...] = ("one", "leader", "minority")

    def validate(self) -> None:
        """ValueError naming any shape or target that does not exist."""
        for kind, chosen, known in (("partition shape", self.partition_shapes, SHAPES),
                                    ("kill target", self.kill_targets, TARGETS)):
            unknown = sorted(set(chosen) - set(known))
            if unknown or not chosen:
                what = ", ".join(unknown) or "none given"
                raise ValueError(f"unknown {kind}(s): {what}; choose from {', '.join(known)}")


BUILDERS: dict[str, Callable[[Nodes, NemesisOptions], Nemesis]] = {
    "kill": lambda nodes, options: KillNemesis(nodes, options.kill_targets),
    "partition": lambda nodes, options: PartitionNemesis(nodes, options.partition_shapes),
}


def parse_nemesis(text: str) -> list[str]:
    """`kill,partition` -> ["kill", "partition"]; `none` or empty -> []; unknown names raise."""
    names = [n.strip() for n in text.split(",") if n.strip() and n.strip() != "none"]
    unknown = [n for n in names if n not in BUILDERS]
    if unknown:
        raise ValueError(f"unknown nemesis {', '.join(unknown)}; choose from {', '.join(BUILDERS)} or none")
    return list(dict.fromkeys(names))


def build(names: list[str], nodes: Nodes, options: NemesisOptions | None = None) -> dict[str, Nemesis]:
    """The nemeses for `names`, keyed by name; ValueError for options a family does not know."""
    options = options or NemesisOptions()
    return {name: BUILDERS[name](nodes, options) for name in names}
