"""A system under test that lives in memory, so a test runs `harness.chaos.run.TestRun` end to end
without Docker.

`FakeCluster` is the run's cluster (`harness.chaos.rundb.RunDb`, and so the nemesis's `nemesis.base.Nodes`):
N fake nodes holding one shared replicated list. An append through a live node lands at the next dense
index; a node that is not running refuses with `DefiniteFailure`, a paused one with
`IndeterminateFailure` (a paused process would time out); the leader is the first live node. Its
lifecycle (kill, stop, start, pause, resume, wipe, running, state) is what the kill family needs;
`exec` runs nothing and raises. `FakeSystem` makes one (`containers`, the hook a system overrides) and
writes each node's final log with `write_final_log`.

Two twins for the must-fail and interrupt tests: `LosingSystem` drops the last entry from every final
log (an acknowledged append lost), `InterruptingSystem` sends the main thread SIGINT (Ctrl-C) once its
cluster has acknowledged some appends.
"""

from __future__ import annotations

import contextlib
import signal
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from harness.chaos.workload import Acked, Served
from harness.errors import HarnessError
from harness.system import Finish, System, write_final_log
from harness.wait import wait_for
from nodes.client import DefiniteFailure, IndeterminateFailure
from nodes.payload import payload_id
from nodes.peers import Address

RUNNING, PAUSED = "S", "T"  # `ps` state letters; None: the process is gone
FAKE_PORT = 9876


class FakeCluster:
    """N in-memory nodes sharing one replicated list; see the module doc."""

    def __init__(self, nodes: int, run_id: str = "fake-run") -> None:
        self.run_id = run_id
        self._names = [f"n{i + 1}" for i in range(nodes)]
        self._state: dict[str, str | None] = dict.fromkeys(self._names)
        self._log: list[str | None] = []
        self._lock = threading.Lock()
        self.calls: list[tuple[str, str | None]] = []  # (operation, node): the lifecycle as it happened
        self.set_up = False
        self.teardowns = 0

    # -- nemesis.base.Nodes
    @property
    def names(self) -> list[str]:
        return list(self._names)

    @property
    def data_dir(self) -> str:
        return "/fake/data"

    def address(self, node: str) -> str:
        return f"10.99.0.{self._names.index(node) + 1}"

    def exec(self, node: str, command: str, timeout: float = 10.0) -> str:
        raise HarnessError(f"fake node {node} has no shell to run {command!r}")

    def _set(self, operation: str, node: str, state: str | None) -> None:
        with self._lock:
            self._state[node] = state
            self.calls.append((operation, node))

    def kill(self, node: str) -> None:
        self._set("kill", node, None)

    def stop(self, node: str, wait: float = 10.0) -> None:
        self._set("stop", node, None)

    def start(self, node: str | None = None, wait: float = 20.0) -> None:
        for name in self._names if node is None else [node]:
            if self._state[name] is None:  # a running (or paused) node is left alone
                self._set("start", name, RUNNING)

    def pause(self, node: str) -> None:
        if self._state[node] is not None:
            self._set("pause", node, PAUSED)

    def resume(self, node: str) -> None:
        if self._state[node] == PAUSED:
            self._set("resume", node, RUNNING)

    def wipe(self, node: str) -> None:
        self.calls.append(("wipe", node))  # the replicated list outlives any one node's copy

    def running(self, node: str) -> bool:
        return self._state[node] is not None

    def state(self, node: str) -> str | None:
        return self._state[node]

    def network_peers(self) -> dict[str, Address]:
        return {name: Address(self.address(name), FAKE_PORT) for name in self._names}

    def leader(self, timeout: float = 1.0) -> str | None:
        with self._lock:
            return next((name for name in self._names if self._state[name] == RUNNING), None)

    def transfer(self, to: str, timeout: float) -> dict[str, Any]:
        return {"result": "refused: the fake cluster's leader is its first live node"}

    # -- harness.chaos.rundb.RunDb
    def setup(self) -> None:
        self.set_up = True
        self.calls.append(("setup", None))

    def teardown(self) -> None:
        with self._lock:
            self._state = dict.fromkeys(self._names)
            self.teardowns += 1
            self.calls.append(("teardown", None))

    def wait_for_leader(self, timeout: float = 30.0) -> str:
        return wait_for(self.leader, timeout, f"no fake node led within {timeout:g} s")

    def client_peers(self) -> dict[str, Address]:
        return self.network_peers()

    def collect(self, results_dir: Path) -> dict[str, list[Path]]:
        """A little: each node's lifecycle as `nodes/<node>/node.log`."""
        written: dict[str, list[Path]] = {}
        for name in self._names:
            folder = results_dir / "nodes" / name
            folder.mkdir(parents=True, exist_ok=True)
            path = folder / "node.log"
            path.write_text("".join(f"{op}\n" for op, node in self.calls if node == name), encoding="utf-8")
            written[name] = [path]
        return written

    def left_running(self) -> str:
        return f"the fake cluster {self.run_id} lives in the test's memory; nothing to remove"

    # -- the replicated list, as the fake clients reach it
    def _refuse_unless_live(self, node: str) -> None:
        state = self._state[node]
        if state is None:
            raise DefiniteFailure(f"{node} is down: connection refused")
        if state == PAUSED:
            raise IndeterminateFailure(f"{node} did not answer: timeout")

    def append(self, node: str, entry_id: str | None) -> int:
        """Append through `node`: the entry's index in the shared list."""
        with self._lock:
            self._refuse_unless_live(node)
            self._log.append(entry_id)
            return len(self._log) - 1

    def read(self, node: str, first: int, last: int) -> tuple[list[list[Any]], int]:
        """The entries `first..last` (cut at the log's end) as `[index, id]` pairs, and the commit index."""
        with self._lock:
            self._refuse_unless_live(node)
            end = len(self._log) - 1
            return [[i, self._log[i]] for i in range(first, min(last, end) + 1)], end

    def entries(self) -> dict[int, str | None]:
        with self._lock:
            return dict(enumerate(self._log))


