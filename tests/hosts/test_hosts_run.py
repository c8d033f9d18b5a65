"""`python -m harness run --hosts`: the harness drives machines it did not create, over SSH.

The hosts are plain SSH containers (conftest.py) that the harness sees only as SSH hosts: a
short run with kill, partition, pause, clock and power loss, as a user with passwordless sudo,
ends valid and leaves them clean (power loss drops what the nodes had not fsynced, and leaves
no mount; root logins run the clean-up test and the nightly sweep on hosts); a host that lacks
a tool or /dev/fuse, a login without root, or sudo that asks for a password is refused before
anything starts; a wrong key and an unreachable host are clear errors with exit 254 and 255.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from harness.chaos.rundb import check_hosts
from harness.hosts.db import HostsDb, clean_hosts
from harness.hosts.inventory import load_inventory
from harness.ssh.keys import create_key_pair
from nemesis.partition import apply_grudge
from tests.hosts.conftest import SshHosts
from tests.support.localcluster import free_ports

pytestmark = pytest.mark.docker
REPO = Path(__file__).resolve().parents[2]


def harness(*args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "harness", *args], cwd=REPO, capture_output=True, text=True,
                          timeout=timeout, env={**os.environ, "PYTHONUNBUFFERED": "1"})


def run_on_hosts(inventory: Path, results: Path, *flags: str, expect: int = 0) -> tuple[Path, dict[str, Any]]:
    """`harness run --hosts inventory` with `flags`, which must exit `expect`; its folder and test.json."""
    done = harness("run", "--hosts", str(inventory), "--results-dir", str(results), *flags)
    run_dir = (results / "latest").resolve()
    test = json.loads((run_dir / "test.json").read_text())
    why = {k: test.get(k) for k in ("error", "catch_up", "final_logs", "nemesis_errors", "collect_error")}
    assert done.returncode == expect, f"{why}\n{done.stdout}\n{done.stderr[-5000:]}"
    return run_dir, test


def nemesis_completions(run_dir: Path) -> list[dict[str, Any]]:
    """The history's nemesis completions, in order."""
    ops = [json.loads(line) for line in (run_dir / "history.jsonl").read_text().splitlines()]
    return [op for op in ops if op["process"] == "nemesis" and op["type"] != "invoke"]


def test_a_short_run_as_a_sudo_user_under_every_kind_of_fault_ends_valid_and_leaves_the_hosts_clean(
        ssh_hosts: SshHosts, tmp_path: Path, via_checker_service: Path) -> None:
    """Kill, partition, pause, clock and power lost on every host at once, all through `sudo -n` for
    `tester` (the power-loss file system's daemon outlives the `sudo` that started it): with sync
    flush nothing acknowledged is lost, though each power loss drops what was not fsynced."""
    inventory = ssh_hosts.inventory(tmp_path / "hosts.toml", user="tester", extra="sudo = true")
    run_dir, test = run_on_hosts(inventory, tmp_path / "results", "--time-limit", "20", "--nemesis",
                                 "kill,partition,pause,clock,power-loss", "--power-loss-targets", "all",
                                 "--flush", "sync", "--nemesis-interval", "2", "--rate", "200",
                                 "--seed", "12")
    assert json.loads((run_dir / "results.json").read_text())["valid"] is True
    assert test["nodes"] == 3 and test["hosts"] == str(inventory)
    assert test["inventory"]["hosts"]["n2"] == {
        "address": ssh_hosts.hosts["n2"].control, "peer_address": ssh_hosts.hosts["n2"].peer,
        "user": "tester", "port": 22, "sudo": True, "data_dir": "/var/lib/dledger-chaos-test",
        "code_dir": "/opt/dledger"}
    assert f"--hosts {inventory}" in test["reproduce"]
    done = nemesis_completions(run_dir)
    assert test["nemesis_errors"] == [] and not [op for op in done if "error" in op]
    assert {"kill", "start", "start-partition", "stop-partition", "pause", "resume", "bump-clock",
            "power-off", "power-on"} <= {op["f"] for op in done}
    offs = [op["value"] for op in done if op["f"] == "power-off"]
    for value in offs:  # each host's file system daemon said what it held when the power went
        assert sorted(value["dropped"]) == sorted(value["targets"]) == ["n1", "n2", "n3"]
        assert all(isinstance(dropped, dict) for dropped in value["dropped"].values()), value
    # it bit: unsynced pages dropped, or a request to the dead disk still waiting when the power went
    # (the process died in it; what it had written since its last fsync may still have been the kernel's)
    bit = [d["pages"] + d["held"] for value in offs for d in value["dropped"].values()]
    assert sum(bit) > 0, offs
    faults = [f for f in test["fault_log"]["faults"] if f["family"] == "power-loss"]
    assert [f["detail"]["dropped"] for f in faults] == [value["dropped"] for value in offs]  # in test.json
    for node in ("n1", "n2", "n3"):  # collected through sudo: the files the node, as root, wrote
        assert (run_dir / "nodes" / node / "events.jsonl").stat().st_size > 0
        assert (run_dir / "final" / f"{node}.jsonl").exists()
    # Nothing secret lands in the results folder: no key, no key file name, no ssh/ folder.
    private = ssh_hosts.keys.private_path.read_text().splitlines()[1]
    assert not (run_dir / "ssh").exists()
    for path in run_dir.rglob("*"):
        if path.is_file() and path.suffix in (".json", ".jsonl", ".log", ".html"):
            text = path.read_text(errors="replace")
            assert private not in text and str(ssh_hosts.keys.private_path) not in text, path
    ssh_hosts.assert_clean(inventory)  # no process, rule, lazyfs mount (/proc/mounts) or code left


