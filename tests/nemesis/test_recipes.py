"""The recipes' step logic against the recording stand-in: order of steps, targets, undo, heal."""

from __future__ import annotations

import random

import networkx as nx
import pytest
from recording import RecordingNodes

from nemesis import recipes
from nemesis.catalogue import FAMILIES, build, parse_options
from nemesis.partition import PartitionFault, clog, unclog
from nemesis.recipes import PartKillFault, PauseKillFault, SwizzleClogFault

STEP_S = 0.01


def steps(value):
    return [(step["step"], step["targets"]) for step in value["steps"]]


def without_times(value):
    return {**value, "steps": [{k: v for k, v in step.items() if k != "at_s"} for step in value["steps"]]}


def cut_between(graph: nx.DiGraph, side: list[str], names: list[str]) -> bool:
    """No packet crosses between `side` and the other nodes, either way."""
    return not any(graph.has_edge(a, b) or graph.has_edge(b, a) for a in side for b in names if b not in side)


# -- pause-kill ----------------------------------------------------------------------------

@pytest.mark.parametrize("seed", range(10))
def test_pause_kill_pauses_the_leader_then_kills_one_of_the_new_majority(seed):
    nodes = RecordingNodes(count=3, leader="n3")
    fault = PauseKillFault(nodes)
    value = fault.start(random.Random(seed))
    victim = value["steps"][1]["targets"][0]
    assert steps(value) == [("pause", ["n3"]), ("kill", [victim])] and victim in ("n1", "n2")
    assert value["leader"] == "n3" and value["new_leader"] == "n1", "the others elected a leader first"
    assert value["targets"] == sorted(["n3", victim])
    assert sorted(fault.leftovers()) == sorted([f"{victim}: the node process is not running",
                                                "n3: the node process is paused"])
    del nodes.events[:]
    assert without_times(fault.stop()) == {"steps": [{"step": "start", "targets": [victim]},
                                                     {"step": "resume", "targets": ["n3"]}],
                                           "targets": sorted(["n3", victim])}
    assert nodes.events == [("start", victim), ("resume", "n3")]
    assert fault.leftovers() == [] and fault.stop()["targets"] == []


def test_pause_kill_goes_on_when_no_new_leader_comes_and_records_it():
    nodes = RecordingNodes(count=5, leader=None, elect=False)
    value = PauseKillFault(nodes, wait_s=0.05).start(random.Random(3))
    paused, killed = (step["targets"][0] for step in value["steps"])
    assert value["leader"] is None and value["new_leader"] is None
    assert nodes.paused == {paused} and nodes.gone == {killed} and paused != killed


def test_pause_kill_is_seeded_and_heal_revives_everything():
    values = []
    for _ in range(2):
        nodes = RecordingNodes(count=5, leader="n2")
        fault = PauseKillFault(nodes)
        values.append(without_times(fault.start(random.Random(42))))
        fault.heal()
        assert fault.leftovers() == [] and not nodes.gone and not nodes.paused
    assert values[0] == values[1]


# -- part-kill -----------------------------------------------------------------------------

@pytest.mark.parametrize("n", (3, 5))
@pytest.mark.parametrize("seed", range(10))
def test_part_kill_crashes_a_majority_node_while_the_minority_is_cut_off_then_heals(n, seed):
    nodes = RecordingNodes(count=n, leader="n2")
    seen_at_kill = []
    kill = nodes.kill
    nodes.kill = lambda node: (seen_at_kill.append(nodes.links()), kill(node))
    fault = PartKillFault(nodes, STEP_S)
    value = fault.start(random.Random(seed))
    minority, victim = value["minority"], value["steps"][1]["targets"][0]
    assert len(minority) == (n - 1) // 2 and "n2" not in minority, "the leader stays with the majority"
    assert victim not in minority and nodes.gone == {victim}
    assert steps(value) == [("partition", minority), ("kill", [victim]), ("heal", nodes.names)]
    assert cut_between(seen_at_kill[0], minority, nodes.names), "the minority was cut off at the crash"
    assert nodes.links().number_of_edges() == n * (n - 1), "the partition is healed at the end of start"
    assert value["new_leader"] not in (None, victim) and value["targets"] == sorted([*minority, victim])
    assert fault.leftovers() == [f"{victim}: the node process is not running"]
    assert fault.stop() == {"targets": [victim]} and nodes.events[-1] == ("start", victim)
    assert fault.leftovers() == []


