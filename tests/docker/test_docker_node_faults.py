"""Kill, stop, pause, clock and leader churn on a live 3-node cluster: each fault really takes
effect on the node it targets, and healing undoes it (leftovers() is empty afterwards)."""

from __future__ import annotations

import json
import random
import time
from collections.abc import Iterator

import pytest

from harness.containers.db import Db
from harness.wait import wait_for
from nemesis import catalogue
from nodes.client import Client

pytestmark = pytest.mark.docker


@pytest.fixture(scope="module")
def live3(node_image: str) -> Iterator[Db]:
    with Db(3, image=node_image, serve_args=["--segment-mb", "1"]) as db:
        db.start()
        db.wait_for_leader()
        yield db


def fault(db: Db, family: str, **options: str):
    values = catalogue.parse_options({k.replace("-", "_"): v for k, v in options.items()})
    return catalogue.FAMILIES[family].make(db, values)


def metadata(db: Db, node: str):
    with Client(db.network_peers(), timeout=2) as client:
        return client.metadata(node=node, timeout=2)


def events(db: Db, node: str, kind: str) -> list[dict]:
    text = db.exec(node, f"cat {db.data_dir}/events.jsonl")
    return [e for e in map(json.loads, text.splitlines()) if e["event"] == kind]


def new_leader(db: Db, old: str, timeout: float = 20) -> str:
    return wait_for(lambda: (lead := db.leader()) not in (None, old) and lead, timeout,
                    f"no leader other than {old} within {timeout} s")


def test_kill_of_the_leader_elects_another_and_restart_heals(live3: Db) -> None:
    kill = fault(live3, "kill", kill_targets="leader")
    leader = live3.wait_for_leader()
    value = kill.start(random.Random(1))
    assert value["targets"] == [leader] and not live3.running(leader)
    assert kill.leftovers() == [f"{leader}: the node process is not running"]
    assert new_leader(live3, leader) != leader
    assert kill.stop()["targets"] == [leader] and live3.running(leader)
    assert kill.leftovers() == []


def test_churn_moves_leadership_by_transfer_and_by_preference(live3: Db) -> None:
    # before the clock tests: a clock set back freezes that node's timers until real time catches up
    churn = fault(live3, "churn", churn_modes="transfer")
    leader = live3.wait_for_leader()
    value = churn.start(random.Random(6))
    assert value["leader"] == leader and value["result"] == "transferred", value
    wait_for(lambda: live3.leader() == value["to"], 10, f"{value['to']} does not lead after the transfer")
    prefer = fault(live3, "churn", churn_modes="prefer")
    rng = random.Random(7)
    value = prefer.start(rng)
    while value["preferred"] == live3.leader():
        value = prefer.start(rng)
    wait_for(lambda: live3.leader() == value["preferred"], 20, f"{value['preferred']} never took over")
    assert prefer.leftovers() != []
    prefer.heal()
    assert prefer.leftovers() == []


def recoveries(db: Db, node: str) -> int:
    return db.exec(node, f"cat {db.data_dir}/node.log").count("store recovered:")


def test_bounce_crashes_and_restarts_at_once_and_the_cluster_elects_again(live3: Db) -> None:
    bounce = fault(live3, "bounce", bounce_targets="leader")
    leader = live3.wait_for_leader()
    term = metadata(live3, leader).term
    before = recoveries(live3, leader)
    value = bounce.start(random.Random(4))
    assert value["targets"] == [leader] and live3.running(leader), "back at once, no stop needed"
    wait_for(lambda: recoveries(live3, leader) == before + 1, 20, f"{leader} did not recover from its disk")
    wait_for(lambda: (lead := live3.leader()) is not None and metadata(live3, lead).term > term, 20,
             "no election after the leader's crash-restart")
    assert bounce.stop() == {"targets": []} and bounce.leftovers() == []
    live3.kill(leader)
    assert bounce.leftovers() == [f"{leader}: the node process is not running"]
    bounce.heal()
    assert live3.running(leader) and bounce.leftovers() == []


def test_stop_is_a_graceful_exit(live3: Db) -> None:
    stop = fault(live3, "stop", stop_targets="one")
    (node,) = stop.start(random.Random(2))["targets"]
    assert not live3.running(node)
    assert "stopped at end index" in live3.exec(node, f"tail -n 5 {live3.data_dir}/node.log")
    stop.heal()
    assert live3.running(node) and stop.leftovers() == []


def test_a_paused_leader_is_replaced_and_resumes_as_follower(live3: Db) -> None:
    pause = fault(live3, "pause", pause_targets="leader")
    leader = live3.wait_for_leader()
    assert pause.start(random.Random(3))["targets"] == [leader]
    assert live3.state(leader) == "T"
    assert pause.leftovers() == [f"{leader}: the node process is paused"]
    successor = new_leader(live3, leader)
    pause.stop()
    assert live3.state(leader) in ("S", "R") and pause.leftovers() == []
    # the stale leader hears of the newer term and follows
    wait_for(lambda: metadata(live3, leader).role == "follower", 20, f"{leader} did not step down")
    assert metadata(live3, leader).term >= metadata(live3, successor).term - 1


def test_a_clock_bump_shows_in_metadata_and_events_and_reset_undoes_it(live3: Db) -> None:
    clock = fault(live3, "clock", clock_targets="one", clock_modes="bump", clock_max_skew_ms="4000")
    value = clock.start(random.Random(4))
    (node,) = value["targets"]
    offset = value["offsets_ms"][node]
    assert 1000 <= abs(offset) <= 4000

    def applied() -> bool:
        meta = metadata(live3, node)
        skew = meta.wall_ms - time.time() * 1000
        return meta.clock_offset_ms == offset and abs(skew - offset) < 500

    wait_for(applied, 10, f"{node} does not report the offset {offset} ms")
    assert events(live3, node, "clock")[-1]["offset_ms"] == offset
    assert clock.leftovers() != []
    clock.stop()
    wait_for(lambda: metadata(live3, node).clock_offset_ms == 0, 10, f"{node} kept its offset")
    assert events(live3, node, "clock")[-1]["offset_ms"] == 0 and clock.leftovers() == []


def test_a_strobing_clock_flips_until_stopped(live3: Db) -> None:
    clock = fault(live3, "clock", clock_targets="one", clock_modes="strobe", clock_strobe_ms="50")
    (node,) = clock.start(random.Random(5))["targets"]
    before = len(events(live3, node, "clock"))
    wait_for(lambda: len(events(live3, node, "clock")) - before >= 6, 10, f"{node}'s clock does not strobe")
    clock.heal()
    assert clock.leftovers() == []
    settled = len(events(live3, node, "clock"))
    wait_for(lambda: metadata(live3, node).clock_offset_ms == 0, 5, "offset not reset")
    assert len(events(live3, node, "clock")) <= settled + 1, "the strobe loop is gone"
