"""Push replication one transition at a time (docs/dledger.md "Replication (push)", "Commit")."""

from __future__ import annotations

import pytest

from nodes.messages import PushRequest, PushResponse, PushType, ResponseCode
from nodes.replication import Dispatcher, SafetyError, handle_push, quorum_index
from nodes.store.logstore import Entry
from nodes.store.memstore import MemStore
from nodes.timing import Timing
from tests.support.scripted import entries

TIMING = Timing(max_inflight_pushes=2, max_batch_entries=3, push_timeout_ms=100.0, push_retry_ms=10.0)
OK, BAD = ResponseCode.SUCCESS, ResponseCode.INCONSISTENT_STATE


def store_with(*terms: int) -> MemStore:
    store = MemStore()
    store.append(entries(*terms))
    store.flush()
    return store


class Leader:
    """A dispatcher plus the pushes it sends."""

    def __init__(self, store: MemStore, now: float = 0.0) -> None:
        self.store = store
        self.disp = Dispatcher("n2", store.end_index, now)
        self.sent: list[PushRequest] = []
        self.seq = 0

    def _seq(self) -> int:
        self.seq += 1
        return self.seq

    def pump(self, now: float = 0.0, commit: int = -1) -> list[PushRequest]:
        before = len(self.sent)
        self.disp.pump(now, self.store, 7, "n1", commit, TIMING, self._seq, lambda _p, m: self.sent.append(m))
        return self.sent[before:]

    def answer(self, req: PushRequest, code: ResponseCode, match: int = -1, end: int = -1, hint: int = -1,
               now: float = 0.0) -> None:
        resp = PushResponse(7, code, req.seq, req.type, match, end, hint)
        self.disp.on_response(resp, now, self.store, TIMING)


def test_quorum_index_is_the_median_match() -> None:
    assert quorum_index([9, 3, 7, 5, 1], quorum=3) == 5
    assert quorum_index([4, 4, -1], quorum=2) == 4


def test_compare_match_with_a_longer_follower_goes_to_truncate_then_append() -> None:
    leader = Leader(store_with(1, 1, 2))
    (compare,) = leader.pump()
    assert (compare.type, compare.index, compare.index_term) == (PushType.COMPARE, 2, 2)
    leader.answer(compare, OK, match=2, end=5)
    (truncate,) = leader.pump()
    assert (truncate.type, truncate.index) == (PushType.TRUNCATE, 2)
    leader.answer(truncate, OK, match=2, end=2)
    assert leader.disp.state is PushType.APPEND and leader.disp.match_index == 2


def test_compare_mismatch_backs_off_by_the_hint_and_never_below_the_match() -> None:
    leader = Leader(store_with(*[1] * 10))
    (compare,) = leader.pump()
    leader.answer(compare, BAD, end=20, hint=4)  # fast back-off: skip the follower's conflicting term
    (again,) = leader.pump()
    assert (again.type, again.index) == (PushType.COMPARE, 4)


def test_append_batches_and_bounds_what_is_in_flight() -> None:
    leader = Leader(store_with(1))
    (compare,) = leader.pump()
    leader.answer(compare, OK, match=0, end=0)
    for i in range(1, 11):
        leader.store.append([Entry(i, 1, b"x")])
    pushes = leader.pump()
    assert [(p.type, [e.index for e in p.entries]) for p in pushes] == [
        (PushType.APPEND, [1, 2, 3]), (PushType.APPEND, [4, 5, 6])]  # 3 per push, 2 in flight
    assert (pushes[0].index, pushes[0].index_term) == (0, 1)
    leader.answer(pushes[0], OK, match=3, end=3)
    (third,) = leader.pump()
    assert [e.index for e in third.entries] == [7, 8, 9]
    assert leader.disp.match_index == 3


def test_unacknowledged_pushes_are_resent_from_the_match_index_after_the_timeout() -> None:
    leader = Leader(store_with(1, 1, 1))
    (compare,) = leader.pump()
    leader.answer(compare, OK, match=0, end=0)
    (push,) = leader.pump(now=1.0)
    assert leader.pump(now=50.0) == []
    (resent,) = leader.pump(now=120.0)
    assert [e.index for e in resent.entries] == [e.index for e in push.entries]


def test_an_error_answer_returns_the_dispatcher_to_compare_after_a_pause() -> None:
    leader = Leader(store_with(1, 1))
    (compare,) = leader.pump()
    leader.answer(compare, OK, match=1, end=1)
    leader.store.append([Entry(2, 1, b"x")])
    (push,) = leader.pump()
    leader.answer(push, ResponseCode.INCONSISTENT_LEADER, end=1)
    assert leader.disp.state is PushType.COMPARE
    assert leader.pump(now=5.0) == []
    (compare_again,) = leader.pump(now=10.0)
    assert compare_again.type is PushType.COMPARE


