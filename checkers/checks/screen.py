"""The screening pass: cheap tests that clear a history of every anomaly, or send it to the exact checks.

A correct history is the common case and the screen proves it with one grouping by id
(`by_id`), per-read conditions and per-block sums of the final logs:
no search, no sort of the whole history beyond the one that pairs its ops. Whatever the
screen cannot clear (a `~<check>` row, or a flag from here) makes the caller run the exact
checks, which give the counts and witnesses.

The final logs are compared block by block (`blocksums`, summed while they are loaded):
each node's blocks with the cluster's, and the cluster's indexes with 0..end.
"""

from __future__ import annotations

from collections import defaultdict
from concurrent.futures import ThreadPoolExecutor
from functools import reduce

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from checkers.checks import consumers
from checkers.checks.anomalies import SUSPECT, Found, anomalies_where, anomaly, collect_anomalies, suspect
from checkers.checks.blocksums import FINAL_BLOCK, NOOP_KEY, Sums, block_sums, sums_table
from checkers.checks.finallogs import FinalLogs
from checkers.checks.tables import Tables, append_ref
from checkers.engine.spark import sql_conf

# What the grouping by id keeps of an append: numbers only, the status too.
_NUMBERS = [
    "status",
    "process",
    "inv_index",
    "inv_time",
    "cmp_index",
    "cmp_time",
    "ack_index",
    "p_ack",
    "p_seen",
]
_STATUSES = ("info", "fail", "ok")
# The exact checks that read every node's final log, not only the cluster's.
NODE_LOG_CHECKS = frozenset({"divergence", "duplicate", "phantom", "aborted-read", "hole"})


def findings(spark: SparkSession, t: Tables, witnesses: int) -> Found:
    """What the screen finds from the history and the final logs: the exact findings of its
    rows (recovered and lost appends, skipped offsets), and `~<check>` for its suspects and
    for the final logs' flags (`final_log_flags`, a job run beside the grouping)."""
    consumed = t.history.consumed
    parts = [
        by_id(t, consumed=consumed),
        read_flags(t),
        # exact, and cheap enough for the screen: one window over each consumer's pulls
        *([consumers.skipped_offset(t), consume_flags(t)] if consumed else []),
    ]
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="screen") as side:
        flags = side.submit(final_log_flags, spark, t.finals)
        # Its grouping is by id, nearly one row per group: aggregating before the shuffle
        # reduces nothing and costs a hash table (10^7 lines: ~42-48 s against ~40-41 s).
        with sql_conf(spark, "spark.sql.execution.bypassPartialAggregation", "true"):
            found = collect_anomalies(reduce(DataFrame.unionByName, parts), witnesses)
        for hid, checks in flags.result().items():
            for name in checks:
                found.setdefault(hid, {})[SUSPECT + name] = (1, [])
    return found


