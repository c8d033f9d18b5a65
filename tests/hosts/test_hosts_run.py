"""`python -m harness run --hosts`: the harness drives machines it did not create, over SSH.

The hosts are plain SSH containers (conftest.py) that the harness sees only as SSH hosts: a
short run with kill, partition and pause ends valid and leaves them clean; a host that lacks
a tool, or a login without root, is refused before anything starts; a wrong key and an
unreachable host are clear errors with exit 254 and 255.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from harness.hostsdb import HostsDb, clean_hosts, leftovers
from harness.inventory import load_inventory
from harness.keys import create_key_pair
from harness.rundb import check_hosts
from nemesis.partition import apply_grudge
from tests.docker.test_docker_compose import free_ports
from tests.hosts.conftest import SshHosts

pytestmark = pytest.mark.docker
REPO = Path(__file__).resolve().parents[2]


def harness(*args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "harness", *args], cwd=REPO, capture_output=True, text=True,
                          timeout=timeout, env={**os.environ, "PYTHONUNBUFFERED": "1"})


def assert_clean(ssh_hosts: SshHosts, inventory: Path) -> None:
    for spec in load_inventory(inventory).hosts:
        ssh = ssh_hosts.ssh(spec.name)
        try:
            assert leftovers(ssh, spec) == [], spec.name
        finally:
            ssh.close()


def test_a_short_run_with_kill_partition_and_pause_ends_valid_and_leaves_the_hosts_clean(
        ssh_hosts: SshHosts, tmp_path: Path) -> None:
    inventory = ssh_hosts.inventory(tmp_path / "hosts.toml")
    results = tmp_path / "results"
    done = harness("run", "--hosts", str(inventory), "--time-limit", "20", "--nemesis",
                   "kill,partition,pause", "--nemesis-interval", "3", "--rate", "100", "--seed", "11",
                   "--results-dir", str(results))
    run_dir = (results / "latest").resolve()
    test = json.loads((run_dir / "test.json").read_text())
    why = {k: test.get(k) for k in ("error", "catch_up", "final_logs", "nemesis_errors", "collect_error")}
    assert done.returncode == 0, f"{why}\n{done.stdout}\n{done.stderr}"
    assert json.loads((run_dir / "results.json").read_text())["valid"] is True
    assert test["nodes"] == 3 and test["hosts"] == str(inventory)
    assert test["inventory"]["hosts"]["n2"] == {
        "address": ssh_hosts.hosts["n2"].control, "peer_address": ssh_hosts.hosts["n2"].peer, "user": "root",
        "port": 22, "sudo": False, "data_dir": "/var/lib/dledger-chaos-test", "code_dir": "/opt/dledger"}
    assert f"--hosts {inventory}" in test["reproduce"]
    ops = {json.loads(line)["f"] for line in (run_dir / "history.jsonl").read_text().splitlines()
           if '"nemesis"' in line}
    assert {"kill", "start", "start-partition", "stop-partition", "pause", "resume"} <= ops
    for node in ("n1", "n2", "n3"):
        assert (run_dir / "nodes" / node / "events.jsonl").stat().st_size > 0
        assert (run_dir / "final" / f"{node}.jsonl").exists()
    # Nothing secret lands in the results folder: no key, no key file name, no ssh/ folder.
    private = ssh_hosts.keys.private_path.read_text().splitlines()[1]
    assert not (run_dir / "ssh").exists()
    for path in run_dir.rglob("*"):
        if path.is_file() and path.suffix in (".json", ".jsonl", ".log", ".html"):
            text = path.read_text(errors="replace")
            assert private not in text and str(ssh_hosts.keys.private_path) not in text, path
    assert_clean(ssh_hosts, inventory)


def test_a_host_lacking_a_tool_is_refused_up_front_naming_it(ssh_hosts: SshHosts, tmp_path: Path) -> None:
    inventory = ssh_hosts.inventory(tmp_path / "hosts.toml", ("n1", "n2", "bare"))
    done = harness("run", "--hosts", str(inventory), "--nemesis", "partition,packet",
                   "--results-dir", str(tmp_path / "results"))
    assert done.returncode == 254, done.stderr
    problems = [line.strip() for line in done.stderr.splitlines() if line.startswith("  ")]
    assert "bare: partition, packet need iptables, which is not installed (Debian package iptables)" \
        in problems
    assert "bare: packet needs tc, which is not installed (Debian package iproute2)" in problems
    # n1 and n2 have every tool (packet faults may still be refused there: they shape eth0, and
    # the peers network may be eth1)
    assert not [p for p in problems if p.startswith(("n1:", "n2:")) and "eth0" not in p]
    assert not (tmp_path / "results").exists()
    check_hosts(load_inventory(inventory), ["kill", "pause"])  # faults that need neither: no refusal
    assert_clean(ssh_hosts, inventory)  # probing copied nothing and left nothing


def test_faults_needing_root_are_refused_for_a_user_without_it(ssh_hosts: SshHosts, tmp_path: Path) -> None:
    inventory = ssh_hosts.inventory(tmp_path / "hosts.toml", user="tester",
                                    extra='code_dir = "/home/tester/dledger-code"')
    done = harness("run", "--hosts", str(inventory), "--nemesis", "kill,partition,disk",
                   "--results-dir", str(tmp_path / "results"))
    assert done.returncode == 254, done.stderr
    assert ("n1: partition needs root privileges: user tester is not root (log in as root, or give tester "
            "passwordless sudo and set sudo = true)") in done.stderr
    assert ("n3: disk needs the nemesis's agents at /opt/dledger/agents, but code_dir is "
            "/home/tester/dledger-code") in done.stderr
    assert "kill" not in done.stderr.split("cannot run this test:")[1]  # kill needs nothing more
    assert not (tmp_path / "results").exists()


def test_a_wrong_key_exits_254_and_an_unreachable_host_255(ssh_hosts: SshHosts, tmp_path: Path) -> None:
    stranger = create_key_pair(tmp_path / "stranger", "not-authorised")
    inventory = ssh_hosts.inventory(tmp_path / "wrong-key.toml", key=stranger.private_path)
    done = harness("run", "--hosts", str(inventory), "--nemesis", "kill", "--results-dir",
                   str(tmp_path / "a"))
    assert done.returncode == 254, done.stderr
    assert f"n1: root@{ssh_hosts.hosts['n1'].control}:22 refused the key" in done.stderr
    assert not (tmp_path / "a").exists()

    [port] = free_ports(1)
    unreachable = tmp_path / "unreachable.toml"
    text = ssh_hosts.inventory(unreachable).read_text().replace("connect_timeout = 20", "connect_timeout = 1")
    host = ssh_hosts.hosts["n3"].control
    unreachable.write_text(text.replace(f'address = "{host}"', f'address = "127.0.0.1"\nport = {port}'))
    done = harness("run", "--hosts", str(unreachable), "--nemesis", "kill", "--results-dir",
                   str(tmp_path / "b"))
    assert done.returncode == 255, done.stderr
    assert f"cannot SSH to n3 at 127.0.0.1:{port}" in done.stderr
    assert "check the address and port in the inventory" in done.stderr
    assert not (tmp_path / "b").exists()


def test_clean_removes_what_a_crashed_run_left(ssh_hosts: SshHosts, tmp_path: Path) -> None:
    """A run that died before its teardown (nodes up, a partition in force): `clean --hosts` removes it."""
    inventory_path = ssh_hosts.inventory(tmp_path / "hosts.toml")
    inventory = load_inventory(inventory_path)
    db = HostsDb(inventory, serve_args=["--segment-mb", "4"])
    db.setup()
    try:
        db.start()
        db.wait_for_leader(timeout=30)
        apply_grudge(db, {"n1": ["n2", "n3"]})
        report = clean_hosts(inventory)
    finally:
        db.teardown()  # finds nothing of its run left
    assert any(line.startswith("killed the node") for line in report["n1"])
    assert "removed the iptables chain CHAOS" in report["n1"]
    assert not [line for lines in report.values() for line in lines if line.startswith("left: ")]
    done = harness("clean", "--hosts", str(inventory_path), timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [f"{n}: nothing to remove" for n in ("n1", "n2", "n3")]
    assert_clean(ssh_hosts, inventory_path)
