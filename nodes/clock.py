"""The node's one clock: real time plus an offset that the clock nemesis controls.

The offset, in milliseconds (an integer or decimal, may be negative), is read from
`<data-dir>/clock-offset-ms`; a missing file means 0. Every timer of the node (election,
heartbeat, lease, request timeouts) reads `now_ms()`, so a bump moves them all at once, as a
real clock step would move DLedger's `System.currentTimeMillis()` timers. `now_ms()` never
goes backwards: a backward step freezes the clock until real time catches up, which is
what "time elapsed since X" computations see on a real machine anyway.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from pathlib import Path

from nodes.controlfile import UNCHANGED, ControlFile

OFFSET_FILE = "clock-offset-ms"

log = logging.getLogger(__name__)


class NodeClock:
    """Monotonic seconds and wall-clock nanoseconds, both shifted by the control file's offset."""

    def __init__(self, data_dir: Path) -> None:
        self._control = ControlFile(data_dir / OFFSET_FILE)
        self._offset_s = 0.0
        self._last = 0.0
        self.on_change: Callable[[float], None] | None = None  # told each new offset, in ms
        self.refresh()

    @property
    def offset_ms(self) -> float:
        return self._offset_s * 1000.0

    def refresh(self) -> None:
        """Re-read the control file if it changed (cheap: one stat when it did not)."""
        text = self._control.poll()
        if text is UNCHANGED:
            return
        if text is None:
            log.info("clock offset file removed: offset 0 ms")
            self._set(0.0)
            return
        assert isinstance(text, str)
        try:
            offset_ms = float(text or "0")
        except ValueError:
            log.error("clock offset file %s holds %r, not a number of ms; keeping %.1f ms",
                      self._control.path, text, self.offset_ms)
            return
        log.info("clock offset now %.1f ms", offset_ms)
        self._set(offset_ms)

    def _set(self, offset_ms: float) -> None:
        changed = offset_ms != self.offset_ms
        self._offset_s = offset_ms / 1000.0
        if changed and self.on_change is not None:
            self.on_change(offset_ms)

    def now_ms(self) -> float:
        """Milliseconds on the node's (skewable, non-decreasing) monotonic clock."""
        value = (time.monotonic() + self._offset_s) * 1000.0
        if value > self._last:
            self._last = value
        return self._last

    def wall_ns(self) -> int:
        """Wall-clock nanoseconds as the node believes them (for log and event lines)."""
        return time.time_ns() + int(self._offset_s * 1e9)
