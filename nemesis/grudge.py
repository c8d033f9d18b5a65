"""Partition shapes as graphs of who still hears whom, and the grudges that cut them (Jepsen's terms).

A shape is a networkx graph on the node names. An undirected edge a-b: a and b still talk.
A directed edge a->b (one-way shapes): b still gets a's packets. The grudge, `{node: [nodes
whose packets it drops]}`, is the complement of that graph: what iptables installs. Every
random choice comes from the seeded `random.Random` given, so shapes are pure and tested
without a cluster. Shapes that need the leader take it (None when no node answered: a
random node stands in).
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence

import networkx as nx

Grudge = dict[str, list[str]]
Shape = Callable[[list[str], random.Random, str | None], nx.Graph]


def majority(n: int) -> int:
    return n // 2 + 1


def components(parts: Sequence[Sequence[str]]) -> nx.Graph:
    """Each part talks within itself and to nobody outside (Jepsen's complete-grudge)."""
    return nx.union_all([nx.complete_graph(sorted(part)) for part in parts])


def bisect(names: Sequence[str]) -> list[list[str]]:
    """Cut in two, smaller half first (Jepsen's bisect)."""
    cut = len(names) // 2
    return [list(names[:cut]), list(names[cut:])]


def shuffled(names: list[str], rng: random.Random) -> list[str]:
    return rng.sample(names, len(names))


def _chief(names: list[str], rng: random.Random, leader: str | None) -> str:
    return leader if leader in names else rng.choice(names)


def _alone(victim: str, names: list[str]) -> nx.Graph:
    return components([[victim], [n for n in names if n != victim]])


def isolate_one(names: list[str], rng: random.Random, leader: str | None) -> nx.Graph:
    """A random node cut off from everyone."""
    return _alone(rng.choice(names), names)


def isolate_leader(names: list[str], rng: random.Random, leader: str | None) -> nx.Graph:
    """The leader cut off from everyone."""
    return _alone(_chief(names, rng, leader), names)


def halves(names: list[str], rng: random.Random, leader: str | None) -> nx.Graph:
    """The nodes in name order cut in two, the first (smaller) half apart: the same split every time."""
    return components(bisect(sorted(names)))


def random_halves(names: list[str], rng: random.Random, leader: str | None) -> nx.Graph:
    """The shuffled nodes cut in two (Jepsen's random halves)."""
    return components(bisect(shuffled(names, rng)))


def minority_third(names: list[str], rng: random.Random, leader: str | None) -> nx.Graph:
    """A random group of fewer than a third of the nodes (Jepsen's minority-third), at least one, cut off."""
    cut = max(1, (len(names) - 1) // 3)
    order = shuffled(names, rng)
    return components([order[:cut], order[cut:]])


def leader_minority(names: list[str], rng: random.Random, leader: str | None) -> nx.Graph:
    """The leader and random others, a minority together, cut off from the majority."""
    chief = _chief(names, rng, leader)
    others = shuffled([n for n in names if n != chief], rng)
    size = len(names) - majority(len(names))  # the largest minority
    return components([[chief, *others[:size - 1]], others[size - 1:]])


def bridge(names: list[str], rng: random.Random, leader: str | None) -> nx.Graph:
    """Random halves that cannot talk, both still talking to one bridge node (Jepsen's bridge)."""
    parts = bisect(shuffled(names, rng))
    hub = parts[1][0]
    links = components(parts)
    links.add_edges_from((hub, n) for n in names if n != hub)
    return links


def majorities_ring(names: list[str], rng: random.Random, leader: str | None) -> nx.Graph:
    """Every node sees a majority, no two the same one (Jepsen's majorities-ring).

    The shuffled nodes form a ring and each talks to its neighbours within `reach` on either
    side: a window of 2*reach+1 >= a majority, centred on itself, so no two windows are
    equal. With 3 nodes such a window is everyone, so the ring loses one link (a path).
    """
    n = len(names)
    if n < 3:
        raise ValueError(f"majorities-ring needs at least 3 nodes, not {n}")
    ring = shuffled(names, rng)
    reach = majority(n) // 2  # (majority - 1) peers to see, half on each side, rounded up
    links = nx.relabel_nodes(nx.circulant_graph(n, range(1, reach + 1)), dict(enumerate(ring)))
    if 2 * reach + 1 >= n:
        links.remove_edge(ring[-1], ring[0])
    return links


def one_way(names: list[str], rng: random.Random, leader: str | None) -> nx.DiGraph:
    """A random node goes deaf: it drops everyone's packets while they all still get its own."""
    deaf = rng.choice(names)
    links = nx.complete_graph(names, create_using=nx.DiGraph)
    links.remove_edges_from((n, deaf) for n in names if n != deaf)
    return links


SHAPES: dict[str, Shape] = {
    "isolate-one": isolate_one,
    "isolate-leader": isolate_leader,
    "halves": halves,
    "random-halves": random_halves,
    "majorities-ring": majorities_ring,
    "bridge": bridge,
    "minority-third": minority_third,
    "one-way": one_way,
    "leader-minority": leader_minority,
}
LEADER_SHAPES = frozenset({"isolate-leader", "leader-minority"})


def grudge(links: nx.Graph) -> Grudge:
    """`{node: [nodes whose packets it drops]}` for every node that drops any: the complement of `links`."""
    heard = links.to_directed()
    dropped = nx.complement(heard)
    return {node: sorted(dropped.predecessors(node)) for node in sorted(heard) if dropped.in_degree(node)}


def cut_off(links: nx.Graph) -> list[str]:
    """The nodes a shape hits: those that hear fewer than a majority (themselves included); when
    every node still hears a majority (bridge, majorities-ring), every node that lost a link."""
    heard = links.to_directed()
    n = len(heard)
    lonely = [v for v in heard if heard.in_degree(v) + 1 < majority(n)]
    return sorted(lonely or (v for v in heard if heard.in_degree(v) + heard.out_degree(v) < 2 * (n - 1)))
