"""Check results folders: durability and linearizability of the log, consumers, replicas, elections.

`check` checks one folder and writes its results.json; `check_many` checks many in the same
Spark jobs. The command line is `checkers.checkcli`; the checker service (`checkers.service.server`)
calls these with its warm Spark session.
"""

from __future__ import annotations

import json
import time
from concurrent.futures import ThreadPoolExecutor
from functools import reduce
from pathlib import Path
from typing import Any, Protocol

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from checkers.checks import consumers, durability, realtime, screen
from checkers.checks.anomalies import DEFAULT_WITNESSES, SUSPECT, Found, collect_anomalies
from checkers.checks.elections import election_safety, forgotten_vote, leader_completeness, load_events
from checkers.checks.finallogs import FinalLogs, load_final_logs
from checkers.checks.history import History, load_history
from checkers.checks.leaderreads import stale_leader_reads
from checkers.checks.replicas import load_stores, replica_disagreement, replica_flags
from checkers.checks.tables import Tables
from checkers.checks.verdict import CHECKS, FINAL, INFORMATIONAL, add_never_read, decide, undecided
from checkers.engine.preload import PRELOADED, Loaded
from checkers.engine.progress import Progress, Watch
from checkers.engine.spark import fit_to_input, running, session
from checkers.layout import INPUTS, ResultsDir
from checkers.run.exercised import run_summary


class Pass(Protocol):
    """One Spark pass over a check run's tables: anomaly rows (`hid, check, key, witness`, see
    `anomalies`) of one or more of `verdict.REGISTRY`'s checks."""

    def __call__(self, t: Tables, /) -> DataFrame: ...


Exact = tuple[Pass, frozenset[str]]  # a pass and the checks it decides
# The exact passes, each with the checks whose anomalies it returns. A pass runs for the
# histories whose screen flagged one of its checks (each flag holds for its check alone,
# `screen.by_id`), for every history without final logs, and for all when asked.
EXACT: tuple[Exact, ...] = (
    (durability.by_id,
     frozenset({"lost", "recovered", "aborted-read", "phantom", "duplicate", "index-mismatch"})),
    (durability.divergence, frozenset({"divergence"})),
    (durability.hole, frozenset({"hole"})),
    (durability.uncommitted_read, frozenset({"uncommitted-read"})),
    (durability.malformed_answer, frozenset({"malformed-answer"})),
    (realtime.time_order, frozenset({"realtime-reorder", "stale-read", "nonmonotonic-read"})),
    (realtime.future_read, frozenset({"future-read"})),
)


def check(
    results_dir: Path | str,
    *,
    spark_master: str | None = None,
    witnesses: int = DEFAULT_WITNESSES,
    progress: Progress | None = None,
) -> dict[str, Any]:
    """Check one results folder, write its results.json and return the verdict; `progress`
    hears what it is doing (`checkers.engine.progress`).

    Raises InputError (naming file and line) when an input file is missing or malformed.
    """
    layout = ResultsDir.open(results_dir)
    if progress is not None and not running():
        progress("starting Spark")
    spark = session(spark_master)
    loaded = PRELOADED.take(layout)
    result = check_many([layout], spark, witnesses=witnesses, loaded=loaded, progress=progress)[0]
    (layout.path / "results.json").write_text(json.dumps(result, indent=1) + "\n")
    return result


