"""Client workers: each appends and reads at its share of the target rate and records every op.

Outcomes follow Jepsen: `ok` when the node confirmed, `fail` when the op surely did not
happen (a definite refusal), `info` when its fate is unknown (timeout, connection lost
mid-call). After an `info` the worker takes a fresh process id, since the old process may
still have an op in flight.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from harness.chaos.generator import Mix, Op, pacing_delay, worker_rng
from harness.chaos.history import History
from nodes.client import DefiniteFailure, IndeterminateFailure
from nodes.messages import ReadMode

LEASE, READ_INDEX = ReadMode.LEASE.label, ReadMode.READ_INDEX.label
MAX_LAG_S = 1.0  # how far behind its schedule a worker may fall before the schedule restarts
DIRECT_READ_TIMEOUT_S = 1.0  # a read sent to one node: a paused node stalls its worker only this long


@dataclass(frozen=True)
class Acked:
    """An ok append as the system confirmed it: where it landed (None when the system does not
    say), the node that answered, and the system's further history fields (DLedger's `term`)."""

    log_index: int | None
    node: str
    fields: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Served:
    """An ok read: its history value (docs/formats.md: `from`, `to`, `entries`, ...) and the node
    that answered."""

    value: dict[str, Any]
    node: str


class LogClient(Protocol):
    """The calls a worker makes (`harness.system.System.client` makes one); failures raise
    `nodes.client.DefiniteFailure` (`fail`) or `IndeterminateFailure` (`info`)."""

    def append(self, body: bytes) -> Acked: ...

    def read(self, first: int, last: int, node: str | None = None, mode: str = "",
             timeout: float | None = None) -> Served: ...

    def close(self) -> None: ...


class LeaseGate:
    """Whether a `mixed` run may send lease reads now: not while a fault steps node clocks (lease
    reads trust bounded clock drift), nor for `quiet_s` after the last such fault stopped, while
    a lease taken on a stepped clock may still run. Closed leases turn reads into read-index."""

    def __init__(self, quiet_s: float = 0.0) -> None:
        self.quiet_s = quiet_s
        self._stepping = 0
        self._until = 0.0
        self._lock = threading.Lock()

    def stepping(self, on: bool, quiet: bool = True) -> None:
        """A fault that may step clocks is about to start (True) or has stopped (False; with
        `quiet` False, it started without stepping one, so no lease can outlive it)."""
        with self._lock:
            self._stepping += 1 if on else -1
            if not on and quiet:
                self._until = max(self._until, time.monotonic() + self.quiet_s)

    def mode(self, wanted: str) -> str:
        """The mode to send a read of mode `wanted` in now."""
        if wanted != LEASE:
            return wanted
        with self._lock:
            closed = self._stepping > 0 or time.monotonic() < self._until
        return READ_INDEX if closed else wanted


@dataclass
class WorkloadState:
    """What workers share: the highest acknowledged index, the stop signal, the lease gate."""

    stop: threading.Event = field(default_factory=threading.Event)
    known_end: int = -1
    lock: threading.Lock = field(default_factory=threading.Lock)
    leases: LeaseGate = field(default_factory=LeaseGate)

    def acknowledged(self, index: int) -> None:
        with self.lock:
            self.known_end = max(self.known_end, index)


class Worker:
    """One worker thread: process ids `worker, worker + stride, worker + 2*stride, ...`, where
    `stride` (default: `workers`) counts every client thread of the run, consumers included."""

    def __init__(
        self,
        worker: int,
        workers: int,
        seed: int,
        rate: float,
        mix: Mix,
        history: History,
        state: WorkloadState,
        connect: Callable[[], LogClient],
        stride: int | None = None,
    ) -> None:
        self.worker = worker
        self.workers = workers
        self.stride = stride or workers
        self.process = worker
        self.rng = worker_rng(seed, worker)
        self.rate = rate
        self.mix = mix
        self.history = history
        self.state = state
        self.connect = connect
        self.seq = 0

    def run(self) -> None:
        client = self.connect()
        next_at = time.monotonic()
        try:
            while True:
                # Keep to the schedule: a slow op eats into the next pause instead of shifting
                # every later op; after a long stall the schedule restarts from now, no burst.
                now = time.monotonic()
                next_at = max(next_at + pacing_delay(self.rng, self.rate, self.workers), now - MAX_LAG_S)
                if self.state.stop.wait(max(0.0, next_at - now)):
                    break
                op = self.mix.next_op(self.rng, self.process, self.seq, self.state.known_end)
                self.seq += 1
                if not self.perform(client, op):
                    client.close()
                    self.process += self.stride
                    client = self.connect()
        finally:
            client.close()

    def perform(self, client: LogClient, op: Op) -> bool:
        """Invoke and complete `op`; False when its outcome was indeterminate."""
        h, process = self.history, self.process
        if "mode" in op.value:
            op = Op(op.f, {**op.value, "mode": self.state.leases.mode(op.value["mode"])}, op.body)
        h.invoke(process, op.f, op.value)
        try:
            if op.f == "append":
                done = client.append(op.body)
                where = {} if done.log_index is None else {"log_index": done.log_index}
                if done.log_index is not None:
                    self.state.acknowledged(done.log_index)
                h.complete(process, "ok", op.f, {**op.value, **where, **done.fields}, node=done.node)
            else:
                at = op.value.get("at")
                served = client.read(op.value["from"], op.value["to"], node=at, mode=op.value.get("mode", ""),
                                     timeout=DIRECT_READ_TIMEOUT_S if at else None)
                h.complete(process, "ok", op.f, served.value, node=served.node)
        except DefiniteFailure as e:
            h.complete(process, "fail", op.f, op.value, error=str(e) or type(e).__name__)
        except IndeterminateFailure as e:
            h.complete(process, "info", op.f, op.value, error=str(e) or type(e).__name__)
            return False
        except Exception as e:  # a bug in the client must not leave an open invoke behind
            h.complete(process, "info", op.f, op.value, error=f"client error: {e!r}")
            return False
        return True


def start_workers(
    workers: int,
    seed: int,
    rate: float,
    mix: Mix,
    history: History,
    state: WorkloadState,
    connect: Callable[[], LogClient],
    stride: int | None = None,
) -> list[threading.Thread]:
    """Start `workers` daemon threads running the workload until `state.stop` is set (process
    ids: see `Worker`)."""
    threads = []
    for w in range(workers):
        worker = Worker(w, workers, seed, rate, mix, history, state, connect, stride)
        thread = threading.Thread(target=worker.run, name=f"worker-{w}", daemon=True)
        thread.start()
        threads.append(thread)
    return threads
