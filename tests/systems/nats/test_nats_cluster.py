"""A 3-server NATS JetStream cluster made the way a run makes it (`harness.containers.db.Db` with `Nats`, each
server started over SSH, the stream created by `Nats.prepare`), through our own client: publish,
read back by seq on every server, deduplication of a retried publish, leader step-down, kill -9 of
the leader; and the precondition of Jepsen's NATS power-loss finding: with the default
`sync_interval` the servers acknowledge publishes they have not fsynced, with `sync_interval:
always` they fsync each one first. One test goes through the seam alone, as a run's workers and
final reads do.

The first test has a cluster of its own; the others run in order on one cluster, and the last of
them kills its leader.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
import urllib.request
from collections.abc import Callable
from pathlib import Path

import docker
import pytest

from harness.containers.cluster import LABEL_RUN
from harness.containers.db import Db
from harness.wait import wait_for
from nemesis.disk import DiskFault
from nodes.client import ClientError
from systems.nats import Nats
from systems.nats.client import Connection, JetStream, publish_retrying, replica_state
from systems.nats.config import CLIENT_PORT, CONFIG_PATH, MONITOR_PORT, server_config
from systems.nats.system import spec_for
from tests.support.seamrun import keeps_every_acknowledged_append
from tests.systems.nats.conftest import leftovers

pytestmark = pytest.mark.docker

SPEC = spec_for(3)  # the stream `Nats.prepare` creates on three servers
PUBLISHED = 50
ELECT_S = 60.0  # a new stream leader after a kill, on a busy machine


def js(db: Db, name: str, timeout: float = 5.0) -> JetStream:
    """Our JetStream client on server `name`, at its address on the run network."""
    return JetStream(Connection(db.address(name), CLIENT_PORT, timeout=timeout, name=name))


def publish(client: JetStream, ids: list[str]) -> list[int]:
    return [client.publish(SPEC.subject, f"body of {msg_id}".encode(), msg_id).seq for msg_id in ids]


def stream_leader(client: JetStream, stream: str, timeout: float = 30, other_than: str | None = None) -> str:
    def leader() -> str | None:
        try:
            found = client.info(stream).leader
        except ClientError:
            return None
        return found if found != other_than else None

    but = f" but {other_than}" if other_than else ""
    return wait_for(leader, timeout, f"stream {stream} has no leader{but} after {timeout} s", interval=0.2)


# ---------------------------------------------------------------- through the seam, as a run


def test_a_run_through_the_seam_keeps_every_acknowledged_append(fresh_cluster: Db, tmp_path: Path) -> None:
    assert isinstance(fresh_cluster.system, Nats)
    keeps_every_acknowledged_append(fresh_cluster, tmp_path)


# ---------------------------------------------------------------- our client on the cluster


def test_publishes_read_back_by_seq_on_every_server(cluster: Db) -> None:
    ids = [f"p{i % 5}-{i}" for i in range(PUBLISHED)]
    assert publish(js(cluster, "n1"), ids) == list(range(1, PUBLISHED + 1))
    expected = [[i, msg_id] for i, msg_id in enumerate(ids)]
    wait_replicated(cluster, PUBLISHED)
    for name in cluster.names:
        direct = js(cluster, name).read_all(SPEC.name, direct=True)
        assert (direct.node, direct.entries(), direct.gaps) == (name, expected, ())
        assert direct.messages[7].data == f"body of {ids[7]}".encode()
        from_leader = js(cluster, name).read_all(SPEC.name)
        assert (from_leader.entries(), from_leader.gaps) == (expected, ())
    assert js(cluster, "n1").get(SPEC.name, PUBLISHED + 1, direct=True) is None
    assert js(cluster, "n1").get(SPEC.name, PUBLISHED + 1) is None


def test_a_retried_publish_is_a_duplicate_with_the_same_seq(cluster: Db) -> None:
    first = js(cluster, "n2").publish(SPEC.subject, b"once", "retry-1")
    again = js(cluster, "n3").publish(SPEC.subject, b"once", "retry-1")
    retried = publish_retrying([js(cluster, "n1")], SPEC, b"once", "retry-1")
    assert not first.duplicate
    assert (again.seq, again.duplicate) == (retried.seq, retried.duplicate) == (first.seq, True)
    assert js(cluster, "n1").info(SPEC.name).last_seq == first.seq


def test_leader_step_down_elects_another(cluster: Db) -> None:
    current = stream_leader(js(cluster, "n1"), SPEC.name)
    js(cluster, "n1").step_down(SPEC.name)
    assert stream_leader(js(cluster, "n1"), SPEC.name, other_than=current) != current


def test_the_server_accepts_each_sync_interval(docker_client: docker.DockerClient, cluster: Db,
                                              always_cluster: Db) -> None:
    """The running clusters are the proof for `default` and `always`; `nats-server -t` checks the rest."""
    assert "sync_interval" not in installed_config(cluster, "n1")
    assert '  sync_interval: "always"\n' in installed_config(always_cluster, "n1")
    assert jetstream_config(cluster, "n1")["sync_interval"] == 120 * 10**9  # the default: 2 minutes
    assert jetstream_config(always_cluster, "n1").get("sync_always") is True
    peers = {name: cluster.address(name) for name in cluster.names}
    container = docker_client.containers.get(cluster.node("n1").container)
    for value in ("10s", "500ms", "1m30s"):
        assert check_config(container, server_config("n1", peers, value, cluster.data_dir)), value
    assert not check_config(container, server_config("n1", peers, "10s", cluster.data_dir).replace(
        '"10s"', '"ten"'))


def test_acknowledged_before_fsynced_unless_always(docker_client: docker.DockerClient, cluster: Db,
                                                  always_cluster: Db,
                                                  record_property: Callable[[str, object], None]) -> None:
    """Jepsen's precondition, measured with strace on each server's process: the fsync calls while
    20 publishes are acknowledged and every replica catches up. The default: none at all. Always: the
    quorum that acknowledges (a majority) fsyncs at least once a publish; a lagging replica may take
    several publishes in one append and fsync once for them, but it fsyncs."""
    counts = {}
    for label, target in (("default", cluster), ("always", always_cluster)):
        ids = [f"{label}-{i}" for i in range(20)]
        counts[label] = fsyncs_during(docker_client, target,
                                      lambda target=target, ids=ids: publish_and_replicate(target, ids))
    record_property("fsyncs_per_server_during_20_acked_publishes", counts)
    print(f"fsync calls per server during 20 acknowledged publishes: {counts}")
    assert all(n == 0 for n in counts["default"].values()), counts
    always = counts["always"].values()
    assert sum(n >= 20 for n in always) >= len(always) // 2 + 1 and all(n >= 1 for n in always), counts


def publish_and_replicate(db: Db, ids: list[str]) -> None:
    """Publish `ids` through n1, then wait until every server's replica holds the last of them."""
    wait_replicated(db, publish(js(db, "n1"), ids)[-1])