class FakeLog:
    """A worker's `harness.chaos.workload.LogClient`: through one node, the next after a refusal."""

    def __init__(self, cluster: FakeCluster, home: int) -> None:
        self.cluster = cluster
        self._at = home

    @property
    def node(self) -> str:
        names = self.cluster.names
        return names[self._at % len(names)]

    def _failed(self) -> None:
        self._at += 1

    def append(self, body: bytes) -> Acked:
        node = self.node
        try:
            index = self.cluster.append(node, payload_id(body))
        except (DefiniteFailure, IndeterminateFailure):
            self._failed()
            raise
        return Acked(index, node)

    def read(self, first: int, last: int, node: str | None = None, mode: str = "",
             timeout: float | None = None) -> Served:
        asked = node or self.node
        try:
            entries, commit_index = self.cluster.read(asked, first, last)
        except (DefiniteFailure, IndeterminateFailure):
            if node is None:
                self._failed()
            raise
        to = entries[-1][0] if entries else first - 1
        return Served({"from": first, "to": to, "commit_index": commit_index, "entries": entries}, asked)

    def close(self) -> None:
        return


class FakeSystem(System):
    """The system whose cluster is a `FakeCluster`; `cluster` is the last one it made."""

    name = "fake"
    client_port = FAKE_PORT
    read_modes = ("linearizable",)
    inputs = ("history", "final-logs")

    def __init__(self) -> None:
        self.cluster: FakeCluster | None = None
        self._clients = 0
        self._clients_lock = threading.Lock()

    def containers(self, nodes: int, key_dir: Path, fuse: bool) -> FakeCluster:
        self.cluster = FakeCluster(nodes, run_id=f"fake-{key_dir.parent.name}")
        return self.cluster

    def image(self, client: Any, log: Any = None) -> str:
        raise NotImplementedError("the fake system runs no image")

    def command(self, nodes: Any, name: str) -> str:
        raise NotImplementedError("the fake system runs no process")

    def leader(self, nodes: Any, timeout: float = 1.0) -> str | None:
        return nodes.leader(timeout)

    def client(self, nodes: Any, timeout: float) -> FakeLog:
        with self._clients_lock:  # spread the workers over the nodes
            home, self._clients = self._clients, self._clients + 1
        return FakeLog(nodes, home)

    def transfer(self, nodes: Any, to: str, timeout: float) -> dict[str, Any]:
        return nodes.transfer(to, timeout)

    def final_entries(self, cluster: FakeCluster, node: str) -> Mapping[int, str | None]:
        """What node `node` holds after healing: the whole replicated list."""
        return cluster.entries()

    def finish(self, nodes: Any, final_dir: Path, catch_up_s: float, op_timeout: float) -> Finish:
        started = time.monotonic()
        leader = None
        with contextlib.suppress(HarnessError):
            leader = nodes.wait_for_leader(catch_up_s)
        held = nodes.entries()
        catch_up = {"leader": leader, "commit_index": len(held) - 1, "lagging": {},
                    "seconds": round(time.monotonic() - started, 3)}
        final_logs: dict[str, int | str] = {
            name: write_final_log(final_dir / f"{name}.jsonl", self.final_entries(nodes, name))
            for name in nodes.names}
        return Finish(catch_up, final_logs)


class LosingSystem(FakeSystem):
    """Every node's final log lacks the last entry: an acknowledged append is lost."""

    def final_entries(self, cluster: FakeCluster, node: str) -> Mapping[int, str | None]:
        held = dict(cluster.entries())
        if held:
            del held[max(held)]
        return held


class InterruptingCluster(FakeCluster):
    """Once `after` appends are acknowledged, the main thread gets SIGINT, as Ctrl-C sends it."""

    def __init__(self, nodes: int, run_id: str, after: int) -> None:
        super().__init__(nodes, run_id)
        self.after = after
        self.interrupted_at: int | None = None
        self._main = threading.main_thread().ident

    def append(self, node: str, entry_id: str | None) -> int:
        index = super().append(node, entry_id)
        if index + 1 == self.after and self._main is not None:
            self.interrupted_at = index
            signal.pthread_kill(self._main, signal.SIGINT)
        return index


class InterruptingSystem(FakeSystem):
    """A fake system whose cluster interrupts the run after `after` acknowledged appends."""

    def __init__(self, after: int) -> None:
        super().__init__()
        self.after = after

    def containers(self, nodes: int, key_dir: Path, fuse: bool) -> InterruptingCluster:
        self.cluster = InterruptingCluster(nodes, f"fake-{key_dir.parent.name}", self.after)
        return self.cluster
