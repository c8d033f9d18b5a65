"""The simulated clients: each sends appends and reads to the node it believes leads (now and
then to another), one at a time with a pause between; every answer is checked
(`nodes.sim.invariants`, or `nodes.sim.hainvariants` in master-slave runs), and every request
must be answered within its node's own timeout (`Deadlines`).

A request that reaches a paused node waits in its socket until the node wakes; its client
gives up after its RPC timeout and moves on (the answer, if one comes, is still checked).
"""

from __future__ import annotations

from dataclasses import dataclass

from nodes.election import Role
from nodes.messages import AppendResponse, ClientResponse, ReadMode, ReadResponse, ResponseCode
from nodes.sim.invariants import Deadlines
from nodes.sim.nodes import Nodes

THINK_MS = ((1.0, 20.0), (1.0, 20.0), (50.0, 400.0))  # a client's pause between ops, drawn per run:
# some runs leave the leader idle between appends (idle-only paths: COMMIT pushes, restarts)
GIVE_UP_MS = (50.0, 400.0)  # a client's RPC timeout: it fires only at a paused node (a running
# node answers by its own timeouts, well before), and the client moves on to its next request
BODY_PADDING = (0, 0, 150, 400)  # bytes after an append's id, per run: entries that span
# 512-byte sectors and 4 KiB pages, so a torn write can cut one in the middle (fits 512-byte segments)
CLIENT_TIMEOUT_MS = 5000.0  # the client stops waiting (the outcome unknown) if no answer came by then

READ_MODES = (ReadMode.READ_INDEX, ReadMode.READ_INDEX, ReadMode.COMMITTED, ReadMode.FOLLOWER,
              ReadMode.UNSAFE, ReadMode.LEASE)  # a DLedger client's, drawn per read
# an answer that leaves the outcome unknown (DLedger's, then master-slave's)
INDEFINITE = (ResponseCode.TERM_CHANGED, ResponseCode.WAIT_QUORUM_ACK_TIMEOUT,
              ResponseCode.FLUSH_SLAVE_TIMEOUT, ResponseCode.FLUSH_DISK_TIMEOUT,
              ResponseCode.SLAVE_NOT_AVAILABLE)


@dataclass(slots=True)
class _Op:
    client: int  # -1: no client waits (a transfer the faults asked for, liveness's probe)
    kind: str
    node: str
    body: bytes = b""
    mode: ReadMode = ReadMode.READ_INDEX
    first: int = 0
    last: int = 0
    before: tuple[int, int] = (-1, -1)  # reads: (max acked, max linearizable read) when invoked
    to: str = ""  # transfers: the transferee
    held: bool = False  # waiting in a paused node's socket
    abandoned: bool = False  # its client gave up waiting (the node may still answer: that is checked)


