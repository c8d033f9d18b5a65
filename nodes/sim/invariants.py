"""Raft's safety properties, checked as the simulation runs.

* election safety: at most one node ever leads a term, and a node leads a term at most
  once (checked when a node becomes leader, before any log check of that step);
* leader completeness: a new leader's log holds every entry committed in an earlier term (a
  candidate that counts a vote of its term late, say after a pause, may lead that term when a
  later term has committed more: Raft allows it, and it cannot commit anything);
* state machine safety: an index, once committed anywhere, always holds the same entry
  (so committed entries never change or disappear, across crashes and power loss);
* log matching: two logs with the same (index, term) agree on everything before it;
* lease safety: when a node becomes leader, no leader of an earlier term would still answer
  a `lease` read (checked at that instant on each node's own clock, paused nodes included: a leader holds
  its lease only while the followers' lease guard keeps anyone else from being elected);
* reads: `read-index` and `lease` reads see every append acknowledged before they were
  invoked, at least the commit index any such read completed before them returned
  (read-after-read order), and only committed entries; `committed` and `follower` reads
  return only committed entries (they may be stale);
* answers in time (`Deadlines`): a node answers every client request within its own
  timeout for it, unless it crashes first;
* disk space: no node has to write more than its disk holds (the DISK_FULL refusals keep
  client appends off a full disk); the simulated disk raises `NoSpace` on such a write and
  the simulator reports a `disk overflow`.

Master-slave runs check election safety (one master per epoch), log matching, answers in
time and disk space from here, and RocketMQ's guarantees instead of the others
(`nodes.sim.hainvariants`).
"""

from __future__ import annotations

import heapq
from collections.abc import Callable

from nodes.messages import ReadMode, ReadResponse
from nodes.store.logstore import Entry


class Violation(Exception):
    """A safety or liveness property failed; the message says which and how."""

    def __init__(self, kind: str, detail: str) -> None:
        super().__init__(f"{kind}: {detail}")
        self.kind = kind
        self.detail = detail


class Invariants:
    """The cluster-wide record the properties are checked against."""

    def __init__(self) -> None:
        self.leaders: dict[int, str] = {}
        self.led: set[tuple[str, int]] = set()
        self.committed: list[Entry] = []
        self.commit_terms: list[int] = []  # per committed index, the term of the node that first committed it
        self.max_acked = -1
        self.max_read = -1  # highest commit index a completed read-index or lease read returned
        # (index, term) -> the entry and the term before it, as last written in any log
        self.written: dict[tuple[int, int], tuple[Entry, int]] = {}

    def on_election(self, node: str, term: int) -> None:
        """`node` became leader of `term`."""
        other = self.leaders.setdefault(term, node)
        if other != node:
            raise Violation("election safety", f"{other} and {node} both leaders in term {term}")
        if (node, term) in self.led:
            raise Violation("election safety", f"{node} leads term {term} a second time")
        self.led.add((node, term))

    def on_leases(self, node: str, term: int, holders: dict[str, int]) -> None:
        """Lease safety: `node` became leader of `term` while `holders` (node -> the term it
        leads) would still answer lease reads. A holder of a later term is no violation: a
        candidate that counts a late vote may lead a term below the current one (as leader
        completeness allows), and such a stale leader can neither commit nor confirm a lease."""
        holders = {n: t for n, t in holders.items() if t < term}
        if holders:
            held = ", ".join(f"{n} (leader of term {t})" for n, t in sorted(holders.items()))
            raise Violation("lease safety", f"{node} leads term {term} while {held} still serves lease reads")

    def on_leader(self, node: str, term: int, log: list[Entry]) -> None:
        """Leader completeness: the new leader of `term` holds every entry committed in an earlier term."""
        committed = self.committed
        if log[: len(committed)] == committed:
            return
        earlier = (i for i, t in enumerate(self.commit_terms) if t < term)
        i = next((i for i in earlier if i >= len(log) or log[i] != committed[i]), None)
        if i is not None:
            raise Violation(
                "leader completeness",
                f"{node} leads term {term} without committed entry {i}: "
                f"has {log[i] if i < len(log) else None}, committed {self.committed[i]}",
            )

    def on_commit(self, node: str, log: list[Entry], old: int, new: int, term: int) -> None:
        """`node`, in `term`, commits up to `new` (it had checked up to `old`)."""
        committed = self.committed
        for i in range(old + 1, new + 1):
            if i >= len(log):
                raise Violation(
                    "state machine safety", f"{node} commits {i} beyond its log end {len(log) - 1}"
                )
            if i < len(committed):
                if log[i] != committed[i]:
                    raise Violation(
                        "state machine safety",
                        f"{node} commits {log[i]} at {i}, where {committed[i]} was committed",
                    )
            else:
                committed.append(log[i])
                self.commit_terms.append(term)

    def on_write(
        self, node: str, log: list[Entry], start: int, logs: Callable[[], dict[str, list[Entry]]]
    ) -> None:
        """Log matching after `node`'s log (`logs()[node]`) changed from `start` on.

        Every log that still holds an (index, term) agrees with `written` there (a
        disagreement was raised when written), so an entry that agrees with `written` is
        fine; one that does not is checked against the logs as they are now (the earlier
        holders of its (index, term) may all be gone) and then replaces it.
        """
        written = self.written
        before = log[start - 1].term if start else -1
        for i in range(start, len(log)):
            entry = log[i]
            key = (i, entry.term)
            old = written.get(key)
            if old is None or old[1] != before or (old[0] is not entry and old[0] != entry):
                if old is not None:
                    check_new_entries(node, logs(), i)
                written[key] = (entry, before)
            before = entry.term

    def on_append_ok(self, body: bytes, first: int) -> None:
        if first >= len(self.committed) or self.committed[first].body != body:
            got = self.committed[first] if first < len(self.committed) else None
            raise Violation("acknowledged append", f"append acked at {first} but committed there is {got}")
        self.max_acked = max(self.max_acked, first)

    def on_read_ok(
        self, node: str, mode: ReadMode, first: int, last: int, before: tuple[int, int], resp: ReadResponse
    ) -> None:
        """Check a successful read; `before` is (`max_acked`, `max_read`) when it was invoked."""
        if mode is ReadMode.UNSAFE:
            return
        committed = self.committed
        top = min(last, resp.commit_index)
        expected = committed[max(first, 0) : top + 1]
        if resp.entries != expected:
            raise Violation(
                f"{mode.label} read",
                f"{node} answered {first}..{last} with "
                f"{[(e.index, e.term) for e in resp.entries]} at commit {resp.commit_index}, "
                f"committed there: {[(e.index, e.term) for e in expected]}",
            )
        if mode not in (ReadMode.READ_INDEX, ReadMode.LEASE):
            return
        acked_before, read_before = before
        if resp.commit_index < acked_before:
            raise Violation(
                f"{mode.label} read",
                f"{node} read at commit {resp.commit_index}, stale: index "
                f"{acked_before} was acknowledged before the read was invoked",
            )
        if resp.commit_index < read_before:
            raise Violation(
                f"{mode.label} read",
                f"{node} read at commit {resp.commit_index}, stale: a "
                f"linearizable read completed before this one was invoked returned commit "
                f"{read_before}",
            )
        self.max_read = max(self.max_read, resp.commit_index)


