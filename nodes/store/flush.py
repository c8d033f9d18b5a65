"""Durability: serialised flushes shared between waiters (group commit), and a ticker thread.

`async` flush (DLedger's): a `Ticker` calls `Flusher.flush` every few milliseconds and
appends return before their bytes are on disk. `sync` flush: an append returns only after
`Flusher.sync_to(its index)`; while one thread fsyncs, later appenders queue on the lock,
and the first of them to get it flushes everything appended meanwhile, so many concurrent
appends share one fsync.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

log = logging.getLogger(__name__)


class Flusher:
    """Runs one flush at a time and remembers the highest index it made durable.

    Waiters sleep on a condition, not on the flush itself: when a flush ends, every waiter
    it covered returns at once, and one uncovered waiter starts the next flush for all the
    appends made meanwhile. `lock` is held while `flush_once` runs; the store also holds
    it for anything that must not run beside a flush (truncation, deleting files, closing).
    """

    def __init__(self, flush_once: Callable[[], int], flushed_index: int = -1) -> None:
        self._flush_once = flush_once
        self.lock = threading.RLock()
        self.flushed_index = flushed_index
        self._cond = threading.Condition()
        self._flushing = False

    def flush(self) -> int:
        """Flush everything appended so far; return the durable index. Blocks."""
        with self._cond:
            while self._flushing:
                self._cond.wait()
            self._run_flush()
            return self.flushed_index

    def sync_to(self, index: int) -> int:
        """Return once `index` is durable, flushing only if no running flush covers it."""
        if self.flushed_index >= index:
            return self.flushed_index
        with self._cond:
            while self.flushed_index < index:
                if self._flushing:
                    self._cond.wait()
                else:
                    self._run_flush()
            return self.flushed_index

    def _run_flush(self) -> None:
        """Flush with the condition released; the caller holds it."""
        self._flushing = True
        self._cond.release()
        try:
            time.sleep(0)  # yield the GIL once: appenders the last flush released join this one
            with self.lock:
                self.flushed_index = self._flush_once()
        finally:
            self._cond.acquire()
            self._flushing = False
            self._cond.notify_all()


class Ticker:
    """A daemon thread calling `task` every `interval_s` seconds until `stop()`."""

    def __init__(self, name: str, interval_s: float, task: Callable[[], object]) -> None:
        self._interval = interval_s
        self._task = task
        self._stopped = threading.Event()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stopped.wait(self._interval):
            try:
                self._task()
            except Exception:
                log.exception("%s failed", self._thread.name)

    def stop(self) -> None:
        self._stopped.set()
        if self._thread is not threading.current_thread():
            self._thread.join()
