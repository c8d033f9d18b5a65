"""Checks that hold the log to real time: real-time reorder, stale read, non-monotonic read and
future read. Each is one prefix maximum (see `prefix`) or running count, and a filter, never
a search. Positions are the known ones (`Tables.known_positions`): the final log's, else the
acknowledged index, else where a read or consume saw the id.

Over the history's order (real time, see `history`), completions contribute and invocations
ask "what had completed before
I was invoked?": the highest final position of an acknowledged append (reorder), the highest
acknowledged index (stale read) and the highest index an ok read saw (non-monotonic read).
Over the log axis, each read asks for the latest invocation among the appends at or below
the highest index it saw (future read).
"""

from __future__ import annotations

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

from checkers.checks.anomalies import anomalies_where, anomaly, anomaly_rows
from checkers.checks.prefix import prefix_max
from checkers.checks.tables import Tables, append_ref, consume_ref, read_ref

ASK, GIVE = 0, 1  # lines have distinct indexes; the tie column only fills prefix_max's order


def _misses(known: str, field: str) -> F.Column:
    """A read that does not reach min(the highest index known before it, its range end)."""
    expected = F.least(F.col(known)[field], F.col("rto"))
    return (F.col("kind") == "read") & F.col(known).isNotNull() & (expected > F.col("k"))


def time_order(t: Tables) -> DataFrame:
    """realtime-reorder, stale-read and nonmonotonic-read rows, from one pass in history order."""
    appends = t.appends.join(t.known_positions(), ["hid", "id"], "left")
    acked = appends.where(F.col("status") == "ok").select(
        "hid",
        F.col("cmp_index").alias("t"),
        F.lit(GIVE).alias("tie"),
        F.struct(
            "ack_index",
            F.col("inv_index").alias("invoke_index"),
            "id",
            F.col("cmp_time").alias("complete_time"),
        ).alias("u_ack"),
        F.when(
            F.col("pos").isNotNull(),
            F.struct(
                F.col("pos").alias("index"),
                F.col("inv_index").alias("invoke_index"),
                "id",
                F.col("cmp_time").alias("complete_time"),
            ),
        ).alias("u_pos"),
    )
    seen = t.reads.where(F.col("seen_max").isNotNull()).select(
        "hid",
        F.col("cmp_index").alias("t"),
        F.lit(GIVE).alias("tie"),
        F.struct(
            "seen_max", F.col("rid").alias("invoke_index"), F.col("cmp_time").alias("complete_time")
        ).alias("u_seen"),
    )
    ask_append = appends.where(F.col("pos").isNotNull()).select(
        "hid",
        F.col("inv_index").alias("t"),
        F.lit(ASK).alias("tie"),
        F.lit("append").alias("kind"),
        "pos",
        append_ref().alias("append"),
    )
    ask_read = t.reads.select(
        "hid",
        F.col("rid").alias("t"),
        F.lit(ASK).alias("tie"),
        F.lit("read").alias("kind"),
        "k",
        "rto",
        read_ref().alias("read"),
    )
    rows = (
        acked.unionByName(seen, allowMissingColumns=True)
        .unionByName(ask_append, allowMissingColumns=True)
        .unionByName(ask_read, allowMissingColumns=True)
    )
    scanned = prefix_max(rows, "t", "tie", ["u_ack", "u_pos", "u_seen"], t.history.lines).where(
        F.col("kind").isNotNull()
    )
    append, read = F.col("append"), F.col("read")
    reorder = (F.col("kind") == "append") & (F.col("pm_u_pos")["index"] > F.col("pos"))
    return anomalies_where(
        scanned,
        [
            (
                reorder,
                anomaly(
                    "realtime-reorder",
                    append["invoke_index"],
                    later=append,
                    later_index=F.col("pos"),
                    earlier=F.col("pm_u_pos"),
                ),
            ),
            (
                _misses("pm_u_ack", "ack_index"),
                anomaly("stale-read", read["invoke_index"], read=read, acked_before=F.col("pm_u_ack")),
            ),
            (
                _misses("pm_u_seen", "seen_max"),
                anomaly(
                    "nonmonotonic-read", read["invoke_index"], read=read, earlier_read=F.col("pm_u_seen")
                ),
            ),
        ],
    )


