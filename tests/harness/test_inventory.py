"""The `--hosts` inventory and the host capability checks, as pure logic (no Docker, no SSH).

Every inventory mistake names the file, the host and the field, and exits 254; the checks
say, one sentence each, what a host lacks for the run's faults. The probe and clean-up
scripts are run or parsed by the local shell, so a syntax slip shows here.
"""

from __future__ import annotations

import argparse
import os
import subprocess
from dataclasses import replace
from pathlib import Path

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from harness.chaos import flags
from harness.hosts.capabilities import HostFacts, needs_of, parse_facts, probe_script, problems
from harness.hosts.db import cleanup_script, leftovers_script, wrapper
from harness.hosts.inventory import HostSpec, InventoryError, load_inventory
from harness.ssh.keys import create_key_pair
from nemesis import catalogue
from nodes.cliparse import run_subcommands

GOOD = """
[defaults]
key = "keys/id_ed25519"
data_dir = "/var/lib/dledger-chaos"

[hosts.n1]
address = "192.0.2.11"
peer_address = "10.0.0.11"

[hosts.n2]
address = "db2.example.net"
user = "alice"
port = 2222
sudo = true

[hosts.n3]
address = "192.0.2.13"
connect_timeout = 3
"""


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    create_key_pair(tmp_path / "keys", "test")
    return tmp_path


def write(folder: Path, text: str, name: str = "hosts.toml") -> Path:
    path = folder / name
    path.write_text(text)
    return path


def test_a_good_inventory_with_defaults_and_relative_key(folder: Path) -> None:
    inventory = load_inventory(write(folder, GOOD))
    assert inventory.names == ["n1", "n2", "n3"]
    n1, n2, n3 = inventory.hosts
    assert (n1.user, n1.port, n1.key, n1.sudo) == ("root", 22, folder / "keys" / "id_ed25519", False)
    assert (n1.peer, n3.peer) == ("10.0.0.11", "192.0.2.13")  # the peer address defaults to the address
    assert (n2.user, n2.port, n2.sudo, n2.login) == ("alice", 2222, True, "alice@db2.example.net:2222")
    assert n3.connect_timeout == 3.0 and n3.code_dir == "/opt/dledger"
    assert n1.load_key() is not None
    record = inventory.record()
    assert record["hosts"]["n2"] == {"address": "db2.example.net", "peer_address": None, "user": "alice",
                                     "port": 2222, "sudo": True, "data_dir": "/var/lib/dledger-chaos",
                                     "code_dir": "/opt/dledger"}
    assert "key" not in str(record) and "keys/" not in str(record)  # what test.json keeps names no key


def test_agent_instead_of_a_key_and_known_hosts(folder: Path) -> None:
    (folder / "known").write_text("")
    text = GOOD.replace('key = "keys/id_ed25519"', 'agent = true\nknown_hosts = "known"')
    host = load_inventory(write(folder, text)).hosts[0]
    assert (host.key, host.agent, host.known_hosts) == (None, True, folder / "known")
    assert host.load_key() is None


def encrypted_key(folder: Path) -> Path:
    blob = Ed25519PrivateKey.generate().private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.OpenSSH,
        serialization.BestAvailableEncryption(b"secret"))
    path = folder / "locked"
    path.write_bytes(blob)
    return path


