"""Losing a node for good, on live clusters: lose-node wipes the target's store and term file (its
logs stay), a master-slave master's loss promotes the most advanced slave, isolate-lose cuts the
leader off before losing it, and stopping either brings the node back empty to catch up."""

from __future__ import annotations

import random
from collections.abc import Iterator

import pytest

from harness.chaos.modes import MODES
from harness.containers.db import Db
from harness.ssh.nodes import LOG_FILES
from harness.wait import wait_for
from nemesis import catalogue
from nemesis.partition import rules_left
from nodes.client import Client

pytestmark = pytest.mark.docker
NAMES = ["n1", "n2", "n3"]


def fault(db: Db, family: str, **options: str):
    values = catalogue.parse_options({k.replace("-", "_"): v for k, v in options.items()})
    return catalogue.FAMILIES[family].make(db, values)


def files(db: Db, node: str) -> set[str]:
    return set(db.exec(node, f"ls -A {db.data_dir}").split())


def append_some(db: Db, count: int, tag: str) -> int:
    with Client(db.network_peers(), timeout=5) as client:
        return max(client.append(f"{tag}-{i}".encode()).first_index for i in range(count))


def served(db: Db, node: str) -> int:
    """What the node serves: its own commit index (a slave's durable end), -2 when it does not answer."""
    with Client(db.network_peers(), timeout=2) as client:
        try:
            return client.get(0, 0, node=node, mode="follower", timeout=2).commit_index
        except Exception:
            return -2


@pytest.fixture
def dledger3(node_image: str) -> Iterator[Db]:
    with Db(3, image=node_image, serve_args=["--segment-mb", "1"]) as db:
        db.start()
        db.wait_for_leader()
        yield db


@pytest.fixture
def async_master3(node_image: str) -> Iterator[Db]:
    node_args = MODES["master-slave-async"].node_args(NAMES)
    serve = ["--segment-mb", "1", "--housekeeping-ms", "1000"]
    with Db(3, image=node_image, serve_args=serve, node_args=node_args) as db:
        db.start()
        db.wait_for_leader()
        yield db


def test_lose_node_wipes_the_leaders_store_and_it_rejoins_empty_and_catches_up(dledger3: Db) -> None:
    db = dledger3
    last = append_some(db, 20, "before")
    leader = db.wait_for_leader()
    assert {"currterm"} <= files(db, leader)
    lose = fault(db, "lose-node", lose_node_targets="leader")
    value = lose.start(random.Random(1))
    assert value["targets"] == [leader] and "promoted" not in value and not db.running(leader)
    assert files(db, leader) <= set(LOG_FILES), "store, term and vote are gone; the logs stay"
    assert lose.leftovers() == [f"{leader}: the node process is not running"]
    after = append_some(db, 5, "after")  # the other two carry on
    assert after > last
    assert lose.stop()["targets"] == [leader] and lose.leftovers() == []
    wait_for(lambda: served(db, leader) >= after, 30, f"{leader} catches up from nothing")
    with Client(db.network_peers(), timeout=5) as client:
        assert client.get(0, after, node=leader, mode="follower").entries[-1].index == after


def test_losing_the_master_promotes_the_most_advanced_slave_and_the_old_master_follows_it(
        async_master3: Db) -> None:
    db = async_master3
    last = append_some(db, 30, "m")
    wait_for(lambda: min(served(db, n) for n in ("n2", "n3")) >= last, 20, "the slaves hold everything")
    lose = fault(db, "lose-node", lose_node_targets="leader")
    value = lose.start(random.Random(2))
    promoted = value["promoted"]
    assert value["targets"] == ["n1"] and promoted["node"] in ("n2", "n3") and "error" not in promoted
    assert promoted["ends"][promoted["node"]] == max(promoted["ends"].values()) >= last
    assert db.wait_for_leader() == promoted["node"]
    assert append_some(db, 3, "on-new-master") > last
    lose.stop()
    assert lose.leftovers() == []
    with Client(db.network_peers(), timeout=3) as client:
        wait_for(lambda: client.metadata(node="n1").leader == promoted["node"], 20, "n1 follows the promoted")
        assert client.metadata(node="n1").broker_role == "SLAVE"


def test_isolate_lose_cuts_the_master_off_then_loses_it_and_heals_its_cut(async_master3: Db) -> None:
    db = async_master3
    append_some(db, 10, "warm")
    isolate = fault(db, "isolate-lose", recipe_step_ms="800")
    value = isolate.start(random.Random(3))
    steps = [s["step"] for s in value["steps"]]
    assert steps == ["isolate", "lose", "heal"] and value["targets"] == ["n1"]
    assert value["steps"][0]["grudge"]["n1"] == ["n2", "n3"] and value["promoted"]["node"] in ("n2", "n3")
    assert rules_left(db) == [] and not db.running("n1") and files(db, "n1") <= set(LOG_FILES)
    assert isolate.leftovers() == ["n1: the node process is not running"]
    isolate.stop()
    assert isolate.leftovers() == []
