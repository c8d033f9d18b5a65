"""Master-slave node processes on loopback: replication, the SYNC_MASTER's waits and refusals,
a slow slave disk, a slave's torn tail, consumer pulls, promotion, and the command line."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from nodes.client import Client, ClientError, DefiniteFailure, IndeterminateFailure
from nodes.messages import ResponseCode
from nodes.payload import payload_id
from nodes.store.entrycodec import HEADER_SIZE
from nodes.store.readfile import scan_store
from tests.support.localcluster import LocalCluster
from tests.support.waiting import wait_until

pytestmark = pytest.mark.cluster
ROOT = Path(__file__).resolve().parents[2]


def nodes_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "nodes", *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=60)


def durable(client: Client, node: str) -> int:
    """What `node` serves: its commit index (a slave's durable log end)."""
    return client.get(0, 0, node=node).commit_index


def log_of(client: Client, node: str, last: int) -> list[tuple[int, int, bytes]]:
    entries = client.get(0, last, node=node, mode="unsafe").entries
    return [(e.index, e.term, e.body) for e in entries]


def live_slaves(cluster: LocalCluster, client: Client) -> list[str]:
    return client.metadata(node=cluster.ids[0]).slaves


def test_sync_master_replicates_and_tells_who_is_who(ha_cluster):
    cluster = ha_cluster(2, "SYNC_MASTER")
    assert cluster.wait_for_leader() == "n1"
    with cluster.client() as client:
        wait_until(lambda: live_slaves(cluster, client) == ["n2"], 10, "n2 streams from n1")
        acks = [client.append(f"s{i}".encode()) for i in range(20)]
        assert [a.first_index for a in acks] == list(range(20)) and {a.node for a in acks} == {"n1"}
        # a SYNC_MASTER acknowledged only what n2 reported durable: n2 serves all of it already
        assert durable(client, "n2") >= 19
        assert client.get(0, 19, node="n2").entries == client.get(0, 19, node="n1").entries
        meta = client.metadata(node="n2")
        assert (meta.mode, meta.broker_role, meta.role) == ("master-slave", "SLAVE", "follower")
        assert meta.leader == "n1"
        with pytest.raises(DefiniteFailure) as refused:
            Client({"n2": cluster.peers["n2"]}, timeout=0.5).append(b"to-a-slave")
        assert refused.value.code is ResponseCode.NOT_LEADER
        assert "NOT_LEADER (leader n1)" in str(refused.value)
        with pytest.raises(DefiniteFailure, match="need offset >= 0"):
            client.pull(-1, node="n2")
        with pytest.raises(DefiniteFailure, match="promote to a master role"):
            client.promote("n2", "SLAVE")
        assert client.metadata(node="n2").leader == "n1"  # both refusals changed nothing
    peers = ("--peers", cluster.peers_arg)
    meta = nodes_cli("metadata", *peers)
    assert meta.returncode == 0, meta.stderr
    answer = json.loads(meta.stdout)  # from whichever node answered first
    assert (answer["leader"], answer["peers"], answer["mode"]) == ("n1", ["n1", "n2"], "master-slave")
    assert (answer["broker_role"], answer["slaves"]) in [("SYNC_MASTER", ["n2"]), ("SLAVE", [])]
    pulled = nodes_cli("pull", *peers, "--offset", "18", "--max", "5", "--node", "n2")
    assert pulled.returncode == 0, pulled.stderr
    assert [json.loads(line)["body"] for line in pulled.stdout.splitlines()] == ["s18", "s19"]
    assert "next offset 20" in pulled.stderr and "suggest n1" in pulled.stderr


def test_flush_slave_timeout_then_slave_not_available_then_catch_up(ha_cluster):
    cluster = ha_cluster(2, "SYNC_MASTER", "--sync-timeout-ms", "800", "--housekeeping-ms", "2500")
    cluster.wait_for_leader()
    with cluster.client(timeout=5) as client:
        wait_until(lambda: live_slaves(cluster, client) == ["n2"], 10, "n2 streams from n1")
        client.append(b"before")
        cluster.pause("n2")  # alive to the master for 2.5 s more, but confirms nothing
        with pytest.raises(IndeterminateFailure) as timed_out:
            client.append(b"waits")
        assert timed_out.value.code is ResponseCode.FLUSH_SLAVE_TIMEOUT

        answers: list[tuple[ResponseCode, float]] = []

        def refused_at_once() -> bool:
            started = time.monotonic()
            try:
                client.append(b"refused")
            except IndeterminateFailure as exc:
                answers.append((exc.code, time.monotonic() - started))
            return answers[-1][0] is ResponseCode.SLAVE_NOT_AVAILABLE
        wait_until(refused_at_once, 15, "the master gives the paused slave up")
        assert answers[-1][1] < 0.5  # at once, not after the sync timeout
        top = client.get(0, 100, node="n1", mode="unsafe").entries[-1].index
        cluster.resume("n2")  # what the master wrote meanwhile reaches the slave
        wait_until(lambda: durable(client, "n2") >= top, 15, f"n2 catches up to {top}")
        assert log_of(client, "n2", top) == log_of(client, "n1", top)
        client.append(b"after")


def test_a_slave_with_a_slow_disk_holds_the_sync_master_ack(ha_cluster, tmp_path):
    cluster = ha_cluster(2, "SYNC_MASTER", "--sync-timeout-ms", "10000")
    cluster.stop("n2")
    cluster.start("n2", "--debug-flush-delay-ms", "1500")
    cluster.wait_for_leader()
    with cluster.client(timeout=15) as client:
        wait_until(lambda: live_slaves(cluster, client) == ["n2"], 10, "n2 streams from n1")
        started = time.monotonic()
        ack = client.append(b"slow")
        assert time.monotonic() - started >= 1.4  # the slave wrote it at once but fsynced it only now
        assert client.get(ack.first_index, node="n2").entries[0].body == b"slow"


def truncate_last_entry(data_dir: Path) -> int:
    """Cut the last data file in the middle of its last entry; that entry's index."""
    last = list(scan_store(data_dir))[-1]
    files = sorted((data_dir / "data").iterdir())
    holder = max((f for f in files if int(f.name) <= last.pos), key=lambda f: int(f.name))
    with holder.open("r+b") as f:
        f.truncate(last.pos - int(holder.name) + HEADER_SIZE + (last.size - HEADER_SIZE) // 2)
    return last.index


def test_a_slave_restarted_with_a_torn_tail_resumes_from_its_durable_offset(ha_cluster):
    cluster = ha_cluster(2, "ASYNC_MASTER")
    cluster.wait_for_leader()
    with cluster.client() as client:
        acks = [client.append_batch([f"a{i}-{j}".encode() * 10 for j in range(10)]) for i in range(10)]
        top = acks[-1].last_index
        wait_until(lambda: durable(client, "n2") >= top, 10, "n2 has everything")
        assert cluster.stop("n2") == 0
        torn = truncate_last_entry(cluster.data_dir("n2"))
        assert torn == top
        more = [client.append(f"b{i}".encode()) for i in range(30)]  # the master goes on meanwhile
        cluster.start("n2")
        top = more[-1].first_index
        wait_until(lambda: durable(client, "n2") >= top, 15, f"n2 catches up to {top}")
        assert log_of(client, "n2", top) == log_of(client, "n1", top)
    recovered = (cluster.data_dir("n2") / "node.log").read_text()
    assert "cut at pos" in recovered


def test_pull_from_the_master_suggests_a_slave_when_the_consumer_lags(ha_cluster):
    cluster = ha_cluster(2, "ASYNC_MASTER", "--suggest-slave-lag", "50")
    cluster.wait_for_leader()
    with cluster.client() as client:
        for _ in range(10):
            client.append_batch([f"m{i}".encode() for i in range(10)])
        wait_until(lambda: durable(client, "n2") >= 99 and live_slaves(cluster, client) == ["n2"], 10,
                   "n2 has everything")
        behind = client.pull(0, 10)
        assert behind.node == "n1" and [payload_id(e.body) for e in behind.entries][:2] == ["m0", "m1"]
        assert (behind.next_offset, behind.max_offset, behind.suggest) == (10, 99, "n2")
        on_slave = client.pull(behind.next_offset, 10, node=behind.suggest)
        assert [e.index for e in on_slave.entries] == list(range(10, 20)) and on_slave.suggest == "n2"
        near = client.pull(90, 10, node="n2")
        assert near.suggest == "n1" and near.next_offset == 100  # caught up: back to the master
        assert client.pull(90, 10).suggest == "n1"


def test_promote_a_slave_when_the_master_dies_and_the_old_master_rejoins(ha_cluster):
    cluster = ha_cluster(3, "ASYNC_MASTER", "--housekeeping-ms", "1000")
    cluster.wait_for_leader()
    with cluster.client(timeout=5) as client:
        acked = [client.append(f"a{i}".encode()).first_index for i in range(20)]
        for node in ("n2", "n3"):
            wait_until(lambda n=node: durable(client, n) >= acked[-1], 10, f"{node} has everything")
    cluster.kill("n1")
    survivors = ["n2", "n3"]
    with cluster.client(timeout=5, nodes=survivors) as client:  # 1 s timed out a read under load
        with pytest.raises(DefiniteFailure):
            client.append(b"no-master")  # the slaves refuse: NOT_LEADER naming the dead n1
        assert [e.index for e in client.get(0, 19, node="n3").entries] == acked  # reads go on
    promoted = nodes_cli("promote", "--peers", cluster.peers_arg, "--node", "n2", "--role", "SYNC_MASTER")
    assert promoted.returncode == 0, promoted.stderr
    assert json.loads(promoted.stdout)["master"] == "n2"
    assert cluster.wait_for_leader(among=survivors) == "n2"
    with cluster.client(timeout=5, nodes=survivors) as client:
        wait_until(lambda: live_slaves_of(client, "n2") == ["n3"], 10, "n3 follows n2")
        after = client.append(b"on-n2")
        assert after.node == "n2" and after.first_index == 20
    cluster.start("n1")  # same command line: ASYNC_MASTER. It must come back as n2's slave.
    assert cluster.wait_for_leader() == "n2"
    with cluster.client(timeout=5) as client:
        meta = client.metadata(node="n1")
        assert (meta.broker_role, meta.leader) == ("SLAVE", "n2")
        wait_until(lambda: durable(client, "n1") >= 20, 10, "n1 catches up")
        assert log_of(client, "n1", 20) == log_of(client, "n2", 20)
        assert client.append(b"still-n2").node == "n2"
    roles = [json.loads(line) for line in (cluster.data_dir("n1") / "events.jsonl").read_text().splitlines()]
    restart = max(i for i, e in enumerate(roles) if e.get("role") == "candidate")
    assert all(e.get("role") != "leader" for e in roles[restart:])


def live_slaves_of(client: Client, node: str) -> list[str]:
    try:
        return client.metadata(node=node).slaves
    except ClientError:
        return []


def test_bad_master_slave_arguments_exit_254():
    serve = ("serve", "--id", "n1", "--peers", "n1=127.0.0.1:1,n2=127.0.0.1:2", "--data-dir", "/tmp/unused")
    cases = [
        ((*serve, "--role", "SLAVE"), "only apply to --mode master-slave"),
        ((*serve, "--mode", "master-slave"), "needs --role"),
        ((*serve, "--mode", "master-slave", "--role", "BOSS"), "unknown broker role"),
        ((*serve, "--mode", "master-slave", "--role", "SLAVE"), "needs --master"),
        ((*serve, "--mode", "master-slave", "--role", "SLAVE", "--master", "10.0.0.1:1"),
         "neither a peer id"),
        ((*serve, "--mode", "master-slave", "--role", "SYNC_MASTER", "--master", "n2"), "names another node"),
        ((*serve, "--mode", "master-slave", "--role", "SLAVE", "--master", "n2", "--max-slave-lag", "-1"),
         "must not be negative"),
        ((*serve, "--mode", "master-slave", "--role", "SLAVE", "--master", "n1"), "which is a SLAVE"),
        (("promote", "--peers", "n1=127.0.0.1:1", "--node", "n1", "--role", "SLAVE"), "promote to"),
        (("promote", "--peers", "n1=127.0.0.1:1", "--node", "n9"), "not one of the peers"),
        (("pull", "--peers", "n1=127.0.0.1:1", "--offset", "-1"), "need --offset >= 0"),
    ]
    for args, text in cases:
        result = nodes_cli(*args)
        assert result.returncode == 254 and text in result.stderr, (args, result.returncode, result.stderr)


def test_master_slave_requests_in_dledger_mode_are_refused(tmp_path):
    with LocalCluster(tmp_path, 1, extra_args=["--segment-mb", "4"]) as cluster:
        cluster.start_all()
        cluster.wait_for_leader()
        with cluster.client() as client:
            with pytest.raises(DefiniteFailure) as refused:
                client.pull(0, node="n1")
            assert refused.value.code is ResponseCode.UNSUPPORTED and "master-slave" in str(refused.value)
            with pytest.raises(DefiniteFailure):
                client.promote("n1")
            assert client.metadata().mode == "dledger"