def test_sudo_that_asks_for_a_password_is_refused_up_front_saying_what_to_do(ssh_hosts: SshHosts,
                                                                            tmp_path: Path) -> None:
    inventory = ssh_hosts.inventory(tmp_path / "hosts.toml", user="nosudo", extra="sudo = true")
    done = harness("run", "--hosts", str(inventory), "--nemesis", "kill", "--results-dir",
                   str(tmp_path / "r"))
    assert done.returncode == 254, done.stderr
    problems = [line.strip() for line in done.stderr.splitlines() if line.startswith("  ")]
    assert [p.split(":")[0] for p in problems] == ["n1", "n2", "n3"]
    assert problems[0] == (
        "n1: sudo = true, but `sudo -n` fails for nosudo (sudo: a password is required): install sudo "
        "(Debian package sudo) and give nosudo passwordless sudo, e.g. the line `nosudo ALL=(ALL:ALL) "
        "NOPASSWD: ALL` in a file of /etc/sudoers.d with mode 0440; or log in as root")
    assert not (tmp_path / "r").exists()


def test_a_host_lacking_a_tool_or_fuse_is_refused_up_front_naming_it(ssh_hosts: SshHosts,
                                                                     tmp_path: Path) -> None:
    inventory = ssh_hosts.inventory(tmp_path / "hosts.toml", ("n1", "n2", "bare"))
    done = harness("run", "--hosts", str(inventory), "--nemesis", "partition,packet,power-loss",
                   "--results-dir", str(tmp_path / "results"))
    assert done.returncode == 254, done.stderr
    problems = [line.strip() for line in done.stderr.splitlines() if line.startswith("  ")]
    assert "bare: partition, packet need iptables, which is not installed (Debian package iptables)" \
        in problems
    assert "bare: packet needs tc, which is not installed (Debian package iproute2)" in problems
    assert "bare: power-loss needs FUSE, but it lacks /dev/fuse" in problems
    # n1 and n2 have every tool and FUSE (packet faults may still be refused there: they shape
    # eth0, and the peers network may be eth1)
    assert not [p for p in problems if p.startswith(("n1:", "n2:")) and "eth0" not in p]
    assert not (tmp_path / "results").exists()
    check_hosts(load_inventory(inventory), ["kill", "pause"])  # faults that need neither: no refusal
    ssh_hosts.assert_clean(inventory)  # probing copied nothing and left nothing


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
    ssh_hosts.assert_clean(inventory_path)
