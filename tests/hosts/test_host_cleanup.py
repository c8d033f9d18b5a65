"""The hosts' clean-up and leftover scripts come from the families' `host_cleanup` (no containers)."""

from __future__ import annotations

import re

from harness.hosts.db import cleanup_script, host_cleanups, leftovers_script
from harness.hosts.inventory import HostSpec
from nemesis import catalogue
from tests.nemesis.recording import RecordingNodes

SPEC = HostSpec(name="n1", address="192.0.2.11", peer_address="10.0.0.11", data_dir="/var/lib/d")
PATH = re.compile(r"/[^\s;|&'\"]*")


def beyond_the_node(command: str, data_dir: str) -> bool:
    """Whether a command works on more of the machine than files in the node's data dir."""
    paths = [p for p in PATH.findall(command) if p != "/dev/null"]
    return not paths or any(not p.startswith(f"{data_dir}/") for p in paths)


def heal_reaches_beyond_the_node(name: str) -> bool:
    """Whether the family's heal runs a command on a node beyond the node's own files."""
    nodes = RecordingNodes()
    catalogue.build([name], nodes)[name].heal()
    return any(beyond_the_node(command, nodes.data_dir) for _, command in nodes.commands)


def test_every_family_whose_heal_changes_a_host_declares_its_cleanup() -> None:
    changing = {name for name in catalogue.FAMILIES if heal_reaches_beyond_the_node(name)}
    assert {"partition", "clock", "packet", "power-loss", "stale-leader"} <= changing
    assert "churn" not in changing and "kill" not in changing  # only the node's files, or only processes
    assert [name for name in changing if not catalogue.FAMILIES[name].host_cleanup] == []


def test_the_hosts_scripts_hold_each_declared_snippet_exactly_once() -> None:
    declared = {c for family in catalogue.FAMILIES.values() for c in family.host_cleanup}
    assert set(host_cleanups()) == declared and len(host_cleanups()) == len(declared)
    scripts = [cleanup_script(SPEC, "20260101T000000-abcdef", keep_code=False),
               cleanup_script(SPEC, None, keep_code=True)]
    for cleanup in host_cleanups():
        assert "\n" not in cleanup.clean
        assert [script.count(cleanup.clean) for script in scripts] == [1, 1]
        assert leftovers_script(SPEC).count(cleanup.listing) == 1
    for script in scripts:  # the root ones inside the root check, after the others
        root_check = script.index('if [ "$(id -u)" = 0 ]')
        assert all((script.index(c.clean) > root_check) == c.root for c in host_cleanups())