DATA = 'data_dir = "/var/lib/dledger-chaos"'
N3 = 'address = "192.0.2.13"'
MISTAKES = [
    # (a text of GOOD, what it becomes ("" + text: appended), words the error must hold)
    ("", "[extra]", ["unknown table or key extra"]),
    ("[hosts.n3]", '[hosts.n3]\nadress = "x"', ["host 'n3'", "unknown field 'adress'"]),
    (N3, "", ["host 'n3'", "field 'address' is missing"]),
    (DATA, "", ["host 'n1'", "field 'data_dir' is missing"]),
    ("port = 2222", "port = 70000", ["host 'n2'", "field 'port'", "1-65535"]),
    ("port = 2222", "port = true", ["host 'n2'", "field 'port'"]),
    ("sudo = true", 'sudo = "yes"', ["host 'n2'", "field 'sudo'", "true or false"]),
    ("connect_timeout = 3", "connect_timeout = 0", ["host 'n3'", "field 'connect_timeout'"]),
    ("[hosts.n1]", "[hosts.n1]\nagent = true", ["host 'n1'", "'key' and 'agent'", "not both"]),
    ('key = "keys/id_ed25519"', "", ["host 'n1'", "field 'key' is missing", "agent = true"]),
    ("keys/id_ed25519", "keys/nope", ["host 'n1'", "field 'key'", "no such file"]),
    ("keys/id_ed25519", "keys/id_ed25519.pub", ["field 'key'", "not a private key"]),
    ("keys/id_ed25519", "locked", ["field 'key'", "passphrase", "agent = true"]),
    ("/var/lib/dledger-chaos", "var/lib", ["host 'n1'", "field 'data_dir'", "absolute"]),
    ('"/var/lib/dledger-chaos"', '"/"', ["field 'data_dir'", "below /"]),
    ("/var/lib/dledger-chaos", "/a/../b", ["field 'data_dir'"]),
    ("/var/lib/dledger-chaos", "/var/lib/x y", ["field 'data_dir'", "letters"]),
    ("/var/lib/dledger-chaos", "/opt/dledger/data", ["'data_dir' and 'code_dir'"]),
    ("[hosts.n3]", '[hosts.n3]\ndata_dir = "/srv/d"', ["field 'data_dir' differs", "n3: /srv/d"]),
    (N3, 'address = "192.0.2.11"', ["host 'n3'", "same SSH host as 'n1'"]),
    (N3, 'address = "10.0.0.11"', ["host 'n3'", "field 'peer_address'", "'n1'"]),
    (N3, 'address = "not a host!"', ["host 'n3'", "field 'address'"]),
    ("[hosts.n3]", '[hosts."n 3"]', ["host 'n 3'", "node name"]),
    ("[defaults]", '[defaults]\naddress = "x"', ["[defaults]", "field 'address'"]),
    ("[hosts.n1]", "[hosts.n1]\nuser = 7", ["host 'n1'", "field 'user'", "string"]),
    ("[hosts.n1]", "[other]", ["unknown table or key other"]),
    ("", "[[oops", ["not valid TOML"]),
]


@pytest.mark.parametrize(("old", "new", "words"), MISTAKES, ids=[" ".join(w) for _, _, w in MISTAKES])
def test_each_mistake_names_the_file_the_host_and_the_field(folder: Path, old: str, new: str,
                                                            words: list[str]) -> None:
    encrypted_key(folder)
    path = write(folder, GOOD.replace(old, new) if old else GOOD + new)
    with pytest.raises(InventoryError) as raised:
        load_inventory(path)
    message = str(raised.value)
    assert message.startswith(f"{path}: ")
    for word in words:
        assert word in message


def test_an_inventory_without_hosts_is_refused(folder: Path) -> None:
    path = write(folder, GOOD.split("[hosts.n1]")[0])
    with pytest.raises(InventoryError, match="no hosts: add a"):
        load_inventory(path)


def test_a_missing_file_is_named(tmp_path: Path) -> None:
    with pytest.raises(InventoryError, match=f"{tmp_path / 'nope.toml'}: cannot read the inventory"):
        load_inventory(tmp_path / "nope.toml")


def harness_run(tmp_path: Path, capsys: pytest.CaptureFixture[str], *flags: str) -> str:
    from harness.__main__ import COMMANDS

    with pytest.raises(SystemExit) as exited:
        run_subcommands("python -m harness", "", COMMANDS, argv=["run", "--results-dir", str(tmp_path / "r"),
                                                                 *flags])
    assert exited.value.code == 254
    assert not (tmp_path / "r").exists()
    return capsys.readouterr().err.splitlines()[-1]


