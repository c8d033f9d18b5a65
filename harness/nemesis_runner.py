"""Drives the nemeses along the seeded schedule and records every fault op in the history.

Nemesis ops use process `"nemesis"`; the invoke says what is about to happen, the `info`
completion what was done (the chosen victims, the grudge) or the error that stopped it.
"""

from __future__ import annotations

import logging
import random
import threading
import time
from typing import Any

from harness.generator import FaultStep
from harness.history import History
from nemesis.base import Nemesis

log = logging.getLogger(__name__)
PROCESS = "nemesis"


class NemesisRunner:
    """A thread that starts and stops faults at their scheduled times."""

    def __init__(
        self, nemeses: dict[str, Nemesis], schedule: list[FaultStep], history: History, rng: random.Random
    ) -> None:
        self.nemeses = nemeses
        self.schedule = schedule
        self.history = history
        self.rng = rng
        self._active: list[str] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="nemesis", daemon=True)
        self._started = 0.0

    def start(self, started: float) -> None:
        """Follow the schedule, counting its times from `started` (a monotonic time)."""
        self._started = started
        self._thread.start()

    def active(self) -> list[str]:
        with self._lock:
            return list(self._active)

    def _loop(self) -> None:
        for step in self.schedule:
            if self._stop.wait(max(0.0, self._started + step.at - time.monotonic())):
                return
            nemesis = self.nemeses[step.fault]
            if step.action == "start":
                self._record(nemesis.start_f, lambda n=nemesis: n.start(self.rng))
                with self._lock:
                    self._active.append(step.fault)
            else:
                self._record(nemesis.stop_f, nemesis.stop)
                with self._lock:
                    self._active.remove(step.fault)

    def _record(self, f: str, action: Any) -> None:
        self.history.invoke(PROCESS, f, None)
        try:
            value = action()
        except Exception as e:  # a failed fault is recorded and the run goes on
            log.exception("nemesis %s failed", f)
            self.history.complete(PROCESS, "info", f, None, error=f"{type(e).__name__}: {e}")
        else:
            self.history.complete(PROCESS, "info", f, value)

    def stop(self, timeout: float | None = None) -> None:
        """Stop following the schedule; a fault in progress gets up to `timeout` s to finish."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout)
            if self._thread.is_alive():
                log.warning("nemesis still busy after %s s; healing goes on without it", timeout)

    def heal_all(self, db: Any) -> None:
        """Stop every fault still in force (recorded), heal every family, and start every node."""
        for fault in self.active():
            self._record(self.nemeses[fault].stop_f, self.nemeses[fault].stop)
        with self._lock:
            self._active.clear()
        for nemesis in self.nemeses.values():
            nemesis.heal()
        db.start()
