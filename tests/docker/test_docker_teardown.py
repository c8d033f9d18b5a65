"""Teardown leaves nothing: after an interrupted run, a failed setup, and `python -m harness clean`."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

import docker
import pytest

from harness.containers.cluster import LABEL_RUN, Cluster, Node, new_run_id
from harness.containers.db import Db
from harness.errors import HarnessError
from tests.support.leftovers import leftovers

pytestmark = pytest.mark.docker
REPO = Path(__file__).resolve().parents[2]


def host_rules_for(network_id: str) -> list[str]:
    """The host's iptables lines that name the run network's bridge (docker adds them per network)."""
    rules = subprocess.run(["iptables-save"], capture_output=True, text=True, check=True).stdout
    return [line for line in rules.splitlines() if f"br-{network_id[:12]}" in line]


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_an_interrupted_run_leaves_nothing(docker_client: docker.DockerClient, node_image: str,
                                           signum: signal.Signals) -> None:
    run = subprocess.Popen([sys.executable, str(Path(__file__).with_name("interrupted_run.py")), node_image],
                           cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert run.stdout is not None
        words = run.stdout.readline().split()
        assert words[:1] == ["ready"], run.stderr.read() if run.poll() is not None else words
        run_id = words[1]
        network_id = docker_client.networks.list(filters={"label": f"{LABEL_RUN}={run_id}"})[0].id
        assert len(leftovers(docker_client, run_id)) == 5  # 2 containers, 1 network, 2 volumes
        assert host_rules_for(network_id)
        run.send_signal(signum)
        run.wait(timeout=300)  # a teardown beside a loaded suite took more than 60 s in CI
    finally:
        if run.poll() is None:
            run.kill()
            run.wait()
    assert run.returncode != 0
    assert leftovers(docker_client, run_id) == []
    assert host_rules_for(network_id) == []


def test_a_missing_image_is_named_and_never_pulled(docker_client: docker.DockerClient) -> None:
    db = Db(2, image="dledger-chaos/node:no-such-tag")
    with pytest.raises(HarnessError, match="is not built: run `make image`"):
        db.setup()
    assert leftovers(docker_client, db.run_id) == []


def test_a_setup_failing_halfway_removes_what_it_made(docker_client: docker.DockerClient, node_image: str,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    start_container = Cluster._start_container

    def failing_on_n2(cluster: Cluster, name: str) -> Node:
        if name == "n2":
            assert len(leftovers(docker_client, cluster.run_id)) == 3  # n1, its volume, the network
            raise RuntimeError("engine trouble")
        return start_container(cluster, name)

    monkeypatch.setattr(Cluster, "_start_container", failing_on_n2)
    db = Db(3, image=node_image)
    with pytest.raises(RuntimeError, match="engine trouble"):
        db.setup()
    assert leftovers(docker_client, db.run_id) == []


def test_clean_removes_a_crashed_runs_leftovers(docker_client: docker.DockerClient, node_image: str) -> None:
    run_id = new_run_id()
    Cluster(docker_client, run_id, 1, node_image, "ssh-ed25519 AAAA unused").create()  # never torn down
    assert len(leftovers(docker_client, run_id)) == 3
    done = subprocess.run([sys.executable, "-m", "harness", "clean", "--run", run_id], cwd=REPO,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "removed 1 containers, 1 networks, 1 volumes"
    assert leftovers(docker_client, run_id) == []
