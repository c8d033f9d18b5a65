"""The pause fault: a frozen node holds what reaches it and handles it all when it wakes."""

from __future__ import annotations

import heapq
import random

import pytest

from nodes.election import Role
from nodes.sim.cluster import Simulation, run_seed
from nodes.sim.config import SimConfig
from nodes.sim.invariants import Deadlines, Violation
from nodes.sim.pause import Held


def test_a_woken_node_takes_every_connection_in_its_order_interleaved_at_random() -> None:
    seen: list[str] = []
    orders = set()
    for seed in range(20):
        held = Held(0.0, random.Random(seed))
        for conn, count in (("a", 3), ("b", 2), ("timer", 1)):
            for i in range(count):
                held.hold(conn, lambda item=f"{conn}{i}": seen.append(item))
        assert len(held) == 6
        seen.clear()
        for handle in held.wake():
            handle()
        assert sorted(seen) == ["a0", "a1", "a2", "b0", "b1", "timer0"]
        assert [x for x in seen if x[0] == "a"] == ["a0", "a1", "a2"]
        assert [x for x in seen if x[0] == "b"] == ["b0", "b1"]
        orders.add(tuple(seen))
    assert len(orders) > 5
    assert any(order[0] == "timer0" for order in orders) and any(order[0] != "timer0" for order in orders)


def test_a_postponed_request_is_due_later() -> None:
    d = Deadlines()
    d.on_request(1, 100.0, "read rid 1")
    d.postpone(1, 50.0)
    d.check(120.0)  # the old due time passes
    with pytest.raises(Violation, match=r"read rid 1 got no answer by 150\.0 ms"):
        d.check(151.0)
    d.on_request(2, 10.0, "append rid 2")
    d.on_answer(2)
    d.postpone(2, 5.0)  # answered: nothing to postpone
    d.check(100.0)


def _advance(sim: Simulation, until: float) -> None:
    """Run the simulation's events up to `until` ms (no healing: the fault phase)."""
    loop = sim.loop
    while loop.queue and loop.queue[0][0] <= until:
        loop.now, _, kind, node, payload = heapq.heappop(loop.queue)
        loop.step += 1
        loop.handlers[kind](node, payload)


@pytest.mark.parametrize("nodes", [3, 5])
def test_a_paused_leader_hears_nothing_while_another_is_elected_and_learns_of_it_when_it_wakes(
    nodes: int,
) -> None:
    sim = Simulation(SimConfig(seed=7, nodes=nodes, faults=(), clients=2))
    cluster = sim.nodes
    _advance(sim, 500.0)
    [old] = cluster.leaders()
    core = cluster.cores[old]
    assert core is not None
    term, commit = core.term, core.commit_index
    cluster.pause(old, 2000.0, random.Random("pause-7"))
    _advance(sim, sim.loop.now + 1900.0)
    others = [n for n in cluster.leaders() if n != old]
    assert others, cluster.roles()
    new = cluster.cores[others[0]]
    assert new is not None and new.term > term and new.commit_index > commit
    assert (core.role, core.term, core.commit_index) == (Role.LEADER, term, commit)  # frozen
    assert len(cluster.paused[old]) > 0
    _advance(sim, sim.loop.now + 300.0)
    assert old not in cluster.paused
    assert core.term >= new.term and core.role is not Role.LEADER
    assert sim.stats["read-info"] + sim.stats["append-info"] > 0  # clients gave up on it


def test_runs_with_pauses_are_clean_and_replay_byte_for_byte() -> None:
    paused = 0
    for seed in range(20):
        config = SimConfig(seed=seed, nodes=(3, 5)[seed % 2], steps=3000, faults=("pause",))
        result = run_seed(config)
        assert result.violation is None, result.summary()
        paused += result.stats["fault-pause"]
    assert paused >= 20
    config = SimConfig(seed=3, nodes=5, steps=3000, faults=("pause", "crash", "loss"))
    assert run_seed(config).summary() == run_seed(config).summary()
