"""The disk nemesis on a live 3-node cluster: a node whose store files were damaged while it
was down recovers by cutting exactly the damaged entries (or rebuilding its index), catches
up from the leader, and the cluster loses no acknowledged entry."""

from __future__ import annotations

import random
from collections.abc import Iterator

import pytest

from harness.containers.db import Db
from harness.wait import wait_for
from nemesis.disk import DiskFault
from nodes.client import AppendAck, Client, ClientError

pytestmark = pytest.mark.docker

Log = list[tuple[int, int, bytes]]


@pytest.fixture(scope="module")
def cluster(cluster3: Db, node_serve: None) -> Iterator[Db]:
    cluster3.start()
    cluster3.wait_for_leader()
    yield cluster3


def committed_log(db: Db, node: str) -> Log:
    """`node`'s committed entries (follower read), (index, term, body) each."""
    log: Log = []
    with Client(db.client_peers(), timeout=2) as client:
        while True:
            first, last = len(log), len(log) + 9_999
            result = client.get(first, last, node=node, mode="follower")
            log += [(e.index, e.term, e.body) for e in result.entries]
            if not result.entries or result.last_index >= last:
                return log


def append(db: Db, tag: str, count: int = 20) -> dict[int, bytes]:
    """Append `count` entries through the leader; {index: body} of the acknowledged ones.

    An append the client could not settle (a restarted follower's election took the leader's
    term away mid-call) is sent again under the new leader: only acknowledged ones count."""
    acked: dict[int, bytes] = {}
    with Client(db.client_peers(), timeout=5) as client:
        for body in (f"disk-{tag}-{i}".encode() for i in range(count)):
            ack = wait_for(lambda body=body: settled_append(client, body), 30,
                           f"no leader acknowledged {body!r} within 30 s")
            acked[ack.first_index] = body
    return acked


def settled_append(client: Client, body: bytes) -> AppendAck | None:
    """The acknowledgement of `body`, or None when the call failed either way."""
    try:
        return client.append(body)
    except ClientError:
        return None


def converged(db: Db, last: int) -> Log | None:
    """The nodes' committed log once every node's is the same and reaches index `last`."""
    logs = [committed_log(db, node) for node in db.names]
    return logs[0] if len(logs[0]) > last and all(log == logs[0] for log in logs) else None


def wait_converged(db: Db, acked: dict[int, bytes]) -> Log:
    """The nodes' common committed log, once there is one holding every acknowledged entry."""
    log = wait_for(lambda: converged(db, max(acked)), 30, "the nodes' committed logs do not converge")
    assert {i: log[i][2] for i in acked} == acked
    return log


def follower(db: Db) -> str:
    leader = db.wait_for_leader()
    return next(n for n in db.names if n != leader)


@pytest.mark.parametrize("file, mode", [("data", "bitflip"), ("data", "zero-tail"), ("index", "truncate")])
def test_damaged_follower_cuts_exactly_the_damage_and_catches_up(cluster: Db, file: str, mode: str) -> None:
    acked = append(cluster, f"{file}-{mode}")
    before = wait_converged(cluster, acked)
    victim = follower(cluster)
    fault = DiskFault(cluster, ("one",), (mode,), (file,))

    report, recovered = fault.corrupt(victim, file, mode, seed=3)

    assert report["changed"], report
    assert report["end_index_before"] == len(before) - 1
    entry = report["entry"]
    if file == "data":
        assert report["expect_end_index"] == entry["index"] - 1
        # the cut lands on the damaged entry's first byte: everything before it is kept
        cut = f"cut at pos {entry['pos']} (" in recovered
        assert cut or (mode == "zero-tail" and report["first_changed"] == entry["pos"]), recovered
    else:
        assert "cut at" not in recovered and "rebuilt" in recovered, recovered
    # new entries also move the victim's commit index: a restarted follower whose log already
    # matches the leader's learns no commit index until the next entry reaches it
    more = append(cluster, f"after-{file}-{mode}", 3)
    after = wait_converged(cluster, {**acked, **more})
    assert after[:len(before)] == before
    assert fault.leftovers() == []


def test_damaged_leader_is_replaced_and_loses_nothing_committed(cluster: Db) -> None:
    acked = append(cluster, "leader")
    before = wait_converged(cluster, acked)
    leader = cluster.wait_for_leader()
    fault = DiskFault(cluster, ("leader",), ("bitflip",), ("data",))

    value = fault.start(random.Random(11))

    assert value["targets"] == [leader] and value["mode"] == "bitflip"
    entry = value["damage"][leader]["entry"]
    assert f"cut at pos {entry['pos']} (" in value["recovery"][leader]
    cluster.wait_for_leader()
    more = append(cluster, "after-leader", 5)
    after = wait_converged(cluster, {**acked, **more})
    assert after[:len(before)] == before
    assert fault.stop() == {"targets": []}
    assert fault.leftovers() == []


def test_heal_starts_every_node_that_is_down(cluster: Db) -> None:
    fault = DiskFault(cluster, ("one",), ("bitflip",), ("data",))
    cluster.kill("n2")
    assert fault.leftovers() == ["n2: the node process is not running"]
    fault.heal()
    assert fault.leftovers() == []
    cluster.wait_for_leader()
