"""A 3-server NATS JetStream cluster in containers, through our own client: publish, read back by seq on
every server, deduplication of a retried publish, leader step-down, kill -9 of the leader; and the
precondition of Jepsen's NATS power-loss finding: with the default `sync_interval` the servers
acknowledge publishes they have not fsynced, with `sync_interval: always` they fsync each one first.

The tests of this module run in order on one cluster; the last kills its leader.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path

import docker
import pytest

from harness.cluster import LABEL_RUN
from harness.wait import wait_for
from systems.nats.client import JetStream, publish_retrying, replica_state
from systems.nats.config import server_config
from tests.systems.nats.natscluster import SPEC, NatsCluster, create_stream, nats_cluster, stream_leader

pytestmark = pytest.mark.docker

PUBLISHED = 50


@pytest.fixture(scope="module")
def leader(cluster: NatsCluster) -> str:
    """The stream, created; its first leader."""
    return create_stream(cluster.js("n1"))


@pytest.fixture(scope="module")
def always_cluster(docker_client: docker.DockerClient, nats_image: str) -> Iterator[NatsCluster]:
    yield from nats_cluster(docker_client, nats_image, "always")


def publish(js: JetStream, ids: list[str]) -> list[int]:
    return [js.publish(SPEC.subject, f"body of {msg_id}".encode(), msg_id).seq for msg_id in ids]


def test_publishes_read_back_by_seq_on_every_server(cluster: NatsCluster, leader: str) -> None:
    ids = [f"p{i % 5}-{i}" for i in range(PUBLISHED)]
    assert publish(cluster.js("n1"), ids) == list(range(1, PUBLISHED + 1))
    expected = [[i, msg_id] for i, msg_id in enumerate(ids)]
    for name in cluster.names:
        def caught_up(name: str = name) -> bool:
            state = replica_state("127.0.0.1", cluster.nodes[name].monitor_port, SPEC.name)
            return state is not None and state["last_seq"] == PUBLISHED
        wait_for(caught_up, 30, f"{name}'s replica did not reach seq {PUBLISHED}")
        direct = cluster.js(name).read_all(SPEC.name, direct=True)
        assert (direct.node, direct.entries(), direct.gaps) == (name, expected, ())
        assert direct.messages[7].data == f"body of {ids[7]}".encode()
        from_leader = cluster.js(name).read_all(SPEC.name)
        assert (from_leader.entries(), from_leader.gaps) == (expected, ())
    assert cluster.js("n1").get(SPEC.name, PUBLISHED + 1, direct=True) is None
    assert cluster.js("n1").get(SPEC.name, PUBLISHED + 1) is None


def test_a_retried_publish_is_a_duplicate_with_the_same_seq(cluster: NatsCluster, leader: str) -> None:
    first = cluster.js("n2").publish(SPEC.subject, b"once", "retry-1")
    again = cluster.js("n3").publish(SPEC.subject, b"once", "retry-1")
    retried = publish_retrying([cluster.js("n1")], SPEC, b"once", "retry-1")
    assert not first.duplicate
    assert (again.seq, again.duplicate) == (retried.seq, retried.duplicate) == (first.seq, True)
    assert cluster.js("n1").info(SPEC.name).last_seq == first.seq


def test_leader_step_down_elects_another(cluster: NatsCluster, leader: str) -> None:
    current = stream_leader(cluster.js("n1"), SPEC.name)
    cluster.js("n1").step_down(SPEC.name)
    assert stream_leader(cluster.js("n1"), SPEC.name, other_than=current) != current


def test_the_server_accepts_each_sync_interval(cluster: NatsCluster, always_cluster: NatsCluster) -> None:
    """The running clusters are the proof for `default` and `always`; `nats-server -t` checks the rest."""
    assert "sync_interval" not in cluster.config("n1")
    assert '  sync_interval: "always"\n' in always_cluster.config("n1")
    assert jetstream_config(cluster, "n1")["sync_interval"] == 120 * 10**9  # the default: 2 minutes
    assert jetstream_config(always_cluster, "n1").get("sync_always") is True
    peers = {name: cluster.container_name(name) for name in cluster.names}
    container = cluster.container("n1")
    for value in ("10s", "500ms", "1m30s"):
        assert check_config(container, server_config("n1", peers, value)), value
    assert not check_config(container, server_config("n1", peers, "10s").replace('"10s"', '"ten"'))


def test_acknowledged_before_fsynced_unless_always(cluster: NatsCluster, leader: str,
                                                  always_cluster: NatsCluster,
                                                  record_property: Callable[[str, object], None]) -> None:
    """Jepsen's precondition, measured with strace on each server's process: the fsync calls while
    20 publishes are acknowledged (the default: none at all; always: at least one a publish)."""
    create_stream(always_cluster.js("n1"))
    counts = {}
    for label, target in (("default", cluster), ("always", always_cluster)):
        ids = [f"{label}-{i}" for i in range(20)]
        counts[label] = fsyncs_during(target, lambda target=target, ids=ids: publish(target.js("n1"), ids))
    record_property("fsyncs_per_server_during_20_acked_publishes", counts)
    print(f"fsync calls per server during 20 acknowledged publishes: {counts}")
    assert all(n == 0 for n in counts["default"].values()), counts
    assert all(n >= 20 for n in counts["always"].values()), counts


def test_publishes_go_on_after_the_leader_is_killed(cluster: NatsCluster, leader: str) -> None:
    killed = stream_leader(cluster.js("n1"), SPEC.name)
    cluster.container(killed).kill()  # SIGKILL: docker-init and the server die at once
    others = [name for name in cluster.names if name != killed]
    new_leader = stream_leader(cluster.js(others[0]), SPEC.name, timeout=60, other_than=killed)
    assert new_leader in others
    before = cluster.js(others[0]).info(SPEC.name).last_seq
    for name in others:
        publish(cluster.js(name), [f"after-kill-{name}-{i}" for i in range(5)])
    read = cluster.js(others[1]).read_all(SPEC.name)
    assert read.last_seq == before + 10 and read.gaps == ()
    assert [msg_id for _, msg_id in read.entries()[-10:]] == [
        f"after-kill-{name}-{i}" for name in others for i in range(5)]


def test_nothing_is_left_after_a_cluster(docker_client: docker.DockerClient, nats_image: str) -> None:
    run = NatsCluster(docker_client, nats_image, size=1)
    selector = {"label": f"{LABEL_RUN}={run.run_id}"}
    try:
        run.start()
        assert len(docker_client.containers.list(filters=selector)) == 1
    finally:
        run.remove()
    assert docker_client.containers.list(all=True, filters=selector) == []
    assert docker_client.networks.list(filters=selector) == []
    assert docker_client.volumes.list(filters=selector) == []


# ---------------------------------------------------------------- helpers


def jetstream_config(cluster: NatsCluster, name: str) -> dict:
    with urllib.request.urlopen(f"http://127.0.0.1:{cluster.nodes[name].monitor_port}/varz", timeout=5) as r:
        return json.load(r)["jetstream"]["config"]


def check_config(container, text: str) -> bool:
    """Whether `nats-server -t` in `container` accepts `text` as its config."""
    path = "/tmp/check.conf"
    result = container.exec_run(["sh", "-c", f"cat > {path} <<'EOF'\n{text}EOF\nnats-server -t -c {path}"])
    assert result.exit_code == 0 or b"error parsing" in result.output, result.output
    return result.exit_code == 0


def server_pid(cluster: NatsCluster, name: str) -> int:
    """The host pid of a container's nats-server (the child of docker-init)."""
    init = cluster.container(name).attrs["State"]["Pid"]
    children = Path(f"/proc/{init}/task/{init}/children")
    if not children.exists():
        pytest.skip("the Docker engine's processes are not visible here (another pid namespace or host)")
    pids = [int(pid) for pid in children.read_text().split()]
    assert len(pids) == 1 and Path(f"/proc/{pids[0]}/exe").resolve().name == "nats-server", pids
    return pids[0]


