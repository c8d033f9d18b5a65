"""Partition shapes, clogs and recipes on a live 3-node cluster: each cut really holds, each heal undoes it.

TCP probes (to a peer's sshd) need packets both ways; the one-way shape and the clog's
outgoing half are measured with UDP datagrams, which need only the one way.
"""

from __future__ import annotations

import json
import random
import shlex
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from itertools import permutations

import pytest
from test_docker_network_faults import probe

from harness.containers.db import Db
from harness.wait import wait_for
from nemesis.partition import PartitionFault, clog, rules_left, unclog
from nemesis.recipes import PartKillFault, PauseKillFault, StaleLeaderFault, SwizzleClogFault
from nodes.client import Client

pytestmark = pytest.mark.docker

UDP_PORT = 9911


def udp_delivered(db: Db, source: str, target: str) -> bool:
    """Whether a datagram from `source` reaches `target` (sent for 2 s; the receiver waits 3 s)."""
    receive = ("import socket; s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); "
               f"s.bind(('0.0.0.0', {UDP_PORT})); s.settimeout(3); s.recv(16); print('got')")
    send = ("import contextlib, socket, time\ns = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\n"
            "for _ in range(40):\n    with contextlib.suppress(PermissionError):  # an OUTPUT drop\n"
            f"        s.sendto(b'x', ({db.address(target)!r}, {UDP_PORT}))\n    time.sleep(0.05)")
    with ThreadPoolExecutor(2) as pool:
        received = pool.submit(db.ssh(target).exec, f"python3 -c {shlex.quote(receive)}", 15)
        sent = pool.submit(db.ssh(source).exec, f"python3 -c {shlex.quote(send)}", 15).result()
        assert sent.ok, sent.stderr
        return received.result().stdout.strip() == "got"


def connectivity(db: Db) -> dict[tuple[str, str], bool]:
    """Whether each node can open a TCP connection to each other node."""
    return {(a, b): probe(db, a, b) for a, b in permutations(db.names, 2)}


def only(db: Db, can: Callable[[str, str], bool]) -> dict[tuple[str, str], bool]:
    """The connectivity where a can reach b exactly when `can(a, b)`."""
    return {(a, b): can(a, b) for a, b in permutations(db.names, 2)}


def everyone_connects(db: Db) -> bool:
    return all(connectivity(db).values())


@pytest.mark.parametrize("shape", ["isolate-one", "halves", "majorities-ring"])
def test_a_symmetric_shape_cuts_exactly_its_grudge_and_heals(cluster3: Db, shape: str) -> None:
    fault = PartitionFault(cluster3, (shape,))
    try:
        value = fault.start(random.Random(5))
        drops = value["grudge"]
        assert drops and fault.leftovers()
        assert connectivity(cluster3) == only(cluster3, lambda a, b: b not in drops.get(a, []))
        fault.stop()
        assert fault.leftovers() == [] and everyone_connects(cluster3)
    finally:
        fault.heal()


def test_one_way_deafens_a_node_that_is_still_heard(cluster3: Db) -> None:
    fault = PartitionFault(cluster3, ("one-way",))
    try:
        (deaf,) = fault.start(random.Random(1))["grudge"]
        peer = next(n for n in cluster3.names if n != deaf)
        assert udp_delivered(cluster3, deaf, peer), "the peer still gets the deaf node's packets"
        assert not udp_delivered(cluster3, peer, deaf), "the deaf node drops the peer's packets"
        fault.stop()
        assert fault.leftovers() == [] and udp_delivered(cluster3, peer, deaf)
    finally:
        fault.heal()


def test_clog_cuts_a_node_off_both_ways_and_unclog_restores_it(cluster3: Db) -> None:
    try:
        clog(cluster3, "n1")
        assert not udp_delivered(cluster3, "n1", "n2"), "n1 sends nothing out"
        assert not udp_delivered(cluster3, "n2", "n1"), "n1 takes nothing in"
        assert connectivity(cluster3) == only(cluster3, lambda a, b: "n1" not in (a, b))
        unclog(cluster3, "n1")
        assert rules_left(cluster3) == [] and everyone_connects(cluster3)
    finally:
        PartitionFault(cluster3, ()).heal()


