"""Every partition shape's defining property, checked on the graph its grudge leaves (networkx).

The grudge (what iptables installs) is turned back into the graph of who still hears whom,
and each shape's property is a graph property of it, on 3, 5, 7 and 9 nodes, over seeds
(hypothesis) and leaders (one of the nodes, or None when no node answered).
"""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

import networkx as nx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from recording import RecordingNodes

from nemesis import grudge
from nemesis.partition import DEFAULT_SHAPES, PARTITION, SHAPES, PartitionFault

SIZES = (3, 5, 7, 9)
EXAMPLES = settings(max_examples=40, deadline=None)
Check = Callable[..., None]


def names_of(n: int) -> list[str]:
    return [f"n{i}" for i in range(1, n + 1)]


def heard(names: list[str], drops: grudge.Grudge) -> nx.DiGraph:
    """Who still hears whom under `drops`: an edge a->b when b gets a's packets."""
    graph = nx.DiGraph()
    graph.add_nodes_from(names)
    graph.add_edges_from((a, b) for a in names for b in names if a != b and a not in drops.get(b, []))
    return graph


def talks(names: list[str], drops: grudge.Grudge) -> nx.Graph:
    """The undirected graph of a symmetric grudge (asserts it is symmetric)."""
    directed = heard(names, drops)
    assert all(directed.has_edge(b, a) for a, b in directed.edges), "the grudge is symmetric"
    return directed.to_undirected()


def cut(shape: str, n: int, seed: int, leader: str | None = None) -> tuple[list[str], nx.Graph, list[str]]:
    """The nodes, the graph `shape`'s grudge leaves, and the nodes the shape targets."""
    names = names_of(n)
    links = grudge.SHAPES[shape](names, random.Random(seed), leader)
    drops = grudge.grudge(links)
    assert all(node not in enemies and set(enemies) <= set(names) for node, enemies in drops.items())
    graph = heard(names, drops) if shape == "one-way" else talks(names, drops)
    return names, graph, grudge.cut_off(links)


def is_complete(graph: nx.Graph) -> bool:
    n = graph.number_of_nodes()
    return graph.number_of_edges() == n * (n - 1) // 2


def parts(graph: nx.Graph) -> list[set[str]]:
    """The connected components, smallest first, each a complete graph."""
    found = sorted(nx.connected_components(graph), key=len)
    assert all(is_complete(graph.subgraph(part)) for part in found)
    return found


seeds = st.integers(0, 2**32 - 1)
leaders = st.sampled_from([None, "n1", "n2", "n3"])


def each_size(sizes: tuple[int, ...] = SIZES, **more: st.SearchStrategy[Any]) -> Callable[[Check], Check]:
    """Run the test on each of `sizes` nodes (`n`), over seeds (`seed`) and any `more` strategies."""
    def wrap(test: Check) -> Check:
        return pytest.mark.parametrize("n", sizes)(EXAMPLES(given(seed=seeds, **more)(test)))
    return wrap


@each_size()
def test_isolate_one_leaves_one_node_alone_and_the_rest_complete(n, seed):
    names, graph, targets = cut("isolate-one", n, seed)
    (alone,) = nx.isolates(graph)
    assert is_complete(graph.subgraph(set(names) - {alone}))
    assert targets == [alone]


@each_size(leader=leaders)
def test_isolate_leader_isolates_the_leader(n, seed, leader):
    names, graph, targets = cut("isolate-leader", n, seed, leader)
    (alone,) = nx.isolates(graph)
    assert alone == leader or leader is None
    assert is_complete(graph.subgraph(set(names) - {alone})) and targets == [alone]


