"""A small, fully scripted cluster driver: instant delivery, explicit partitions and filters.

Time advances in fixed ticks; every message sent during a tick is delivered within it
(unless a partition or a filter drops it), so a test scenario reads like the Raft paper's.
The core benchmark drives it too.
"""

from __future__ import annotations

import random
from collections import deque
from collections.abc import Callable
from dataclasses import replace

from nodes.core import Core, CoreConfig
from nodes.driver import apply_writes
from nodes.election import Role
from nodes.messages import ClientResponse, PeerMessage
from nodes.store.logstore import Entry
from nodes.store.memstore import MemStore

Filter = Callable[[str, str, PeerMessage], bool]


def entries(*terms: int) -> list[Entry]:
    """A log whose entry i has term terms[i] and body b"i-t"."""
    return [Entry(i, t, f"{i}-{t}".encode()) for i, t in enumerate(terms)]


class ScriptedCluster:
    """N cores on MemStores, driven tick by tick."""

    def __init__(self, n: int = 3, *, config: CoreConfig | None = None, seed: int = 0,
                 logs: dict[str, list[Entry]] | None = None,
                 terms: dict[str, tuple[int, str | None]] | None = None,
                 down: tuple[str, ...] = (), tick_ms: float = 5.0, **timing: int) -> None:
        self.names = [f"n{i + 1}" for i in range(n)]
        base = config or CoreConfig()
        self.config = replace(base, timing=replace(base.timing, **timing)) if timing else base
        self.rng = random.Random(seed)
        self.now = 0.0
        self.tick_ms = tick_ms
        self.stores = {name: MemStore() for name in self.names}
        for name, log in (logs or {}).items():
            self.stores[name].append(log)
            self.stores[name].flush()
        self.persisted: dict[str, tuple[int, str | None]] = {name: (0, None) for name in self.names}
        self.persisted.update(terms or {})
        self.cores: dict[str, Core | None] = dict.fromkeys(self.names)
        self.blocked: set[tuple[str, str]] = set()
        self.filters: list[Filter] = []
        self.sent: list[tuple[str, str, PeerMessage]] = []
        self.keep_sent = True
        self.responses: dict[int, ClientResponse] = {}
        self.auto_flush = dict.fromkeys(self.names, True)
        self._queue: deque[tuple[str, str, PeerMessage]] = deque()
        self._rid = 0
        for name in self.names:
            if name not in down:
                self.start(name)

    # ---- nodes ---------------------------------------------------------------------------

    def start(self, name: str) -> Core:
        term, vote = self.persisted[name]
        core = Core(name, self.names, self.stores[name], term, vote, self.config,
                    random.Random(self.rng.getrandbits(32)), self.now)
        self.cores[name] = core
        self.drain(name)
        return core

    def crash(self, name: str) -> None:
        self.cores[name] = None

    def core(self, name: str) -> Core:
        core = self.cores[name]
        assert core is not None, f"{name} is down"
        return core

    def drain(self, name: str) -> None:
        core = self.core(name)
        ready = core.ready()
        if ready.persist is not None:
            self.persisted[name] = ready.persist
        store = self.stores[name]
        apply_writes(store, ready.writes)
        if ready.store_commit is not None:
            store.set_committed(ready.store_commit)
        for peer, message in ready.messages:
            if self.keep_sent:
                self.sent.append((name, peer, message))
            self._queue.append((name, peer, message))
        self.responses.update(ready.completions)
        if self.auto_flush[name] and store.flushed_index < store.end_index:
            self.flush(name)

    def flush(self, name: str) -> None:
        self.stores[name].flush()
        self.core(name).store_progress(self.now)
        self.drain(name)

    # ---- network -------------------------------------------------------------------------

    def isolate(self, *names: str) -> None:
        """Cut `names` (as a group) off from everyone else, both ways."""
        rest = [n for n in self.names if n not in names]
        self.blocked |= {(a, b) for a in names for b in rest} | {(b, a) for a in names for b in rest}

    def heal(self) -> None:
        self.blocked.clear()
        self.filters.clear()

    def deliver(self) -> None:
        while self._queue:
            sender, receiver, message = self._queue.popleft()
            core = self.cores[receiver]
            if core is None or (sender, receiver) in self.blocked or any(f(sender, receiver, message)
                                                                        for f in self.filters):
                continue
            core.receive(sender, message, self.now)
            self.drain(receiver)

    def run(self, ms: float) -> None:
        """Advance `ms` of time, ticking every node and delivering everything each tick."""
        end = self.now + ms
        while self.now < end:
            self.now += self.tick_ms
            for name in self.names:
                if self.cores[name] is not None:
                    self.core(name).tick(self.now)
                    self.drain(name)
            self.deliver()

    def run_until(self, condition: Callable[[], bool], within_ms: float = 5000.0) -> None:
        end = self.now + within_ms
        while not condition():
            assert self.now < end, f"condition not met within {within_ms} ms: {self.describe()}"
            self.run(self.tick_ms)

    # ---- observations --------------------------------------------------------------------

    def leaders(self) -> list[str]:
        return [n for n, c in self.cores.items() if c is not None and c.role is Role.LEADER]

    def elect(self, within_ms: float = 5000.0) -> str:
        """Run until exactly one live node leads and its no-op is committed; return it."""
        def settled() -> bool:
            leaders = self.leaders()
            if len(leaders) != 1:
                return False
            leader = self.core(leaders[0])
            return leader.commit_index >= leader.log.end_index
        self.run_until(settled, within_ms)
        return self.leaders()[0]

    def describe(self) -> str:
        return ", ".join(f"{n}:{c.role.value}/t{c.term}/c{c.commit_index}/e{c.log.end_index}"
                         if c else f"{n}:down" for n, c in self.cores.items())

    def request(self, node: str, method: str, *args: object) -> int:
        """Call `Core.<method>(rid, *args, now)` at `node`, deliver what follows; return rid."""
        self._rid += 1
        getattr(self.core(node), method)(self._rid, *args, self.now)
        self.drain(node)
        self.deliver()
        return self._rid

    def append(self, node: str, *bodies: bytes) -> int:
        return self.request(node, "client_append", list(bodies))
