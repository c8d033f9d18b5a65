"""Power loss (Jepsen's LazyFS, our own): the targets lose every write they had not fsynced.

The nodes' data dir must be the power-loss file system (`nemesis/agents/lazyfs.py`; the
Db's `fuse` option), whose daemon holds every unsynced write in memory. Start cuts the
power of the chosen targets at once, one thread per node: SIGKILL the node process, then
`lazyfs.py crash` kills the daemon with what it held, unmounts and mounts the file system
afresh over what was fsynced; the node stays down. Stop starts the targets' nodes again:
they recover from what their last fsyncs left. The history value says what each target
lost (`dropped`: files with unsynced changes, their 4 KiB pages and bytes; null when the
daemon could not tell). The nodes' `start` must mount the file system before the node
runs (the Db does with `fuse`); healing relies on it.
"""

from __future__ import annotations

import json
import random
import shlex
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from nemesis.base import Family, Nodes
from nemesis.targets import pick, targets_option

LAZYFS = "/opt/dledger/agents/lazyfs.py"  # nemesis/agents/lazyfs.py in the node image


def mount_command(backing: str, mountpoint: str) -> str:
    """The shell command that mounts the file system over `backing` at `mountpoint` unless it is."""
    return f"python3 {LAZYFS} mount {shlex.quote(backing)} {shlex.quote(mountpoint)}"


class PowerFault:
    """Cuts the targets' power and restores it; see the module doc."""

    def __init__(self, nodes: Nodes, targets: tuple[str, ...]) -> None:
        self.nodes = nodes
        self.targets = targets
        self.off: list[str] = []

    def _lazyfs(self, command: str) -> str:
        return f"python3 {LAZYFS} {command} {shlex.quote(self.nodes.data_dir)}"

    def _cut(self, node: str) -> dict[str, int] | None:
        self.nodes.kill(node)
        return json.loads(self.nodes.exec(node, self._lazyfs("crash"), timeout=60))["dropped"]

    def start(self, rng: random.Random) -> dict[str, Any]:
        spec, victims = pick(self.nodes, self.targets, rng)
        with ThreadPoolExecutor(len(victims)) as pool:
            dropped = dict(zip(victims, pool.map(self._cut, victims), strict=True))
        self.off += [node for node in victims if node not in self.off]
        return {"target": spec, "targets": victims, "dropped": dropped}

    def stop(self) -> dict[str, Any]:
        restored = sorted(self.off)
        for node in restored:
            self.nodes.start(node)
        self.off.clear()
        return {"targets": restored}

    def _fs_problem(self, node: str) -> str:
        return self.nodes.exec(node, self._lazyfs("status") + " || true").strip()

    def heal(self) -> None:
        for node in self.nodes.names:
            if self._fs_problem(node):
                self.nodes.kill(node)  # a node on a dead mount cannot go on: start it on a fresh one
            self.nodes.start(node)
        self.off.clear()

    def leftovers(self) -> list[str]:
        left = []
        for node in self.nodes.names:
            if problem := self._fs_problem(node):
                left.append(f"{node}: {problem}")
            if not self.nodes.running(node):
                left.append(f"{node}: the node process is not running")
        return left


POWER_LOSS = Family(
    name="power-loss", label="power loss", start_f="power-off", stop_f="power-on",
    make=lambda nodes, o: PowerFault(nodes, o["power_loss_targets"]),
    help="cut the targets' power: SIGKILL the node and drop every write it had not fsynced, then "
         "start it again",
    options=(targets_option("power-loss", "all,majority,minority,one"),), weight=0.5,
    needs=frozenset({"fuse", "root", "agents"}))
