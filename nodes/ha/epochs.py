"""A log's epoch map and the consistency check between a slave's log and its master's.

In master-slave mode an entry's term is the epoch of the master that wrote it, and a
master takes a fresh epoch whenever it starts or is promoted, so one epoch's entries all
come from one master's log, written once each. Terms never decrease along a log, so a
log is described by where each epoch's run of entries starts (`EpochStart`), and two logs
hold the same entries up to the end of the last epoch run they share with the same start
(RocketMQ 5's epoch file, `findLastConsistentPoint`). The master checks every slave report
against its own map and tells a slave whose log goes further to cut it there: after a
promotion, a slave may hold entries the old master wrote that the new one never got.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from nodes.logview import ReadableLog
from nodes.messages import EpochStart
from nodes.store.logstore import Entry


class EpochMap:
    """Where each epoch's run of entries starts in one log, kept up to date with its writes."""

    __slots__ = ("starts",)

    def __init__(self, starts: Iterable[EpochStart] = ()) -> None:
        self.starts = list(starts)

    @classmethod
    def of(cls, log: ReadableLog) -> EpochMap:
        """The map of `log`, found by binary search (terms never decrease along a log)."""
        starts: list[EpochStart] = []
        index, end = max(log.begin_index, 0), log.end_index
        while index <= end:
            term = log.term_at(index)
            starts.append(EpochStart(term, index))
            lo, hi = index + 1, end + 1  # the first index after `index` with a larger term
            while lo < hi:
                mid = (lo + hi) // 2
                if log.term_at(mid) > term:
                    hi = mid
                else:
                    lo = mid + 1
            index = lo
        return cls(starts)

    def appended(self, entries: Sequence[Entry]) -> None:
        """`entries` were appended at the log's end."""
        last = self.starts[-1].epoch if self.starts else None
        for e in entries:
            if e.term != last:
                self.starts.append(EpochStart(e.term, e.index))
                last = e.term

    def appended_run(self, epoch: int, first: int) -> None:
        """Entries of `epoch` were appended from index `first` on."""
        if not self.starts or self.starts[-1].epoch != epoch:
            self.starts.append(EpochStart(epoch, first))

    def truncated(self, after: int) -> None:
        """Every entry after `after` was dropped."""
        while self.starts and self.starts[-1].first_index > after:
            self.starts.pop()


def _runs(starts: Sequence[EpochStart], end: int) -> list[tuple[int, int, int]]:
    """(epoch, first index, last index) of each run of a log ending at `end`."""
    runs = []
    for i, start in enumerate(starts):
        last = starts[i + 1].first_index - 1 if i + 1 < len(starts) else end
        if start.first_index <= last:
            runs.append((start.epoch, start.first_index, last))
    return runs


def last_consistent(
    theirs: Sequence[EpochStart], their_end: int, mine: Sequence[EpochStart], my_end: int
) -> int:
    """The last index up to which a log (`theirs`, ending at `their_end`) holds the same
    entries as mine; -1 when they share nothing. Equal to `their_end` when theirs is a
    prefix of mine."""
    my_runs = {epoch: (first, last) for epoch, first, last in _runs(mine, my_end)}
    for epoch, first, last in reversed(_runs(theirs, their_end)):
        run = my_runs.get(epoch)
        if run is not None and run[0] == first:
            return min(last, run[1])
    return -1