def test_part_kill_partition_step_records_its_grudge_and_waits_a_step():
    nodes = RecordingNodes(count=5, leader="n1")
    value = PartKillFault(nodes, 0.2).start(random.Random(5))
    partition, kill, _heal = value["steps"]
    assert set(partition["grudge"]) == set(nodes.names)
    majority = set(nodes.names) - set(value["minority"])
    assert all(set(partition["grudge"][m]) == majority for m in value["minority"])
    assert kill["at_s"] - partition["at_s"] >= 0.2 - 0.001  # both rounded to the millisecond


def test_part_kill_lifts_only_its_own_cut():
    nodes = RecordingNodes(count=5)
    PartitionFault(nodes, ("one-way",)).start(random.Random(0))
    kept = {n: sorted(rules) for n, rules in nodes.chains.items()}
    PartKillFault(nodes, STEP_S).start(random.Random(1))
    assert {n: sorted(rules) for n, rules in nodes.chains.items()} == kept


def test_part_kill_heal_flushes_and_restarts_whatever_state():
    nodes = RecordingNodes(count=5)
    fault = PartKillFault(nodes, STEP_S)
    fault.start(random.Random(1))
    clog(nodes, "n4")
    nodes.pause("n5")
    fault.heal()
    assert fault.leftovers() == [] and not nodes.gone and not nodes.paused


# -- swizzle-clog --------------------------------------------------------------------------

def test_clog_cuts_one_node_both_ways_and_unclog_leaves_other_clogs():
    nodes = RecordingNodes(count=3)
    clog(nodes, "n1")
    clog(nodes, "n2")
    assert nodes.links().edges == set(), "n3 is cut from n1 and n2 by their rules alone"
    assert nodes.chains["n3"] == []
    unclog(nodes, "n1")
    assert set(nodes.links().edges) == {("n1", "n3"), ("n3", "n1")}, "n2 stays clogged"
    unclog(nodes, "n2")
    assert nodes.links().number_of_edges() == 6 and nodes.chains == {n: [] for n in nodes.names}


@pytest.mark.parametrize("n", (3, 5))
@pytest.mark.parametrize("seed", range(10))
def test_swizzle_clogs_a_majority_one_by_one_and_unclogs_in_a_random_order(n, seed):
    nodes = RecordingNodes(count=n)
    fault = SwizzleClogFault(nodes, STEP_S)
    value = fault.start(random.Random(seed))
    order = value["order"]
    assert n // 2 + 1 <= len(order) <= n and len(set(order)) == len(order)
    assert steps(value) == [("clog", [node]) for node in order] and value["targets"] == sorted(order)
    links = nodes.links()
    assert all(links.in_degree(c) == 0 and links.out_degree(c) == 0 for c in order), "each clogged both ways"
    assert [s["at_s"] for s in value["steps"]] == sorted(s["at_s"] for s in value["steps"])
    assert value["steps"][-1]["at_s"] >= STEP_S * (len(order) - 1)
    assert fault.leftovers()
    stopped = fault.stop()
    assert sorted(stopped["order"]) == sorted(order) and stopped["targets"] == sorted(order)
    assert steps(stopped) == [("unclog", [node]) for node in stopped["order"]]
    assert fault.leftovers() == [] and nodes.links().number_of_edges() == n * (n - 1)
    assert fault.stop()["order"] == []


def test_swizzle_order_is_seeded_and_unclogging_is_shuffled():
    def orders(seed):
        fault = SwizzleClogFault(RecordingNodes(count=5), 0)
        return tuple(fault.start(random.Random(seed))["order"]), tuple(fault.stop()["order"])

    assert orders(9) == orders(9)
    assert any(clogs != unclogs for clogs, unclogs in map(orders, range(20))), "unclogs in another order"


def test_swizzle_heal_flushes_a_half_done_start():
    nodes = RecordingNodes(count=5)
    fault = SwizzleClogFault(nodes, STEP_S)
    fault.start(random.Random(2))
    fault.heal()
    assert fault.leftovers() == [] and fault.stop()["targets"] == []


# -- the catalogue -------------------------------------------------------------------------

def test_recipes_are_registered_with_their_names_and_step_option():
    for name in ("pause-kill", "part-kill", "swizzle-clog"):
        family = FAMILIES[name]
        assert (family.start_f, family.stop_f) == (f"start-{name}", f"stop-{name}") and family.label
    faults = build(["pause-kill", "part-kill", "swizzle-clog"], RecordingNodes())
    assert [type(f) for f in faults.values()] == [PauseKillFault, PartKillFault, SwizzleClogFault]
    assert faults["swizzle-clog"].step_s == 0.5 and faults["part-kill"].step_s == 0.5
    fast = build(["part-kill"], RecordingNodes(), parse_options({"recipe_step_ms": "20"}))
    assert fast["part-kill"].step_s == 0.02
    with pytest.raises(ValueError, match="--recipe-step-ms"):
        recipes.STEP.value("0")
