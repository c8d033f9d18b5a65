"""The seam between a run and its cluster: `RunDb`, whatever the nodes run on.

Two Dbs implement it: `harness.containers.db.Db` (one container a node, made by the run) and
`harness.hosts.db.HostsDb` (the machines of an inventory, `--hosts hosts.toml`, which the
run did not make). Both drive their nodes over SSH (`harness.ssh.nodes.SshNodes`); the
nemesis sees either through its `nemesis.base.Nodes` protocol, which `RunDb` extends with
the lifecycle a run needs. `open_db` picks one; `check_hosts` refuses, before any results
folder exists, a run the hosts cannot carry.
"""

from __future__ import annotations

from pathlib import Path
from typing import Protocol

from harness.hosts.capabilities import needs_of
from harness.hosts.inventory import Inventory
from harness.system import System
from nemesis import catalogue
from nemesis.base import Nodes
from nodes.peers import Address


class RunDb(Nodes, Protocol):
    """What a run needs from its cluster, beyond what the nemesis needs (`Nodes`)."""

    run_id: str

    def setup(self) -> None:
        """Make (or check and prepare) the nodes' machines and connect to each; no node runs yet."""
        ...

    def teardown(self) -> None:
        """Leave nothing of the run on the machines; safe at any point, and twice."""
        ...

    def wait_for_leader(self, timeout: float = 30.0) -> str:
        """Wait until some node leads; its name."""
        ...

    def client_peers(self) -> dict[str, Address]:
        """Where the harness reaches each node's client port."""
        ...

    def collect(self, results_dir: Path) -> dict[str, list[Path]]:
        """Copy each node's logs and store files under results_dir/nodes/<node>/."""
        ...

    def left_running(self) -> str:
        """How to reach the nodes left running (`--leave-running`), and how to remove them."""
        ...


def open_db(inventory: Inventory | None, nodes: int, run_dir: Path, faults: list[str], system: System,
            keep: bool = False) -> RunDb:
    """The Db for a run of `system`: containers when `inventory` is None, else its hosts (not set up
    yet; they run our DLedger node only, which the flags check)."""
    fuse = "fuse" in catalogue.needs(faults)
    if inventory is None:
        return system.containers(nodes, run_dir / "ssh", fuse)
    from harness.hosts.db import HostsDb
    from systems.dledger import Dledger

    assert isinstance(system, Dledger), "--hosts runs our DLedger node only (harness.chaos.flags)"
    return HostsDb(inventory, system=system, fuse=fuse, keep=keep, needs=needs_of(faults))


def check_hosts(inventory: Inventory, faults: list[str]) -> None:
    """Connect to every host and probe it: SshRefused when a host refuses the login, HostsRefused
    when one lacks what the faults need (both mean exit 254), HarnessError when one cannot be
    reached (255)."""
    from harness.hosts.db import HostsDb

    db = HostsDb(inventory, needs=needs_of(faults, fuse="fuse" in catalogue.needs(faults)))
    try:
        db.check()
    finally:
        db.teardown()
