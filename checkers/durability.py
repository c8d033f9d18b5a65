"""Checks on what the log holds: lost, recovered, aborted read, phantom, duplicate, divergence,
index mismatch and hole. Each is a join or an aggregation over ids or log indexes.
"""

from __future__ import annotations

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

from checkers.anomalies import anomaly_rows
from checkers.tables import NOOP_KEY, Tables, append_ref, read_ref


def _claim() -> F.Column:
    return F.struct("log_index", "source", F.col("ref").alias("history_index"))


def _named_claims(t: Tables) -> DataFrame:
    """Claims by reads and final logs that name an id (no-ops excluded)."""
    return t.claims(acks=False).where(F.col("id").isNotNull())


def lost(t: Tables) -> DataFrame:
    """An acknowledged append, or an id an ok read saw, missing from the cluster's final log."""
    acked = t.appends.where(F.col("status") == "ok").select(
        "hid", "id", F.lit(None).cast("long").alias("rid")
    )
    seen = t.read_entries.where(F.col("id").isNotNull()).select("hid", "id", "rid")
    missing = t.with_final_log(acked.unionByName(seen)).join(t.positions, ["hid", "id"], "left_anti")
    per_id = missing.groupBy("hid", "id").agg(F.min("rid").alias("seen_by_read"))
    rows = per_id.join(t.appends, ["hid", "id"], "left")
    return anomaly_rows(
        rows,
        "lost",
        F.coalesce("inv_index", "seen_by_read"),
        id=F.col("id"),
        append=F.when(F.col("inv_index").isNotNull(), append_ref()),
        seen_by_read=F.col("seen_by_read"),
    )


def recovered(t: Tables) -> DataFrame:
    """An indeterminate append (info, or never completed) that did land: not an error."""
    rows = t.appends.where(F.col("status") == "info").join(t.positions, ["hid", "id"])
    return anomaly_rows(
        rows, "recovered", F.col("inv_index"), id=F.col("id"), final_index=F.col("pos"), append=append_ref()
    )


def aborted_read(t: Tables) -> DataFrame:
    """An id in a read or a final log whose append definitely failed."""
    failed = t.appends.where(F.col("status") == "fail")
    rows = (
        _named_claims(t)
        .join(failed, ["hid", "id"])
        .groupBy("hid", "id")
        .agg(F.min(_claim()).alias("seen"), F.min(append_ref()).alias("append"))
    )
    return anomaly_rows(
        rows,
        "aborted-read",
        F.col("append")["invoke_index"],
        id=F.col("id"),
        append=F.col("append"),
        seen=F.col("seen"),
    )


def phantom(t: Tables) -> DataFrame:
    """An id in a read or a final log that no client ever appended."""
    rows = (
        _named_claims(t)
        .join(t.appends, ["hid", "id"], "left_anti")
        .groupBy("hid", "id")
        .agg(F.min(_claim()).alias("seen"))
    )
    return anomaly_rows(rows, "phantom", F.col("seen")["log_index"], id=F.col("id"), seen=F.col("seen"))


def duplicate(t: Tables) -> DataFrame:
    """One id at two log indexes (in reads and final logs)."""
    rows = (
        _named_claims(t)
        .groupBy("hid", "id")
        .agg(F.min(_claim()).alias("first"), F.max(_claim()).alias("second"))
        .where(F.col("first")["log_index"] != F.col("second")["log_index"])
    )
    return anomaly_rows(
        rows,
        "duplicate",
        F.col("first")["log_index"],
        id=F.col("id"),
        first=F.col("first"),
        second=F.col("second"),
    )


def divergence(t: Tables) -> DataFrame:
    """One log index holding different ids across acks, reads and the nodes' final logs."""
    claims = t.claims(acks=True).withColumn("idkey", F.coalesce("id", F.lit(NOOP_KEY)))
    per_id = claims.groupBy("hid", "log_index", "idkey").agg(
        F.max("id").alias("id"),
        F.count("*").alias("claims"),
        F.min(F.struct("source", F.col("ref").alias("history_index"))).alias("example"),
    )
    rows = (
        per_id.groupBy("hid", "log_index")
        .agg(
            F.count("*").alias("ids"),
            F.sort_array(F.collect_list(F.struct("id", "claims", "example"))).alias("held"),
        )
        .where(F.col("ids") > 1)
    )
    return anomaly_rows(
        rows, "divergence", F.col("log_index"), log_index=F.col("log_index"), held=F.slice("held", 1, 5)
    )


def index_mismatch(t: Tables) -> DataFrame:
    """An acknowledged index that does not hold the id in the cluster's final log (which has it elsewhere)."""
    at_ack = t.cluster.select("hid", F.col("log_index").alias("ack_index"), "id")
    rows = (
        t.appends.where(F.col("status") == "ok")
        .join(t.positions, ["hid", "id"])
        .join(at_ack, ["hid", "ack_index", "id"], "left_anti")
    )
    return anomaly_rows(
        rows,
        "index-mismatch",
        F.col("inv_index"),
        id=F.col("id"),
        ack_index=F.col("ack_index"),
        final_index=F.col("pos"),
        append=append_ref(),
    )


def hole(t: Tables) -> DataFrame:
    """A gap below the highest index of a node's final log, or inside an ok read's entries."""
    by_node = Window.partitionBy("hid", "node").orderBy("log_index")
    present = t.finals.entries.select("hid", "node", "log_index")
    gaps = present.withColumn("before", F.coalesce(F.lag("log_index").over(by_node), F.lit(-1))).where(
        F.col("log_index") - F.col("before") > 1
    )
    final_holes = anomaly_rows(
        gaps,
        "hole",
        F.col("before") + 1,
        node=F.col("node"),
        missing_from=F.col("before") + 1,
        missing_to=F.col("log_index") - 1,
    )
    read_gaps = anomaly_rows(t.reads.where(F.col("gap")), "hole", F.col("rid"), read=read_ref())
    return final_holes.unionByName(read_gaps)