def by_id(t: Tables, *, consumed: bool = False) -> DataFrame:
    """Recovered and lost appends, and `~<check>` rows for whatever else the exact checks by id
    or by position could find.

    One grouping by id of every append, every id a read saw, and the cluster's final log,
    with numbers only (so Spark aggregates it in a hash table, partially before the shuffle).
    No-ops are keyed by their index. An acknowledged append (or an id an ok read saw) that
    the cluster's final log does not hold is `lost` as the exact check by id counts it, so
    the screen gives those rows itself (the witnesses' `covered_by` is added by the caller);
    without final logs it is a suspect.

    Each suspect holds for its check alone, whatever else the history holds, so the caller
    runs only the exact passes of the checks flagged (`check.EXACT`). An id whose statements
    (acknowledgement, reads', consumes' and the cluster's indexes) are not all its one
    position flags a divergence. A real-time reorder is flagged for an append whose known
    position is below an index acknowledged before it was invoked, and for an acknowledged
    append whose position its acknowledgement does not tell (no index, or landed elsewhere);
    a future read for an append landed at or below an index a read saw before it was
    invoked, or seen by a read or consume that completed before it was invoked. The known
    position is the cluster's, else the acknowledged index, else the lowest index a read or
    consume saw it at, as the exact checks take it (`Tables.known_positions`).

    With `consumed`, every entry a consume got joins the grouping too: an id the cluster's
    log does not hold at the index it was consumed at flags the consumer checks by log index
    (consumed-then-lost, consume-divergence).
    """
    noop = F.concat(F.lit(NOOP_KEY + ":"), F.col("log_index").cast("string"))
    code = F.array_position(F.array(*[F.lit(x) for x in _STATUSES]), F.col("status"))
    appended = t.appends.withColumn("status", code).select("hid", "id", *_NUMBERS)
    claim = [F.coalesce("id", noop).alias("id"), F.col("log_index").alias("claim")]
    read = t.read_entries.select("hid", *claim, "rid", F.col("log_index").alias("rclaim"), "rdone")
    claimed = read.unionByName(
        t.history.observed.select("hid", *claim),  # what fail and info reads and consumes carried
        allowMissingColumns=True,
    )
    placed = t.cluster.select("hid", F.coalesce("id", noop).alias("id"), F.col("log_index").alias("at"))
    facts = appended.unionByName(claimed, allowMissingColumns=True).unionByName(
        placed, allowMissingColumns=True
    )
    got = []
    if consumed:
        at = F.col("e")[0].cast("long")
        got_id = F.coalesce(F.col("e")[1], F.concat(F.lit(NOOP_KEY + ":"), at.cast("string")))
        entries = t.consumes.select("hid", "cmp_index", F.explode("entries").alias("e"))
        facts = facts.unionByName(
            entries.select("hid", got_id.alias("id"), at.alias("got"), F.col("cmp_index").alias("got_done")),
            allowMissingColumns=True,
        )
        got = [F.min(c).alias(f"{c}_lo") for c in ("got", "got_done")] + [F.max("got").alias("got_hi")]
    ids = facts.groupBy("hid", "id").agg(
        *[F.max(c).alias(c) for c in _NUMBERS],
        F.min("claim").alias("claim_lo"),
        F.max("claim").alias("claim_hi"),
        F.min("rid").alias("seen_by_read"),
        F.min("rclaim").alias("read_lo"),
        F.min("rdone").alias("read_done_lo"),
        F.min("at").alias("pos"),
        F.max("at").alias("pos_hi"),
        *got,
    )
    if not consumed:
        nothing = F.lit(None).cast("long")
        ids = ids.select("*", *[nothing.alias(c) for c in ("got_lo", "got_done_lo", "got_hi")])
    ids = ids.withColumn("status", F.get(F.array(*[F.lit(x) for x in _STATUSES]), F.col("status") - 1))
    pos, status, ack = F.col("pos"), F.col("status"), F.col("ack_index")
    landed, named = pos.isNotNull(), ~F.col("id").startswith(NOOP_KEY)
    appended_here, ok = F.col("inv_index").isNotNull(), status == "ok"
    stated = [F.col(c) for c in ("claim_lo", "claim_hi", "got_lo", "got_hi")]  # where the history has it
    said = F.coalesce(F.least(*stated), ack).isNotNull()
    seen_at = F.coalesce(pos, ack, F.least("read_lo", "got_lo"))  # its known position
    has_final_log = F.col("hid").isin(*t.finals.longest) if t.finals.longest else F.lit(False)
    lost = ~landed & (ok | F.col("seen_by_read").isNotNull())
    suspects = {
        "lost": ~has_final_log & lost,
        "aborted-read": (status == "fail") & (said | landed),
        "phantom": ~appended_here & (said | landed),
        "duplicate": F.least(*stated, pos) != F.greatest(*stated, F.col("pos_hi")),
        "index-mismatch": ok & _differs(F.when(landed, pos), *stated, against=ack),
        "divergence": F.when(landed, _differs(*stated, ack, F.col("pos_hi"), against=pos)).otherwise(said),
        "realtime-reorder": (ok & (ack.isNull() | F.coalesce(pos != ack, F.lit(False))))
        | (F.col("p_ack") > seen_at),
        "future-read": (landed & (F.col("p_seen") >= pos))
        | (F.col("inv_index") > F.least("read_done_lo", "got_done_lo")),
    }
    if consumed:
        got_lo = F.col("got_lo")
        suspects["consumed-then-lost"] = got_lo.isNotNull() & ~landed
        # A named id nowhere in the log flags consumed-then-lost (its pass decides both);
        # a no-op is one where the cluster's log holds another entry (up to its end).
        ends = [F.lit(x) for hid, node in t.finals.longest.items() for x in (hid, t.finals.ends[hid][node])]
        end = F.element_at(F.create_map(*ends), F.col("hid")) if ends else F.lit(None)
        suspects["consume-divergence"] = got_lo.isNotNull() & F.when(
            landed, (got_lo != pos) | (F.col("got_hi") != pos)
        ).otherwise(~named & F.coalesce(got_lo <= end, F.lit(True)))
    by_index = ("divergence", "consume-divergence")  # no-ops count too
    cases = [
        (
            named & appended_here & (status == "info") & landed,
            anomaly("recovered", F.col("inv_index"), id=F.col("id"), final_index=pos, append=append_ref()),
        ),
        (
            named & has_final_log & lost,
            anomaly(
                "lost",
                F.coalesce("inv_index", "seen_by_read"),
                id=F.col("id"),
                append=F.when(appended_here, append_ref()),
                seen_by_read=F.col("seen_by_read"),
            ),
        ),
        *[
            (cond if name in by_index else named & cond, suspect(name, id=F.col("id")))
            for name, cond in suspects.items()
        ],
    ]
    return anomalies_where(ids, cases)


def _differs(*stated: Column, against: Column) -> Column:
    """Some non-null one of `stated` is not `against` (false when `against` is null)."""
    return F.coalesce(F.exists(F.array(*stated), lambda x: x != against), F.lit(False))


