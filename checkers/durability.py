"""Checks on what the log holds: lost, recovered, aborted read, phantom, duplicate, index
mismatch (one grouping by id), divergence (a grouping by index) and hole (a per-node scan).
"""

from __future__ import annotations

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

from checkers.anomalies import anomalies_where, anomaly, anomaly_rows
from checkers.blocksums import NOOP_KEY
from checkers.tables import Tables, append_ref, read_ref


def _claim() -> F.Column:
    return F.struct("log_index", "source", F.col("ref").alias("history_index"))


def _named_claims(t: Tables) -> DataFrame:
    """Claims by reads and final logs that name an id (no-ops excluded)."""
    return t.claims(acks=False).where(F.col("id").isNotNull())


def by_id(t: Tables) -> DataFrame:
    """lost, recovered, aborted-read, phantom, duplicate and index-mismatch, from one grouping by id.

    Every fact about an id (its append, what reads and final logs claim, where the cluster's
    final log holds it) is grouped by (hid, id) once; each check is a condition on the group.
    """
    appended = t.appends.select("hid", "id", append_ref().alias("app"))
    claimed = _named_claims(t).select(
        "hid", "id", _claim().alias("claim"), F.when(F.col("source") == "read", F.col("ref")).alias("rid")
    )
    placed = t.cluster.where(F.col("id").isNotNull()).select("hid", "id", F.col("log_index").alias("at"))
    facts = appended.unionByName(claimed, allowMissingColumns=True).unionByName(
        placed, allowMissingColumns=True
    )
    ids = facts.groupBy("hid", "id").agg(
        F.max("app").alias("app"),
        F.min("claim").alias("first"),
        F.max("claim").alias("second"),
        F.min("rid").alias("seen_by_read"),
        F.min("at").alias("pos"),
        F.collect_set("at").alias("held_at"),
    )
    app, first, pos = F.col("app"), F.col("first"), F.col("pos")
    has_final_log = F.col("hid").isin(*t.finals.longest) if t.finals.longest else F.lit(False)
    landed = pos.isNotNull()
    ident = F.col("id")
    return anomalies_where(
        ids,
        [
            (
                has_final_log & ~landed & ((app["type"] == "ok") | F.col("seen_by_read").isNotNull()),
                anomaly(
                    "lost",
                    F.coalesce(app["invoke_index"], F.col("seen_by_read")),
                    id=ident,
                    append=app,
                    seen_by_read=F.col("seen_by_read"),
                ),
            ),
            (
                (app["type"] == "info") & landed,
                anomaly("recovered", app["invoke_index"], id=ident, final_index=pos, append=app),
            ),
            (
                (app["type"] == "fail") & first.isNotNull(),
                anomaly("aborted-read", app["invoke_index"], id=ident, append=app, seen=first),
            ),
            (app.isNull() & first.isNotNull(), anomaly("phantom", first["log_index"], id=ident, seen=first)),
            (
                first["log_index"] != F.col("second")["log_index"],
                anomaly("duplicate", first["log_index"], id=ident, first=first, second=F.col("second")),
            ),
            (
                (app["type"] == "ok") & landed & ~F.array_contains("held_at", app["ack_index"]),
                anomaly(
                    "index-mismatch",
                    app["invoke_index"],
                    id=ident,
                    ack_index=app["ack_index"],
                    final_index=pos,
                    append=app,
                ),
            ),
        ],
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


def uncommitted_read(t: Tables) -> DataFrame:
    """An ok read that returned an entry past the commit index it reported with it."""
    rows = t.reads.where(F.col("uncommitted"))
    return anomaly_rows(rows, "uncommitted-read", F.col("rid"), read=read_ref(),
                        commit_index=F.col("commit_index"))


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
