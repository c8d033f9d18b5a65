"""A real 3-member etcd cluster in containers (bookworm's etcd-server 3.4.23): the log workload's
appends land at dense indexes, read back linearizably and serializably from every member, a
retried append does not duplicate, move-leader moves it, appends go on after a kill -9 of the
leader and the killed member comes back with its log; `--unsafe-no-fsync` is accepted. Every
container, network and volume carries the run label and is gone afterwards."""

from __future__ import annotations

from collections.abc import Iterator

import docker  # type: ignore[import-untyped]
import pytest

from harness.cluster import LABEL_RUN
from harness.wait import wait_for
from nodes.client import DefiniteFailure, IndeterminateFailure
from systems.etcd.client import AppendOk, EtcdClient
from systems.etcd.config import EtcdOptions
from systems.etcd.containers import EtcdContainers

pytestmark = pytest.mark.docker
Etcd3 = tuple[EtcdContainers, EtcdClient]
START_S = 60.0  # members of a fresh cluster find each other and elect within this, on a busy machine
ELECT_S = 30.0
ENTRIES = 50


def leftovers(client: docker.DockerClient, run_id: str) -> list[str]:
    selector = {"label": f"{LABEL_RUN}={run_id}"}
    return ([c.name for c in client.containers.list(all=True, filters=selector)]
            + [n.name for n in client.networks.list(filters=selector)]
            + [v.name for v in client.volumes.list(filters=selector)])


def started(cluster: EtcdContainers) -> EtcdClient:
    client = EtcdClient(cluster.start(), timeout=5.0)
    wait_for(client.leader, START_S, f"no etcd leader within {START_S} s")
    return client


@pytest.fixture(scope="module")
def etcd3(docker_client: docker.DockerClient, etcd_image: str) -> Iterator[Etcd3]:
    with EtcdContainers(docker_client, etcd_image, 3) as cluster:
        yield cluster, started(cluster)
    assert leftovers(docker_client, cluster.run_id) == []


def append_until_ok(client: EtcdClient, append_id: str, timeout: float = ELECT_S) -> AppendOk:
    """Append `append_id`, retrying it (safe: a retry never duplicates) while the outcome is not ok."""
    def attempt() -> AppendOk | None:
        try:
            return client.append(append_id)
        except (DefiniteFailure, IndeterminateFailure):
            return None

    ack = wait_for(attempt, timeout, f"{append_id} was not appended within {timeout} s")
    assert ack is not None
    return ack


def whole_log(client: EtcdClient, node: str, length: int) -> list[tuple[int, str]]:
    """`node`'s own log once it holds `length` entries (a follower may apply a moment later)."""
    entries = wait_for(lambda: (log := client.read_all(node)) and len(log) >= length and log,
                       ELECT_S, f"{node} did not hold {length} entries within {ELECT_S} s")
    return list(entries or [])


def test_appends_land_at_dense_indexes_and_read_back_from_every_member(etcd3: Etcd3) -> None:
    cluster, client = etcd3
    assert {client.status(node).revision for node in cluster.names} == {1}  # the empty store: index -1
    acks = [client.append(f"e-{i}") for i in range(ENTRIES)]
    assert [ack.log_index for ack in acks] == list(range(ENTRIES))
    assert not any(ack.duplicate for ack in acks)
    expected = [(i, f"e-{i}") for i in range(ENTRIES)]
    for node in cluster.names:
        read = client.read(0, ENTRIES - 1, node=node)
        assert (read.node, read.entries, read.last) == (node, expected, ENTRIES - 1)
        assert client.read(10, 19, node=node).entries == expected[10:20]
        assert whole_log(client, node, ENTRIES) == expected  # serializable: the member's own state


def test_a_retried_append_does_not_duplicate(etcd3: Etcd3) -> None:
    _, client = etcd3
    retry = client.append("e-7")
    assert (retry.log_index, retry.duplicate) == (7, True)
    after = client.append("after-retry")
    assert (after.log_index, after.duplicate) == (ENTRIES, False)  # the retry used no revision
    ids = [append_id for _, append_id in client.read().entries]
    assert len(ids) == len(set(ids)) == ENTRIES + 1


def test_move_leader_changes_the_leader(etcd3: Etcd3) -> None:
    cluster, client = etcd3
    before = client.leader()
    target = next(name for name in cluster.names if name != before)
    assert client.move_leader(target) == before
    wait_for(lambda: client.leader() == target, ELECT_S, f"{target} did not become leader")


def test_appends_go_on_after_a_kill_9_of_the_leader(docker_client: docker.DockerClient,
                                                    etcd3: Etcd3) -> None:
    cluster, client = etcd3
    victim = client.leader()
    assert victim is not None
    cluster.kill(victim)
    assert docker_client.containers.get(cluster.container_name(victim)).status == "exited"
    survivors = EtcdClient({name: endpoint for name, endpoint in client.endpoints.items() if name != victim})
    wait_for(lambda: survivors.leader() not in (None, victim), ELECT_S, "no new leader among the survivors")
    acks = [append_until_ok(survivors, f"k-{i}") for i in range(10)]
    assert [ack.log_index for ack in acks] == list(range(ENTRIES + 1, ENTRIES + 11))
    length = ENTRIES + 11
    logs = {node: whole_log(survivors, node, length) for node in survivors.endpoints}
    assert all(log == logs[next(iter(logs))] and len(log) == length for log in logs.values())
    back = EtcdClient({victim: cluster.restart(victim)})
    assert wait_for(lambda: _answers(back, victim, length), START_S, f"{victim} did not come back") == logs[
        next(iter(logs))]


def _answers(client: EtcdClient, node: str, length: int) -> list[tuple[int, str]] | None:
    try:
        log = client.read_all(node)
    except (DefiniteFailure, IndeterminateFailure):
        return None
    return log if len(log) >= length else None


def test_unsafe_no_fsync_is_accepted(docker_client: docker.DockerClient, etcd_image: str) -> None:
    with EtcdContainers(docker_client, etcd_image, 3, EtcdOptions(unsafe_no_fsync=True)) as cluster:
        client = started(cluster)
        assert [client.append(f"u-{i}").log_index for i in range(5)] == list(range(5))
        assert [append_id for _, append_id in client.read().entries] == [f"u-{i}" for i in range(5)]
        for node in cluster.names:
            container = docker_client.containers.get(cluster.container_name(node))
            assert container.status == "running"
            assert "--unsafe-no-fsync" in container.attrs["Args"]
        # etcd 3.4.23's --help and start-up log never name the flag, but its flag set knows it: a bad
        # value is refused as this flag's, where an unknown flag is "not defined"
        member = docker_client.containers.get(cluster.container_name("n1"))
        bad_value = member.exec_run(["/usr/bin/etcd", "--unsafe-no-fsync=maybe", "--data-dir=/tmp/x"])
        assert bad_value.exit_code == 2 and b"for -unsafe-no-fsync" in bad_value.output
        unknown = member.exec_run(["/usr/bin/etcd", "--unsafe-no-such-flag", "--data-dir=/tmp/x"])
        assert unknown.exit_code == 2 and b"flag provided but not defined" in unknown.output
    assert leftovers(docker_client, cluster.run_id) == []