def check_many(
    dirs: list[ResultsDir],
    spark: SparkSession,
    *,
    witnesses: int = DEFAULT_WITNESSES,
    exact: bool = False,
    loaded: Loaded | None = None,
    progress: Progress | None = None,
) -> list[dict[str, Any]]:
    """Verdicts for many results folders, checked together in the same Spark jobs.

    The screen (`screen`) runs first; the exact checks run only when it cannot clear every
    history, or with `exact`. Either way the verdicts are the exact checks' verdicts.
    `loaded` holds `dirs`' history and final logs when they were loaded already, and the
    screen's findings from them when it ran already (`preload`). `progress` hears each stage
    and how far Spark is (`checkers.engine.progress`).
    """
    started = time.monotonic()
    lost_where: dict[int, dict[str, int]] = {}
    unread: dict[int, int] = {}
    fit_to_input(spark, _input_bytes(dirs))
    loaded = loaded or Loaded()
    screened = None if exact or loaded.witnesses != witnesses else loaded.screened
    # Small jobs run beside the others (Spark takes jobs from many threads): the election
    # check, on the screen's path the stores' flags, and (in Python) what the nodes exercised.
    side = ThreadPoolExecutor(max_workers=3, thread_name_prefix="check")
    with Watch(spark, progress) as watch, side:
        watch.stage("loading the history and final logs")
        replicas = None if exact else side.submit(replica_flags, spark, dirs)
        elections = side.submit(_elections, spark, dirs, witnesses)
        summaries = [side.submit(run_summary, d) for d in dirs]
        history = loaded.history or load_history(spark, dirs)
        try:
            finals = loaded.finals or load_final_logs(spark, dirs)
        except BaseException:
            history.unpersist()
            raise
        linearizable = frozenset(hid for hid, d in enumerate(dirs) if d.linearizable_reads)
        tables = Tables(history, finals, linearizable)
        try:
            ready = time.monotonic()
            watch.stage(f"screening {history.lines:,} history lines")
            found = {}
            if replicas is not None:
                found = screen.findings(spark, tables, witnesses) if screened is None else screened
                found = _merged(found, _suspects(replicas.result()))
            elected, events = elections.result()
            found = _merged(found, elected)
            found = _merged(found, _leader_reads(spark, tables, events, dirs, witnesses))
            flagged = {hid: _flagged(hid, found, finals) for hid in range(len(dirs))}
            screen_done = time.monotonic()
            hids = range(len(dirs))
            every = {hid for hid in hids if exact or hid not in finals.longest}
            ran, decided = _plan(_passes(spark, dirs, history), found, hids, every)
            # The lost appends the screen found are placed, and their witnesses covered, beside the passes.
            lost = [(hid, w) for hid, checks in found.items() if "lost" not in decided[hid]
                    for w in checks.get("lost", (0, []))[1]]
            placing = side.submit(durability.lost_where, tables) if lost else None
            covering = side.submit(durability.covers, tables, [(hid, w["id"]) for hid, w in lost])
            passed: Found = {}
            if ran:
                what = sorted({name for names in flagged.values() for name in names}) or ["asked"]
                watch.stage(f"exact checks (the screen left: {', '.join(what)})")
                parts = [run(tables).where(F.col("hid").isin(*mine)) for run, _, mine in ran]
                passed = collect_anomalies(reduce(DataFrame.unionByName, parts), witnesses)
            found = _merged(_screened(found, decided), passed)
            if placing is None and any("lost" in checks for checks in found.values()):
                watch.stage("placing the lost appends")
                placing = side.submit(durability.lost_where, tables)
            lost_where = {} if placing is None else placing.result()
            covers = covering.result()
            for hid, w in lost:
                if (cover := covers.get((hid, w["id"]))) is not None:
                    w["covered_by"] = cover
            # Without final logs `lost` may end unknown: count what nothing ever read back.
            drain = [hid for hid, d in enumerate(dirs) if hid not in finals.longest and FINAL in d.inputs]
            if drain:
                watch.stage("counting the acknowledged appends never read back")
                unread = durability.never_read(tables, drain)
        finally:
            tables.unpersist()
    timing = {
        "load_s": round(ready - started, 3),
        "screen_s": round(screen_done - ready, 3),
        "check_s": round(time.monotonic() - ready, 3),
        "exact_checks": bool(ran),
        "history_preloaded": loaded.history is not None,
        "final_logs_preloaded": loaded.finals is not None,
        "screen_preloaded": screened is not None,
        "spark_master": spark.sparkContext.master,
    }
    results = []
    for hid, layout in enumerate(dirs):
        ends = finals.ends.get(hid, {})
        missing = _missing_inputs(layout, ends)
        undecidable, not_applicable, notes = _undecidable(layout, ends, missing)
        stats = {
            **history.stats.get(hid, {}),
            "final_log_ends": ends,
            "cluster_log_node": finals.longest.get(hid),
            "screen": None if exact else flagged[hid],
            "exact_decided": sorted(decided[hid]),  # the checks the exact passes decided here
            **timing,
        }
        if layout.fault_log is not None:
            stats["faults"] = layout.fault_log
        present = frozenset(INPUTS) - missing.keys()
        verdict = decide(found.get(hid, {}), undecidable, layout.read_mode, stats, [*layout.notes, *notes],
                         not_applicable, present)
        if hid in lost_where:
            verdict["checks"]["lost"]["where"] = lost_where[hid]
        if hid in unread and FINAL in missing:
            add_never_read(verdict, unread[hid])
        if layout.source is not None:
            verdict["source"] = layout.source
        results.append({**verdict, **summaries[hid].result()})
    return results


def _suspects(flags: dict[int, set[str]]) -> Found:
    """`~<check>` findings for each hid -> checks flagged."""
    return {hid: {SUSPECT + name: (1, []) for name in checks} for hid, checks in flags.items()}


def _passes(spark: SparkSession, dirs: list[ResultsDir], history: History) -> list[Exact]:
    """The exact passes of `dirs` (`EXACT`, the stores', and the consumers' and reads of the
    whole log's when the histories hold them), each with the checks it decides."""
    def stores(t: Tables) -> DataFrame:
        return replica_disagreement(load_stores(spark, dirs), t.finals)

    return [
        *EXACT,
        (stores, frozenset({"replica-disagreement"})),
        *([(consumers.checks, consumers.CHECKS)] if history.consumed else []),
        *([(realtime.stale_by_id, frozenset({"stale-read"}))] if history.whole_reads else []),
    ]


