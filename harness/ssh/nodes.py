"""What every Db does to its nodes over SSH, wherever they run: containers (`harness.containers.db.Db`) or
machines of an inventory (`harness.hosts.db.HostsDb`).

The node is the system's process (`harness.system.System.command`: `python3 -m nodes serve`
for our DLedger node), a detached process tracked by a pid file
(`harness.ssh.control.RemoteProcess`): `start` (every node when None; a running node is left
alone; waits until each listens on the system's client port), `kill` (SIGKILL), `stop`
(SIGTERM, waits for the exit), `pause`/`resume` (SIGSTOP/SIGCONT), `running`, `state`;
`leader`, `wait_for_leader` and `transfer` ask the system; `collect` copies each node's data
and log dirs into the results folder. With `fuse` (the power-loss fault) `start` first mounts
the power-loss file system at the data dir over `store_dir`, and the node's logs go to
`fuse_log_dir`, off that mount.

A subclass says where things are: the same paths on every node (`pidfile`, `data_dir`: the
node's data dir, `store_dir` and `fuse_log_dir`: with `fuse`, the folder the file system keeps
its files in and the node's log dir), and `names`, `ssh(name)`, `peers_arg()`,
`client_peers()` and any `listen_args(name)`.
"""

from __future__ import annotations

import contextlib
import json
import re
import shlex
from abc import ABC, abstractmethod
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Any

from harness.errors import HarnessError, NodeExitedAtStart
from harness.ssh.control import RemoteProcess, Ssh
from harness.wait import wait_for
from nemesis.power import mount_command
from nodes.events import EVENTS_FILE, NODE_LOG
from nodes.peers import Address

if TYPE_CHECKING:
    from harness.system import System

STDOUT_LOG = "stdout.log"  # in the log dir
LOG_FILES = (NODE_LOG, EVENTS_FILE, STDOUT_LOG)  # what the node writes to its log dir


