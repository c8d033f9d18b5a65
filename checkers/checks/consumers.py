"""Checks on what the consumers consumed: consumed-then-lost, consume-divergence and skipped-offset.

A consume (`f` `consume`, see `checkers.jsonlines`) is one pull of a consumer reading the log
in order from its offset. What it got is not a read (no real-time rule applies to it), but
each consumed entry says what the log held at its index, so it must agree with the cluster's
final log and with every other consume; and a consumer must never move its offset past
entries it did not get.

* consumed-then-lost: a consumed id (not a no-op) that the cluster's final log does not hold.
  Counted once per id. Needs the final logs.
* consume-divergence: a log index where the consumes got different ids, or got an id the
  cluster's final log does not hold there (it holds another, or, past its end or in a gap,
  holds the consumed id at another index). Counted once per index. A consumed no-op where
  the final log holds nothing is not a divergence (no-ops only count for index continuity).
* skipped-offset: an ok consume that leaves a range of offsets never consumed by its
  consumer (`consumer`, in history order of its ok consumes): it pulled from beyond the
  offset the consumer committed at its previous ok consume, its entries are not consecutive
  from where it pulled, or it committed an offset past the entries it got. Pulling again from
  a lower offset (a rewind) is allowed. Counted once per consume.

The first two are one grouping by log index of the consumed entries with the cluster's final
log; only the indexes where they do not simply agree are looked at further (by id). The third
is a window over each consumer's ok consumes.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from checkers.checks.anomalies import anomaly_rows
from checkers.checks.blocksums import NOOP_KEY
from checkers.checks.tables import Tables, consume_ref

REASONS = ("from-past-offset", "entries-not-consecutive", "offset-past-entries")
CHECKS = frozenset({"consumed-then-lost", "consume-divergence", "skipped-offset"})  # what `checks` finds


def checks(t: Tables) -> DataFrame:
    """Every consumer check's anomaly rows."""
    return consumed_vs_final(t).unionByName(skipped_offset(t))


def _consumed(t: Tables) -> DataFrame:
    """hid, log_index, id, idkey (the id, or NOOP_KEY for a no-op), consume: each entry an ok consume got."""
    return t.consumes.select("hid", consume_ref().alias("consume"), F.explode("entries").alias("e")).select(
        "hid",
        F.col("e")[0].cast("long").alias("log_index"),
        F.col("e")[1].alias("id"),
        F.coalesce(F.col("e")[1], F.lit(NOOP_KEY)).alias("idkey"),
        "consume",
    )


def _first(ref: str) -> Column:
    """The earliest (by invoke index) of the consume references in column `ref`."""
    return F.min_by(ref, F.col(ref)["invoke_index"])


def consumed_vs_final(t: Tables) -> DataFrame:
    """consumed-then-lost and consume-divergence rows."""
    consumed = _consumed(t)
    final = t.cluster.select("hid", "log_index", F.coalesce("id", F.lit(NOOP_KEY)).alias("fkey"))
    at = (
        consumed.select("hid", "log_index", "idkey")
        .unionByName(final, allowMissingColumns=True)
        .groupBy("hid", "log_index")
        .agg(F.min("idkey").alias("lo"), F.max("idkey").alias("hi"), F.max("fkey").alias("fkey"))
    )
    lo, hi, fkey = F.col("lo"), F.col("hi"), F.col("fkey")
    agreed = F.when(fkey.isNull(), (lo == hi) & (hi == NOOP_KEY)).otherwise((lo == fkey) & (hi == fkey))
    suspect = at.where(lo.isNotNull() & ~agreed).select("hid", "log_index", "fkey")
    # The consumed entries at those indexes, each id with where the final log holds it.
    held = t.cluster.where(F.col("id").isNotNull()).select("hid", "id", F.col("log_index").alias("at"))
    per_id = (
        consumed.join(suspect, ["hid", "log_index"])
        .join(held, ["hid", "id"], "left")
        .groupBy("hid", "log_index", "idkey")
        .agg(
            F.max("id").alias("id"),
            F.max("fkey").alias("fkey"),
            F.count_distinct(F.col("consume")["invoke_index"]).alias("consumes"),
            _first("consume").alias("first"),
            F.min("at").alias("final_index"),
        )
    )
    return _lost(t, per_id).unionByName(_divergence(per_id))


