"""The pure-Python reference checker: the same checks written the plainest way, and a search.

`reference_check(results_dir)` returns the same verdict format as the Spark checker, from
quadratic loops that follow each definition word for word; it is meant for histories of up
to a few hundred ops, to cross-check the Spark checker. `linearizable(results_dir)` is a
brute-force linearizability search over the log model (depth-first over which pending op
takes effect next, memoised on the state), independent of the per-class definitions: the
tests check that it says "not linearizable" exactly when the checks find an anomaly.
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

from checkers.checks.verdict import DRIFT, JUDGED_MODES, MARGIN_NS, add_never_read, decide, undecided
from checkers.jsonlines import HistoryValidator, event_line_problem, final_line_problem, iter_jsonl
from checkers.layout import ResultsDir

NOOP = "\u0000noop"


@dataclass
class Op:
    """A client op with its completion (type `info` and no completion when it never completed)."""

    f: str
    process: int
    inv_index: int
    inv_time: int
    value: dict[str, Any]
    type: str = "info"
    cmp_index: int | None = None
    cmp_time: int | None = None
    result: dict[str, Any] = field(default_factory=dict)
    node: str | None = None  # the node that answered (the completion's)

    @property
    def id(self) -> str:
        return self.value["id"]

    @property
    def done_time(self) -> float:
        """When it completed, as a history index (real-time order); never for an indeterminate op."""
        return self.cmp_index if self.type in ("ok", "fail") and self.cmp_index is not None else math.inf

    @property
    def entries(self) -> list[tuple[int, str | None]]:
        return [(int(i), x) for i, x in self.result.get("entries", [])]

    @property
    def seen_max(self) -> int | None:
        return max((i for i, _ in self.entries), default=None)

    @property
    def k(self) -> int:
        return self.seen_max if self.seen_max is not None else self.rfrom - 1

    @property
    def rto(self) -> int | None:
        """The last index it answers for; None: to the log's end."""
        return self.result.get("to", self.value.get("to"))

    @property
    def rfrom(self) -> int:
        return self.result.get("from", self.value.get("from", 0))

    @property
    def whole(self) -> bool:
        """A read of the whole log from 0."""
        return "to" not in self.value and self.value.get("from", 0) <= 0

    def covers(self, p: int) -> bool:
        """It speaks for index `p` (see `checkers.checks.history.covers`)."""
        indexes = [i for i, _ in self.entries]
        top = max(indexes, default=None)
        if top is not None and 0 <= top - self.rfrom < len(indexes) * 4 + 64:
            return self.rfrom <= p <= top
        return p in indexes

    @property
    def malformed(self) -> bool:
        """Its entries contradict its request: out of order or repeated, outside [from, to], or
        `to` before from - 1."""
        indexes = [i for i, _ in self.entries]
        top = math.inf if self.rto is None else self.rto
        return (
            indexes != sorted(set(indexes))
            or any(i < self.rfrom or i > top for i in indexes)
            or (self.rto is not None and self.rto < self.rfrom - 1)
        )

    @property
    def consumer(self) -> int:
        return self.value["consumer"]


@dataclass
class Run:
    """One results folder, loaded."""

    layout: ResultsDir
    appends: list[Op]
    reads: list[Op]  # ok reads
    consumes: list[Op]  # ok consumes, in history order
    observed: list[Op]  # fail and info reads and consumes that carried entries
    finals: dict[str, dict[int, str | None]]  # node -> log_index -> id
    events: EventClaims

    @property
    def cluster(self) -> dict[int, str | None] | None:
        if not self.finals:
            return None
        longest = min(self.finals, key=lambda n: (-max(self.finals[n], default=-1), n))
        return self.finals[longest]