def test_idle_dispatcher_sends_commit() -> None:
    leader = Leader(store_with(1))
    (compare,) = leader.pump()
    leader.answer(compare, OK, match=0, end=0)
    assert leader.pump(now=1.0, commit=0) == []  # a busy stream would carry it: wait a little
    (commit,) = leader.pump(now=TIMING.push_retry_ms, commit=0)
    assert (commit.type, commit.commit_index) == (PushType.COMMIT, 0)
    assert leader.pump(now=TIMING.push_retry_ms + 1, commit=0) == []
    (periodic,) = leader.pump(now=TIMING.push_retry_ms + TIMING.heartbeat_ms, commit=0)
    assert periodic.type is PushType.COMMIT


def push(type_: PushType, index: int, index_term: int, *new: Entry, commit: int = -1) -> PushRequest:
    return PushRequest(7, "n1", 1, type_, index, index_term, commit, list(new))


def test_follower_compare_reports_a_hint_below_the_conflicting_term() -> None:
    store = store_with(1, 1, 3, 3, 3)
    out = handle_push(store, push(PushType.COMPARE, 4, 2), commit=-1, verified=-1)
    assert (out.code, out.hint_index) == (ResponseCode.INCONSISTENT_STATE, 1)
    assert handle_push(store, push(PushType.COMPARE, 1, 1), commit=-1, verified=-1).match_index == 1


def test_follower_appends_only_entries_that_continue_its_log() -> None:
    store = store_with(1, 1)
    gap = handle_push(store, push(PushType.APPEND, 4, 1, Entry(5, 1, b"x")), commit=-1, verified=-1)
    assert gap.code is ResponseCode.INCONSISTENT_INDEX and store.end_index == 1
    wrong_prev = handle_push(store, push(PushType.APPEND, 1, 9, Entry(2, 9, b"x")), commit=-1, verified=-1)
    assert wrong_prev.code is ResponseCode.INCONSISTENT_STATE and store.end_index == 1
    ok = handle_push(store, push(PushType.APPEND, 1, 1, Entry(2, 2, b"a"), Entry(3, 2, b"b")), -1, -1)
    assert (ok.code, ok.match_index, store.end_index) == (ResponseCode.SUCCESS, 3, 3)


def test_follower_replaces_conflicting_entries_and_ignores_repeats() -> None:
    store = store_with(1, 1, 1, 1)
    out = handle_push(store, push(PushType.APPEND, 0, 1, Entry(1, 1, b"1-1"), Entry(2, 2, b"new")), -1, -1)
    assert out.match_index == 2
    assert [(e.index, e.term) for e in store.entries] == [(0, 1), (1, 1), (2, 2)]


def test_truncate_keeps_what_was_acknowledged_to_this_leader() -> None:
    store = store_with(1, 1, 1, 1, 1)
    out = handle_push(store, push(PushType.TRUNCATE, 1, 1), commit=-1, verified=3)
    assert (out.match_index, store.end_index) == (3, 3)


def test_follower_refuses_to_drop_a_committed_entry() -> None:
    store = store_with(1, 1, 1)
    with pytest.raises(SafetyError):
        handle_push(store, push(PushType.APPEND, 0, 1, Entry(1, 2, b"other")), commit=2, verified=-1)


def test_a_follower_that_forgot_its_match_is_compared_again_when_idle() -> None:
    """A follower restarted with a log that already matches ours learns no commit index until
    it knows it matches: its COMMIT answer says so (match -1) and the leader compares again."""
    leader = Leader(store_with(1, 1, 2))
    (compare,) = leader.pump()
    leader.answer(compare, OK, match=2, end=2)
    assert leader.pump() == [] and leader.disp.match_index == 2
    (commit,) = leader.pump(now=TIMING.heartbeat_ms + 1, commit=2)
    assert commit.type is PushType.COMMIT
    leader.answer(commit, OK, match=2, end=2)  # a follower that knows: nothing to do
    assert leader.pump(now=TIMING.heartbeat_ms + 2, commit=2) == []
    (commit,) = leader.pump(now=2 * TIMING.heartbeat_ms + 3, commit=2)
    leader.answer(commit, OK, match=-1, end=2)  # restarted: it forgot
    (again,) = leader.pump(now=2 * TIMING.heartbeat_ms + 4, commit=2)
    assert (again.type, again.index) == (PushType.COMPARE, 2)
