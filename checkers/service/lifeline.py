"""When a checker service stops on its own: the process that started it exits, or it sits idle.

A service started for tests or by a check is told its starter's pid (`serve --parent PID`):
it watches that process through a pidfd (Linux 5.3 and later), which becomes readable the
moment the process exits, however it exits (kill -9 included). An idle limit (`serve
--idle-timeout S`) stops a service no request has reached for S seconds, like Gradle's daemon.
"""

from __future__ import annotations

import os
import select
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager


def on_exit(pid: int, then: Callable[[], None]) -> None:
    """Call `then` once process `pid` has exited (from a daemon thread); at once if it is gone."""
    try:
        fd = os.pidfd_open(pid)
    except ProcessLookupError:
        then()
        return

    def watch() -> None:
        try:
            select.select([fd], [], [])  # readable once the process has exited
        finally:
            os.close(fd)
        then()

    threading.Thread(target=watch, name=f"watch-pid-{pid}", daemon=True).start()


class IdleClock:
    """How long since the last request ended, none being in progress; `expired` past the limit."""

    def __init__(self, limit_s: float | None) -> None:
        self.limit_s = limit_s
        self._busy = 0
        self._since = time.monotonic()
        self._lock = threading.Lock()

    @contextmanager
    def busy(self) -> Iterator[None]:
        """Hold the clock while a request (or the warm-up) runs; it restarts when the last one ends."""
        with self._lock:
            self._busy += 1
        try:
            yield
        finally:
            with self._lock:
                self._busy -= 1
                self._since = time.monotonic()

    def expired(self) -> bool:
        with self._lock:
            idle = 0.0 if self._busy else time.monotonic() - self._since
        return self.limit_s is not None and idle >= self.limit_s