def load(results_dir: Path | str) -> Run:
    layout = ResultsDir.open(results_dir)
    open_ops: dict[Any, Op] = {}
    appends: list[Op] = []
    reads: list[Op] = []
    consumes: list[Op] = []
    kinds = {"append": appends, "read": reads, "consume": consumes}
    for _, line in iter_jsonl(layout.history, HistoryValidator()):
        if line["process"] == "nemesis" or line["f"] not in kinds:
            continue
        if line["type"] == "invoke":
            op = Op(line["f"], line["process"], line["index"], line["time"], line["value"])
            open_ops[line["process"]] = op
            kinds[op.f].append(op)
        else:
            op = open_ops.pop(line["process"])
            op.type, op.cmp_index, op.cmp_time, op.result, op.node = (
                line["type"],
                line["index"],
                line["time"],
                line["value"],
                line.get("node"),
            )
    finals = {
        node: {e["log_index"]: e.get("id") for _, e in iter_jsonl(path, final_line_problem)}
        for node, path in layout.final_logs().items()
    }
    ok_consumes = [c for c in consumes if c.type == "ok"]
    observed = [op for op in reads + consumes if op.type in ("fail", "info") and "entries" in op.result]
    return Run(layout, appends, [r for r in reads if r.type == "ok"], ok_consumes, observed, finals,
               event_claims(list(layout.event_logs().values())))


class LeaderLine(NamedTuple):
    """A `leader` role line: who, which term, when (real_ns) and where its log ended (if said)."""

    node: str
    term: int
    at: int
    end_index: int | None


@dataclass
class EventClaims:
    """What the nodes' events.jsonl say about leaders and votes."""

    leaders: dict[int, set[str]] = field(default_factory=lambda: defaultdict(set))  # term -> claimed
    leader_lines: list[LeaderLine] = field(default_factory=list)
    committed: dict[int, int] = field(default_factory=dict)  # term -> the highest commit index reported in it
    forgotten_votes: int = 0  # start lines that recovered less than the node's last vote line

    @property
    def election_safety(self) -> int:
        """Terms with two leaders, or a node leading them twice."""
        lines = Counter((line.term, line.node) for line in self.leader_lines)
        twice = {term for (term, _), n in lines.items() if n > 1}
        return sum(1 for term, names in self.leaders.items() if len(names) > 1 or term in twice)

    @property
    def leader_completeness(self) -> int:
        """Leader lines whose log ended below an index committed in an earlier term."""
        return sum(1 for line in self.leader_lines if line.end_index is not None
                   and any(index > line.end_index for t, index in self.committed.items() if t < line.term))


def event_claims(paths: list[Path]) -> EventClaims:
    """Leaders per term and forgotten votes (see `checkers.checks.elections`) of these events files."""
    claims = EventClaims()
    for path in paths:
        lines = sorted((e for _, e in iter_jsonl(path, event_line_problem)),
                       key=lambda e: e.get("real_ns", e["time_ns"]))
        saved: tuple[int, str | None] | None = None  # the last vote line's (term, vote) since the last start
        for e in lines:
            if e.get("role") == "leader":
                claims.leaders[e["term"]].add(e["node"])
                claims.leader_lines.append(
                    LeaderLine(e["node"], e["term"], e.get("real_ns", e["time_ns"]), e.get("end_index")))
            elif e.get("event") == "commit":
                claims.committed[e["term"]] = max(claims.committed.get(e["term"], -1), e["commit_index"])
            elif e.get("role") and e.get("leader") is not None:
                claims.leaders[e["term"]].add(e["leader"])
            elif e.get("event") == "vote":
                saved = (e["term"], e.get("candidate"))
            elif e.get("event") == "start":
                claims.forgotten_votes += (saved is not None and not e["fresh"]
                                           and _forgot(saved, e["term"], e.get("vote")))
                saved = (-1, None) if e["fresh"] else (e["term"], e.get("vote"))
    return claims


def _forgot(saved: tuple[int, str | None], term: int, vote: str | None) -> bool:
    """Whether a node that had saved or granted `saved` (term, vote) recovered less: an earlier
    term, or in that term another vote (Raft saves both before it answers)."""
    saved_term, saved_vote = saved
    return term < saved_term or (term == saved_term and saved_vote is not None and vote != saved_vote)


