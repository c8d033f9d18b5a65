"""Nemesis names accepted on the command line, and how to build each against a cluster."""

from __future__ import annotations

from collections.abc import Callable

from nemesis.base import Nemesis, Nodes
from nemesis.kill import KillNemesis
from nemesis.partition import PartitionNemesis

BUILDERS: dict[str, Callable[[Nodes], Nemesis]] = {
    "kill": KillNemesis,
    "partition": PartitionNemesis,
}


def parse_nemesis(text: str) -> list[str]:
    """`kill,partition` -> ["kill", "partition"]; `none` or empty -> []; unknown names raise."""
    names = [n.strip() for n in text.split(",") if n.strip() and n.strip() != "none"]
    unknown = [n for n in names if n not in BUILDERS]
    if unknown:
        raise ValueError(f"unknown nemesis {', '.join(unknown)}; choose from {', '.join(BUILDERS)} or none")
    return list(dict.fromkeys(names))


def build(names: list[str], nodes: Nodes) -> dict[str, Nemesis]:
    """The nemeses for `names`, keyed by name."""
    return {name: BUILDERS[name](nodes) for name in names}