def _lost(t: Tables, per_id: DataFrame) -> DataFrame:
    has_final_log = F.col("hid").isin(*t.finals.longest) if t.finals.longest else F.lit(False)
    missing = per_id.where(has_final_log & F.col("id").isNotNull() & F.col("final_index").isNull())
    rows = missing.groupBy("hid", "id").agg(
        F.sum("consumes").alias("consumes"),
        F.min_by(F.struct("log_index", "first"), F.col("first")["invoke_index"]).alias("earliest"),
    )
    earliest = F.col("earliest")
    return anomaly_rows(
        rows,
        "consumed-then-lost",
        earliest["first"]["invoke_index"],
        id=F.col("id"),
        log_index=earliest["log_index"],
        consumes=F.col("consumes"),
        consume=earliest["first"],
    )


def _divergence(per_id: DataFrame) -> DataFrame:
    fkey, named = F.col("fkey"), F.col("id").isNotNull()
    # What the consumes got there, earliest first (by their first consume's invoke).
    got = F.struct(F.col("first")["invoke_index"].alias("_at"), "id", "consumes", "first", "final_index")
    rows = per_id.groupBy("hid", "log_index").agg(
        F.max("fkey").alias("fkey"),
        F.count("*").alias("ids"),
        F.max((fkey.isNotNull() & (F.col("idkey") != fkey)).cast("int")).alias("differs"),
        F.max((named & F.col("final_index").isNotNull()).cast("int")).alias("elsewhere"),
        F.sort_array(F.collect_list(got)).alias("consumed"),
    )
    in_final = fkey.isNotNull()
    divergent = F.when(in_final, F.col("differs") == 1).otherwise(
        (F.col("ids") > 1) | (F.col("elsewhere") == 1)
    )
    return anomaly_rows(
        rows.where(divergent),
        "consume-divergence",
        F.col("log_index"),
        log_index=F.col("log_index"),
        in_final_log=in_final,
        final_id=F.when(fkey != NOOP_KEY, fkey),
        consumed=F.transform(F.slice("consumed", 1, 5), lambda c: c.dropFields("_at")),
    )


def skipped_offset(t: Tables) -> DataFrame:
    """An ok consume that leaves offsets its consumer never consumed (one row per consume)."""
    by_consumer = Window.partitionBy("hid", "consumer").orderBy("cid")
    rows = t.consumes.select(
        "hid",
        "cid",
        "cfrom",
        "offset",
        F.transform("entries", lambda e: e[0].cast("long")).alias("indexes"),
        consume_ref().alias("consume"),
        F.lag(consume_ref()).over(by_consumer).alias("previous"),
    )
    cfrom, indexes = F.col("cfrom"), F.col("indexes")
    after = F.col("previous")["offset"]
    # 1-based position of the first entry that is not at from + its position (0: none).
    wrong = F.array_position(F.transform(indexes, lambda i, j: i != cfrom + j), True).cast("int")
    expected = cfrom + wrong - 1
    got_to = cfrom + F.size(indexes)
    beyond = F.greatest(expected, F.element_at(indexes, wrong) - 1)  # up to the index it got instead
    cases = [
        ("from-past-offset", cfrom > after, after, cfrom - 1),
        ("entries-not-consecutive", wrong > 0, expected, beyond),
        ("offset-past-entries", F.col("offset") > got_to, got_to, F.col("offset") - 1),
    ]

    def first_that_holds(pick: int) -> Column:  # one row per consume: the first case that holds
        chosen = F.when(cases[0][1], cases[0][pick])
        for case in cases[1:]:
            chosen = chosen.when(case[1], case[pick])
        return chosen

    flagged = rows.select(
        "hid",
        "cid",
        "consume",
        "previous",
        first_that_holds(0).alias("reason"),
        first_that_holds(2).alias("missing_from"),
        first_that_holds(3).alias("missing_to"),
    ).where(F.col("reason").isNotNull())
    return anomaly_rows(
        flagged,
        "skipped-offset",
        F.col("cid"),
        consumer=F.col("consume")["consumer"],
        reason=F.col("reason"),
        missing_from=F.col("missing_from"),
        missing_to=F.col("missing_to"),
        consume=F.col("consume"),
        previous=F.col("previous"),
    )