def _history_lost(run: Run, ok: list[Op]) -> set[str]:
    """Acknowledged appends that the history shows lost (see `checkers.checks.durability.covered`)."""
    ops = run.reads + run.consumes
    whole = [r.inv_index for r in run.reads if r.whole] if run.layout.linearizable_reads else []
    lost = set()
    for a in ok:
        assert a.cmp_index is not None  # an ok op has completed (load sets its completion index)
        holding = [op for op in ops + run.observed if any(x == a.id for _, x in op.entries)]
        last_seen = max((op.inv_index for op in holding), default=None)
        p = a.result.get("log_index")
        if p is None:
            p = min((i for op in holding for i, x in op.entries if x == a.id), default=None)
        entry_cover = max((op.inv_index for op in ops if any(i == p for i, _ in op.entries)), default=None)
        if p is None:
            past = max(whole, default=None)
        else:
            past = max((op.inv_index for op in ops if op.covers(p)), default=None)
        replaced = (
            entry_cover is not None
            and entry_cover > a.cmp_index
            and (-1 if last_seen is None else last_seen) < entry_cover
        )
        never_seen = last_seen is None and past is not None and past > a.cmp_index
        if replaced or never_seen:
            lost.add(a.id)
    return lost


def _stale(run: Run, ok: list[Op], r: Op) -> bool:
    """A read that misses an index acknowledged before it, or (reading the whole log) an id."""
    top = max((a.result["log_index"] for a in ok if "log_index" in a.result and a.done_time < r.inv_index),
              default=-math.inf)
    if min(top, math.inf if r.rto is None else r.rto) > r.k:
        return True
    held = {x for _, x in r.entries}
    return r.whole and any(a.done_time < r.inv_index and a.id not in held for a in ok)


def _checks(run: Run) -> dict[str, int]:
    """Anomaly counts per check, by each check's definition in verdict.REGISTRY (docs/design.md)."""
    log = run.cluster
    by_id = {a.id: a for a in run.appends}
    ok = [a for a in run.appends if a.type == "ok"]
    pos: dict[str, int] = {}
    for i, x in sorted((log or {}).items()):
        if x is not None:
            pos.setdefault(x, i)
    seen = [(i, x) for op in run.reads + run.consumes for i, x in op.entries]
    observed = seen + [(i, x) for op in run.observed for i, x in op.entries]
    claims = [(i, x, "seen") for i, x in seen]
    claims += [(i, x, "observed") for op in run.observed for i, x in op.entries]
    claims += [(i, x, node) for node, entries in run.finals.items() for i, x in entries.items()]
    named = [(i, x) for i, x, _ in claims if x is not None]
    counts: dict[str, int] = {}
    lost = _history_lost(run, ok) - set(pos)  # the final log, read last, is the last cover
    if log is not None:
        must = {a.id for a in ok} | {x for r in run.reads for _, x in r.entries if x is not None}
        lost |= must - set(pos)
    counts["lost"] = len(lost)
    counts["recovered"] = sum(1 for a in run.appends if a.type == "info" and a.id in pos)
    answered = [(i, x) for i, x, source in claims if x is not None and source != "observed"]
    counts["aborted-read"] = len({x for _, x in answered if x in by_id and by_id[x].type == "fail"})
    counts["phantom"] = len({x for _, x in named if x not in by_id})
    at: dict[str, set[int]] = defaultdict(set)
    for i, x in named:
        at[x].add(i)
    counts["duplicate"] = sum(1 for indexes in at.values() if len(indexes) > 1)
    held: dict[int, set[str]] = defaultdict(set)
    acked = [a for a in ok if "log_index" in a.result]
    for i, x, _ in claims + [(a.result["log_index"], a.id, "ack") for a in acked]:
        held[i].add(NOOP if x is None else x)
    counts["divergence"] = sum(1 for ids in held.values() if len(ids) > 1)
    counts["index-mismatch"] = sum(
        1
        for a in acked
        if (a.id in pos and (log or {}).get(a.result["log_index"]) != a.id)
        or any(x == a.id and i != a.result["log_index"] for i, x in observed)
    )
    known = dict(pos)
    for a in acked:
        known.setdefault(a.id, a.result["log_index"])
    for i, x in sorted(seen, key=lambda e: e[0]):
        if x in by_id:
            known.setdefault(x, i)
    placed = [a for a in run.appends if a.id in known]
    counts["realtime-reorder"] = sum(
        1
        for b in placed
        if any(a.type == "ok" and a.done_time < b.inv_index and known[a.id] > known[b.id] for a in placed)
    )
    counts["stale-read"] = sum(1 for r in run.reads if _stale(run, ok, r))
    counts["nonmonotonic-read"] = sum(
        1
        for r in run.reads
        if min(
            max(
                (e.seen_max for e in run.reads if e.seen_max is not None and e.done_time < r.inv_index),
                default=-math.inf,
            ),
            math.inf if r.rto is None else r.rto,
        )
        > r.k
    )
    counts["future-read"] = sum(
        1
        for r in run.reads
        if r.seen_max is not None
        and any(by_id[x].inv_index > r.done_time for x in _seen_ids(r, log) if x in by_id)
    ) + sum(
        1 for c in run.consumes if any(x in by_id and by_id[x].inv_index > c.done_time for _, x in c.entries)
    )
    counts["malformed-answer"] = sum(1 for op in run.reads + run.consumes if op.malformed)
    counts["uncommitted-read"] = sum(
        1 for r in run.reads
        if r.seen_max is not None and r.result.get("commit_index") is not None
        and r.seen_max > r.result["commit_index"]
    )
    holes = sum(
        1 for r in run.reads if len({i for i, _ in r.entries if r.rfrom <= i <= r.k}) < r.k - r.rfrom + 1
    )
    for entries in run.finals.values():
        end = max(entries, default=-1)
        holes += sum(1 for g in range(end + 1) if g not in entries and (g == 0 or g - 1 in entries))
    counts["hole"] = holes
    counts["election-safety"] = run.events.election_safety
    counts["leader-completeness"] = run.events.leader_completeness
    counts["stale-leader-read"] = _stale_leader_reads(run)
    counts["forgotten-vote"] = run.events.forgotten_votes
    counts.update(_consumer_checks(run, log, pos))
    return counts


