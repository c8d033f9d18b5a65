"""The harness's consumer against real node processes: it fails over to a slave (a follower)
when the master (leader) dies, keeps its offset, and returns when the master is back."""

from __future__ import annotations

import json
import random
import threading
from pathlib import Path

import pytest

from harness.chaos.consumers import BATCH, Consumer, HaPuller, Puller, RaftPuller
from harness.chaos.history import History
from nodes.client import Client
from tests.support.localcluster import Clusters, LocalCluster
from tests.support.waiting import wait_until

pytestmark = pytest.mark.cluster


def fill(cluster: LocalCluster, count: int) -> list[str]:
    """Append `count` entries and wait until every node holds them; their ids."""
    ids = [f"c-{i}" for i in range(count)]
    with cluster.client(timeout=5) as client:
        for start in range(0, count, 50):
            client.append_batch([i.encode() for i in ids[start:start + 50]])
        last = client.get(0, 0).commit_index
        for node in cluster.ids:
            wait_until(lambda n=node: client.get(0, 0, node=n, mode="follower").commit_index >= last, 15,
                       f"{node} holds everything")
    return ids


def consumed(history_path: Path) -> tuple[list[dict], list[str | None]]:
    """The consume lines, and the ids the ok consumes got, in order."""
    lines = [json.loads(line) for line in history_path.read_text().splitlines()]
    got = [e[1] for line in lines if line["type"] == "ok" for e in line["value"]["entries"]]
    return lines, got


def step_until(consumer: Consumer, puller: Puller, done, what: str, timeout: float = 20) -> None:
    def step() -> bool:
        consumer.consume(puller, consumer.target or consumer.home or consumer.names[0])
        return done()
    wait_until(step, timeout, what)


def test_master_slave_consumer_fails_over_to_a_slave_and_returns_to_the_master(tmp_path):
    fast = ("--segment-mb", "4", "--report-interval-ms", "100", "--ha-heartbeat-ms", "50",
            "--housekeeping-ms", "1000")
    clusters = Clusters(tmp_path, fast)
    try:
        cluster = clusters.start(3, master_role="ASYNC_MASTER")
        cluster.wait_for_leader()
        ids = fill(cluster, 4 * BATCH)
        history = History(tmp_path / "history.jsonl")
        consumer = Consumer(0, 0, 1, cluster.ids, history, threading.Event(), lambda: None, random.Random(2))
        puller = HaPuller(Client(cluster.peers, timeout=1))
        consumer.consume(puller, "n1")
        assert consumer.offset == BATCH and consumer.home == "n1"
        cluster.kill("n1")
        step_until(consumer, puller, lambda: consumer.offset >= 3 * BATCH, "it goes on from a slave")
        cluster.start("n1")
        cluster.wait_for_leader()
        with cluster.client() as client:
            for batch in range(2):
                client.append_batch([f"after-{batch}-{i}".encode() for i in range(10)])
        step_until(consumer, puller, lambda: consumer.target is None and consumer.offset > len(ids),
                   "the consumer is back on the master")
        puller.close()
        history.close()
        lines, got = consumed(tmp_path / "history.jsonl")
        served = [line["node"] for line in lines if line["type"] == "ok"]
        assert served[0] == "n1" and set(served[1:-1]) & {"n2", "n3"} and served[-1] == "n1"
        assert any(line["type"] in ("fail", "info") and line["node"] == "n1" for line in lines)
        assert got[:len(ids)] == ids  # every entry once, in order, across the failover
        assert [line["value"]["from"] for line in lines if line["type"] == "ok"] == sorted(
            line["value"]["from"] for line in lines if line["type"] == "ok")
    finally:
        clusters.close()


def test_dledger_consumer_reads_followers_while_the_leader_is_down_then_the_new_leader(tmp_path):
    clusters = Clusters(tmp_path, ("--segment-mb", "4"))
    try:
        cluster = clusters.start(3)
        first = cluster.wait_for_leader()
        ids = fill(cluster, 3 * BATCH)
        history = History(tmp_path / "history.jsonl")
        consumer = Consumer(0, 0, 1, cluster.ids, history, threading.Event(), lambda: None, random.Random(5))
        puller = RaftPuller(Client(cluster.peers, timeout=1))
        consumer.consume(puller, first)
        assert consumer.home == first and consumer.offset == BATCH
        cluster.kill(first)
        step_until(consumer, puller, lambda: consumer.offset >= 2 * BATCH, "it goes on from a follower")
        second = cluster.wait_for_leader(among=[n for n in cluster.ids if n != first])
        step_until(consumer, puller, lambda: consumer.target is None and consumer.home == second,
                   "the consumer is back on the (new) leader")
        puller.close()
        history.close()
        lines, got = consumed(tmp_path / "history.jsonl")
        named = [g for g in got if g is not None]
        assert named == ids[:len(named)] and len(named) >= 2 * BATCH - 2
        assert any(line["type"] != "ok" and line["node"] == first for line in lines)
    finally:
        clusters.close()

