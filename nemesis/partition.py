"""Network partitions with iptables over SSH: each node drops packets from the nodes it has a grudge on.

Rules live in a chain of our own (`CHAOS`, jumped to from INPUT), so healing flushes exactly
what the nemesis added and nothing else.
"""

from __future__ import annotations

import random
from typing import Any

from nemesis import grudge as shapes
from nemesis.base import Family, Nodes, Option

CHAIN = "CHAOS"
SHAPES = ("isolate-leader", "isolate-one", "halves", "bridge")


def setup_chain(nodes: Nodes, node: str) -> None:
    """Create the CHAOS chain and jump to it from INPUT, once."""
    nodes.exec(node, f"iptables -N {CHAIN} 2>/dev/null; "
                     f"iptables -C INPUT -j {CHAIN} 2>/dev/null || iptables -I INPUT -j {CHAIN}")


def apply_grudge(nodes: Nodes, grudge: shapes.Grudge) -> None:
    """Install the DROP rules of `grudge` on every node that holds one."""
    for node, enemies in grudge.items():
        if not enemies:
            continue
        setup_chain(nodes, node)
        rules = "; ".join(f"iptables -A {CHAIN} -s {nodes.address(e)} -j DROP" for e in enemies)
        nodes.exec(node, f"set -e; {rules}")


def heal_all(nodes: Nodes) -> None:
    """Flush the CHAOS chain on every node."""
    for node in nodes.names:
        nodes.exec(node, f"iptables -F {CHAIN} 2>/dev/null || true")


def rules_left(nodes: Nodes) -> list[str]:
    """Every DROP rule still in a node's CHAOS chain."""
    left = []
    for node in nodes.names:
        rules = nodes.exec(node, f"iptables -S {CHAIN} 2>/dev/null || true")
        left += [f"{node}: {line}" for line in rules.splitlines() if line.startswith("-A ")]
    return left


class PartitionFault:
    """Cuts the network into the shapes in `modes`, chosen at random per fault."""

    def __init__(self, nodes: Nodes, modes: tuple[str, ...]) -> None:
        self.nodes = nodes
        self.modes = modes

    def grudge_for(self, mode: str, rng: random.Random) -> shapes.Grudge:
        names = self.nodes.names
        if mode == "isolate-leader":
            return shapes.isolate(names, self.nodes.leader() or rng.choice(names))
        if mode == "isolate-one":
            return shapes.isolate(names, rng.choice(names))
        if mode == "halves":
            return shapes.halves(names, rng)
        return shapes.bridge(names, rng)

    def start(self, rng: random.Random) -> dict[str, Any]:
        mode = rng.choice(self.modes)
        grudge = shapes.without_self_loops(self.grudge_for(mode, rng))
        apply_grudge(self.nodes, grudge)
        return {"shape": mode, "grudge": grudge, "targets": sorted(grudge)}

    def stop(self) -> dict[str, Any]:
        heal_all(self.nodes)
        return {"targets": list(self.nodes.names)}

    def heal(self) -> None:
        heal_all(self.nodes)

    def leftovers(self) -> list[str]:
        return rules_left(self.nodes)


PARTITION = Family(
    name="partition", label="partition", start_f="start-partition", stop_f="stop-partition",
    make=lambda nodes, options: PartitionFault(nodes, options["partition_shapes"]),
    help="cut the network with iptables into one of the chosen shapes",
    options=(Option("partition-shapes", "isolate-leader,halves",
                    f"partition shapes to draw from: {', '.join(SHAPES)}", choices=SHAPES),),
    weight=1.0)