class Workload:
    """The clients of `nodes`: `think_ms` their pause between requests, `padding` the bytes after
    an append's id (both drawn per run)."""

    def __init__(self, nodes: Nodes, think_ms: tuple[float, float], padding: int) -> None:
        self.nodes = nodes
        self.loop, self.rng, self.trace, self.stats = nodes.loop, nodes.rng, nodes.trace, nodes.stats
        self.config = config = nodes.config
        self.deadlines = Deadlines()
        self.ops: dict[int, _Op] = {}
        self.stopped = False  # after healing the clients send nothing (the cluster is left idle)
        self.unanswered: set[int] = set()  # appends pending at healing that no node has answered yet
        self.probed: tuple[int, int] | None = None  # liveness's probe: (request id, index) once acknowledged
        self._think_ms = think_ms
        self._padding = padding
        self._next_rid = 0
        self._believed_leader: list[str | None] = [None] * config.clients
        self._append_count = 0
        self._read_modes: tuple[ReadMode, ...]
        if nodes.ha is None:
            timing = nodes.core_config.timing
            self._timeouts = (timing.append_timeout_ms, timing.read_timeout_ms, timing.transfer_timeout_ms)
            self._read_modes = READ_MODES
        else:
            self._timeouts = nodes.ha.timeouts
            self._read_modes = nodes.ha.read_modes
        self._client = self.loop.on(self._on_client)
        self._client_timeout = self.loop.on(self._on_client_timeout)
        self._give_up = self.loop.on(self._on_give_up)

    def begin(self) -> None:
        """Every client sends its first request within 50 ms."""
        for c in range(self.config.clients):
            self.loop.after(self.rng.uniform(0, 50.0), self._client, "", c)

    def stop(self) -> None:
        """Healing: no client sends again, and every append pending now must be answered."""
        self.stopped = True
        self.unanswered = {rid for rid, op in self.ops.items() if op.kind == "append"}
        self.stats["pending-at-heal"] = len(self.unanswered)

    def next_rid(self) -> int:
        self._next_rid += 1
        return self._next_rid

    # ---- requests ----------------------------------------------------------------------

    def _pick_node(self, client: int) -> str:
        believed = self._believed_leader[client]
        if believed is not None and self.rng.random() < 0.85:
            return believed
        return self.rng.choice(self.nodes.names)

    def _on_client(self, _node: str, client: int) -> None:
        if self.stopped:
            return
        rng, nodes = self.rng, self.nodes
        node = self._pick_node(client)
        if nodes.cores[node] is None:
            self._believed_leader[client] = None
            self.loop.after(rng.uniform(*self._think_ms), self._client, "", client)
            return
        rid = self.next_rid()
        roll = rng.random()
        if roll < self.config.append_share:
            self._append_count += 1
            name = f"c{client}-{self._append_count}"
            body = name.encode() + b"." * self._padding
            self.ops[rid] = _Op(client, "append", node, body)
            self.trace.add(node, f"client {client} append {name} rid {rid}")
        else:
            mode = rng.choice(self._read_modes)
            top = max(len(nodes.inv.committed) - 1 if nodes.ha is None else nodes.ha.checks.max_acked, 0)
            first = rng.randint(max(0, top - 30), top + 3)
            last = first + rng.randint(0, 40)
            before = (nodes.inv.max_acked, nodes.inv.max_read)
            self.ops[rid] = _Op(client, "read", node, mode=mode, first=first, last=last, before=before)
            self.trace.add(node, f"client {client} read {mode.label} {first}..{last} rid {rid}")
        self.loop.after(CLIENT_TIMEOUT_MS, self._client_timeout, "", rid)
        self._submit(rid)

    def request_transfer(self) -> None:
        """Ask the current leader, if any, to hand over to a random other member."""
        leaders = self.nodes.leaders()
        if not leaders:
            return
        node = leaders[-1]
        to = self.rng.choice([n for n in self.nodes.names if n != node])
        rid = self.next_rid()
        self.ops[rid] = _Op(-1, "transfer", node, to=to)
        self.trace.add(node, f"transfer to {to} rid {rid}")
        self._submit(rid)

    def probe(self, node: str) -> None:
        """Liveness's probe: offer `node`, which leads, one append that must commit everywhere."""
        core = self.nodes.cores[node]
        assert core is not None
        rid = self.next_rid()
        self.ops[rid] = _Op(-1, "probe", node, b"probe")
        self._answer_by(rid, self._timeouts[0])
        core.client_append(rid, [b"probe"], self.nodes.local(node))
        self.nodes.drain(node)

    def probing(self) -> bool:
        """Whether a probe append waits for its answer."""
        return any(op.kind == "probe" for op in self.ops.values())

    def _submit(self, rid: int) -> None:
        """The request reaches its node: the node takes it now, or holds it while paused (and
        the client, if one waits, gives up after its RPC timeout)."""
        op = self.ops[rid]
        node = op.node
        nodes = self.nodes
        held = nodes.paused.get(node)
        if held is not None:
            op.held = True
            # a connection of its own: a client that gives up on a request drops its connection
            held.hold(f"rid {rid}", lambda: self._submit(rid) if rid in self.ops else None)
            if op.client >= 0:
                self.loop.after(held.rng.uniform(*GIVE_UP_MS), self._give_up, "", rid)
            return
        op.held = False
        core, driver = nodes.cores[node], nodes.drivers[node]
        local, (append_ms, read_ms, transfer_ms) = nodes.local(node), self._timeouts
        assert core is not None and driver is not None
        if op.kind == "append":
            self._answer_by(rid, append_ms)
            driver.client_append(rid, [op.body], local)  # refused with DISK_FULL, as the server does
        elif op.kind == "read":
            self._answer_by(rid, read_ms)
            core.client_read(rid, op.first, op.last, op.mode, local)
        else:
            self._answer_by(rid, transfer_ms)
            core.client_transfer(rid, op.to, local)
        nodes.drain(node)

    def _answer_by(self, rid: int, timeout_ms: float) -> None:
        """The node owes an answer to `rid` within its `timeout_ms` on its clock, as slow as the
        lease's drift bound lets it run, plus a tick or two."""
        op = self.ops[rid]
        due = self.loop.now + timeout_ms / self.nodes.drift_band[0] + 2 * self.config.tick_ms
        self.deadlines.on_request(rid, due, f"{op.kind} rid {rid} at {op.node} ({timeout_ms:.0f} ms timeout)")

    # ---- what becomes of them ----------------------------------------------------------

    def _on_give_up(self, _node: str, rid: int) -> None:
        """A client stops waiting for a request its paused node holds and goes on (the answer,
        if the node gives one when it wakes, is still checked)."""
        op = self.ops.get(rid)
        if op is None or not op.held or op.abandoned:
            return
        self.trace.add(op.node, f"client {op.client} gives up on rid {rid}")
        self.stats[f"{op.kind}-info"] += 1
        op.abandoned = True
        self.loop.after(self.rng.uniform(*self._think_ms), self._client, "", op.client)

    def _on_client_timeout(self, _node: str, rid: int) -> None:
        if rid in self.ops:
            self._finish(rid, "info")

    def on_crash(self, node: str) -> None:
        """`node` crashed: what it was asked ends with no answer (the outcome unknown)."""
        for rid in [rid for rid, op in self.ops.items() if op.node == node]:
            self._finish(rid, "info")

    def on_pause(self, node: str, duration: float) -> None:
        """`node` is paused for `duration`: what it took already it owes answers later by as much."""
        for rid, op in self.ops.items():
            if op.node == node and not op.held:
                self.deadlines.postpone(rid, duration)

    def _finish(self, rid: int, outcome: str) -> None:
        op = self.ops.pop(rid)
        self.deadlines.on_answer(rid)
        if op.abandoned:  # counted when its client gave up
            return
        self.stats[f"{op.kind}-{outcome}"] += 1
        if op.client >= 0:
            self.loop.after(self.rng.uniform(*self._think_ms), self._client, "", op.client)

    def complete(self, rid: int, response: ClientResponse) -> None:
        """A node answers `rid`: check the answer, and the client goes on."""
        self.unanswered.discard(rid)
        op = self.ops.get(rid)
        if op is None:
            return
        self.trace.add(op.node, f"client {op.client} rid {rid} gets", response)
        leader = getattr(response, "leader", None)
        if op.client >= 0 and not op.abandoned:
            self._believed_leader[op.client] = leader
        code = response.code
        if code is ResponseCode.SUCCESS:
            self._check_success(rid, op, response)
            self._finish(rid, "ok")
        elif code in INDEFINITE:
            self._finish(rid, "info")
        else:
            self._finish(rid, "fail")

    def _check_success(self, rid: int, op: _Op, response: ClientResponse) -> None:
        nodes = self.nodes
        ha = nodes.ha
        if isinstance(response, AppendResponse):
            if ha is None:
                nodes.inv.on_append_ok(op.body, response.first_index)
            else:
                ha.checks.on_ack(op.node, op.body, response)
            if op.kind == "probe":
                self.probed = (rid, response.last_index)
        elif isinstance(response, ReadResponse):
            if ha is None:
                nodes.inv.on_read_ok(op.node, op.mode, op.first, op.last, op.before, response)
            else:
                core = nodes.cores[op.node]
                master = core is not None and core.role is Role.LEADER
                ha.checks.on_read(op.node, master, op.mode, op.first, response)