def future_read(t: Tables) -> DataFrame:
    """A read that saw the log up to index k while an append at or below k was invoked after it returned.

    "At or below k" covers the ids in the read's own entries and, where there is a final
    log, every id the final log holds at index k or lower.
    """
    invoked = F.struct(
        F.col("inv_index").alias("invoke_index"), F.col("inv_time").alias("invoke_time"), "id", "log_index"
    )
    in_log = t.cluster.join(t.appends, ["hid", "id"]).select(
        "hid", F.col("log_index").alias("t"), F.lit(0).alias("tie"), invoked.alias("u")
    )
    asks = t.reads.where(F.col("seen_max").isNotNull())
    asking = asks.select("hid", F.col("seen_max").alias("t"), F.lit(1).alias("tie"), "rid")
    scanned = (
        prefix_max(in_log.unionByName(asking, allowMissingColumns=True), "t", "tie", ["u"], t.log_span)
        .where(F.col("rid").isNotNull())
        .select("hid", "rid", "pm_u")
    )
    own = t.read_entries.join(t.appends, ["hid", "id"]).groupBy("hid", "rid").agg(F.max(invoked).alias("own"))
    rows = (
        asks.join(scanned, ["hid", "rid"], "left")
        .join(own, ["hid", "rid"], "left")
        .withColumn("latest", F.greatest("pm_u", "own"))
        .where(F.col("latest")["invoke_index"] > F.col("cmp_index"))
    )
    reads = anomaly_rows(
        rows, "future-read", F.col("rid"), read=read_ref(), append_invoked_after=F.col("latest")
    )
    if not t.history.consumed:
        return reads
    got = (
        t.consume_entries.join(t.appends, ["hid", "id"])
        .groupBy("hid", "cid")
        .agg(F.max(invoked).alias("latest"))
    )
    later = t.consumes.join(got, ["hid", "cid"]).where(F.col("latest")["invoke_index"] > F.col("cmp_index"))
    consumes = anomaly_rows(
        later, "future-read", F.col("cid"), consume=consume_ref(), append_invoked_after=F.col("latest")
    )
    return reads.unionByName(consumes)


def stale_by_id(t: Tables) -> DataFrame:
    """Reads of the whole log (from 0) that miss an append acknowledged before they were invoked.

    Only reads that the rule by index (`time_order`) does not already flag: one count per
    read. Counted without a search: the appends acknowledged before each read (a running
    count in history order) against those of its own entries; the missing append named in the
    witness is looked up for the flagged reads only.
    """
    whole = t.reads.where(F.col("whole") & (F.col("rfrom") <= 0))
    whole = whole.where(~F.coalesce(F.least("p_ack", "rto") > F.col("k"), F.lit(False)))
    acked = t.appends.where(F.col("status") == "ok").select("hid", "id", "cmp_index")
    no_read = F.lit(None).cast("long").alias("rid")
    events = acked.select("hid", F.col("cmp_index").alias("t"), F.lit(1).alias("n"), no_read)
    events = events.unionByName(whole.select("hid", F.col("rid").alias("t"), F.lit(0).alias("n"), "rid"))
    so_far = Window.partitionBy("hid").orderBy("t").rowsBetween(Window.unboundedPreceding, Window.currentRow)
    before = events.withColumn("acked_before", F.sum("n").over(so_far)).where(F.col("rid").isNotNull())
    entries = t.read_entries.join(whole.select("hid", "rid"), ["hid", "rid"]).select("hid", "rid", "id")
    held = (
        entries.join(acked, ["hid", "id"])
        .where(F.col("cmp_index") < F.col("rid"))
        .groupBy("hid", "rid")
        .agg(F.countDistinct("id").alias("held"))
    )
    short = (
        before.select("hid", "rid", "acked_before")
        .join(held, ["hid", "rid"], "left")
        .where(F.coalesce("held", F.lit(0)) < F.col("acked_before"))
    )
    candidates = short.select("hid", "rid").join(acked, "hid").where(F.col("cmp_index") < F.col("rid"))
    missing = (
        candidates.join(entries, ["hid", "rid", "id"], "left_anti")
        .groupBy("hid", "rid")
        .agg(F.min(F.struct(F.col("cmp_index").alias("complete_index"), "id")).alias("missing"))
    )
    rows = whole.join(missing, ["hid", "rid"])
    return anomaly_rows(rows, "stale-read", F.col("rid"), read=read_ref(), not_seen=F.col("missing"))