def fsyncs_during(cluster: NatsCluster, action: Callable[[], object]) -> dict[str, int]:
    """The fsync and fdatasync calls each server of `cluster` made while `action` ran (strace -f)."""
    if shutil.which("strace") is None or os.geteuid() != 0:
        pytest.skip("counting fsyncs needs strace and root on the Docker host")
    with tempfile.TemporaryDirectory(prefix="nats-strace-") as tmp:
        traces = {name: Path(tmp) / f"{name}.trace" for name in cluster.names}
        logs = {name: Path(tmp) / f"{name}.log" for name in cluster.names}
        procs = []
        try:
            for name in cluster.names:
                argv = ["strace", "-f", "-e", "trace=fsync,fdatasync,sync_file_range,msync", "-o",
                        str(traces[name]), "-p", str(server_pid(cluster, name))]
                with logs[name].open("w") as log:
                    procs.append(subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=log))
            for name in cluster.names:
                wait_for(lambda name=name: "attached" in logs[name].read_text(), 10,
                         f"strace did not attach to {name}")
            action()
        finally:
            for proc in procs:
                proc.terminate()
                proc.wait(timeout=10)
        return {name: sum("sync" in line.split("(")[0] for line in traces[name].read_text().splitlines()
                          if "(" in line)
                for name in cluster.names}
