"""A scripted master-slave group: `HaNode`s on MemStores, driven by the real `Driver`.

Time advances in fixed ticks; every message sent during a tick is delivered within it
unless a link is cut. Flushes run at the end of each tick on nodes whose `auto_flush` is
on; a test holds a node's flushes (a slow disk) by turning it off and runs them with
`flush(node)`. Term files are real files under `root/<node>`.
"""

from __future__ import annotations

import dataclasses
from collections import deque
from collections.abc import Callable
from pathlib import Path

from nodes.driver import Driver
from nodes.ha.config import BrokerRole, HaConfig
from nodes.ha.node import HaNode
from nodes.logic import Ack, Flusher, Ready
from nodes.messages import ClientResponse, HaReport, PeerMessage
from nodes.store.memstore import MemStore
from nodes.store.termfile import load_term

FAST = {"report_interval_ms": 100.0, "heartbeat_ms": 50.0, "housekeeping_ms": 500.0, "resend_ms": 100.0,
        "sync_timeout_ms": 1000.0, "ack": Ack.WRITTEN}


class _Host:
    def __init__(self, group: HaGroup, name: str) -> None:
        self.group, self.name = group, name

    def send(self, peer: str, message: PeerMessage) -> None:
        self.group.sent.append((self.name, peer, message))
        if isinstance(message, HaReport):  # with what the reporter's store had made durable then
            self.group.reports.append((self.name, message, self.group.stores[self.name].flushed_index))
        if (self.name, peer) not in self.group.cut and self.group.nodes.get(peer) is not None:
            self.group.queue.append((self.name, peer, message))

    def complete(self, token: int, response: ClientResponse) -> None:
        self.group.responses[token] = response

    def start_flush(self) -> None:
        self.group.flush_wanted.add(self.name)

    def applied(self, ready: Ready) -> None:
        self.group.roles[self.name].extend(ready.role_changes)


class HaGroup:
    """Nodes n1..nN; n1 starts as `master_role`, the others as its slaves."""

    def __init__(self, root: Path, n: int = 2, master_role: BrokerRole = BrokerRole.SYNC_MASTER,
                 tick_ms: float = 10.0, **config: object) -> None:
        self.root = root
        self.names = [f"n{i + 1}" for i in range(n)]
        self.tick_ms = tick_ms
        self.now = 0.0
        settings = {**FAST, **config}
        self.configs = {
            name: HaConfig(role=master_role if name == "n1" else BrokerRole.SLAVE,
                           master=None if name == "n1" else "n1", **settings)  # type: ignore[arg-type]
            for name in self.names
        }
        self.stores = {name: MemStore() for name in self.names}
        self.nodes: dict[str, HaNode | None] = dict.fromkeys(self.names)
        self.drivers: dict[str, Driver] = {}
        self.auto_flush = dict.fromkeys(self.names, True)
        self.flush_wanted: set[str] = set()
        self.cut: set[tuple[str, str]] = set()
        self.queue: deque[tuple[str, str, PeerMessage]] = deque()
        self.sent: list[tuple[str, str, PeerMessage]] = []
        self.reports: list[tuple[str, HaReport, int]] = []
        self.responses: dict[int, ClientResponse] = {}
        self.roles: dict[str, list] = {name: [] for name in self.names}
        self._rid = 0
        for name in self.names:
            self.start(name)

    # -- lifecycle ---------------------------------------------------------------------

    def start(self, name: str, **changes: object) -> HaNode:
        """Start (or restart) `name` on its store and term file, its config changed by `changes`."""
        if changes:
            self.configs[name] = dataclasses.replace(self.configs[name], **changes)  # type: ignore[arg-type]
        data = self.root / name
        data.mkdir(parents=True, exist_ok=True)
        state = load_term(data)
        node = HaNode(name, self.names, self.stores[name], self.configs[name], state.term, state.vote_for,
                      self.now)
        self.nodes[name] = node
        host = _Host(self, name)
        self.drivers[name] = Driver(node, self.stores[name], data, state, Flusher.GROUP_COMMIT, host)
        self.drivers[name].drive()
        return node

    def crash(self, name: str, power_loss: bool = False) -> None:
        """Stop `name` (losing what it did not flush on a power loss)."""
        self.nodes[name] = None
        self.flush_wanted.discard(name)
        self.queue = deque(q for q in self.queue if name not in (q[0], q[1]))
        if power_loss:
            self.stores[name].power_loss()

    def node(self, name: str) -> HaNode:
        node = self.nodes[name]
        assert node is not None, f"{name} is down"
        return node

    # -- time --------------------------------------------------------------------------

    def tick(self, count: int = 1) -> None:
        for _ in range(count):
            self.now += self.tick_ms
            for name, node in self.nodes.items():
                if node is not None:
                    node.tick(self.now)
                    self.drivers[name].drive()
            self.deliver()
            for name in sorted(self.flush_wanted):
                if self.auto_flush[name]:
                    self.flush(name)
            self.deliver()

    def deliver(self) -> None:
        while self.queue:
            sender, receiver, message = self.queue.popleft()
            node = self.nodes.get(receiver)
            if node is None or (sender, receiver) in self.cut:
                continue
            node.receive(sender, message, self.now)
            self.drivers[receiver].drive()

    def flush(self, name: str) -> None:
        """Run the group-commit flush `name`'s driver asked for."""
        if self.nodes[name] is None:
            return
        self.flush_wanted.discard(name)
        self.stores[name].flush()
        self.drivers[name].flushed(self.now)

    def run_until(self, predicate: Callable[[], bool], max_ms: float = 5000.0) -> None:
        deadline = self.now + max_ms
        while not predicate():
            assert self.now < deadline, f"condition not met within {max_ms} ms"
            self.tick()

    def isolate(self, a: str, b: str) -> None:
        self.cut |= {(a, b), (b, a)}

    def heal(self) -> None:
        self.cut.clear()

    # -- clients -----------------------------------------------------------------------

    def _next(self) -> int:
        self._rid += 1
        return self._rid

    def append(self, name: str, *bodies: bytes) -> int:
        """Hand `name` an append; its request id (the answer lands in `responses`)."""
        rid = self._next()
        self.node(name).client_append(rid, list(bodies) or [b"x"], self.now)
        self.drivers[name].drive()
        return rid

    def call(self, name: str, method: str, *args: object) -> ClientResponse:
        """Call `client_<method>` on `name` and return its (immediate) answer."""
        rid = self._next()
        getattr(self.node(name), f"client_{method}")(rid, *args, self.now)
        self.drivers[name].drive()
        return self.responses.pop(rid)

    def answer(self, rid: int) -> ClientResponse | None:
        return self.responses.get(rid)

    def wait_answer(self, rid: int, max_ms: float = 5000.0) -> ClientResponse:
        self.run_until(lambda: rid in self.responses, max_ms)
        return self.responses[rid]

    def active_master(self) -> str | None:
        masters = [n for n, node in self.nodes.items() if node is not None and node.role.value == "leader"]
        assert len(masters) <= 1, masters
        return masters[0] if masters else None

    def wait_master(self, max_ms: float = 5000.0) -> str:
        self.run_until(lambda: self.active_master() is not None, max_ms)
        return str(self.active_master())
