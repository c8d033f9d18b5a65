"""Real node processes on loopback: election, concurrent appends, kill -9, catch-up, transfer."""

from __future__ import annotations

import threading

import pytest

from nodes.client import Client, ClientError, IndeterminateFailure
from nodes.payload import encode_payload, payload_id
from tests.support.localcluster import LocalCluster
from tests.support.waiting import wait_until

pytestmark = pytest.mark.cluster


def append_concurrently(cluster: LocalCluster, workers: int, per_worker: int, prefix: str) -> dict[str, int]:
    """Append `workers * per_worker` unique ids from concurrent clients; {id: acked index}."""
    acked: dict[str, int] = {}
    errors: list[Exception] = []
    lock = threading.Lock()

    def worker(w: int) -> None:
        with cluster.client(timeout=5) as client:
            for i in range(per_worker):
                append_id = f"{prefix}{w}-{i}"
                try:
                    ack = client.append(encode_payload(append_id, 100))
                except ClientError as exc:
                    errors.append(exc)
                    return
                with lock:
                    acked[append_id] = ack.first_index

    threads = [threading.Thread(target=worker, args=(w,)) for w in range(workers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert not errors, errors[:3]
    return acked


def committed_log(client: Client, node: str, upto: int) -> dict[int, tuple[int, str | None]]:
    """{index: (term, id)} of `node`'s committed entries 0..upto, read in follower mode."""
    log: dict[int, tuple[int, str | None]] = {}
    for first in range(0, upto + 1, 5000):
        result = client.get(first, min(first + 4999, upto), node=node, mode="follower")
        log.update((e.index, (e.term, payload_id(e.body))) for e in result.entries)
    return log


def node_commit(client: Client, node: str) -> int:
    return client.get(0, 0, node=node, mode="follower").commit_index


def assert_all_acked_present(log: dict[int, tuple[int, str | None]], acked: dict[str, int]) -> None:
    missing = {i: idx for i, idx in acked.items() if log.get(idx, (0, None))[1] != i}
    assert not missing, f"{len(missing)} acknowledged appends lost or moved, e.g. {list(missing.items())[:5]}"


def test_three_nodes_append_kill_catch_up_transfer(local_cluster):
    cluster = local_cluster(3)
    leader = cluster.wait_for_leader()
    acked = append_concurrently(cluster, workers=8, per_worker=1250, prefix="a")
    assert len(acked) == 10_000 and len(set(acked.values())) == 10_000
    top = max(acked.values())
    with cluster.client() as client:
        for node in cluster.ids:
            wait_until(lambda n=node: node_commit(client, n) >= top, 20, f"{node} commits {top}")
            assert_all_acked_present(committed_log(client, node, top), acked)

    # kill -9 the leader: a new one takes over and nothing acknowledged is lost
    cluster.kill(leader)
    survivors = [n for n in cluster.ids if n != leader]
    new_leader = cluster.wait_for_leader(among=survivors)
    assert new_leader != leader
    more = append_concurrently(cluster, workers=2, per_worker=50, prefix="b")
    acked |= more
    top = max(acked.values())
    with cluster.client(nodes=survivors) as client:
        assert_all_acked_present(committed_log(client, new_leader, top), acked)

    # the old leader comes back and catches up
    cluster.start(leader)
    with cluster.client() as client:
        wait_until(lambda: node_commit(client, leader) >= top, 20, f"{leader} catches up to {top}")
        assert committed_log(client, leader, top) == committed_log(client, new_leader, top)

    # leadership transfer to a named node
    target = next(n for n in cluster.ids if n != new_leader)
    with cluster.client() as client:
        result = client.transfer(target)
        assert result.node == new_leader
    assert cluster.wait_for_leader() == target


def test_restarted_leader_truncates_its_uncommitted_tail(local_cluster):
    cluster = local_cluster(3)
    old = cluster.wait_for_leader()
    base = append_concurrently(cluster, workers=2, per_worker=20, prefix="base")
    followers = [n for n in cluster.ids if n != old]
    with cluster.client() as client:
        for node in followers:
            wait_until(lambda n=node: node_commit(client, n) >= max(base.values()), 10, f"{node} caught up")
    # With both followers dead, the leader appends entries that can never commit.
    for node in followers:
        cluster.kill(node)
    with Client({old: cluster.peers[old]}, timeout=0.2) as client, pytest.raises(IndeterminateFailure):
        client.append_batch([encode_payload(f"doomed-{i}") for i in range(5)])
    cluster.kill(old)
    for node in followers:
        cluster.start(node)
    new = cluster.wait_for_leader(among=followers)
    fresh = append_concurrently(cluster, workers=1, per_worker=20, prefix="fresh")
    top = max(fresh.values())

    cluster.start(old)
    with cluster.client() as client:
        wait_until(lambda: node_commit(client, old) >= top, 20, f"{old} catches up to {top}")
        old_log = committed_log(client, old, top)
        assert old_log == committed_log(client, new, top)
    assert not [i for _, i in old_log.values() if i and i.startswith("doomed")]
    assert_all_acked_present(old_log, base | fresh)


def test_five_nodes_survive_two_kills(local_cluster):
    cluster = local_cluster(5)
    first = cluster.wait_for_leader()
    acked = append_concurrently(cluster, workers=4, per_worker=50, prefix="c")
    cluster.kill(first)
    second = cluster.wait_for_leader(among=[n for n in cluster.ids if n != first])
    cluster.kill(second)
    alive = [n for n in cluster.ids if n not in (first, second)]
    third = cluster.wait_for_leader(among=alive)
    acked |= append_concurrently(cluster, workers=2, per_worker=20, prefix="d")
    with cluster.client(nodes=alive) as client:
        assert_all_acked_present(committed_log(client, third, max(acked.values())), acked)


def test_sigterm_stops_gracefully_and_a_follower_answers_not_leader(local_cluster):
    cluster = local_cluster(3)
    leader = cluster.wait_for_leader()
    follower = next(n for n in cluster.ids if n != leader)
    with cluster.client() as client:
        with pytest.raises(ClientError) as err:
            client.get(0, node=follower)  # read-index mode: only the leader serves
        assert err.value.leader == leader
        client.append(b"before-stop")
    assert cluster.stop(leader) == 0
    assert "stopped at end index" in (cluster.data_dir(leader) / "node.log").read_text()
    assert (cluster.data_dir(leader) / "currterm").read_text().startswith("currTerm=")
