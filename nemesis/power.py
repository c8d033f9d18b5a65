"""Power loss (Jepsen's LazyFS, our own): the targets lose every write they had not fsynced.

The nodes' data dir must be the power-loss file system (`nemesis/agents/lazyfs.py`; the
Db's `fuse` option), whose daemon holds every unsynced write in memory. Start cuts the
power of the chosen targets at one instant: it tells each target's file system to die at
a moment a little ahead (`lazyfs.py cut --at`: from then on nothing more becomes durable,
fsyncs fail), waits for that moment, then, one thread per node, SIGKILLs the node
process and `lazyfs.py crash` kills the daemon with what it held, unmounts and mounts the
file system afresh over what was fsynced; the node stays down. (Killing alone is only as
simultaneous as the kill commands: under load they land tens or hundreds of milliseconds
apart, and the last node killed has fsynced, and so keeps, what the others lost.) Stop
starts the targets' nodes again: they recover from what their last fsyncs left. The
history value says what each target lost (`dropped`: files with unsynced changes, their
4 KiB pages and bytes; null when the daemon could not tell) and how late after the shared
moment each cut was set (`late_ms`, 0 when on time). The nodes' `start` must mount the
file system before the node runs (the Db does with `fuse`); healing relies on it.
"""

from __future__ import annotations

import json
import random
import shlex
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from nemesis.base import Family, Nodes
from nemesis.targets import pick, targets_option

LAZYFS = "/opt/dledger/agents/lazyfs.py"  # nemesis/agents/lazyfs.py in the node image
CUT_LEAD_S = 0.5  # how far ahead the shared moment is set: more than a command takes under load


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

    def _cut_at(self, node: str, at: float) -> float:
        """Tell `node`'s file system to die at epoch `at`; how late (ms) that was set."""
        return json.loads(self.nodes.exec(node, self._lazyfs(f"cut --at {at!r}"), timeout=60))["late_ms"]

    def _cut(self, node: str) -> dict[str, int] | None:
        self.nodes.kill(node)
        return json.loads(self.nodes.exec(node, self._lazyfs("crash"), timeout=60))["dropped"]

    def start(self, rng: random.Random) -> dict[str, Any]:
        spec, victims = pick(self.nodes, self.targets, rng)
        at = time.time() + CUT_LEAD_S
        with ThreadPoolExecutor(len(victims)) as pool:
            late = dict(zip(victims, pool.map(lambda node: self._cut_at(node, at), victims), strict=True))
            time.sleep(max(0.0, at - time.time()))  # the moment the disks die: then the processes
            dropped = dict(zip(victims, pool.map(self._cut, victims), strict=True))
        self.off += [node for node in victims if node not in self.off]
        return {"target": spec, "targets": victims, "dropped": dropped, "late_ms": late}

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
