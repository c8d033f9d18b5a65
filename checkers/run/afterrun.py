"""Every after-run reader of a results folder, fed by one pass over its files.

The history and each node's events are read once (`checkers.run.reader.RunReader`) by listeners:
the fault pairing (`checkers.run.faultperiods`), the fault log's client outcomes
(`checkers.run.faultlog`), the report's timeline (`checkers.pages.timeline`), the op timeline's chunks
(`checkers.pages.optimeline`) and the nodes' series, who led when included (`checkers.run.nodeseries`).
A run makes one as soon as its history is complete, reads the events once they are collected,
writes the fault log into test.json before the check and hands the readers to the report after
it (`checkers.pages.report.write_report`, which otherwise makes its own).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from checkers.pages.optimeline import OpTimeline
from checkers.pages.timeline import TimelineReader
from checkers.run.faultlog import Outcomes, fault_log_of
from checkers.run.faultperiods import FaultPairing
from checkers.run.nodeseries import NodeSeries, SeriesReader
from checkers.run.reader import OpListener, RunReader


class AfterRun:
    """The readers of the run in `folder`, whose test.json says `test`; with `for_fault_log`,
    the client outcomes the fault log needs too."""

    def __init__(self, folder: Path, test: dict[str, Any], *, for_fault_log: bool = False) -> None:
        self.folder = folder
        self.test = test
        self.reader = RunReader(folder)
        self.faults = FaultPairing.of(test.get("faults"))
        self.outcomes = Outcomes() if for_fault_log else None
        self.timeline = TimelineReader(self.faults)
        self.ops = OpTimeline(folder, test)
        self.series: NodeSeries | None = None  # None without events, or without a way to place them
        self.series_note: str | None = None  # why there is no series, or what it left out

    def read_history(self) -> None:
        """The pass over history.jsonl; InputError names a missing file or a malformed line."""
        listeners: list[OpListener] = [self.faults, self.timeline, self.ops]
        self.reader.history(listeners + ([self.outcomes] if self.outcomes else []))

    def read_events(self) -> None:
        """The pass over the nodes' events.jsonl, when they can be placed on the history's time line."""
        wall = self.test.get("history_wall_ns")
        logs = self.reader.event_logs
        if not logs:
            self.series_note = "No leader or commit-index plot: the folder has no nodes/<node>/events.jsonl."
        elif not isinstance(wall, int):
            self.series_note = ("No leader or commit-index plot: test.json has no history_wall_ns, so the "
                                "nodes' events cannot be placed on the history's time line.")
        else:
            series = SeriesReader(sorted(logs), wall)
            self.reader.events([series])
            self.series = series.series
            if self.series.unplaced:
                self.series_note = (f"{self.series.unplaced} node event line(s) without real_ns could not "
                                    "be placed: left out.")

    def fault_log(self) -> dict[str, Any]:
        """test.json's `fault_log`, once both passes are done (made `for_fault_log`)."""
        assert self.outcomes is not None, "made without for_fault_log"
        return fault_log_of(self.faults.periods, self.outcomes, self.series)

    def close(self) -> None:
        self.reader.close()
