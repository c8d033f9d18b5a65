"""Serve options on live node processes: preferred leader, group, lease and committed read modes."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from nodes.client import Client, DefiniteFailure
from nodes.messages import ResponseCode
from tests.support.localcluster import LocalCluster
from tests.support.waiting import wait_until

pytestmark = pytest.mark.cluster

GROUP = "g1"
PREFERRED = "n3"


def agreed_leader(client: Client, nodes: list[str]) -> str | None:
    """The leader every node names, or None while they disagree."""
    leaders = {client.metadata(node=n, timeout=1).leader for n in nodes}
    return leaders.pop() if len(leaders) == 1 else None


def test_preferred_leader_group_lease_and_committed_reads(local_cluster: Callable[..., LocalCluster]) -> None:
    cluster = local_cluster(3, "--group", GROUP, "--preferred-leader", PREFERRED, "--read-mode", "lease")
    with Client(cluster.peers, group=GROUP, timeout=5) as client:
        wait_until(lambda: agreed_leader(client, cluster.ids) == PREFERRED, 20, f"{PREFERRED} leads")
        # handed away, leadership comes back to the preferred leader once it is caught up
        assert client.transfer("n1").node == PREFERRED
        wait_until(lambda: agreed_leader(client, cluster.ids) == PREFERRED, 20, f"{PREFERRED} leads again")

        ack = client.append(b"in-group")
        for mode in ("", "lease"):  # the node's configured mode, then asked for by name
            read = client.get(ack.first_index, mode=mode)
            assert [e.body for e in read.entries] == [b"in-group"] and read.node == PREFERRED

    with Client(cluster.peers, group="other", timeout=2) as stranger:
        for call in (lambda: stranger.metadata(node="n1"), lambda: stranger.append(b"intruder")):
            with pytest.raises(DefiniteFailure) as refused:
                call()
            assert refused.value.code is ResponseCode.UNKNOWN_GROUP

    # the same nodes again, reading in committed mode
    for node in cluster.ids:
        assert cluster.stop(node) == 0
    for node in cluster.ids:
        cluster.start(node, "--read-mode", "committed")
    with Client(cluster.peers, group=GROUP, timeout=5) as client:
        wait_until(
            lambda: agreed_leader(client, cluster.ids) == PREFERRED, 20, f"{PREFERRED} leads after restart"
        )
        wait_until(lambda: client.get(ack.first_index).entries != [], 10, "a committed read sees the entry")
        read = client.get(0, ack.first_index)
        assert read.entries[-1].body == b"in-group" and read.commit_index >= ack.first_index
        follower = next(n for n in cluster.ids if n != PREFERRED)
        with pytest.raises(DefiniteFailure) as refused:
            client.get(0, node=follower)  # committed reads are the leader's
        assert refused.value.code is ResponseCode.NOT_LEADER
    assert "read mode committed" in (cluster.data_dir(PREFERRED) / "node.log").read_text()
    assert all(cluster.alive(n) for n in cluster.ids)


def test_timing_overrides_reach_the_running_node(local_cluster: Callable[..., LocalCluster]) -> None:
    # DLedger's profile would take 6 s to notice a dead leader; with 100 ms heartbeats it takes 300 ms.
    cluster = local_cluster(3, "--timing", "dledger", "--timing-set", "heartbeat_ms=100",
                            "--timing-set", "vote_wait_ms=300")
    old = cluster.wait_for_leader(timeout=20)
    cluster.kill(old)
    rest = [n for n in cluster.ids if n != old]
    with Client({n: cluster.peers[n] for n in rest}, timeout=1) as client:
        wait_until(lambda: agreed_leader(client, rest) not in (None, old), 4.5, "a new leader within 4.5 s")
