"""Pure logic of the first nemeses: partition shapes, iptables commands, kill victims.

The nodes here are a recording stand-in; the real iptables and kill paths run against
containers in tests/docker and in the chaos tests.
"""

import random

import pytest

from nemesis import grudge
from nemesis.catalogue import build, parse_nemesis
from nemesis.kill import KillNemesis
from nemesis.partition import PartitionNemesis

NAMES = ["n1", "n2", "n3", "n4", "n5"]


class RecordingNodes:
    def __init__(self, leader="n3"):
        self.names = list(NAMES)
        self.commands: list[tuple[str, str]] = []
        self.events: list[tuple[str, str]] = []
        self._leader = leader

    def address(self, node):
        return f"10.9.0.{node[1:]}"

    def exec(self, node, command, timeout=10.0):
        self.commands.append((node, command))
        return ""

    def kill(self, node):
        self.events.append(("kill", node))

    def start(self, node):
        self.events.append(("start", node))

    def leader(self):
        return self._leader


def cut_pairs(g):
    return {(a, b) for a, enemies in g.items() for b in enemies}


def test_isolate_cuts_victim_both_ways():
    g = grudge.isolate(NAMES, "n2")
    assert g["n2"] == ["n1", "n3", "n4", "n5"]
    assert all(g[n] == ["n2"] for n in NAMES if n != "n2")


@pytest.mark.parametrize("seed", range(20))
def test_halves_is_a_minority_and_a_majority(seed):
    g = grudge.halves(NAMES, random.Random(seed))
    sizes = sorted({len(enemies) for enemies in g.values()})
    assert sizes == [2, 3], "majority nodes drop the 2 minority nodes, minority drop the 3"
    assert cut_pairs(g) == {(b, a) for a, b in cut_pairs(g)}, "cuts are symmetric"


@pytest.mark.parametrize("seed", range(20))
def test_bridge_keeps_one_node_connected_to_both_sides(seed):
    g = grudge.without_self_loops(grudge.bridge(NAMES, random.Random(seed)))
    hubs = [n for n in NAMES if n not in g]
    assert len(hubs) == 1
    assert all(hubs[0] not in enemies for enemies in g.values())
    assert len(g) == 4 and all(len(enemies) == 2 for enemies in g.values())


def test_partition_isolates_the_current_leader_and_heals_by_flushing_its_chain():
    nodes = RecordingNodes(leader="n4")
    nemesis = PartitionNemesis(nodes, modes=("isolate-leader",))
    value = nemesis.start(random.Random(1))
    assert value["shape"] == "isolate-leader" and value["grudge"]["n4"] == ["n1", "n2", "n3", "n5"]
    rules = [c for n, c in nodes.commands if n == "n4" and "-j DROP" in c]
    assert len(rules) == 1 and all(f"-s 10.9.0.{i} -j DROP" in rules[0] for i in (1, 2, 3, 5))
    assert any("iptables -I INPUT -j CHAOS" in c for n, c in nodes.commands if n == "n4")
    nodes.commands.clear()
    nemesis.stop()
    assert sorted(n for n, c in nodes.commands if "iptables -F CHAOS" in c) == NAMES


def test_kill_restarts_exactly_what_it_killed():
    nodes = RecordingNodes(leader="n1")
    nemesis = KillNemesis(nodes, targets=("leader",))
    assert nemesis.start(random.Random(0)) == ["n1"]
    assert nemesis.stop() == ["n1"]
    assert nodes.events == [("kill", "n1"), ("start", "n1")]
    assert nemesis.stop() == [], "a second stop has nothing to restart"


def test_kill_minority_never_takes_a_majority():
    nodes = RecordingNodes()
    nemesis = KillNemesis(nodes, targets=("minority",))
    for seed in range(30):
        victims = nemesis.start(random.Random(seed))
        assert 1 <= len(victims) <= 2
        nemesis.stop()


def test_unknown_names_are_refused_clearly():
    with pytest.raises(ValueError, match="unknown nemesis bogus; choose from kill, partition"):
        parse_nemesis("kill,bogus")
    with pytest.raises(ValueError, match="unknown partition shape"):
        PartitionNemesis(RecordingNodes(), modes=("moon",))
    assert parse_nemesis("none") == [] and parse_nemesis("kill, partition,kill") == ["kill", "partition"]
    assert set(build(["kill", "partition"], RecordingNodes())) == {"kill", "partition"}
