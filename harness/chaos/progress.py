"""The live progress line of a run: elapsed time, client outcomes, faults in force, the leader.

On a terminal the line is redrawn in place every second; otherwise (CI logs) a full line
is printed every few seconds so logs stay readable.
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable
from typing import TextIO


class ProgressLine:
    """Redraws `render()` until stopped; `render` returns the text of the line."""

    def __init__(self, render: Callable[[], str], out: TextIO = sys.stderr, interval: float | None = None):
        self.render = render
        self.out = out
        self.tty = out.isatty()
        self.interval = interval if interval is not None else (1.0 if self.tty else 5.0)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="progress", daemon=True)
        self._width = 0

    def start(self) -> ProgressLine:
        self._thread.start()
        return self

    def _draw(self) -> None:
        try:
            text = self.render()
        except Exception as e:  # progress must never break a run
            text = f"(progress unavailable: {e})"
        if self.tty:
            self.out.write("\r" + text.ljust(self._width))
            self._width = len(text)
        else:
            self.out.write(text + "\n")
        self.out.flush()

    def _loop(self) -> None:
        while not self._stop.wait(self.interval):
            self._draw()

    def stop(self) -> None:
        """Stop redrawing and leave the last line on screen."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(self.interval + 5)
        self._draw()
        if self.tty:
            self.out.write("\n")
            self.out.flush()


class LeaderWatch:
    """The leader as last seen, and how many times a different node was seen leading."""

    def __init__(self, leader: str | None = None) -> None:
        self.leader = leader
        self.changes = 0

    def see(self, leader: str | None) -> None:
        """Note who leads now (None when no leader answers: that is no change)."""
        if leader is not None and leader != self.leader:
            if self.leader is not None:
                self.changes += 1
            self.leader = leader


def run_status(started: float, time_limit: float, counts: dict[str, int], faults: list[str],
               leader: str | None, changes: int = 0) -> str:
    """`12s/60s  ok 1234  fail 3  info 2  faults: partition  leader: n3 (2 changes)`."""
    elapsed = time.monotonic() - started
    fault_text = ", ".join(faults) if faults else "none"
    return (f"{elapsed:4.0f}s/{time_limit:.0f}s  ok {counts.get('ok', 0)}  fail {counts.get('fail', 0)}  "
            f"info {counts.get('info', 0)}  faults: {fault_text}  leader: {leader or '?'} "
            f"({changes} change{'s' if changes != 1 else ''})")