def test_swizzle_clog_cuts_every_clogged_node_until_stop(cluster3: Db) -> None:
    fault = SwizzleClogFault(cluster3, 0.1)
    try:
        order = fault.start(random.Random(3))["order"]
        assert connectivity(cluster3) == only(cluster3, lambda a, b: a not in order and b not in order)
        assert sorted(fault.stop()["order"]) == sorted(order)
        assert fault.leftovers() == [] and everyone_connects(cluster3)
    finally:
        fault.heal()


def test_pause_kill_changes_the_leader_and_heals_clean(cluster3: Db) -> None:
    cluster3.start()
    leader = cluster3.wait_for_leader(30)
    fault = PauseKillFault(cluster3)
    try:
        value = fault.start(random.Random(2))
        (paused,), (killed,) = (step["targets"] for step in value["steps"])
        assert paused == leader and cluster3.state(leader) == "T" and not cluster3.running(killed)
        assert value["new_leader"] not in (None, leader), "the others elected a new leader"
        assert len(fault.leftovers()) == 2
        fault.stop()
        assert cluster3.state(leader) not in ("T", None) and cluster3.running(killed)
        assert fault.leftovers() == []
        wait_for(cluster3.leader, 30, "no leader after pause-kill stopped")
    finally:
        fault.heal()


def test_part_kill_crashes_a_node_and_heals_the_partition_inside_start(cluster3: Db) -> None:
    cluster3.start()
    leader = cluster3.wait_for_leader(30)
    fault = PartKillFault(cluster3, 0.5)
    try:
        value = fault.start(random.Random(4))
        (killed,) = value["steps"][1]["targets"]
        assert leader not in value["minority"] and not cluster3.running(killed)
        assert fault.leftovers() == [f"{killed}: the node process is not running"], "only the crash stays"
        assert value["new_leader"] not in (None, killed)
        fault.stop()
        assert fault.leftovers() == [] and cluster3.running(killed)
        wait_for(cluster3.leader, 30, "no leader after part-kill stopped")
    finally:
        fault.heal()


def role_events(db: Db, node: str) -> list[dict]:
    text = db.exec(node, f"cat {db.data_dir}/events.jsonl")
    return [e for e in map(json.loads, text.splitlines()) if e["event"] == "role"]


@pytest.mark.parametrize("mode", ["clock", "pause"])
def test_stale_leader_keeps_believing_it_leads_while_the_others_elect_and_heal_ends_it(cluster3: Db,
                                                                                       mode: str) -> None:
    cluster3.start()
    old = cluster3.wait_for_leader(30)

    def says(node: str):
        with Client(cluster3.network_peers(), timeout=2) as client:
            return client.metadata(node=node, timeout=2)

    term = says(old).term
    fault = StaleLeaderFault(cluster3, (mode,), 5000)
    try:
        value = fault.start(random.Random(3))
        assert value["targets"] == [old] and value["stepped_clock"] == (mode == "clock")
        first = {"clock": "clock-back", "pause": "pause"}[mode]
        assert [s["step"] for s in value["steps"]][:2] == [first, "isolate"]
        others = [node for node in cluster3.names if node != old]
        assert not probe(cluster3, old, others[0]) and probe(cluster3, others[0], others[1])
        wait_for(lambda: (lead := says(others[0]).leader) in others and says(lead).term > term, 30,
                 "the others did not elect a new leader")
        if mode == "clock":
            stale = says(old)
            assert (stale.role, stale.term) == ("leader", term), "cut off, its timers frozen, it still leads"
            assert stale.clock_offset_ms < 0
        else:  # woken as leader of its old term, it gives up by itself: nobody could tell it otherwise
            assert cluster3.state(old) not in ("T", None)
            wait_for(lambda: [(e["role"], e["term"]) for e in role_events(cluster3, old)][-1][0] != "leader",
                     30, f"{old} never stepped down")
            assert role_events(cluster3, old)[-1]["term"] == term
        assert fault.leftovers(), "the cut's rules (and the clock offset) are in force"
        fault.stop()
        assert fault.leftovers() == []
        wait_for(lambda: says(old).role == "follower" and says(old).term > term, 30,
                 f"{old} did not follow the new leader after the heal")
    finally:
        fault.heal()
