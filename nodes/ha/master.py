"""The master's side: one stream per slave (HAService/HAConnection) and the appends that wait
for a slave (GroupTransferService), as plain state; `nodes.ha.node` drives them.

A peer becomes a slave of this master by reporting (HaReport) for the master's epoch. Each
report is checked against the master's epoch map (`nodes.ha.epochs`): a slave whose log
goes beyond what it shares with the master's is told where to cut it and gets nothing
else until it reports a log that is a prefix of the master's (it is then *verified*). A
verified slave is streamed entries from its log end on, at most `max_inflight_entries`
beyond it; when its end does not advance for `resend_ms` while entries are in flight
(a link that dropped them, a slave that restarted), the stream starts again from its end.
A stream (re)starts with the slave's last entry, which the slave checks against its own
before it appends anything after it (`nodes.ha.node`, "Replication").

A slave's `acked` offset is what it reported durable (fsynced); only a verified slave's
counts. A SYNC_MASTER acknowledges an entry once some slave's acked offset reaches it
(RocketMQ's push2SlaveMaxOffset); a slave is *available* (isSlaveOK) when it reported
within `housekeeping_ms` and, after the append, lags it by at most `max_slave_lag`.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from nodes.ha.config import HaConfig
from nodes.ha.epochs import EpochMap, last_consistent
from nodes.logview import ReadableLog
from nodes.messages import HaReport
from nodes.store.logstore import Entry


@dataclass(slots=True)
class SlaveStream:
    """What the master knows of one slave and how far it streamed to it."""

    peer: str
    acked: int = -1  # the slave's durable offset, as reported
    end: int = -1  # the slave's log end, as reported
    next_send: int = 0
    verified: bool = False
    last_report: float = 0.0
    last_progress: float = 0.0  # when `end` last advanced, or streaming (re)started


class Streams:
    """Every slave of this master in its current epoch."""

    def __init__(self, config: HaConfig) -> None:
        self._config = config
        self._slaves: dict[str, SlaveStream] = {}

    def clear(self) -> None:
        """A new epoch: every slave must report (and be verified) again."""
        self._slaves.clear()

    def on_report(self, peer: str, report: HaReport, mine: EpochMap, my_end: int, now: float) -> int | None:
        """Take a slave's report; the index its log must be cut after, or None when it is a
        prefix of mine (verified: its acked offset counts and it is streamed to)."""
        st = self._slaves.get(peer)
        if st is None:
            st = self._slaves[peer] = SlaveStream(peer)
        st.last_report = now
        point = last_consistent(report.epochs, report.end_index, mine.starts, my_end)
        if point != report.end_index:
            st.verified = False
            return point
        if not st.verified or report.end_index >= st.next_send or report.end_index < st.end:
            st.next_send = max(report.end_index, 0)  # (re)start, or the slave lost its tail: resend
            st.last_progress = now
        elif report.end_index > st.end:
            st.last_progress = now
        st.verified = True
        st.end = report.end_index
        st.acked = min(report.offset, report.end_index)
        return None

    def live(self, now: float) -> Iterator[SlaveStream]:
        """The verified slaves heard from within `housekeeping_ms`."""
        horizon = now - self._config.housekeeping_ms
        return (st for st in self._slaves.values() if st.verified and st.last_report >= horizon)

    def max_acked(self) -> int:
        """The highest durable offset a verified slave reported (-1 if none)."""
        return max((st.acked for st in self._slaves.values() if st.verified), default=-1)

    def slave_ok(self, last: int, now: float) -> bool:
        """RocketMQ's isSlaveOK: a live slave lags index `last` by at most `max_slave_lag`."""
        return any(last - st.acked <= self._config.max_slave_lag for st in self.live(now))

    def best(self, now: float) -> str | None:
        """The live slave furthest along (for a consumer told to pull from a slave)."""
        live = list(self.live(now))
        return max(live, key=lambda st: (st.acked, st.peer)).peer if live else None

    def pump(self, log: ReadableLog, now: float, send: Callable[[str, list[Entry]], None]) -> None:
        """Send each live slave what it lacks, within the in-flight bound."""
        cfg = self._config
        end = log.end_index
        for st in self.live(now):
            if st.next_send > st.end + 1 and now - st.last_progress > cfg.resend_ms:
                st.next_send, st.last_progress = max(st.end, 0), now  # in flight too long: lost
            while st.next_send <= end:
                room = cfg.max_inflight_entries - (st.next_send - st.end - 1)
                if room <= 0:
                    break
                last = st.next_send + min(cfg.max_batch_entries, room) - 1
                entries = log.get_range(st.next_send, min(last, end), cfg.max_batch_bytes)
                if not entries:
                    break
                send(st.peer, entries)
                st.next_send = entries[-1].index + 1


@dataclass(slots=True)
class PendingAppend:
    """An append waiting to be acknowledged."""

    request_id: int
    first: int
    last: int
    deadline: float


class GroupTransfer:
    """The appends waiting for their acknowledgement, in index order (GroupTransferService)."""

    def __init__(self) -> None:
        self._pending: deque[PendingAppend] = deque()
        self.entries = 0  # entries waiting

    def add(self, request_id: int, first: int, last: int, deadline: float) -> None:
        self._pending.append(PendingAppend(request_id, first, last, deadline))
        self.entries += last - first + 1

    def _pop(self) -> PendingAppend:
        p = self._pending.popleft()
        self.entries -= p.last - p.first + 1
        return p

    def release(self, acked: int) -> list[PendingAppend]:
        """The appends now acknowledged: every index up to `acked` is."""
        done = []
        while self._pending and self._pending[0].last <= acked:
            done.append(self._pop())
        return done

    def expired(self, now: float) -> list[PendingAppend]:
        """The appends whose deadline passed (deadlines grow with the indexes)."""
        done = []
        while self._pending and self._pending[0].deadline <= now:
            done.append(self._pop())
        return done

    def drain(self) -> list[PendingAppend]:
        """Every append still waiting."""
        done = list(self._pending)
        self._pending.clear()
        self.entries = 0
        return done