def wait_replicated(db: Db, last: int) -> None:
    """Wait until every server's replica of the stream holds seq `last`."""
    for name in db.names:
        def caught_up(name: str = name) -> bool:
            state = replica_state(db.address(name), MONITOR_PORT, SPEC.name)
            return state is not None and state["last_seq"] >= last
        wait_for(caught_up, 30, f"{name}'s replica did not reach seq {last}")


def test_the_disk_fault_damages_a_servers_message_block_and_the_stream_repairs_it(cluster: Db) -> None:
    """The disk family on NATS's own files, live (`--disk-files blk`): one bit of a follower's newest
    message block flipped across a SIGKILL. Restarted while the other servers are paused (so none can
    repair it yet), its replica holds only the messages before the damaged one (the server says
    nothing of it in its log); once they resume, the stream leader brings it back to every message."""
    ids = [f"disk-{i}" for i in range(100)]
    first = publish(js(cluster, "n1"), ids)[0]
    leader = stream_leader(js(cluster, "n1"), SPEC.name)
    follower = next(name for name in cluster.names if name != leader)
    last = js(cluster, leader).info(SPEC.name).last_seq

    def holds(seq: int) -> bool:
        state = replica_state(cluster.address(follower), MONITOR_PORT, SPEC.name) or {}
        return state.get("last_seq") == seq

    wait_for(lambda: holds(last), 30, f"{follower}'s replica did not reach seq {last}")
    others = [name for name in cluster.names if name != follower]
    for name in others:
        cluster.pause(name)
    try:
        fault = DiskFault(cluster, ("one",), ("bitflip",), ("blk",))
        report, recovery = fault.corrupt(follower, "blk", "bitflip", 7)
        damaged = replica_state(cluster.address(follower), MONITOR_PORT, SPEC.name)
    finally:
        for name in others:
            cluster.resume(name)
    print(f"damage: {report}\nthe replica restarted on it: {damaged}")
    assert report["changed"] and report["path"] == "jetstream/$G/streams/dlc/msgs/1.blk", report
    assert recovery == "" and cluster.running(follower)
    assert damaged is not None and first <= damaged["last_seq"] < last, damaged
    wait_for(lambda: holds(last), ELECT_S, f"{follower}'s replica was not repaired to seq {last}")
    read = js(cluster, follower).read_all(SPEC.name, direct=True)
    assert read.gaps == () and [msg_id for _, msg_id in read.entries()[-100:]] == ids


