"""Power loss (Jepsen's LazyFS, our own): the targets lose every write they had not fsynced.

The nodes' data dir must be the power-loss file system (`nemesis/agents/lazyfs.py`; the
Db's `fuse` option), whose daemon holds every unsynced write in memory. Start cuts the
power of the chosen targets at one instant: it tells each target's file system to die at
a moment a little ahead (`lazyfs.py cut --at`: from then on nothing more becomes durable,
and whatever waits for the disk waits until the power loss), waits for that moment, then,
one thread per node, `lazyfs.py crash` SIGKILLs every process using the disk (the node's)
and kills the daemon with what it held, unmounts and mounts the file system afresh over
what was fsynced; the node stays down. (Killing alone is only as simultaneous as the kill
commands: under load they land tens or hundreds of milliseconds apart, and the last node
killed has fsynced, and so keeps, what the others lost; and a disk that failed the fsyncs
after the cut would let a server that ignores the failure acknowledge what is then lost.) Stop
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

from nemesis.agents.lazyfs import STATE_DIR
from nemesis.base import Family, HostCleanup, Nodes
from nemesis.process import undo_each
from nemesis.targets import pick, targets_option

LAZYFS = "/opt/dledger/agents/lazyfs.py"  # nemesis/agents/lazyfs.py in the node image
CUT_LEAD_S = 0.5  # how far ahead the shared moment is set: more than a command takes under load
_DETACH = ("import sys; sys.path.insert(0, sys.argv[1]); import lazyfs; lazyfs._detach(sys.argv[2]); "
           "[p.unlink(missing_ok=True) for p in lazyfs._state_paths(sys.argv[2]).values()]")
# The file system over `$data_dir/data` (a host's node data dir), its daemon and state.
LAZYFS_CLEANUP = HostCleanup(
    clean=f'if [ -d {STATE_DIR} ] && [ -f "$code_dir/agents/lazyfs.py" ]; then '
          'grep -qs " $data_dir/data fuse" /proc/mounts && echo "unmounted the power-loss file system"; '
          f'python3 -c {shlex.quote(_DETACH)} "$code_dir/agents" "$data_dir/data"; '
          f"rmdir {STATE_DIR} 2>/dev/null; fi",
    listing=f"""pgrep -af '[a]gents/lazyfs.py' | sed 's/^/agent process: /'
grep -s lazyfs /proc/mounts | sed 's/^/mount: /'
ls -d {STATE_DIR}/* 2>/dev/null | sed 's/^/file: /'""")


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
        """The power loss of `node` (its disk already cut): `crash` kills whatever uses the
        disk, the node process among them, then drops what was not fsynced."""
        dropped = json.loads(self.nodes.exec(node, self._lazyfs("crash"), timeout=60))["dropped"]
        self.nodes.kill(node)  # gone already, unless it ran off the disk
        return dropped

    def start(self, rng: random.Random) -> dict[str, Any]:
        spec, victims = pick(self.nodes, self.targets, rng)
        return {"target": spec, **self.cut(victims)}

    def cut(self, victims: list[str]) -> dict[str, Any]:
        """Cut the power of `victims` at one instant; their nodes stay down until `restore`."""
        at = time.time() + CUT_LEAD_S
        with ThreadPoolExecutor(len(victims)) as pool:
            late = dict(zip(victims, pool.map(lambda node: self._cut_at(node, at), victims), strict=True))
            time.sleep(max(0.0, at - time.time()))  # the moment the disks die: then the processes
            dropped = dict(zip(victims, pool.map(self._cut, victims), strict=True))
        self.off += [node for node in victims if node not in self.off]
        return {"targets": victims, "dropped": dropped, "late_ms": late}

    def restore(self, nodes: list[str]) -> dict[str, Any]:
        """Power `nodes` (of those cut) on again: each recovers from what its fsyncs left."""
        back = [node for node in nodes if node in self.off]
        self.off[:] = [node for node in self.off if node not in back]
        return undo_each(back, self.nodes.start)

    def stop(self) -> dict[str, Any]:
        return self.restore(list(self.off))

    def _fs_problem(self, node: str) -> str:
        return self.nodes.exec(node, self._lazyfs("status") + " || true").strip()

    def heal(self) -> None:
        for node in self.nodes.names:
            if self._fs_problem(node):  # a cut disk or a dead mount: finish the power loss
                self._cut(node)
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
    needs=frozenset({"fuse", "root", "agents"}), host_cleanup=(LAZYFS_CLEANUP,))
