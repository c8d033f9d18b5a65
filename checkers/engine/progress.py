"""What a check is doing and how far it is, for a person waiting on it.

`Watch` reports each stage of a check as it begins (loading, screening, the exact checks,
the verdict) and, while Spark works, how many tasks of its running stages are done, at most
every `every` seconds and only when that changed. `check_many` drives it; the checker service
passes its lines to the client as they come (`checkers.service.server.request`).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from types import TracebackType

from pyspark.sql import SparkSession

Progress = Callable[[str], None]


class Watch:
    """Stages and Spark task counts of one check, reported to `report` (None: nothing)."""

    def __init__(self, spark: SparkSession, report: Progress | None, every: float = 2.0) -> None:
        self._spark, self._report, self._every = spark, report, every
        self._stage = ""
        self._stopped = threading.Event()
        self._thread: threading.Thread | None = None

    def stage(self, name: str) -> None:
        """A stage begins: say so now."""
        self._stage = name
        if self._report is not None:
            self._report(name)

    def __enter__(self) -> Watch:
        if self._report is not None:
            self._thread = threading.Thread(target=self._poll, name="check-progress", daemon=True)
            self._thread.start()
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 tb: TracebackType | None) -> None:
        self._stopped.set()
        if self._thread is not None:
            self._thread.join()

    def _poll(self) -> None:
        assert self._report is not None
        tracker = self._spark.sparkContext.statusTracker()
        last: tuple[str, int, int] | None = None
        while not self._stopped.wait(self._every):
            infos = [tracker.getStageInfo(i) for i in tracker.getActiveStageIds()]
            done = sum(i.numCompletedTasks for i in infos if i is not None)
            total = sum(i.numTasks for i in infos if i is not None)
            now = (self._stage, done, total)
            if total and now != last:
                self._report(f"{self._stage}: {done}/{total} tasks of {len(infos)} Spark stage(s)")
                last = now
