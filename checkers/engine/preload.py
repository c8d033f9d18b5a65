"""Load a results folder's inputs before its check, while the run that wrote them is still ending.

The history is complete once the last fault is stopped, the final logs once the final
reads are done; the heal, the final reads and collecting the node files take seconds more,
and reading, pairing and caching the history and the final logs, and the screen over them
(`screen.findings`), are most of a warm check. `load` does one part (`history` or `finals`)
early, in this process or on the checker service, and once both are held it screens them;
`take` hands what was loaded to the check of the same folder, each part as long as the files
it was loaded from are unchanged, and the screen's findings with both. The check itself is
left with what needs the collected node files (the election check, the stores' flags). One
folder is held at a time.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from pyspark.sql import SparkSession

from checkers.checks import screen
from checkers.checks.anomalies import DEFAULT_WITNESSES, Found
from checkers.checks.finallogs import FinalLogs, load_final_logs
from checkers.checks.history import History, load_history
from checkers.checks.tables import Tables
from checkers.engine.spark import fit_to_input
from checkers.layout import ResultsDir

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
    """What `take` hands a check: each part, or None when it was not loaded (or is stale), and
    the screen's findings from both (with that many witnesses) when it ran."""

    history: History | None = None
    finals: FinalLogs | None = None
    screened: Found | None = None
    witnesses: int | None = None


class Preloaded:
    """The parts of one folder loaded ahead of its check; `take` waits for a load under way."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._folder: Path | None = None
        self._held: dict[Part, tuple[Key, History | FinalLogs]] = {}
        self._screened: tuple[int, Found] | None = None

    def load(
        self,
        spark: SparkSession,
        layout: ResultsDir,
        part: Part = "history",
        *,
        witnesses: int = DEFAULT_WITNESSES,
    ) -> None:
        """Load and cache `layout`'s `part`, dropping anything held for another folder; then,
        with both parts held, screen them (`witnesses` a check).

        Raises InputError when its files are malformed (the check says so).
        """
        with self._lock:
            if self._folder != layout.path.resolve():
                self._drop()
                self._folder = layout.path.resolve()
            held = self._held.pop(part, None)
            self._screened = None
            if held is not None:
                held[1].unpersist()
            key = _key(part, layout)
            if part == "history":
                fit_to_input(spark, layout.history.stat().st_size)
                self._held[part] = key, load_history(spark, [layout])
            else:
                self._held[part] = key, load_final_logs(spark, [layout])
            if len(self._held) == len(PARTS):
                tables = Tables(self._history(), self._finals())
                self._screened = witnesses, screen.findings(spark, tables, witnesses)

    def take(self, layout: ResultsDir) -> Loaded:
        """The parts loaded for `layout` from files still unchanged (then no longer held)."""
        with self._lock:
            held, folder, screened = self._held, self._folder, self._screened
            self._held, self._folder, self._screened = {}, None, None
        loaded = Loaded()
        for part, (key, data) in held.items():
            if folder == layout.path.resolve() and key == _key(part, layout):
                setattr(loaded, part, data)
            else:
                data.unpersist()
        if screened is not None and loaded.history is not None and loaded.finals is not None:
            loaded.witnesses, loaded.screened = screened
        return loaded

    def _history(self) -> History:
        data = self._held["history"][1]
        assert isinstance(data, History)
        return data

    def _finals(self) -> FinalLogs:
        data = self._held["finals"][1]
        assert isinstance(data, FinalLogs)
        return data

    def _drop(self) -> None:
        for _, data in self._held.values():
            data.unpersist()
        self._held, self._screened = {}, None


PRELOADED = Preloaded()
