"""A real 3-member etcd cluster (bookworm's etcd-server 3.4.23) made the way a run makes it
(`harness.containers.db.Db` with `Etcd`, each member started over SSH): the log workload's appends land at
dense indexes, read back linearizably and serializably from every member, a retried append does
not duplicate, move-leader moves it, appends go on after a kill -9 of the leader and the killed
member comes back with its log; `--unsafe-no-fsync` is accepted. One test goes through the seam
alone, as a run's workers and final reads do. Every container, network and volume carries the run
label and is gone afterwards (the fixtures check)."""

from __future__ import annotations

import shlex
from pathlib import Path

import docker  # type: ignore[import-untyped]
import pytest

from harness.containers.db import Db
from harness.wait import wait_for
from nemesis.base import NodeExited
from nemesis.disk import DiskFault
from nodes.client import DefiniteFailure, IndeterminateFailure
from systems.etcd import Etcd
from systems.etcd.client import AppendOk, EtcdClient
from tests.support.seamrun import keeps_every_acknowledged_append
from tests.systems.etcd.conftest import START_S, EtcdCluster

pytestmark = pytest.mark.docker
ELECT_S = 30.0
ENTRIES = 50


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


# ---------------------------------------------------------------- through the seam, as a run


def test_a_run_through_the_seam_keeps_every_acknowledged_append(fresh_etcd3: EtcdCluster,
                                                                 tmp_path: Path) -> None:
    db, _ = fresh_etcd3
    assert isinstance(db.system, Etcd)
    keeps_every_acknowledged_append(db, tmp_path)


# ---------------------------------------------------------------- our client on the cluster


def test_appends_land_at_dense_indexes_and_read_back_from_every_member(etcd3: EtcdCluster) -> None:
    db, client = etcd3
    assert {client.status(node).revision for node in db.names} == {1}  # the empty store: index -1
    acks = [client.append(f"e-{i}") for i in range(ENTRIES)]
    assert [ack.log_index for ack in acks] == list(range(ENTRIES))
    assert not any(ack.duplicate for ack in acks)
    expected = [(i, f"e-{i}") for i in range(ENTRIES)]
    for node in db.names:
        read = client.read(0, ENTRIES - 1, node=node)
        assert (read.node, read.entries, read.last) == (node, expected, ENTRIES - 1)
        assert client.read(10, 19, node=node).entries == expected[10:20]
        assert whole_log(client, node, ENTRIES) == expected  # serializable: the member's own state


def test_a_retried_append_does_not_duplicate(etcd3: EtcdCluster) -> None:
    _, client = etcd3
    retry = client.append("e-7")
    assert (retry.log_index, retry.duplicate) == (7, True)
    after = client.append("after-retry")
    assert (after.log_index, after.duplicate) == (ENTRIES, False)  # the retry used no revision
    ids = [append_id for _, append_id in client.read().entries]
    assert len(ids) == len(set(ids)) == ENTRIES + 1


def test_move_leader_changes_the_leader(etcd3: EtcdCluster) -> None:
    db, client = etcd3
    before = client.leader()
    target = next(name for name in db.names if name != before)
    assert client.move_leader(target) == before
    wait_for(lambda: client.leader() == target, ELECT_S, f"{target} did not become leader")


def test_appends_go_on_after_a_kill_9_of_the_leader(etcd3: EtcdCluster) -> None:
    db, client = etcd3
    victim = client.leader()
    assert victim is not None
    db.kill(victim)  # SIGKILL of the member's etcd (its container stays)
    assert not db.running(victim)
    survivors = EtcdClient({name: endpoint for name, endpoint in client.endpoints.items() if name != victim})
    wait_for(lambda: survivors.leader() not in (None, victim), ELECT_S, "no new leader among the survivors")
    acks = [append_until_ok(survivors, f"k-{i}") for i in range(10)]
    assert [ack.log_index for ack in acks] == list(range(ENTRIES + 1, ENTRIES + 11))
    length = ENTRIES + 11
    logs = {node: whole_log(survivors, node, length) for node in survivors.endpoints}
    assert all(log == logs[next(iter(logs))] and len(log) == length for log in logs.values())
    db.start(victim)  # on its data, as it was
    back = EtcdClient({victim: client.endpoints[victim]})
    assert wait_for(lambda: _answers(back, victim, length), START_S, f"{victim} did not come back") == logs[
        next(iter(logs))]


def _answers(client: EtcdClient, node: str, length: int) -> list[tuple[int, str]] | None:
    try:
        log = client.read_all(node)
    except (DefiniteFailure, IndeterminateFailure):
        return None
    return log if len(log) >= length else None


def test_unsafe_no_fsync_is_accepted(docker_client: docker.DockerClient, etcd3_no_fsync: EtcdCluster) -> None:
    db, client = etcd3_no_fsync
    assert [client.append(f"u-{i}").log_index for i in range(5)] == list(range(5))
    assert [append_id for _, append_id in client.read().entries] == [f"u-{i}" for i in range(5)]
    for node in db.names:
        assert db.running(node)
        assert "--unsafe-no-fsync" in command_line(db, node)
    # etcd 3.4.23's --help and start-up log never name the flag, but its flag set knows it: a bad
    # value is refused as this flag's, where an unknown flag is "not defined"
    member = docker_client.containers.get(db.node("n1").container)
    bad_value = member.exec_run(["/usr/bin/etcd", "--unsafe-no-fsync=maybe", "--data-dir=/tmp/x"])
    assert bad_value.exit_code == 2 and b"for -unsafe-no-fsync" in bad_value.output
    unknown = member.exec_run(["/usr/bin/etcd", "--unsafe-no-such-flag", "--data-dir=/tmp/x"])
    assert unknown.exit_code == 2 and b"flag provided but not defined" in unknown.output


def command_line(db: Db, node: str) -> list[str]:
    """The argv of the member's running etcd, as its node's kernel has it."""
    pid = db.process(node).pid()
    assert pid is not None, f"{node}: no etcd was started"
    return db.exec(node, f"cat /proc/{shlex.quote(str(pid))}/cmdline").split("\0")[:-1]



def test_the_disk_fault_cuts_a_members_wal_and_etcd_refuses_to_run_on_it(etcd3: EtcdCluster) -> None:
    """The disk family on etcd's own files, live (`--disk-files wal`, the module's last test: it leaves
    a member down). A follower's newest WAL loses its last 1,444 written bytes (the seed's cut) across
    a SIGKILL; etcd will not run on a log that lost committed entries: the member panics as the
    leader's heartbeat names a commit beyond its log, every time it starts, while the others go on."""
    db, client = etcd3
    for i in range(100):
        append_until_ok(client, f"w-{i}")
    leader = client.leader()
    follower = next(name for name in db.names if name != leader)
    fault = DiskFault(db, ("one",), ("truncate",), ("wal",))
    report, recovery = fault.corrupt(follower, "wal", "truncate", 7)
    print(f"damage: {report}\nrecovery: {recovery}")
    assert report["changed"] and report["mode"] == "truncate", report
    assert report["path"].startswith("etcd/member/wal/") and report["path"].endswith(".wal"), report
    assert report["written_end"] - report["offset"] == 1444, report
    assert report["file_size"]["after"] == report["offset"] < report["file_size"]["before"], report
    assert recovery.startswith("did not start again: ") and "out of range" in recovery, recovery
    assert not db.running(follower)
    with pytest.raises(NodeExited, match="out of range"):
        db.start(follower)
    others = EtcdClient({name: endpoint for name, endpoint in client.endpoints.items() if name != follower})
    assert append_until_ok(others, "after-damage").log_index == len(others.read().entries) - 1
