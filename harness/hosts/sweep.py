"""The nightly sweep on the machines of an inventory (`harness nightly --hosts hosts.toml`): which
cells they can run, and why not the others.

    facts = probe(inventory)              # HostsRefused when no run at all could use the hosts
    why_not(cell, inventory, facts)       # None, or why the sweep skips the cell

A cell runs on the inventory's first `cell.nodes` hosts. It is skipped when the inventory names
fewer hosts, or when one of those hosts lacks what the cell's faults need (root, iptables, FUSE
...: `harness.hosts.capabilities`); the reason names the hosts and what each lacks.
"""

from __future__ import annotations

from harness.hosts.capabilities import HostFacts, needs_of, problems
from harness.hosts.db import HostsDb
from harness.hosts.inventory import Inventory
from harness.sweeps.matrix import Cell


def probe(inventory: Inventory) -> dict[str, HostFacts]:
    """Log in to every host and probe it, touching nothing; its facts by host name.

    HostsRefused when a host cannot run any test (no python3, a data_dir in use ...), SshRefused
    when one refuses the login, HarnessError when one cannot be reached."""
    db = HostsDb(inventory)
    try:
        return db.check()
    finally:
        db.teardown()


def why_not(cell: Cell, inventory: Inventory, facts: dict[str, HostFacts]) -> str | None:
    """Why the hosts cannot run `cell`, or None when they can."""
    if cell.nodes > len(inventory.hosts):
        return f"needs {cell.nodes} nodes; {inventory.path} names {len(inventory.hosts)} hosts"
    needs = needs_of(cell.families)
    lacking = [f"{spec.name}: {problem}" for spec in inventory.hosts[:cell.nodes]
               for problem in problems(spec, facts[spec.name], needs, str(inventory.path))]
    return "; ".join(lacking) or None
