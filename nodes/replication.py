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


class SafetyError(Exception):
    """The core was asked to do something that would break a Raft safety property."""


def commits_by_counting(entry_term: int, term: int) -> bool:
    """Whether a leader of `term` may commit an entry of `entry_term` because a quorum holds
    it: only entries of its own term (Raft's Figure 8); earlier ones commit under them."""
    return entry_term == term


def step_back(compare_index: int, hint_index: int, match_index: int) -> int:
    """Where to compare next after a mismatch at `compare_index`: the follower's hint, at
    least one entry back, but never below what the follower acknowledged (`match_index`)."""
    return max(min(hint_index, compare_index - 1), match_index)


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
        "_above",
        "_epoch",
        "_floor",
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
        self._floor: int | None = None  # in COMPARE: the highest index known to match
        self._above: int | None = None  # in COMPARE: the lowest index known not to match

    def _reset(self, now: float, compare_index: int, retry_ms: float) -> None:
        """Back to COMPARE at `compare_index`, sending no sooner than `retry_ms` from now."""
        self.state = PushType.COMPARE
        self.compare_index = compare_index
        self._floor = self._above = None
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
        if self._oldest_timed_out(now, timing):
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

    def _oldest_timed_out(self, now: float, timing: Timing) -> bool:
        """Whether the oldest unacknowledged push waited `push_timeout_ms` (it or its answer was lost)."""
        inflight = self._inflight
        return bool(inflight) and now - inflight[0].sent_at >= timing.push_timeout_ms

    def _narrow(self, follower_end: int, seq: int) -> None:
        """After a compare: look between the highest index known to match (`_floor`) and the
        lowest known not to (`_above`) until they are adjacent, then TRUNCATE the follower's
        log after the highest match, or APPEND from there when it holds nothing beyond.

        The follower's hint steps back a whole term, possibly below entries that still agree
        with ours (some of them committed): cutting there would remove committed entries
        from a majority. So, like DLedger's one-by-one compare, we truncate only after the
        highest match (by log matching, everything after it conflicts), found by halving.
        """
        floor, above = self._floor, self._above
        assert floor is not None
        if above is not None and floor + 1 < above and follower_end > floor:
            self.compare_index = (floor + above) // 2
        elif follower_end > floor:
            self.state, self.compare_index = PushType.TRUNCATE, floor
            self._floor = self._above = None
        else:
            self._append_from(floor + 1, seq)

    def _append_from(self, index: int, seq: int) -> None:
        self.state = PushType.APPEND
        self.next_index = index
        self._epoch = seq
        self._floor = self._above = None

    def _lost_acknowledged(self, resp: PushResponse) -> bool:
        """Whether the follower's log now ends below what it acknowledged before this answer."""
        return resp.end_index < self.match_index and resp.seq > self._match_seq

    def _forgot_match(self, resp: PushResponse) -> bool:
        """Whether a COMMIT answer says the follower no longer knows how far it matches (it
        restarted), while nothing in flight would tell it."""
        return (resp.code is ResponseCode.SUCCESS and resp.match_index < self.match_index
                and resp.seq > self._match_seq and not self._inflight)

    def on_response(self, resp: PushResponse, now: float, store: ReadableLog, timing: Timing) -> bool:
        """Take one answer of this term; True when the match index advanced."""
        self.last_ack_at = now
        advanced = False
        if resp.code is ResponseCode.SUCCESS and resp.match_index > self.match_index:
            self.match_index, self._match_seq = resp.match_index, resp.seq
            advanced = True
        elif self._lost_acknowledged(resp):
            # The follower lost entries it had acknowledged (power loss under async flush):
            # what it matches is unknown again.
            hit("push.follower-lost-entries")
            self.match_index = -1
            self._reset(now, min(resp.end_index, store.end_index), 0.0)
            return False
        if resp.type is PushType.COMMIT:
            if self._forgot_match(resp):
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
                above = self._above
                self._above = self.compare_index if above is None else min(above, self.compare_index)
                if self._floor is None:
                    # never below the match index: what the follower acknowledged stays
                    self.compare_index = step_back(self.compare_index, resp.hint_index, self.match_index)
                else:
                    self._narrow(resp.end_index, resp.seq)
            elif resp.code is not ResponseCode.SUCCESS:
                self._reset(now, store.end_index, timing.push_retry_ms)
            elif self.state is PushType.COMPARE:
                self._floor = resp.match_index if self._floor is None else max(self._floor, resp.match_index)
                self._narrow(resp.end_index, resp.seq)
            else:  # truncated: stream from there
                self._append_from(resp.match_index + 1, resp.seq)
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
    held = _held(store, entries)
    if held:
        hit("push.append.overlap-skip")
    entries = entries[held:]
    if entries and entries[0].index <= store.end_index:
        hit("push.append.conflict-repair")
        _truncate(store, entries[0].index - 1, commit)
    if entries:
        store.append(entries)
    return PushOutcome(ResponseCode.SUCCESS, req.entries[-1].index, -1)


def _held(store: ReadableLog, entries: list[Entry]) -> int:
    """How many of the pushed `entries`, from the first, the follower already holds (same
    index and term): those are skipped, and the first one it holds in another term starts
    the conflict its log is cut at."""
    end = store.end_index
    k = 0
    while k < len(entries) and entries[k].index <= end and store.term_at(entries[k].index) == entries[k].term:
        k += 1
    return k


def _truncate(store: LogView, after: int, commit: int) -> None:
    if after < commit:
        raise SafetyError(f"asked to truncate after {after}, below the commit index {commit}")
    store.truncate_after(after)
