"""Load a results folder's history before its check, while the run that wrote it is still ending.

The history is complete once the workload stops; the heal, the final reads, collecting the
node files and the teardown take seconds more, and reading, pairing and caching the history
is about half a warm check. `preload` does that part early (in this process, or on the
checker service) and `take` hands the loaded history to the check of the same folder, as long
as history.jsonl is unchanged. One folder is held at a time.
"""

from __future__ import annotations

import threading
from pathlib import Path

from pyspark.sql import SparkSession

from checkers.history import History, load_history
from checkers.layout import ResultsDir
from checkers.spark import shuffle_partitions_for

Key = tuple[str, int, int]


def _key(history: Path) -> Key:
    st = history.stat()
    return str(history.resolve()), st.st_size, st.st_mtime_ns


class Preloaded:
    """The one history loaded ahead of its check; `take` waits for a load under way."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._held: tuple[Key, History] | None = None

    def load(self, spark: SparkSession, layout: ResultsDir) -> None:
        """Load and cache `layout`'s history (InputError when it is malformed: the check says so)."""
        with self._lock:
            self._drop()
            cores = spark.sparkContext.defaultParallelism
            partitions = shuffle_partitions_for(layout.history.stat().st_size, cores)
            spark.conf.set("spark.sql.shuffle.partitions", str(partitions))
            key = _key(layout.history)
            self._held = key, load_history(spark, [layout])

    def take(self, layout: ResultsDir) -> History | None:
        """The history loaded for `layout` (then no longer held), or None."""
        with self._lock:
            held, self._held = self._held, None
        if held is None:
            return None
        key, history = held
        if key != _key(layout.history):
            history.unpersist()
            return None
        return history

    def _drop(self) -> None:
        if self._held is not None:
            self._held[1].unpersist()
            self._held = None


PRELOADED = Preloaded()
