"""Partition shapes as grudges: `{node: [nodes whose packets it drops]}` (Jepsen's term).

Pure functions, so the shapes are unit-tested without a cluster.
"""

from __future__ import annotations

import random

Grudge = dict[str, list[str]]


def complete(components: list[list[str]]) -> Grudge:
    """Every node drops packets from every node outside its own component."""
    grudge: Grudge = {}
    for component in components:
        others = sorted(n for c in components if c is not component for n in c)
        for node in component:
            grudge[node] = others
    return grudge


def isolate(nodes: list[str], victim: str) -> Grudge:
    """Cut `victim` off from everyone else."""
    return complete([[victim], [n for n in nodes if n != victim]])


def halves(nodes: list[str], rng: random.Random) -> Grudge:
    """A random minority and majority."""
    shuffled = rng.sample(nodes, len(nodes))
    cut = len(nodes) // 2
    return complete([sorted(shuffled[:cut]), sorted(shuffled[cut:])])


def bridge(nodes: list[str], rng: random.Random) -> Grudge:
    """Two halves that both still talk to one bridge node (Jepsen's bridge)."""
    shuffled = rng.sample(nodes, len(nodes))
    hub, rest = shuffled[0], shuffled[1:]
    cut = len(rest) // 2
    left, right = rest[:cut], rest[cut:]
    grudge: Grudge = {hub: []}
    for node in left:
        grudge[node] = sorted(right)
    for node in right:
        grudge[node] = sorted(left)
    return grudge


def without_self_loops(grudge: Grudge) -> Grudge:
    """Drop empty entries, so the history shows only nodes that drop something."""
    return {node: peers for node, peers in sorted(grudge.items()) if peers}
