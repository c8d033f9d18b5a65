"""Pure logic of the first nemeses: partition shapes, iptables commands, kill victims.

The nodes here are a recording stand-in; the real iptables and kill paths run against
containers in tests/docker and in the chaos tests.
"""

import random

import pytest
from recording import RecordingNodes

from nemesis import grudge
from nemesis.catalogue import build, resolve
from nemesis.kill import KILL
from nemesis.partition import PARTITION, PartitionFault
from nemesis.process import ProcessFault

NAMES = ["n1", "n2", "n3", "n4", "n5"]


def cut_pairs(g):
    return {(a, b) for a, enemies in g.items() for b in enemies}


def test_isolate_cuts_victim_both_ways():
    g = grudge.grudge(grudge.isolate_leader(NAMES, random.Random(0), "n2"))
    assert g["n2"] == ["n1", "n3", "n4", "n5"]
    assert all(g[n] == ["n2"] for n in NAMES if n != "n2")


@pytest.mark.parametrize("seed", range(20))
def test_halves_is_a_minority_and_a_majority(seed):
    g = grudge.grudge(grudge.random_halves(NAMES, random.Random(seed), None))
    sizes = sorted({len(enemies) for enemies in g.values()})
    assert sizes == [2, 3], "majority nodes drop the 2 minority nodes, minority drop the 3"
    assert cut_pairs(g) == {(b, a) for a, b in cut_pairs(g)}, "cuts are symmetric"


@pytest.mark.parametrize("seed", range(20))
def test_bridge_keeps_one_node_connected_to_both_sides(seed):
    g = grudge.grudge(grudge.bridge(NAMES, random.Random(seed), None))
    hubs = [n for n in NAMES if n not in g]
    assert len(hubs) == 1
    assert all(hubs[0] not in enemies for enemies in g.values())
    assert len(g) == 4 and all(len(enemies) == 2 for enemies in g.values())


def test_partition_isolates_the_current_leader_and_heals_by_flushing_its_chain():
    nodes = RecordingNodes(leader="n4")
    nemesis = PartitionFault(nodes, ("isolate-leader",))
    value = nemesis.start(random.Random(1))
    assert value["shape"] == "isolate-leader" and value["grudge"]["n4"] == ["n1", "n2", "n3", "n5"]
    assert value["targets"] == ["n4"] and value["leader"] == "n4"
    rules = [c for n, c in nodes.commands if n == "n4" and "-j DROP" in c]
    assert len(rules) == 1 and all(f"-s 10.9.0.{i} -j DROP" in rules[0] for i in (1, 2, 3, 5))
    assert any("iptables -I INPUT -j CHAOS" in c for n, c in nodes.commands if n == "n4")
    assert nemesis.stop() == {"targets": ["n4"]}
    assert nodes.chains == {n: [] for n in NAMES}, "stop removes the rules it added"
    nodes.commands.clear()
    nemesis.heal()
    assert sorted(n for n, c in nodes.commands if "iptables -F CHAOS" in c) == NAMES


def test_partition_stop_leaves_the_rules_of_other_faults_in_the_chain():
    nodes = RecordingNodes()
    other = PartitionFault(nodes, ("isolate-one",))
    other.start(random.Random(2))
    kept = {n: sorted(rules) for n, rules in nodes.chains.items()}
    nemesis = PartitionFault(nodes, ("majorities-ring",))
    nemesis.start(random.Random(3))
    nemesis.stop()
    assert {n: sorted(rules) for n, rules in nodes.chains.items()} == kept, "a rule both added stays once"


def test_kill_restarts_exactly_what_it_killed():
    nodes = RecordingNodes(leader="n1")
    nemesis = KILL.make(nodes, {"kill_targets": ("leader",)})
    assert isinstance(nemesis, ProcessFault)
    assert nemesis.start(random.Random(0))["targets"] == ["n1"]
    assert nemesis.stop()["targets"] == ["n1"]
    assert nodes.events == [("kill", "n1"), ("start", "n1")]
    assert nemesis.stop()["targets"] == [], "a second stop has nothing to restart"


def test_kill_minority_never_takes_a_majority():
    nodes = RecordingNodes()
    nemesis = KILL.make(nodes, {"kill_targets": ("minority",)})
    for seed in range(30):
        victims = nemesis.start(random.Random(seed))["targets"]
        assert 1 <= len(victims) <= 2
        nemesis.stop()


def test_unknown_names_are_refused_clearly():
    with pytest.raises(ValueError, match="unknown fault 'bogus'"):
        resolve("kill,bogus")
    (shapes,) = PARTITION.options
    with pytest.raises(ValueError, match="--partition-shapes: unknown moon; choose from isolate-one"):
        shapes.value("halves,moon")
    assert resolve("none") == [] and resolve("kill, partition,kill") == ["kill", "partition"]
    assert set(build(["kill", "partition"], RecordingNodes())) == {"kill", "partition"}