def _plan(
    passes: list[Exact], found: Found, hids: range, every: set[int]
) -> tuple[list[tuple[Pass, frozenset[str], list[int]]], dict[int, frozenset[str]]]:
    """The passes to run, each with the histories it runs for: those whose screen suspects one
    of its checks in `found`, and `every`. And hid -> the checks the passes decide for it."""
    left = {
        hid: frozenset(CHECKS) if hid in every
        else frozenset(n.removeprefix(SUSPECT) for n in found.get(hid, {}) if n.startswith(SUSPECT))
        for hid in hids
    }
    ran = [(run, finds, mine) for run, finds in passes if (mine := [h for h in hids if left[h] & finds])]
    decided = {hid: frozenset().union(*[finds for _, finds, mine in ran if hid in mine]) for hid in hids}
    return ran, decided


def _screened(found: Found, decided: dict[int, frozenset[str]]) -> Found:
    """The screen's own findings in `found` (no suspects), but for the checks the exact passes
    decided for that history."""
    return {
        hid: {n: v for n, v in checks.items() if not n.startswith(SUSPECT) and n not in decided[hid]}
        for hid, checks in found.items()
    }


def _elections(spark: SparkSession, dirs: list[ResultsDir], witnesses: int) -> tuple[Found, DataFrame]:
    """The election-safety, leader-completeness and forgotten-vote findings (exact on either
    path), and the events they came from."""
    events = load_events(spark, dirs)
    checks = (election_safety, leader_completeness, forgotten_vote)
    return collect_anomalies(reduce(DataFrame.unionByName, [c(events) for c in checks]), witnesses), events


def _leader_reads(spark: SparkSession, t: Tables, events: DataFrame, dirs: list[ResultsDir],
                  witnesses: int) -> Found:
    """The stale-leader-read findings (exact on either path) of the histories with linearizable reads."""
    walls = {hid: d.history_wall_ns for hid, d in enumerate(dirs)
             if d.history_wall_ns is not None and hid in t.linearizable}
    modes = {hid: d.read_mode for hid, d in enumerate(dirs)}
    return collect_anomalies(stale_leader_reads(spark, t, events, walls, modes), witnesses)


def _merged(found: Found, more: Found) -> Found:
    """`found` with `more`'s checks added to each history's."""
    return {hid: {**found.get(hid, {}), **more.get(hid, {})} for hid in found.keys() | more.keys()}


def _flagged(hid: int, found: Found, finals: FinalLogs) -> list[str]:
    """What the screen left for the exact checks to decide in history `hid` (empty: cleared).

    Without final logs the screen cannot place reads' ids in the log, so it never clears.
    """
    names = {name.removeprefix(SUSPECT) for name in found.get(hid, {}) if name not in INFORMATIONAL}
    if hid not in finals.longest:
        names.add("no final logs")
    return sorted(names)


def _input_bytes(dirs: list[ResultsDir]) -> int:
    return sum(
        d.history.stat().st_size + sum(p.stat().st_size for p in d.final_logs().values()) for d in dirs
    )


def _missing_inputs(layout: ResultsDir, ends: dict[str, int]) -> dict[str, str]:
    """The inputs (`layout.INPUTS`) the folder lacks -> what is missing."""
    missing: dict[str, str] = {}
    if not ends:
        missing["final-logs"] = "no final logs (final/<node>.jsonl)"
    if not layout.event_logs():
        missing["events"] = "no events (nodes/<node>/events.jsonl)"
    if not layout.store_dirs():
        missing["stores"] = "no store files collected (nodes/<node>/data/)"
    return missing


def _undecidable(
    layout: ResultsDir, ends: dict[str, int], missing: dict[str, str]
) -> tuple[dict[str, str], dict[str, str], list[str]]:
    """Checks this folder gives nothing to decide on (check -> why), checks that do not apply
    to it (check -> why), and notes for people; `missing` is `_missing_inputs`."""
    notes: list[str] = []
    stores = layout.store_dirs()
    why, not_applicable = undecided(layout.inputs, missing)
    if "final-logs" not in layout.inputs:
        return why, not_applicable, notes
    missing_logs = layout.missing_final_logs()
    if missing_logs:
        notes.append(f"no final log for {len(missing_logs)} node(s): {', '.join(missing_logs)}")
        if ends and len(ends) < layout.cluster_size() // 2 + 1:
            why["lost"] = why["consumed-then-lost"] = (
                f"final logs of {len(ends)} of {layout.cluster_size()} nodes: fewer than a "
                "majority, a committed entry may be only on the missing nodes"
            )
    if stores and not ends and "replica-disagreement" not in not_applicable:
        why["replica-disagreement"] = "no final logs to tell which store entries were committed"
    elif stores and set(stores) - set(ends):
        notes.append(
            f"store files without a final log, not compared: {', '.join(sorted(set(stores) - set(ends)))}"
        )
    return why, not_applicable, notes


def internal_error(e: Exception, master: str) -> str:
    """What went wrong, in one line: the message must say what happened, not only a JVM stack trace."""
    first = str(e).strip().splitlines()[0] if str(e).strip() else ""
    return f"internal error ({master}): {type(e).__name__}: {first}"