def test_run_flags_with_hosts_exit_254_naming_the_problem(folder: Path,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    good = write(folder, GOOD)
    two = write(folder, GOOD.split("[hosts.n3]")[0], "two.toml")
    assert harness_run(folder, capsys, "--hosts", str(good), "--nodes", "4").endswith(
        f"--nodes 4: {good} names only 3 hosts")
    assert harness_run(folder, capsys, "--hosts", str(two)).endswith(
        "names 2 hosts; a run needs 3 to 9 (give --nodes to run on the first ones)")
    assert "error: --keep: only with --hosts" in harness_run(folder, capsys, "--keep")
    missing = harness_run(folder, capsys, "--hosts", str(folder / "none.toml"))
    assert missing.endswith("cannot read the inventory: No such file or directory")


def test_nodes_with_hosts_runs_on_the_first_ones_and_without_on_every_host(folder: Path) -> None:
    four = write(folder, GOOD + '[hosts.n4]\naddress = "192.0.2.14"\n')
    parser = argparse.ArgumentParser()
    flags.add_arguments(parser)
    every = parser.parse_args(["--hosts", str(four)])
    flags.validate(every)
    assert (every.nodes, every.inventory.names) == (4, ["n1", "n2", "n3", "n4"])
    first = parser.parse_args(["--hosts", str(four), "--nodes", "3"])
    flags.validate(first)
    assert (first.nodes, first.inventory.names, first.workers) == (3, ["n1", "n2", "n3"], 6)
    assert list(first.inventory.record()["hosts"]) == ["n1", "n2", "n3"]  # what test.json keeps
    assert "--nodes 3 " in flags.reproduce_command(first, first.faults, 1, "t")
    containers = parser.parse_args([])
    flags.validate(containers)
    assert (containers.nodes, containers.inventory) == (flags.NODES, None)


# -- capabilities ------------------------------------------------------------------------------

SPEC = HostSpec(name="n1", address="192.0.2.11", peer_address="10.0.0.11", data_dir="/var/lib/d", agent=True)
READY = HostFacts(uid=0, python=(3, 11, 2), peer_ip="10.0.0.11",
                  tools=frozenset({"setsid", "ps", "ss", "tar", "iptables", "tc", "ip", "fusermount3"}),
                  iptables_works=True, pyfuse3=True, dev_fuse=True,
                  addresses={"lo": ("127.0.0.1",), "eth0": ("10.0.0.11",)}, listening=frozenset({22}),
                  code_writable=True, data_writable=True)
EVERYTHING = needs_of(list(catalogue.FAMILIES), fuse=True)


def test_a_ready_host_can_run_every_family() -> None:
    assert problems(SPEC, READY, EVERYTHING) == []
    assert set(EVERYTHING) == {"root", "iptables", "tc", "eth0", "agents", "fuse"}
    assert EVERYTHING["iptables"] == ["partition", "packet", "part-kill", "stale-leader", "swizzle-clog",
                                      "lagging-majority", "isolate-lose"]


def test_the_probe_output_becomes_facts() -> None:
    facts = parse_facts("\n".join([
        "uid=0", "python=3.11.2", "peer_ip=10.0.0.11", "tool=setsid", "tool=ps", "tool=ss", "tool=tar",
        "tool=iptables", "tool=tc", "tool=ip", "tool=fusermount3", "iptables_works=1", "pyfuse3=1",
        "dev_fuse=1",
        "addr=lo 127.0.0.1", "addr=eth0 10.0.0.11", "listen=22", "listen=*", "code_state=absent",
        "code_writable=1", "data_state=absent", "data_writable=1", "noise without an equals sign"]))
    assert facts == READY


@pytest.mark.parametrize(("facts", "needs", "expected"), [
    (replace(READY, python=None), [], "python3 is not installed"),
    (replace(READY, python=(3, 9, 2)), [], "python3 is 3.9.2; the node needs 3.11 or newer"),
    (replace(READY, tools=READY.tools - {"setsid", "ss"}), [], "missing setsid (util-linux), ss (iproute2)"),
    (replace(READY, peer_ip=None), [], "cannot resolve its peer address 10.0.0.11"),
    (replace(READY, code_state="foreign"), [], "code_dir /opt/dledger exists and was not made by the"),
    (replace(READY, code_writable=False), [], "cannot create code_dir /opt/dledger as root"),
    (replace(READY, data_state="foreign"), [], "data_dir /var/lib/d is not empty and was not made by"),
    (replace(READY, data_state="ours"), [], "holds the files of another run"),
    (replace(READY, listening=frozenset({20911})), [], "port 20911, the node's, is in use"),
    (replace(READY, uid=1000), ["partition"], "partition needs root privileges: user root is not root"),
    (replace(READY, tools=READY.tools - {"iptables"}), ["partition", "part-kill"],
     "partition, part-kill need iptables, which is not installed (Debian package iptables)"),
    (replace(READY, iptables_works=False), ["partition"], "partition needs a working iptables"),
    (replace(READY, tools=READY.tools - {"tc"}), ["packet"], "packet needs tc, which is not installed"),
    (replace(READY, addresses={"ens3": ("10.0.0.11",)}), ["packet"], "an interface eth0"),
    (replace(READY, addresses={"eth0": ("192.0.2.11",), "eth1": ("10.0.0.11",)}), ["packet"],
     "packet needs the peer address on eth0 (the packet faults shape eth0), but 10.0.0.11 is on eth1"),
    (replace(READY, dev_fuse=False, pyfuse3=False), ["power-loss"],
     "power-loss needs FUSE, but it lacks /dev/fuse, python3's pyfuse3 and trio (Debian package "
     "python3-pyfuse3)"),
])
def test_each_lack_is_one_sentence_naming_the_families(facts: HostFacts, needs: list[str],
                                                       expected: str) -> None:
    found = problems(SPEC, facts, needs_of(needs))
    assert len(found) == 1, found
    assert expected in found[0]


def test_faults_that_need_nothing_run_on_a_bare_login_and_others_are_refused_with_their_reason() -> None:
    bare = replace(READY, uid=1000, tools=frozenset({"setsid", "ps", "ss", "tar"}), pyfuse3=False,
                   dev_fuse=False, addresses={})
    spec = replace(SPEC, user="alice", code_dir="/home/alice/dlc")
    assert problems(spec, bare, needs_of(["kill", "stop", "pause", "churn", "pause-kill"])) == []
    found = problems(spec, bare, needs_of(["partition", "disk"]))
    assert found == [
        "partition needs iptables, which is not installed (Debian package iptables)",
        "partition needs root privileges: user alice is not root (log in as root, or give alice passwordless "
        "sudo and set sudo = true)",
        "disk needs the nemesis's agents at /opt/dledger/agents, but code_dir is /home/alice/dlc: "
        "set code_dir = \"/opt/dledger\""]
    assert "sudo -n runs as a user that is not root" in problems(replace(spec, sudo=True), bare,
                                                               needs_of(["clock"]))[0]
    assert problems(SPEC, READY, {"warp-drive": ["future"]}) == [
        "future needs 'warp-drive', which the harness cannot check on a host"]


def test_the_probe_runs_in_a_real_shell(tmp_path: Path) -> None:
    spec = replace(SPEC, data_dir=str(tmp_path / "data"), code_dir=str(tmp_path / "code"),
                   peer_address="127.0.0.1")
    (tmp_path / "code").mkdir()
    (tmp_path / "code" / ".dledger-chaos").write_text("abc123\n")
    out = subprocess.run(["sh", "-c", wrapper(spec)(probe_script(spec))], capture_output=True, text=True,
                         timeout=60, check=True).stdout
    facts = parse_facts(out)
    assert facts.uid == os.getuid() and facts.python is not None and facts.python[:2] >= (3, 11)
    assert facts.peer_ip == "127.0.0.1" and "127.0.0.1" in facts.addresses.get("lo", ())
    assert {"ps", "tar"} <= facts.tools
    assert (facts.code_state, facts.code_marker) == ("ours", "abc123")
    assert (facts.data_state, facts.data_writable) == ("absent", True)


def test_clean_up_and_leftover_scripts_parse_and_sudo_wraps_every_command() -> None:
    for script in (cleanup_script(SPEC, "20260101T000000-abcdef", keep_code=False),
                   cleanup_script(SPEC, None, keep_code=True), leftovers_script(SPEC)):
        assert subprocess.run(["sh", "-n", "-c", script], capture_output=True, timeout=30).returncode == 0
    assert "rm -rf /opt/dledger" in cleanup_script(SPEC, None, keep_code=False)
    assert "rm -rf /opt/dledger" not in cleanup_script(SPEC, None, keep_code=True)
    plain = wrapper(SPEC)("echo \"'$PYTHONPATH'\"")
    assert plain.startswith("sh -c ")
    assert subprocess.run(plain, shell=True, capture_output=True, text=True, timeout=30).stdout == \
        "'/opt/dledger'\n"
    sudo = wrapper(replace(SPEC, sudo=True))("echo \"'$PYTHONPATH'\"")
    assert sudo == f"sudo -n -- {plain}"