def read_flags(t: Tables) -> DataFrame:
    """`~stale-read`, `~nonmonotonic-read`, `~hole`, `~uncommitted-read` and `~malformed-answer`
    rows from each ok read on its own.

    A read's real-time prefixes (`History`) are what the exact checks compute, so these
    conditions are theirs: the read misses an index acknowledged, or seen by another read,
    before it was invoked; its entries skip an index; it saw past its own commit index; or
    its entries contradict its range. A read of the whole log is always sent on: the rule by
    id (every append acknowledged before it, wherever it sits) needs the exact check.
    """
    return anomalies_where(
        t.reads,
        [
            (_misses("p_ack") | F.col("whole"), suspect("stale-read", rid=F.col("rid"))),
            (F.col("malformed"), suspect("malformed-answer", rid=F.col("rid"))),
            (_misses("p_seen"), suspect("nonmonotonic-read", rid=F.col("rid"))),
            (F.col("gap"), suspect("hole", rid=F.col("rid"))),
            (F.col("uncommitted"), suspect("uncommitted-read", rid=F.col("rid"))),
        ],
    )


def consume_flags(t: Tables) -> DataFrame:
    """`~malformed-answer` rows for the ok consumes whose entries contradict where they pulled from."""
    return anomalies_where(t.consumes, [(F.col("malformed"), suspect("malformed-answer", cid=F.col("cid")))])


def _misses(prefix: str) -> Column:
    """The read does not reach min(the prefix at its invoke, its range end)."""
    return F.col(prefix).isNotNull() & (F.least(prefix, "rto") > F.col("k"))


def final_log_flags(spark: SparkSession, finals: FinalLogs) -> dict[int, set[str]]:
    """hid -> checks whose anomalies the final logs may hold (empty when they are sound).

    `hole` and `divergence` (two entries at an index) when the cluster's log is not exactly
    the indexes 0..end; when a node's log is not a prefix of the cluster's, every check that
    reads each node's log (`NODE_LOG_CHECKS`).
    """
    flags: dict[int, set[str]] = defaultdict(set)
    if not finals.longest:
        return flags
    nodes = finals.blocks
    cluster = {(hid, b): s for (hid, node, b), s in nodes.items() if finals.longest.get(hid) == node}
    ends = [(hid, end) for hid, node in finals.longest.items() if (end := finals.ends[hid][node]) >= 0]
    expected: dict[tuple, Sums] = {}
    if ends:
        top = max(end for _, end in ends)
        hids = spark.createDataFrame(ends, "hid long, end long")
        indexes = spark.range(top + 1).withColumnRenamed("id", "log_index").crossJoin(F.broadcast(hids))
        indexes = indexes.where(F.col("log_index") <= F.col("end"))
        indexes = indexes.select(
            "hid", "log_index", F.lit(None).cast("long").alias("term"), F.lit("").alias("id")
        )
        expected = sums_table(block_sums(indexes, ["hid"]).collect(), ["hid"])
    for (hid, b), (n, _, _, hi) in expected.items():
        got = cluster.get((hid, b))
        if got is None or (got[0], got[3]) != (n, hi):
            flags[hid] |= {"hole", "divergence"}
    for hid, b in cluster:
        if (hid, b) not in expected:
            flags[hid] |= {"hole", "divergence"}
    partial = _partial_blocks(spark, finals)
    for hid, ends_of in finals.ends.items():
        for node, end in ends_of.items():
            if node == finals.longest[hid]:
                continue
            for b in range(end // FINAL_BLOCK + 1):
                got = nodes.get((hid, node, b))
                cut = b == end // FINAL_BLOCK and end < ends_of[finals.longest[hid]]
                reference = partial.get((hid, node)) if cut else cluster.get((hid, b))
                if got is None or reference is None or got[:3] != reference[:3]:
                    flags[hid] |= NODE_LOG_CHECKS
    return flags


def _partial_blocks(spark: SparkSession, finals: FinalLogs) -> dict[tuple, Sums]:
    """(hid, node) -> sums of the cluster's log over the block holding the node's end, up to
    it, for the nodes whose log ends before the cluster's."""
    cuts = [
        (hid, node, end)
        for hid, nodes in finals.ends.items()
        for node, end in nodes.items()
        if 0 <= end < nodes[finals.longest[hid]]
    ]
    if not cuts:
        return {}
    cut = spark.createDataFrame(cuts, "hid long, node string, end long").withColumn(
        "_cb", F.floor(F.col("end") / FINAL_BLOCK)
    )
    rows = (
        finals.cluster.join(F.broadcast(cut), "hid")
        .where(
            (F.floor(F.col("log_index") / FINAL_BLOCK) == F.col("_cb")) & (F.col("log_index") <= F.col("end"))
        )
        .drop("_cb", "end")
    )
    sums = sums_table(block_sums(rows, ["hid", "node"]).collect(), ["hid", "node"])
    return {(hid, node): s for (hid, node, _), s in sums.items()}
