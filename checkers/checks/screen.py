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


def findings(spark: SparkSession, t: Tables, witnesses: int) -> Found:
    """What the screen finds from the history and the final logs: the exact findings of its
    rows (recovered appends, skipped offsets), and `~<check>` for its suspects and for the
    final logs' flags (`final_log_flags`, a job run beside the grouping)."""
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
    """Recovered appends, and `~<check>` rows for whatever the exact checks by id would find.

    One grouping by id of every append, every id a read saw, and the cluster's final log,
    with numbers only (so Spark aggregates it in a hash table, partially before the shuffle).
    No-ops are keyed by their index. Beyond the exact checks' conditions the groups flag a
    read's claim at an index where the cluster's log does not hold its id (divergence), an
    append landed below an index acknowledged before it was invoked (real-time reorder), and
    one landed at or below an index a read saw before it was invoked (future read): exact
    while every acknowledged index is right, which the other conditions show.

    With `consumed`, every entry a consume got joins the grouping too: an id the cluster's
    log does not hold at the index it was consumed at flags the consumer checks by log index
    (consumed-then-lost, consume-divergence).
    """
    noop = F.concat(F.lit(NOOP_KEY + ":"), F.col("log_index").cast("string"))
    code = F.array_position(F.array(*[F.lit(x) for x in _STATUSES]), F.col("status"))
    appended = t.appends.withColumn("status", code).select("hid", "id", *_NUMBERS)
    claim = [F.coalesce("id", noop).alias("id"), F.col("log_index").alias("claim")]
    claimed = t.read_entries.select("hid", *claim, "rid").unionByName(
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
        F.min("at").alias("pos"),
        F.max("at").alias("pos_hi"),
        *got,
    )
    ids = ids.withColumn("status", F.get(F.array(*[F.lit(x) for x in _STATUSES]), F.col("status") - 1))
    pos, status, lo = F.col("pos"), F.col("status"), F.col("claim_lo")
    landed, named = pos.isNotNull(), ~F.col("id").startswith(NOOP_KEY)
    appended_here = F.col("inv_index").isNotNull()
    suspects = {
        "lost": ~landed & ((status == "ok") | F.col("seen_by_read").isNotNull()),
        "aborted-read": (status == "fail") & (lo.isNotNull() | landed),
        "phantom": ~appended_here & (lo.isNotNull() | landed),
        "duplicate": (lo != F.col("claim_hi")) | (pos != F.col("pos_hi")),
        "index-mismatch": (status == "ok") & landed & (F.col("ack_index") != pos),
        "divergence": lo.isNotNull() & (~landed | (lo != pos) | (F.col("claim_hi") != pos)),
        "realtime-reorder": landed & (F.col("p_ack") > pos),
        "future-read": landed & (F.col("p_seen") >= pos),
    }
    if consumed:
        got_lo = F.col("got_lo")
        suspects["consumed-then-lost"] = got_lo.isNotNull() & ~landed
        suspects["future-read"] = suspects["future-read"] | (F.col("inv_index") > F.col("got_done_lo"))
        # A named id nowhere in the log is flagged as lost (the exact checks then see it all);
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
        *[
            (cond if name in by_index else named & cond, suspect(name, id=F.col("id")))
            for name, cond in suspects.items()
        ],
    ]
    return anomalies_where(ids, cases)


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

    `hole` when the cluster's log is not exactly the indexes 0..end; `divergence` when a
    node's log is not a prefix of the cluster's.
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
            flags[hid].add("hole")
    for hid, b in cluster:
        if (hid, b) not in expected:
            flags[hid].add("hole")
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
                    flags[hid].add("divergence")
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