def _stale_leader_reads(run: Run) -> int:
    """Reads of a judged mode answered by a node whose latest leader line before the answer is of
    a lower term than a leader line written before the read was invoked (`checkers.checks.leaderreads`)."""
    wall = run.layout.history_wall_ns
    if wall is None or not run.layout.linearizable_reads:
        return 0
    found = 0
    lines = run.events.leader_lines
    for r in run.reads:
        if (r.value.get("mode") or run.layout.read_mode) not in JUDGED_MODES or r.node is None:
            continue
        invoked = wall + r.inv_time - MARGIN_NS - int(r.inv_time * DRIFT)
        answered = wall + (r.cmp_time or 0)
        served = max((ln.term for ln in lines if ln.node == r.node and ln.at <= answered), default=-1)
        newest = max((ln.term for ln in lines if ln.at <= invoked), default=None)
        found += newest is not None and newest > served
    return found


def _consumer_checks(run: Run, log: dict[int, str | None] | None, pos: dict[str, int]) -> dict[str, int]:
    """consumed-then-lost, consume-divergence and skipped-offset (see `checkers.checks.consumers`)."""
    counts: dict[str, int] = {}
    consumed = [(i, x) for c in run.consumes for i, x in c.entries]
    if log is not None:
        counts["consumed-then-lost"] = len({x for _, x in consumed if x is not None and x not in pos})
    at: dict[int, set[str]] = defaultdict(set)
    for i, x in consumed:
        at[i].add(NOOP if x is None else x)
    final = log or {}
    counts["consume-divergence"] = sum(
        1
        for i, ids in at.items()
        if (len(ids | {NOOP if final[i] is None else final[i]}) > 1 if i in final else len(ids) > 1)
        or (i not in final and any(x in pos for x in ids))
    )
    skipped = 0
    committed: dict[int, int] = {}  # consumer -> offset after its last ok consume
    for c in sorted(run.consumes, key=lambda c: c.inv_index):
        indexes = [i for i, _ in c.entries]
        previous = committed.get(c.consumer)
        if (
            (previous is not None and c.rfrom > previous)
            or indexes != list(range(c.rfrom, c.rfrom + len(indexes)))
            or c.result["offset"] > c.rfrom + len(indexes)
        ):
            skipped += 1
        committed[c.consumer] = c.result["offset"]
    counts["skipped-offset"] = skipped
    return counts