def test_publishes_go_on_after_the_leader_is_killed(cluster: Db) -> None:
    killed = stream_leader(js(cluster, "n1"), SPEC.name)
    cluster.kill(killed)  # SIGKILL of the server process (its container stays)
    assert not cluster.running(killed)
    others = [name for name in cluster.names if name != killed]
    new_leader = stream_leader(js(cluster, others[0]), SPEC.name, timeout=ELECT_S, other_than=killed)
    assert new_leader in others
    before = js(cluster, others[0]).info(SPEC.name).last_seq
    for name in others:
        publish(js(cluster, name), [f"after-kill-{name}-{i}" for i in range(5)])
    read = js(cluster, others[1]).read_all(SPEC.name)
    assert read.last_seq == before + 10 and read.gaps == ()
    assert [msg_id for _, msg_id in read.entries()[-10:]] == [
        f"after-kill-{name}-{i}" for name in others for i in range(5)]


def test_nothing_is_left_after_a_cluster(docker_client: docker.DockerClient, nats_image: str) -> None:
    with Db(1, system=Nats(), image=nats_image) as db:
        selector = {"label": f"{LABEL_RUN}={db.run_id}"}
        db.start()
        assert db.running("n1")
        assert len(docker_client.containers.list(filters=selector)) == 1
    assert leftovers(docker_client, db.run_id) == []


# ---------------------------------------------------------------- helpers


def installed_config(db: Db, name: str) -> str:
    """The config `Nats.install` wrote on node `name`, which its server runs with."""
    return db.exec(name, f"cat {CONFIG_PATH}")


def jetstream_config(db: Db, name: str) -> dict:
    with urllib.request.urlopen(f"http://{db.address(name)}:{MONITOR_PORT}/varz", timeout=5) as r:
        return json.load(r)["jetstream"]["config"]


def check_config(container, text: str) -> bool:
    """Whether `nats-server -t` in `container` accepts `text` as its config."""
    path = "/tmp/check.conf"
    result = container.exec_run(["sh", "-c", f"cat > {path} <<'EOF'\n{text}EOF\nnats-server -t -c {path}"])
    assert result.exit_code == 0 or b"error parsing" in result.output, result.output
    return result.exit_code == 0


def server_pid(docker_client: docker.DockerClient, db: Db, name: str) -> int:
    """The host pid of node `name`'s nats-server: of the processes `docker top` lists (host pids), the
    one whose pid in the container (the last of its `NSpid`) is the one the Db started."""
    inside = db.process(name).pid()
    assert inside is not None, f"{name}: no server was started"
    container = docker_client.containers.get(db.node(name).container)
    if not Path(f"/proc/{container.attrs['State']['Pid']}").exists():
        pytest.skip("the Docker engine's processes are not visible here (another pid namespace or host)")
    top = container.top()
    column = top["Titles"].index("PID")
    for row in top["Processes"]:
        host = int(row[column])
        try:
            status = Path(f"/proc/{host}/status").read_text()
        except FileNotFoundError:
            continue  # gone since (an SSH command's process)
        nspid = next(line.split()[1:] for line in status.splitlines() if line.startswith("NSpid:"))
        if int(nspid[-1]) == inside:
            assert Path(f"/proc/{host}/exe").resolve().name == "nats-server", (name, host)
            return host
    pytest.fail(f"{name}: no process of {container.name} has pid {inside} in it: {top['Processes']}")


def fsyncs_during(docker_client: docker.DockerClient, db: Db, action: Callable[[], object]) -> dict[str, int]:
    """The fsync and fdatasync calls each server of `db` made while `action` ran (strace -f)."""
    if shutil.which("strace") is None or os.geteuid() != 0:
        pytest.skip("counting fsyncs needs strace and root on the Docker host")
    with tempfile.TemporaryDirectory(prefix="nats-strace-") as tmp:
        traces = {name: Path(tmp) / f"{name}.trace" for name in db.names}
        logs = {name: Path(tmp) / f"{name}.log" for name in db.names}
        procs = []
        try:
            for name in db.names:
                argv = ["strace", "-f", "-e", "trace=fsync,fdatasync,sync_file_range,msync", "-o",
                        str(traces[name]), "-p", str(server_pid(docker_client, db, name))]
                with logs[name].open("w") as log:
                    procs.append(subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=log))
            for name in db.names:
                wait_for(lambda name=name: "attached" in logs[name].read_text(), 10,
                         f"strace did not attach to {name}")
            action()
        finally:
            for proc in procs:
                proc.terminate()
                proc.wait(timeout=10)
        return {name: sum("sync" in line.split("(")[0] for line in traces[name].read_text().splitlines()
                          if "(" in line)
                for name in db.names}
