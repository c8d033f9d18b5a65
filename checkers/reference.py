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
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from checkers.jsonlines import HistoryValidator, event_line_problem, final_line_problem, iter_jsonl
from checkers.layout import ResultsDir
from checkers.verdict import NEEDS_FINAL_LOG, decide

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
        return self.seen_max if self.seen_max is not None else self.value["from"] - 1

    @property
    def rto(self) -> int:
        return self.result.get("to", self.value["to"])

    @property
    def rfrom(self) -> int:
        return self.result.get("from", self.value["from"])

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
    finals: dict[str, dict[int, str | None]]  # node -> log_index -> id
    leaders: dict[int, set[str]]  # term -> claimed leaders

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
            op.type, op.cmp_index, op.cmp_time, op.result = (
                line["type"],
                line["index"],
                line["time"],
                line["value"],
            )
    finals = {
        node: {e["log_index"]: e.get("id") for _, e in iter_jsonl(path, final_line_problem)}
        for node, path in layout.final_logs().items()
    }
    leaders: dict[int, set[str]] = defaultdict(set)
    for path in layout.event_logs().values():
        for _, e in iter_jsonl(path, event_line_problem):
            if e.get("role") == "leader":
                leaders[e["term"]].add(e["node"])
            elif e.get("role") and e.get("leader") is not None:
                leaders[e["term"]].add(e["leader"])
    ok_consumes = [c for c in consumes if c.type == "ok"]
    return Run(layout, appends, [r for r in reads if r.type == "ok"], ok_consumes, finals, leaders)


def _checks(run: Run) -> dict[str, int]:
    """Anomaly counts per check, by the definitions in DESIGN.md (see verdict.CHECKS)."""
    log = run.cluster
    by_id = {a.id: a for a in run.appends}
    ok = [a for a in run.appends if a.type == "ok"]
    pos: dict[str, int] = {}
    for i, x in sorted((log or {}).items()):
        if x is not None:
            pos.setdefault(x, i)
    claims = [(i, x, "read") for r in run.reads for i, x in r.entries]
    claims += [(i, x, node) for node, entries in run.finals.items() for i, x in entries.items()]
    named = [(i, x) for i, x, _ in claims if x is not None]
    counts: dict[str, int] = {}
    if log is not None:
        must = {a.id for a in ok} | {x for r in run.reads for _, x in r.entries if x is not None}
        counts["lost"] = len(must - set(pos))
    counts["recovered"] = sum(1 for a in run.appends if a.type == "info" and a.id in pos)
    counts["aborted-read"] = len({x for _, x in named if x in by_id and by_id[x].type == "fail"})
    counts["phantom"] = len({x for _, x in named if x not in by_id})
    at: dict[str, set[int]] = defaultdict(set)
    for i, x in named:
        at[x].add(i)
    counts["duplicate"] = sum(1 for indexes in at.values() if len(indexes) > 1)
    held: dict[int, set[str]] = defaultdict(set)
    for i, x, _ in claims + [(a.result["log_index"], a.id, "ack") for a in ok]:
        held[i].add(NOOP if x is None else x)
    counts["divergence"] = sum(1 for ids in held.values() if len(ids) > 1)
    counts["index-mismatch"] = sum(
        1 for a in ok if a.id in pos and (log or {}).get(a.result["log_index"]) != a.id
    )
    landed = [a for a in run.appends if a.id in pos]
    counts["realtime-reorder"] = sum(
        1
        for b in landed
        if any(a.type == "ok" and a.done_time < b.inv_index and pos[a.id] > pos[b.id] for a in landed)
    )
    counts["stale-read"] = sum(
        1
        for r in run.reads
        if min(
            max((a.result["log_index"] for a in ok if a.done_time < r.inv_index), default=-math.inf), r.rto
        )
        > r.k
    )
    counts["nonmonotonic-read"] = sum(
        1
        for r in run.reads
        if min(
            max(
                (e.seen_max for e in run.reads if e.seen_max is not None and e.done_time < r.inv_index),
                default=-math.inf,
            ),
            r.rto,
        )
        > r.k
    )
    counts["future-read"] = sum(
        1
        for r in run.reads
        if r.seen_max is not None
        and any(by_id[x].inv_index > r.done_time for x in _seen_ids(r, log) if x in by_id)
    )
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
    counts["election-safety"] = sum(1 for names in run.leaders.values() if len(names) > 1)
    counts.update(_consumer_checks(run, log, pos))
    return counts


def _consumer_checks(run: Run, log: dict[int, str | None] | None, pos: dict[str, int]) -> dict[str, int]:
    """consumed-then-lost, consume-divergence and skipped-offset (see `checkers.consumers`)."""
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
    why: dict[str, str] = {}
    if run.cluster is None:
        why.update(dict.fromkeys(NEEDS_FINAL_LOG, "no final logs"))
    if not run.leaders and not run.layout.event_logs():
        why["election-safety"] = "no events"
    why["replica-disagreement"] = "not checked by the reference checker"
    found = {name: (n, []) for name, n in counts.items() if n}
    return decide(found, why, run.layout.read_mode, {}, [])


def linearizable(results_dir: Path | str, limit: int = 2_000_000) -> bool | None:
    """Whether some order of the ops, within their real-time windows, produces every result.

    Model: one log; an append adds its id at the end (an ok append at its acknowledged
    index); an ok read returns the log's entries in its range; the cluster's final log is
    the log at the end, so appends in it must take effect and others must not; no-ops of
    the final log take effect whenever they are next. None without a final log, or when
    the search visits more than `limit` states.
    """
    run = load(results_dir)
    log = run.cluster
    if log is None:
        return None
    final = [log.get(i, NOOP + "hole") for i in range(max(log, default=-1) + 1)]
    in_log = set(final)
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
                    and (op.type != "ok" or op.result["log_index"] == length)
                ):
                    stack.append((mask | 1 << i, length + 1))
            elif sorted(op.entries) == [(j, final[j]) for j in range(op.rfrom, min(op.rto, length - 1) + 1)]:
                stack.append((mask | 1 << i, length))
    return False
