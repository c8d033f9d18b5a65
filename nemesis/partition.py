"""Network partitions with iptables over SSH: each node drops packets from the nodes it has a grudge on.

Every rule lives in a chain of our own (`CHAOS`, jumped to from INPUT and OUTPUT), so healing
flushes exactly what the nemeses added and nothing else. A partition drops a node's incoming
packets by source, as Jepsen does; a clog cuts one node off from its peers in both
directions with rules on that node alone. Several faults may share the chain at once (a
partition, a swizzle's clogs, part-kill's cut), so each removes only its own rules (one copy
of each: identical rules of two faults stack); only healing flushes the chain. The shapes
are in `nemesis.grudge`.

The default shapes all bite a Raft group: `isolate-leader` and `leader-minority` depose the
leader every time (while it keeps believing it leads), `majorities-ring` and `bridge` leave
every node (or all but one) a majority but no clean one to agree on, and `one-way` makes a
node deaf while its votes still reach everyone. `halves` (the same split every run),
`random-halves`, `isolate-one` and `minority-third` often miss the leader, and the group
carries on as if nothing happened.
"""

from __future__ import annotations

import random
from typing import Any

from nemesis import grudge
from nemesis.base import Family, HostCleanup, Nodes, Option

CHAIN = "CHAOS"
SHAPES = tuple(grudge.SHAPES)
DEFAULT_SHAPES = "isolate-leader,leader-minority,majorities-ring,bridge,one-way"
# The chain and its jumps, for every family that cuts links with it.
CHAIN_CLEANUP = HostCleanup(
    clean=f"if iptables -w 5 -S {CHAIN} >/dev/null 2>&1; then "
          + "".join(f"while iptables -w 5 -D {hook} -j {CHAIN} 2>/dev/null; do :; done; "
                    for hook in ("INPUT", "OUTPUT"))
          + f"iptables -w 5 -F {CHAIN}; iptables -w 5 -X {CHAIN}; "
          f'echo "removed the iptables chain {CHAIN}"; fi',
    listing=f"iptables -w 5 -S 2>/dev/null | grep -E -- '(^| ){CHAIN}( |$)' | sed 's/^/iptables: /'",
    root=True)


def setup_chain(nodes: Nodes, node: str) -> None:
    """Create the CHAOS chain and jump to it from INPUT and OUTPUT, once."""
    jumps = "; ".join(f"iptables -C {hook} -j {CHAIN} 2>/dev/null || iptables -I {hook} -j {CHAIN}"
                      for hook in ("INPUT", "OUTPUT"))
    nodes.exec(node, f"iptables -N {CHAIN} 2>/dev/null; {jumps}")


def _add(nodes: Nodes, node: str, specs: list[str]) -> None:
    nodes.exec(node, "set -e; " + "; ".join(f"iptables -A {CHAIN} {spec}" for spec in specs))


def _remove(nodes: Nodes, node: str, specs: list[str]) -> None:
    """Delete one copy of each rule; one already gone (a heal came first) is no error."""
    nodes.exec(node, "; ".join(f"iptables -D {CHAIN} {spec} 2>/dev/null" for spec in specs) + "; true")


def _drop_from(nodes: Nodes, enemies: list[str]) -> list[str]:
    return [f"-s {nodes.address(enemy)} -j DROP" for enemy in enemies]


def apply_grudge(nodes: Nodes, drops: grudge.Grudge) -> None:
    """Install the DROP rules of the grudge `drops` on every node that holds one."""
    for node, enemies in drops.items():
        setup_chain(nodes, node)
        _add(nodes, node, _drop_from(nodes, enemies))


def lift_grudge(nodes: Nodes, drops: grudge.Grudge) -> None:
    """Remove the rules `apply_grudge(drops)` added; rules of other faults in the chain stay."""
    for node, enemies in drops.items():
        _remove(nodes, node, _drop_from(nodes, enemies))


def _clog_rules(nodes: Nodes, node: str) -> list[str]:
    peers = [peer for peer in nodes.names if peer != node]
    return _drop_from(nodes, peers) + [f"-d {nodes.address(peer)} -j DROP" for peer in peers]


def clog(nodes: Nodes, node: str) -> None:
    """Cut `node` off from every peer, both ways: it drops what they send and what it sends them."""
    setup_chain(nodes, node)
    _add(nodes, node, _clog_rules(nodes, node))


def unclog(nodes: Nodes, node: str) -> None:
    """Remove the rules one `clog` of `node` added; rules of other faults stay."""
    _remove(nodes, node, _clog_rules(nodes, node))


def heal_all(nodes: Nodes) -> None:
    """Flush the CHAOS chain on every node."""
    for node in nodes.names:
        nodes.exec(node, f"iptables -F {CHAIN} 2>/dev/null || true")


def rules_left(nodes: Nodes) -> list[str]:
    """Every rule still in a node's CHAOS chain."""
    left = []
    for node in nodes.names:
        rules = nodes.exec(node, f"iptables -S {CHAIN} 2>/dev/null || true")
        left += [f"{node}: {line}" for line in rules.splitlines() if line.startswith("-A ")]
    return left


class PartitionFault:
    """Cuts the network into one of `shapes`, drawn per fault; stop lifts that cut, heal flushes all."""

    def __init__(self, nodes: Nodes, shapes: tuple[str, ...]) -> None:
        self.nodes = nodes
        self.shapes = shapes
        self.drops: grudge.Grudge = {}
        self.cut: list[str] = []

    def start(self, rng: random.Random) -> dict[str, Any]:
        shape = rng.choice(self.shapes)
        leader = self.nodes.leader() if shape in grudge.LEADER_SHAPES else None
        links = grudge.SHAPES[shape](self.nodes.names, rng, leader)
        self.drops, self.cut = grudge.grudge(links), grudge.cut_off(links)
        apply_grudge(self.nodes, self.drops)
        value: dict[str, Any] = {"shape": shape, "grudge": self.drops, "targets": self.cut}
        if shape in grudge.LEADER_SHAPES:
            value["leader"] = leader
        return value

    def stop(self) -> dict[str, Any]:
        lift_grudge(self.nodes, self.drops)
        healed = self.cut
        self.drops, self.cut = {}, []
        return {"targets": healed}

    def heal(self) -> None:
        heal_all(self.nodes)
        self.drops, self.cut = {}, []

    def leftovers(self) -> list[str]:
        return rules_left(self.nodes)


PARTITION = Family(
    name="partition", label="partition", start_f="start-partition", stop_f="stop-partition",
    make=lambda nodes, options: PartitionFault(nodes, options["partition_shapes"]),
    help="cut the network with iptables into one of the chosen shapes",
    options=(Option("partition-shapes", DEFAULT_SHAPES,
                    f"partition shapes to draw from: {', '.join(SHAPES)}", choices=SHAPES),),
    weight=1.0, needs=frozenset({"root", "iptables"}), host_cleanup=(CHAIN_CLEANUP,))