class SshNodes(ABC):
    """The node lifecycle over SSH; see the module doc."""

    def __init__(self, system: System, fuse: bool, *, pidfile: str, data_dir: str, store_dir: str,
                 fuse_log_dir: str) -> None:
        self.system = system
        self.fuse = fuse
        self.pidfile = pidfile
        self.data_dir = data_dir
        self.store_dir = store_dir
        self.fuse_log_dir = fuse_log_dir

    # -- where things are (the subclass) ---------------------------------------------------

    @property
    @abstractmethod
    def names(self) -> list[str]:
        ...

    @abstractmethod
    def ssh(self, name: str) -> Ssh:
        ...

    @abstractmethod
    def peers_arg(self) -> str:
        """The `--peers` value the nodes run with."""

    @abstractmethod
    def address(self, name: str) -> str:
        """The node's address on the network its peers reach it on."""

    @abstractmethod
    def network_peers(self) -> dict[str, Address]:
        """Each node's client address as the harness reaches it for the workload."""

    @abstractmethod
    def client_peers(self) -> dict[str, Address]:
        """Where the harness reaches each node's client port."""

    def listen_args(self, name: str) -> list[str]:
        """Extra `serve` arguments on where the node listens (none: its peer address)."""
        return []

    # -- the node process ------------------------------------------------------------------

    @property
    def log_dir(self) -> str:
        """Where the node writes node.log, events.jsonl and stdout.log: its data dir, or with `fuse`
        a folder beside the file system's store."""
        return self.fuse_log_dir if self.fuse else self.data_dir

    def exec(self, name: str, command: str, timeout: float = 10.0) -> str:
        """Run `command` on the node; its stdout; CommandFailed if it exits non-zero."""
        return self.ssh(name).check(command, timeout)

    def process(self, name: str) -> RemoteProcess:
        """The node's DLedger process."""
        return RemoteProcess(self.ssh(name), self.pidfile, f"{self.log_dir}/{STDOUT_LOG}")

    def start(self, name: str | None = None, wait: float = 20.0) -> None:
        """Start the node (every node when None) unless it runs; wait until each listens on its port
        (`wait` 0: return once the processes are started)."""
        targets = [name] if name else self.names
        for target in targets:
            if not self.process(target).running():
                if self.fuse:
                    self.mount(target)
                self.process(target).start(self.system.command(self, target))
        for target in targets if wait > 0 else ():
            self._wait_listening(target, wait)

    def _wait_listening(self, name: str, wait: float) -> None:
        stdout_log = self.process(name).logfile

        def listening() -> bool:
            if not self.process(name).running():
                said = self.ssh(name).exec(f"tail -n 200 {stdout_log}").stdout
                raise NodeExitedAtStart(name, last_words(said), stdout_log)
            return bool(self.ssh(name).exec(f"ss -Hltn 'sport = :{port}'").stdout.strip())

        port = self.system.client_port
        wait_for(listening, wait, f"{name}: the node does not listen on port {port} after {wait} s; "
                                  f"see {stdout_log} on it")

    def kill(self, name: str) -> None:
        """SIGKILL the node process and wait until it is gone."""
        if self.process(name).signal("KILL"):
            self.process(name).wait_exit()

    def stop(self, name: str, wait: float = 10.0) -> None:
        """SIGTERM the node process (graceful: flush and close) and wait until it exits."""
        process = self.process(name)
        if process.signal("CONT") and process.signal("TERM"):
            process.wait_exit(wait)

    def wipe(self, name: str) -> None:
        """Delete everything the stopped node keeps in its data dir (store, term and vote,
        checkpoint) but its own logs: a machine or disk lost for good."""
        if self.running(name):
            raise HarnessError(f"{name}: wipe needs the node stopped; it runs")
        keep = " ".join(f"! -name {shlex.quote(f)}" for f in LOG_FILES)
        data_dir = shlex.quote(self.data_dir)
        self.exec(name, f"find {data_dir} -mindepth 1 -maxdepth 1 {keep} -exec rm -rf {{}} +", timeout=60)

    def pause(self, name: str) -> None:
        """SIGSTOP the node process."""
        self.process(name).signal("STOP")

    def resume(self, name: str) -> None:
        """SIGCONT the node process."""
        self.process(name).signal("CONT")

    def running(self, name: str) -> bool:
        return self.process(name).running()

    def state(self, name: str) -> str | None:
        """The node process's `ps` state letter (`T` while paused), None when it is gone."""
        return self.process(name).state()

    def mount(self, name: str) -> None:
        """With `fuse`: mount the power-loss file system at the data dir, unless it serves there."""
        self.exec(name, f"mkdir -p {shlex.quote(self.fuse_log_dir)} && "
                        f"{mount_command(self.store_dir, self.data_dir)}", timeout=60)

    # -- the group -------------------------------------------------------------------------

    def leader(self, timeout: float = 1.0) -> str | None:
        """The node that leads now, as the system says, or None."""
        return self.system.leader(self, timeout)

    def transfer(self, to: str, timeout: float) -> dict[str, Any]:
        """Move leadership to `to` (the system's way); the cluster's answer as history fields."""
        return self.system.transfer(self, to, timeout)

    def wait_for_leader(self, timeout: float = 30.0) -> str:
        """Wait until some node leads; its name. HarnessError after `timeout` seconds."""
        failure = f"no leader elected within {timeout} s; see node.log of each node"
        return wait_for(self.leader, timeout, failure) or ""

    def collect(self, results_dir: Path) -> dict[str, list[Path]]:
        """Copy each node's data dir and log dir (node.log, events.jsonl, store files) to
        results_dir/nodes/<node>/, from every node at once."""

        def one(name: str) -> list[Path]:
            local = results_dir / "nodes" / name
            return [path for folder in dict.fromkeys((self.log_dir, self.data_dir))
                    for path in self.ssh(name).download_tree(folder, local)]

        with ThreadPoolExecutor(max(1, len(self.names)), thread_name_prefix="collect") as pool:
            copying = {name: pool.submit(one, name) for name in self.names}
        copied: dict[str, list[Path]] = {}
        failures: list[str] = []
        for name, copy in copying.items():
            try:
                copied[name] = copy.result()
            except (OSError, HarnessError) as e:
                failures.append(f"{name}: {e}")
        if failures:
            raise HarnessError("could not collect the files of " + "; ".join(failures))
        return copied


# How a process says why it exits: Go's panic and fatal error, a zap logger's fatal or panic line,
# Python's exception line.
_DYING = re.compile(r'^(panic: |fatal error: )|"level":"(fatal|panic)"|^[\w.]*(Error|Exception)\b')


def last_words(output: str, limit: int = 300) -> str:
    """Why a process exited, from the end of its output: the last line that says it is dying (a JSON
    log line as its `msg` and `error`), else its last line; at most `limit` characters."""
    lines = [line for line in output.splitlines() if line.strip()]
    dying = [line for line in lines if _DYING.search(line)]
    said = (dying or lines or ["no output"])[-1].strip()
    if said.startswith("{"):
        with contextlib.suppress(ValueError, AttributeError):
            fields = json.loads(said)
            said = ": ".join(str(fields[key]) for key in ("msg", "error") if fields.get(key))
    return said[:limit]
