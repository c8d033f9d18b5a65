"""Drives the faults along the seeded schedule and records every fault op in the history.

Nemesis ops use process `"nemesis"` and run one at a time on one thread (Jepsen's nemesis
is one process too), while several faults may be in force at once. The invoke says what
is about to happen, the `info` completion what was done (its value always names the
`"targets"`) or the error that stopped it.
"""

from __future__ import annotations

import functools
import logging
import random
import threading
import time
from collections.abc import Callable
from typing import Any

from harness.chaos.generator import FaultStep
from harness.chaos.history import History
from harness.chaos.workload import LeaseGate
from nemesis.base import Family, Fault, NodeExited, Nodes
from nemesis.process import NOT_RUNNING

log = logging.getLogger(__name__)
PROCESS = "nemesis"


class NemesisRunner:
    """A thread that starts, stops and fires faults at their scheduled times."""

    def __init__(self, families: dict[str, Family], faults: dict[str, Fault], schedule: list[FaultStep],
                 history: History, rng: random.Random, leases: LeaseGate | None = None) -> None:
        self.families = families
        self.leases = leases or LeaseGate()
        self._gated: set[str] = set()  # faults holding the lease gate closed
        self.faults = faults
        self.schedule = schedule
        self.history = history
        self.rng = rng
        self.errors: list[str] = []
        self.exited: dict[str, str] = {}  # node -> what it said as it refused to start at the heal
        self._active: list[str] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="nemesis", daemon=True)
        self._started = 0.0
        self._next = 0  # how many of the schedule's steps have begun
        self.late = 0.0  # the most seconds a step started after its scheduled time

    def start(self, started: float) -> None:
        """Follow the schedule, counting its times from `started` (a monotonic time)."""
        self._started = started
        self._thread.start()

    def active(self) -> list[str]:
        with self._lock:
            return list(self._active)

    def _loop(self) -> None:
        for step in self.schedule:
            wait = self._started + step.at - time.monotonic()
            self.late = max(self.late, -wait)
            if self._stop.wait(max(0.0, wait)):
                return
            self._next += 1
            if step.action == "stop":
                self._stop_fault(step.fault)
            else:
                self.inject(step.fault)

    def inject(self, name: str) -> None:
        """Start (or fire, for an instant family) one fault of family `name` now, recorded."""
        family = self.families[name]
        if not family.instant:
            with self._lock:
                self._active.append(name)
        if family.steps_clocks:  # closed before the clock moves; reopened at once if it did not
            self._gated.add(name)
            self.leases.stepping(True)
        value = self._record(family.start_f, lambda: self.faults[name].start(self.rng))
        if name in self._gated and isinstance(value, dict) and value.get("stepped_clock") is False:
            self._gated.discard(name)
            self.leases.stepping(False, quiet=False)

    def _stop_fault(self, name: str) -> None:
        stop_f = self.families[name].stop_f
        assert stop_f is not None
        self._record(stop_f, self.faults[name].stop)
        with self._lock:
            self._active.remove(name)
        if name in self._gated:
            self._gated.discard(name)
            self.leases.stepping(False)

    def _record(self, f: str, action: Callable[[], Any]) -> Any:
        """Do `action` between its invoke and completion lines; its value (None if it failed)."""
        self.history.invoke(PROCESS, f, None)
        try:
            value = action()
        except Exception as e:  # a fault that could not take effect is recorded as an error
            log.exception("nemesis %s failed", f)
            self.errors.append(f"{f}: {type(e).__name__}: {e}")
            self.history.complete(PROCESS, "info", f, None, error=f"{type(e).__name__}: {e}")
            return None
        self.history.complete(PROCESS, "info", f, value)
        return value

    def finish(self, timeout: float) -> bool:
        """Wait up to `timeout` s for the schedule's last step; whether it has run."""
        self._thread.join(timeout)
        return not self._thread.is_alive()

    def unrun(self) -> list[str]:
        """The families whose scheduled start never came (the run ended first), in schedule order."""
        started = {step.fault for step in self.schedule[:self._next]}
        return list(dict.fromkeys(s.fault for s in self.schedule if s.fault not in started))

    def stop(self, timeout: float | None = None) -> None:
        """Stop following the schedule; a fault op in progress gets up to `timeout` s to finish."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout)
            if self._thread.is_alive():
                log.warning("nemesis still busy after %s s; healing goes on without it", timeout)

    def stop_faults(self) -> None:
        """Stop every fault still in force, recorded: the nemesis's last history lines."""
        for name in self.active():
            self._stop_fault(name)

    def heal_all(self, nodes: Nodes) -> dict[str, list[str]]:
        """Stop every fault still in force (`stop_faults`), heal every family (unrecorded), start
        every node. A node whose system refuses to start on what it holds (`NodeExited`: etcd on a
        log that lost committed entries, say) is the cluster's state, not a fault left in force:
        `exited` records what it said.

        Returns what each family still left on the nodes afterwards (empty lists when clean).
        """
        self.stop_faults()
        for fault in self.faults.values():
            self._noting_exits(fault.heal)
        for node in nodes.names:
            self._noting_exits(functools.partial(nodes.start, node))
        down = {NOT_RUNNING.format(node) for node in self.exited}
        return {name: left for name, fault in self.faults.items()
                if (left := [text for text in fault.leftovers() if text not in down])}

    def _noting_exits(self, action: Callable[[], None]) -> None:
        try:
            action()
        except NodeExited as e:
            self.exited[e.node] = e.reason
