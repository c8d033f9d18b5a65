"""Push replication: the leader's per-follower dispatcher and the follower's push handling.

Leader side, one `Dispatcher` per follower, DLedger's states:
COMPARE (find the last index where both logs agree, stepping back a whole conflicting
term at a time on the follower's hint) -> TRUNCATE (cut the follower's log after it, when
it is longer) -> APPEND (stream batches, at most `max_inflight_pushes` unacknowledged,
resent from the match index when the oldest is not acknowledged in time), with COMMIT
pushes when idle. Any error or unexpected answer sends it back to COMPARE.

Follower side, `handle_push`: applies a push from its current leader and term, appending
only entries that continue its log, and says how far its log now matches the leader's.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

from nodes.coverage import hit
from nodes.logview import LogView, ReadableLog
from nodes.messages import PushRequest, PushResponse, PushType, ResponseCode
from nodes.store.logstore import Entry
from nodes.timing import Timing


class SafetyError(AssertionError):
    """The core was asked to do something that would break a Raft safety property."""


def commits_by_counting(entry_term: int, term: int) -> bool:
    """Whether a leader of `term` may commit an entry of `entry_term` because a quorum holds
    it: only entries of its own term (Raft's Figure 8); earlier ones commit under them."""
    return entry_term == term


def quorum_index(indexes: list[int], quorum: int) -> int:
    """The highest index held by at least `quorum` members (the median for odd clusters)."""
    return sorted(indexes, reverse=True)[quorum - 1]


@dataclass(slots=True)
class _Inflight:
    seq: int
    last: int
    sent_at: float


class Dispatcher:
    """The leader's replication state machine for one follower."""

    __slots__ = (
        "_epoch",
        "_inflight",
        "_match_seq",
        "_retry_at",
        "_sent_commit",
        "_sent_commit_at",
        "_wait_sent_at",
        "_wait_seq",
        "compare_index",
        "last_ack_at",
        "match_index",
        "next_index",
        "peer",
        "state",
    )

    def __init__(self, peer: str, end_index: int, now: float) -> None:
        self.peer = peer
        self.state = PushType.COMPARE
        self.match_index = -1
        self._match_seq = -1
        self.compare_index = end_index
        self.next_index = end_index + 1
        self.last_ack_at = now
        self._inflight: deque[_Inflight] = deque()
        self._wait_seq = -1
        self._wait_sent_at = 0.0
        self._retry_at = now
        self._epoch = 0
        self._sent_commit = -1
        self._sent_commit_at = now

    def _reset(self, now: float, compare_index: int, retry_ms: float) -> None:
        """Back to COMPARE at `compare_index`, sending no sooner than `retry_ms` from now."""
        self.state = PushType.COMPARE
        self.compare_index = compare_index
        self._inflight.clear()
        self._wait_seq = -1
        self._retry_at = now + retry_ms

    def pump(
        self,
        now: float,
        store: ReadableLog,
        term: int,
        leader: str,
        commit: int,
        timing: Timing,
        next_seq: Callable[[], int],
        send: Callable[[str, PushRequest], None],
    ) -> None:
        """Send whatever this state allows now (and resend what timed out)."""
        if now < self._retry_at:
            return
        if self.state is not PushType.APPEND:
            if self._wait_seq >= 0 and now - self._wait_sent_at < timing.push_timeout_ms:
                return
            index = min(self.compare_index, store.end_index)
            self.compare_index = index
            seq = next_seq()
            self._wait_seq, self._wait_sent_at = seq, now
            send(
                self.peer, PushRequest(term, leader, seq, self.state, index, store.term_at(index), commit, [])
            )
            return
        inflight = self._inflight
        if inflight and now - inflight[0].sent_at >= timing.push_timeout_ms:
            hit("push.resend-timeout")
            inflight.clear()  # resend everything not acknowledged, from the match index
            self.next_index = self.match_index + 1
            self._epoch = next_seq()
        end = store.end_index
        while len(inflight) < timing.max_inflight_pushes and self.next_index <= end:
            first = self.next_index
            # at most max_batch_bytes of bodies, but always one entry: a push never stalls
            entries = store.get_range(
                first, min(end, first + timing.max_batch_entries - 1), timing.max_batch_bytes
            )
            seq = next_seq()
            last = entries[-1].index
            send(
                self.peer,
                PushRequest(
                    term, leader, seq, PushType.APPEND, first - 1, store.term_at(first - 1), commit, entries
                ),
            )
            inflight.append(_Inflight(seq, last, now))
            self.next_index = last + 1
            self._sent_commit, self._sent_commit_at = commit, now
        # COMMIT when idle: soon after the commit index moved (a busy stream carries it in
        # its APPENDs instead), else once per heartbeat interval.
        wait = timing.push_retry_ms if commit > self._sent_commit else timing.heartbeat_ms
        if not inflight and now - self._sent_commit_at >= wait:
            send(self.peer, PushRequest(term, leader, next_seq(), PushType.COMMIT, -1, -1, commit, []))
            self._sent_commit, self._sent_commit_at = commit, now

    def on_response(self, resp: PushResponse, now: float, store: ReadableLog, timing: Timing) -> bool:
        """Take one answer of this term; True when the match index advanced."""
        self.last_ack_at = now
        advanced = False
        if resp.code is ResponseCode.SUCCESS and resp.match_index > self.match_index:
            self.match_index, self._match_seq = resp.match_index, resp.seq
            advanced = True
        elif resp.end_index < self.match_index and resp.seq > self._match_seq:
            # The follower lost entries it had acknowledged (power loss under async flush):
            # what it matches is unknown again.
            hit("push.follower-lost-entries")
            self.match_index = -1
            self._reset(now, min(resp.end_index, store.end_index), 0.0)
            return False
        if resp.type is PushType.COMMIT:
            if (resp.code is ResponseCode.SUCCESS and resp.match_index < self.match_index
                    and resp.seq > self._match_seq and not self._inflight):
                # The follower restarted and no longer knows that its log matches ours, so it
                # cannot learn the commit index: compare again (nothing else would, when idle).
                hit("push.restarted-follower")
                self._reset(now, store.end_index, 0.0)
            return advanced
        if self.state is not PushType.APPEND:
            if resp.seq != self._wait_seq or resp.type is not self.state:
                return advanced
            self._wait_seq = -1
            if resp.code is ResponseCode.INCONSISTENT_STATE:
                hit("push.leader.step-back")
                # never below the match index: what the follower acknowledged stays
                self.compare_index = max(min(resp.hint_index, self.compare_index - 1), self.match_index)
            elif resp.code is not ResponseCode.SUCCESS:
                self._reset(now, store.end_index, timing.push_retry_ms)
            elif self.state is PushType.COMPARE and resp.end_index > resp.match_index:
                self.state = PushType.TRUNCATE
            else:
                self.state = PushType.APPEND
                self.next_index = resp.match_index + 1
                self._epoch = resp.seq
            return advanced
        inflight = self._inflight
        while inflight and inflight[0].last <= self.match_index:
            inflight.popleft()
        if resp.code is ResponseCode.SUCCESS or resp.seq < self._epoch:
            return advanced
        if resp.code is ResponseCode.INCONSISTENT_INDEX:  # a gap (reordered pushes): resend from match
            inflight.clear()
            self.next_index = self.match_index + 1
            self._epoch = resp.seq + 1
        elif resp.code is ResponseCode.INCONSISTENT_STATE:  # the follower lost entries: find where
            self._reset(now, max(min(resp.hint_index, store.end_index), self.match_index), 0.0)
        else:
            self._reset(now, store.end_index, timing.push_retry_ms)
        return advanced


def conflict_hint(store: ReadableLog, index: int, commit: int) -> int:
    """Where the leader should compare next after a mismatch at `index` (below its whole term)."""
    end = store.end_index
    if index > end:
        return end
    term = store.term_at(index)
    i = index - 1
    while i > commit and store.term_at(i) == term:
        i -= 1
    return i


@dataclass(frozen=True, slots=True)
class PushOutcome:
    """What a follower made of a push: its answer code, how far it matches, and a hint."""

    code: ResponseCode
    match_index: int
    hint_index: int


def _holds(store: ReadableLog, index: int, term: int) -> bool:
    return index == -1 or (store.begin_index <= index <= store.end_index and store.term_at(index) == term)


def handle_push(store: LogView, req: PushRequest, commit: int, verified: int) -> PushOutcome:
    """Apply a COMPARE, TRUNCATE or APPEND push of the current leader to the follower's store.

    The caller checked term and leader. `verified` is how far the log is known to match
    this leader (what it acknowledged). TRUNCATE never cuts at or below `commit` or
    `verified`: a push can be overtaken by later ones, and those entries match anyway.
    A conflicting entry at or below `commit` raises SafetyError (a committed entry lost).
    """
    if req.type is PushType.APPEND and req.index > store.end_index:
        hit("push.append.gap")
        return PushOutcome(ResponseCode.INCONSISTENT_INDEX, -1, store.end_index)
    if not _holds(store, req.index, req.index_term):
        hit("push.compare.mismatch")
        return PushOutcome(ResponseCode.INCONSISTENT_STATE, -1, conflict_hint(store, req.index, commit))
    if req.type is PushType.COMPARE:
        hit("push.compare.match")
        return PushOutcome(ResponseCode.SUCCESS, req.index, -1)
    if req.type is PushType.TRUNCATE:
        keep = max(req.index, commit, verified)
        if store.end_index > keep:
            hit("push.truncate")
            _truncate(store, keep, commit)
        return PushOutcome(ResponseCode.SUCCESS, keep, -1)
    entries: list[Entry] = req.entries
    if not entries:
        return PushOutcome(ResponseCode.SUCCESS, req.index, -1)
    end = store.end_index
    if entries[0].index <= end:
        k = 0
        while (
            k < len(entries)
            and entries[k].index <= end
            and store.term_at(entries[k].index) == entries[k].term
        ):
            k += 1
        if k:
            hit("push.append.overlap-skip")
        if k < len(entries) and entries[k].index <= end:
            hit("push.append.conflict-repair")
            _truncate(store, entries[k].index - 1, commit)
        entries = entries[k:]
    if entries:
        store.append(entries)
    return PushOutcome(ResponseCode.SUCCESS, req.entries[-1].index, -1)


def _truncate(store: LogView, after: int, commit: int) -> None:
    if after < commit:
        raise SafetyError(f"asked to truncate after {after}, below the commit index {commit}")
    store.truncate_after(after)