@each_size()
def test_halves_splits_in_name_order_the_same_every_time(n, seed):
    names, graph, targets = cut("halves", n, seed)
    small, big = parts(graph)
    assert (len(small), len(big)) == (n // 2, n - n // 2)
    assert small == set(names[: n // 2]) and targets == sorted(small)


@each_size()
def test_random_halves_are_two_complete_halves(n, seed):
    _, graph, targets = cut("random-halves", n, seed)
    small, big = parts(graph)
    assert (len(small), len(big)) == (n // 2, n - n // 2) and targets == sorted(small)


@pytest.mark.parametrize("n", SIZES)
def test_random_halves_differ_between_seeds(n):
    splits = {frozenset(parts(cut("random-halves", n, seed)[1])[0]) for seed in range(30)}
    assert len(splits) > 1


@each_size()
def test_majorities_ring_gives_each_node_its_own_majority(n, seed):
    names, graph, targets = cut("majorities-ring", n, seed)
    seen = [frozenset([node, *graph[node]]) for node in names]
    assert all(len(view) >= grudge.majority(n) for view in seen), "every node sees a majority"
    assert len(set(seen)) == n, "no two nodes see the same majority"
    assert nx.is_connected(graph) and targets == sorted(x for x in names if graph.degree(x) < n - 1)


@each_size(SIZES[1:])
def test_majorities_ring_is_a_ring_from_5_nodes(n, seed):
    _, graph, _ = cut("majorities-ring", n, seed)
    degrees = {d for _, d in graph.degree}
    assert len(degrees) == 1, "every node has as many links"
    assert nx.is_isomorphic(graph, nx.circulant_graph(n, range(1, degrees.pop() // 2 + 1)))


@each_size()
def test_bridge_node_talks_to_all_and_holds_the_halves_together(n, seed):
    names, graph, targets = cut("bridge", n, seed)
    (hub,) = [node for node in names if graph.degree(node) == n - 1]
    left, right = parts(graph.subgraph(set(names) - {hub}))
    assert (len(left), len(right)) == ((n - 1) // 2, n - 1 - (n - 1) // 2)
    assert targets == sorted(set(names) - {hub})


@each_size()
def test_minority_third_cuts_off_fewer_than_a_third(n, seed):
    _, graph, targets = cut("minority-third", n, seed)
    small, big = parts(graph)
    assert len(small) == max(1, (n - 1) // 3) and len(small) < grudge.majority(n) <= len(big)
    assert targets == sorted(small)


@each_size()
def test_one_way_makes_one_node_deaf_but_heard(n, seed):
    names, graph, targets = cut("one-way", n, seed)
    (deaf,) = [node for node in names if graph.in_degree(node) == 0]
    others = set(names) - {deaf}
    assert all(graph.has_edge(deaf, x) and not graph.has_edge(x, deaf) for x in others), "A->B yes, B->A no"
    assert is_complete(graph.subgraph(others).to_undirected(reciprocal=True))
    assert targets == [deaf]


@each_size(leader=leaders)
def test_leader_minority_puts_the_leader_on_the_minority_side(n, seed, leader):
    _, graph, targets = cut("leader-minority", n, seed, leader)
    small, big = parts(graph)
    assert len(small) == n - grudge.majority(n) and len(big) == grudge.majority(n)
    assert leader is None or leader in small
    assert targets == sorted(small)


def test_every_shape_is_covered_and_only_one_way_is_asymmetric():
    assert set(SHAPES) == {"isolate-one", "isolate-leader", "halves", "random-halves", "majorities-ring",
                           "bridge", "minority-third", "one-way", "leader-minority"}
    for shape in SHAPES:
        for n in SIZES:
            names = names_of(n)
            graph = heard(names, grudge.grudge(grudge.SHAPES[shape](names, random.Random(n), "n1")))
            assert all(graph.has_edge(b, a) for a, b in graph.edges) == (shape != "one-way"), shape
            assert graph.number_of_edges() < n * (n - 1), f"{shape} on {n} nodes cuts something"


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("n", (3, 5))
def test_the_partition_installs_exactly_its_grudge(shape, n):
    nodes = RecordingNodes(count=n, leader="n2")
    fault = PartitionFault(nodes, (shape,))
    value = fault.start(random.Random(7))
    assert nx.utils.graphs_equal(nodes.links(), heard(nodes.names, value["grudge"]))
    assert value.get("leader") == ("n2" if shape in grudge.LEADER_SHAPES else None)
    assert fault.leftovers()
    assert fault.stop() == {"targets": value["targets"]}
    assert fault.leftovers() == [] and nx.utils.graphs_equal(nodes.links(), heard(nodes.names, {}))


def test_the_default_shapes_are_leader_aware_and_every_shape_is_a_choice():
    (option,) = PARTITION.options
    assert option.value(option.default) == tuple(DEFAULT_SHAPES.split(","))
    assert set(option.value(option.default)) >= grudge.LEADER_SHAPES
    assert option.choices == SHAPES and option.value(",".join(SHAPES)) == SHAPES


def test_majorities_ring_needs_three_nodes():
    with pytest.raises(ValueError, match="at least 3 nodes"):
        grudge.majorities_ring(["n1", "n2"], random.Random(0), None)