def _seen_ids(read: Op, log: dict[int, str | None] | None) -> set[str | None]:
    """Ids a read saw: its own entries and, with a final log, everything at or below its top index."""
    seen = {x for _, x in read.entries}
    if log is not None and read.seen_max is not None:
        seen |= {x for i, x in log.items() if i <= read.seen_max}
    return seen


def reference_check(results_dir: Path | str) -> dict[str, Any]:
    """The verdict (counts, no witnesses) in results.json's format, without Spark.

    Replica disagreement is not re-derived here (it needs the store reader): it is left
    "unknown" unless there are no store files, as in the Spark checker.
    """
    run = load(results_dir)
    counts = _checks(run)
    missing: dict[str, str] = {}
    if run.cluster is None:
        missing["final-logs"] = "no final logs"
    if not run.layout.event_logs():
        missing["events"] = "no events"
    why, not_applicable = undecided(run.layout.inputs, missing)
    if "replica-disagreement" not in not_applicable:
        why["replica-disagreement"] = "not checked by the reference checker"
    found: dict[str, tuple[int, list[Any]]] = {name: (n, []) for name, n in counts.items() if n}
    verdict = decide(found, why, run.layout.read_mode, {}, [], not_applicable)
    if "final-logs" in missing:
        add_never_read(verdict, _never_read(run))
    return verdict


def _never_read(run: Run) -> int:
    """Acknowledged appends (distinct ids) that no read or consume ever returned, ok or not."""
    seen = {x for op in run.reads + run.consumes + run.observed for _, x in op.entries}
    return len({a.id for a in run.appends if a.type == "ok" and a.id not in seen})


def linearizable(results_dir: Path | str, limit: int = 2_000_000) -> bool | None:
    """Whether some order of the ops, within their real-time windows, produces every result.

    Model: one log; an append adds its id at the end (an ok append at its acknowledged
    index); an ok read returns the log's entries in its range; the cluster's final log is
    the log at the end, so appends in it must take effect and others must not; no-ops of
    the final log take effect whenever they are next. A consume is a statement of what the
    log held, bound to no moment (a consumer may read a lagging replica): its entries must be
    the final log's, of appends invoked before it returned. None without a final log, or when
    the search visits more than `limit` states.
    """
    run = load(results_dir)
    log = run.cluster
    if log is None:
        return None
    final = [log.get(i, NOOP + "hole") for i in range(max(log, default=-1) + 1)]
    in_log = set(final)
    invoked: dict[str | None, int] = {a.id: a.inv_index for a in run.appends}
    for c in run.consumes:
        if c.malformed:  # no log answers a pull so (an index twice, say, even of two no-ops)
            return False
        for i, x in c.entries:
            if not 0 <= i < len(final) or final[i] != x or invoked.get(x, -1) > c.done_time:
                return False
    ops = [a for a in run.appends if a.id in in_log or a.type == "ok"] + run.reads
    if any(a.type == "fail" for a in ops):
        return False
    done_times = [op.done_time for op in ops]
    seen: set[tuple[int, int]] = set()
    stack = [(0, 0)]  # (bitmask of ops taken effect, log length)
    full = (1 << len(ops)) - 1
    while stack:
        state = stack.pop()
        if state in seen:
            continue
        seen.add(state)
        if len(seen) > limit:
            return None
        mask, length = state
        if mask == full and length == len(final):
            return True
        if length < len(final) and final[length] is None:
            stack.append((mask, length + 1))
        pending = [i for i in range(len(ops)) if not mask >> i & 1]
        horizon = min((done_times[i] for i in pending), default=math.inf)
        for i in pending:
            op = ops[i]
            if op.inv_index > horizon:
                continue
            if op.f == "append":
                if (
                    length < len(final)
                    and final[length] == op.id
                    and (op.type != "ok" or op.result.get("log_index", length) == length)
                ):
                    stack.append((mask | 1 << i, length + 1))
            elif op.entries == [(j, final[j]) for j in range(op.rfrom, _top(op, length) + 1)]:
                stack.append((mask | 1 << i, length))
    return False


def _top(read: Op, length: int) -> int:
    """The last index of a log of `length` entries that `read` answers for."""
    return length - 1 if read.rto is None else min(read.rto, length - 1)
