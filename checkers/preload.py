"""Load a results folder's inputs before its check, while the run that wrote them is still ending.

The history is complete once the workload stops, the final logs once the final reads are
done; the heal, the final reads, collecting the node files and the teardown take seconds
more, and reading, pairing and caching the history and the final logs is most of a warm
check. `load` does one part (`history` or `finals`) early, in this process or on the checker
service, and `take` hands what was loaded to the check of the same folder, each part as long
as the files it was loaded from are unchanged. One folder is held at a time.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from pyspark.sql import SparkSession

from checkers.finallogs import FinalLogs, load_final_logs
from checkers.history import History, load_history
from checkers.layout import ResultsDir
from checkers.spark import shuffle_partitions_for

Part = Literal["history", "finals"]
PARTS: tuple[Part, ...] = ("history", "finals")
Key = tuple[tuple[str, int, int], ...]


def _key(part: Part, layout: ResultsDir) -> Key:
    """What the part was loaded from: each file's path, size and modification time."""
    paths = [layout.history] if part == "history" else sorted(layout.final_logs().values())
    stats = [(str(p.resolve()), p.stat()) for p in paths]
    return tuple((name, st.st_size, st.st_mtime_ns) for name, st in stats)


@dataclass
class Loaded:
    """What `take` hands a check: each part, or None when it was not loaded (or is stale)."""

    history: History | None = None
    finals: FinalLogs | None = None


class Preloaded:
    """The parts of one folder loaded ahead of its check; `take` waits for a load under way."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._folder: Path | None = None
        self._held: dict[Part, tuple[Key, History | FinalLogs]] = {}

    def load(self, spark: SparkSession, layout: ResultsDir, part: Part = "history") -> None:
        """Load and cache `layout`'s `part`, dropping anything held for another folder.

        Raises InputError when its files are malformed (the check says so).
        """
        with self._lock:
            if self._folder != layout.path.resolve():
                self._drop()
                self._folder = layout.path.resolve()
            held = self._held.pop(part, None)
            if held is not None:
                held[1].unpersist()
            key = _key(part, layout)
            if part == "history":
                cores = spark.sparkContext.defaultParallelism
                partitions = shuffle_partitions_for(layout.history.stat().st_size, cores)
                spark.conf.set("spark.sql.shuffle.partitions", str(partitions))
                self._held[part] = key, load_history(spark, [layout])
            else:
                self._held[part] = key, load_final_logs(spark, [layout])

    def take(self, layout: ResultsDir) -> Loaded:
        """The parts loaded for `layout` from files still unchanged (then no longer held)."""
        with self._lock:
            held, folder = self._held, self._folder
            self._held, self._folder = {}, None
        loaded = Loaded()
        for part, (key, data) in held.items():
            if folder == layout.path.resolve() and key == _key(part, layout):
                setattr(loaded, part, data)
            else:
                data.unpersist()
        return loaded

    def _drop(self) -> None:
        for _, data in self._held.values():
            data.unpersist()
        self._held = {}


PRELOADED = Preloaded()