class Deadlines:
    """Every client request is answered in time, unless its node crashes first.

    The node promises an answer by its own timeout for the request: an append that did not
    commit gets WAIT_QUORUM_ACK_TIMEOUT after `append_timeout_ms`, a read waiting for a
    leadership check TIMEOUT after `read_timeout_ms`, a transfer TIMEOUT after
    `transfer_timeout_ms` (and a leader that steps down answers at once). The caller gives
    each request its due time with the slack the node needs to notice it (a tick, and
    clock rates within the lease's drift bound). A node paused for a while owes its answers
    that much later.
    """

    def __init__(self) -> None:
        self._pending: dict[int, tuple[float, str]] = {}
        self._due: list[tuple[float, int]] = []

    def on_request(self, rid: int, due: float, what: str) -> None:
        """Request `rid` (described by `what`) must be answered by `due`."""
        self._pending[rid] = (due, what)
        heapq.heappush(self._due, (due, rid))

    def postpone(self, rid: int, by: float) -> None:
        """Request `rid`, if still unanswered, may be answered `by` ms later."""
        if rid in self._pending:
            due, what = self._pending[rid]
            self.on_request(rid, due + by, what)

    def on_answer(self, rid: int) -> None:
        """Request `rid` was answered, or its node crashed (it owes no answer)."""
        self._pending.pop(rid, None)

    def due_before(self, now: float) -> bool:
        """Whether some request was due before `now` (answered or not): `check` has work."""
        due = self._due
        return bool(due) and due[0][0] < now

    def check(self, now: float) -> None:
        """Raise if a request still unanswered was due before `now`."""
        due = self._due
        while due and due[0][0] < now:
            when, rid = heapq.heappop(due)
            pending = self._pending.get(rid)
            if pending is not None and pending[0] == when:  # else answered, or postponed
                del self._pending[rid]
                raise Violation("answer in time", f"{pending[1]} got no answer by {when:.1f} ms")


def check_log_matching(logs: dict[str, list[Entry]]) -> None:
    """Every pair of logs that agrees on (index, term) somewhere agrees on all before it."""
    names = list(logs)
    for a_i, a in enumerate(names):
        for b in names[a_i + 1 :]:
            _check_pair(a, b, logs[a], logs[b])


def check_new_entries(node: str, logs: dict[str, list[Entry]], start: int) -> None:
    """Log matching after `node`'s log changed from `start` on, the rest having been checked before.

    By induction on the index, the whole property holds when every two logs with the same
    term at an index hold the same entry there and the same term just before it; only
    pairs involving `node`'s entries from `start` on can have started to break that.
    """
    log = logs[node]
    end = len(log)
    before = log[start - 1].term if start else -1
    for other, lo in logs.items():
        top = min(end, len(lo))
        if start >= top or lo is log:
            continue
        same = not start or lo[start - 1].term == before  # the two logs' terms just before index i
        for i in range(start, top):
            a, b = log[i], lo[i]
            if a.term != b.term:
                same = False
            elif not same or (a is not b and a != b):
                _check_pair(node, other, log, lo)
                raise Violation("log matching", f"{node} and {other} disagree before ({i}, t{a.term})")


def _check_pair(a: str, b: str, la: list[Entry], lb: list[Entry]) -> None:
    i = min(len(la), len(lb)) - 1
    while i >= 0 and la[i].term != lb[i].term:
        i -= 1
    if i >= 0 and la[: i + 1] != lb[: i + 1]:
        j = next(k for k in range(i + 1) if la[k] != lb[k])
        raise Violation(
            "log matching", f"{a} and {b} agree at ({i}, t{la[i].term}) but differ at {j}: {la[j]} vs {lb[j]}"
        )
