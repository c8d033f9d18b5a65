"""DLedger nodes in containers, driven over SSH: election, appends through published ports, reads
from every node, kill and restart, pause, collect, on 3 and 5 nodes."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import docker
import pytest

from harness.containers.cluster import LABEL_RUN
from harness.containers.db import Db
from harness.wait import wait_for
from nodes.client import Client, DefiniteFailure

pytestmark = pytest.mark.docker
SERVE_ARGS = ["--segment-mb", "1"]


@pytest.fixture(scope="module")
def running3(node_image: str, node_serve: None) -> Iterator[Db]:
    with Db(3, image=node_image, serve_args=SERVE_ARGS) as db:
        db.start()
        yield db


def append(db: Db, bodies: list[bytes]) -> tuple[int, int]:
    """Append through the leader's published port; the first and last index.

    Only the leader is asked: a paused node never answers, and docker's port proxy accepts a
    connection to a dead node's port and then resets it; a client must take both as an
    indeterminate outcome, which would make these tests flaky.
    """
    leader = db.wait_for_leader()
    with Client({leader: db.client_peers()[leader]}, timeout=10) as client:
        ack = client.append_batch(bodies)
    return ack.first_index, ack.last_index


def committed_on(db: Db, node: str, first: int, last: int, timeout: float = 20.0) -> list[bytes]:
    """The bodies of `first..last` from `node`'s own committed log, once it has all of them."""
    def read() -> list[bytes] | None:
        with Client(db.client_peers(), timeout=2) as client:
            entries = client.get(first, last, node=node, mode="follower").entries
        return [e.body for e in entries] if len(entries) == last - first + 1 else None

    return wait_for(read, timeout, f"{node} did not commit {first}..{last} within {timeout} s") or []


def test_three_nodes_elect_replicate_and_serve_reads_everywhere(running3: Db) -> None:
    assert running3.wait_for_leader() in running3.names
    bodies = [f"entry-{i}".encode() for i in range(20)]
    first, last = append(running3, bodies)
    for node in running3.names:
        assert committed_on(running3, node, first, last) == bodies


def test_a_killed_follower_restarts_over_ssh_and_catches_up(running3: Db) -> None:
    leader = running3.wait_for_leader()
    follower = next(n for n in running3.names if n != leader)
    running3.kill(follower)
    assert not running3.running(follower)
    with Client({follower: running3.network_peers()[follower]}, timeout=2) as client, \
            pytest.raises(DefiniteFailure):
        client.append(b"to-a-dead-node")  # its own address refuses: surely not appended
    bodies = [b"while-down-1", b"while-down-2"]
    first, last = append(running3, bodies)  # two of three nodes are a quorum
    running3.start(follower)
    assert running3.running(follower)
    assert committed_on(running3, follower, first, last) == bodies


def test_killing_the_leader_elects_another(running3: Db) -> None:
    old = running3.wait_for_leader()
    running3.kill(old)
    new = wait_for(lambda: (running3.leader() or old) != old and running3.leader(), 20, "no new leader")
    assert new and new != old
    first, last = append(running3, [b"after-failover"])
    running3.start(old)
    assert committed_on(running3, old, first, last) == [b"after-failover"]


def test_a_paused_follower_resumes(running3: Db) -> None:
    leader = running3.wait_for_leader()
    follower = next(n for n in running3.names if n != leader)
    running3.pause(follower)
    assert running3.process(follower).state() == "T"
    first, last = append(running3, [b"while-paused"])
    running3.resume(follower)
    assert committed_on(running3, follower, first, last) == [b"while-paused"]


def test_collect_copies_logs_events_and_store_files(running3: Db, tmp_path: Path) -> None:
    first, last = append(running3, [b"to-collect"])
    for node in running3.names:
        committed_on(running3, node, first, last)
    copied = running3.collect(tmp_path)
    assert sorted(copied) == running3.names
    roles: set[str] = set()
    for node in running3.names:
        folder = tmp_path / "nodes" / node
        assert (folder / "node.log").stat().st_size > 0
        events = [json.loads(line) for line in (folder / "events.jsonl").read_text().splitlines()]
        roles |= {event["role"] for event in events if "role" in event}
        segments = sorted(p.name for p in (folder / "data").iterdir())
        assert segments and all(len(name) == 20 and name.isdigit() for name in segments)
        assert sorted((folder / "index").iterdir())
    assert "leader" in roles and roles <= {"candidate", "leader", "follower"}


def test_five_nodes_survive_two_kills_and_leave_nothing(docker_client: docker.DockerClient, node_image: str,
                                                        node_serve: None) -> None:
    with Db(5, image=node_image, serve_args=SERVE_ARGS) as db:
        db.start()
        leader = db.wait_for_leader()
        first, last = append(db, [b"five-1", b"five-2"])
        for node in db.names:
            assert committed_on(db, node, first, last) == [b"five-1", b"five-2"]
        for victim in [n for n in db.names if n != leader][:2]:
            db.kill(victim)
        first, last = append(db, [b"three-of-five"])
        assert committed_on(db, leader, first, last) == [b"three-of-five"]
        run_id = db.run_id
    selector = {"label": f"{LABEL_RUN}={run_id}"}
    assert docker_client.containers.list(all=True, filters=selector) == []
    assert docker_client.networks.list(filters=selector) == []
    assert docker_client.volumes.list(filters=selector) == []
