"""The store's background work: a `Ticker` thread calls a task every few milliseconds.

DLedger's asynchronous flush is a ticker calling `MmapStore.flush` (appends return before
their bytes are on disk); the retention check is another. The simulator starts none.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

log = logging.getLogger(__name__)


class Ticker:
    """A daemon thread calling `task` every `interval_s` seconds until `stop()`."""

    def __init__(self, name: str, interval_s: float, task: Callable[[], object]) -> None:
        self._interval = interval_s
        self._task = task
        self._stopped = threading.Event()
        self._worker = threading.Thread(target=self._run, name=name, daemon=True)
        self._worker.start()

    def _run(self) -> None:
        while not self._stopped.wait(self._interval):
            try:
                self._task()
            except Exception:
                log.exception("%s failed", self._worker.name)

    def stop(self) -> None:
        self._stopped.set()
        if self._worker is not threading.current_thread():
            self._worker.join()
