"""Leadership confirmation by heartbeat rounds, and the reads waiting on it.

The leader numbers each heartbeat round (`seq`). A follower's SUCCESS for round s means it
still followed this leader after the leader sent s, so once a quorum (the leader
included) acknowledged some round >= s, the leader knows it led when s went out. That
serves three purposes: `read-index` reads (Raft thesis 6.4: a read that arrived before
round s was sent is linearizable once s is confirmed and the commit index covers the
leader's own term), `lease` reads (no round needed while the last confirmed round was
sent less than the lease ago) and the step-down of a leader that lost its quorum.
"""

from __future__ import annotations

from dataclasses import dataclass

from nodes.logview import ReadableLog
from nodes.messages import ResponseCode
from nodes.store.logstore import Entry


class Confirmations:
    """Which heartbeat round a quorum acknowledged, when it was sent, and the current round's tally."""

    __slots__ = (
        "_acked",
        "_answered_by",
        "_quorum",
        "_sent",
        "answered",
        "confirmed_at",
        "confirmed_seq",
        "inconsistent",
        "last_seq",
        "not_ready",
        "success",
    )

    def __init__(self, others: list[str], quorum: int, now: float) -> None:
        self._acked = dict.fromkeys(others, -1)
        self._quorum = quorum
        self._sent: dict[int, float] = {}
        self.last_seq = -1
        self.confirmed_seq = -1
        self.confirmed_at = now
        self.answered = self.success = self.not_ready = self.inconsistent = 0
        self._answered_by: set[str] = set()

    def start(self, seq: int, now: float) -> None:
        """A new round `seq` goes out now; the leader counts as its own first success."""
        self._sent[seq] = now
        self.last_seq = seq
        self.answered, self.success, self.not_ready, self.inconsistent = 0, 1, 0, 0
        self._answered_by = set()
        self._recompute()

    def answer(self, peer: str, seq: int, code: ResponseCode) -> bool:
        """Count one heartbeat answer; True when the confirmed round advanced."""
        before = self.confirmed_seq
        # Only rounds this leadership sent count: a late answer to an earlier leadership's
        # heartbeat (same term, re-elected) must not confirm this one.
        if code is ResponseCode.SUCCESS and seq in self._sent and seq > self._acked.get(peer, seq):
            self._acked[peer] = seq
            self._recompute()
        if seq == self.last_seq and peer not in self._answered_by:
            self._answered_by.add(peer)
            self.answered += 1
            if code is ResponseCode.SUCCESS:
                self.success += 1
            elif code is ResponseCode.TERM_NOT_READY:
                self.not_ready += 1
            elif code is ResponseCode.INCONSISTENT_LEADER:
                self.inconsistent += 1
        return self.confirmed_seq > before

    def confirms(self, seq: int) -> bool:
        """Whether a quorum acknowledged round `seq` or a later one (the leader led when it went out)."""
        return seq <= self.confirmed_seq

    @property
    def round_complete(self) -> bool:
        return self.answered >= len(self._acked)

    def _recompute(self) -> None:
        acked = sorted([self.last_seq, *self._acked.values()], reverse=True)[self._quorum - 1]
        if acked > self.confirmed_seq:
            self.confirmed_seq = acked
            self.confirmed_at = self._sent[acked]
            for seq in [s for s in self._sent if s < acked]:
                del self._sent[seq]


@dataclass(slots=True)
class PendingRead:
    """A read waiting for round `need_seq` to be confirmed (and the leader's term to commit)."""

    request_id: int
    first: int
    last: int
    need_seq: int
    deadline: float


def read_range(
    store: ReadableLog, first: int, last: int, limit: int, max_bytes: int | None = None
) -> tuple[list[Entry], int]:
    """Stored entries `first..last`, cut at `limit` (the commit index, or the end for unsafe
    reads) and to bodies of at most `max_bytes` (the first entry always); with the last index
    of the range they answer for: `last`, or the last entry's when `max_bytes` cut them."""
    top = min(last, limit)
    first = max(first, store.begin_index, 0)
    if first > top:
        return [], last
    entries = store.get_range(first, top, max_bytes)
    if entries and entries[-1].index < min(top, store.end_index):
        return entries, entries[-1].index
    return entries, last
