"""Stale-leader reads: a read-index or lease read answered by a leader that had been deposed
before the read was invoked, from the history and nodes/<node>/events.jsonl.

A node answers such a read only as leader, and only while it still leads: read-index
confirms with a majority after the read arrives, and a lease lasts only as long as the
followers' lease guard keeps anyone else from being elected. So once a leader of a later term
was elected, no leader of an earlier term may answer a read invoked after that. The node that
answered (the completion's `node`) led, at most, the term of its latest `leader` role line
before the answer came back; a `leader` line of a higher term written before the read was
invoked breaks the rule, whatever the read returned (the stale-read check needs an
acknowledged append it missed).

Events are placed on the history's time line by their `real_ns` (the machine's wall clock)
less test.json's `history_wall_ns`; the history's times come from the monotonic clock, which
may drift from the wall clock by up to 500 ppm (NTP's slew), so a leader line counts only if
it came at least `MARGIN_NS` plus that drift before the invoke. Reads of other modes, and
folders without `history_wall_ns`, are not judged.
"""

from __future__ import annotations

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from checkers.checks.anomalies import anomaly_rows
from checkers.checks.tables import Tables, read_ref
from checkers.checks.verdict import DRIFT, JUDGED_MODES, MARGIN_NS


def stale_leader_reads(spark: SparkSession, t: Tables, events: DataFrame, walls: dict[int, int],
                       run_modes: dict[int, str]) -> DataFrame:
    """One row per read answered by a leader of a term below one elected before its invoke.

    `walls`: hid -> history_wall_ns (hids without one are not judged); `run_modes`: hid -> the
    folder's read mode, the mode of its reads that name none (`mixed` reads each name theirs).
    """
    if not walls:
        return spark.createDataFrame([], "hid long, check string, key long, witness string")
    base = spark.createDataFrame([(h, w, run_modes.get(h)) for h, w in walls.items()],
                                 "hid long, wall long, run_mode string")
    reads = (
        t.reads.where(F.col("served_by").isNotNull())
        .join(F.broadcast(base), "hid")
        .withColumn("read_mode", F.coalesce("mode", "run_mode"))
        .where(F.col("read_mode").isin(*JUDGED_MODES))
        .withColumn("inv_wall", F.col("wall") + F.col("inv_time") - F.lit(MARGIN_NS)
                    - (F.col("inv_time") * DRIFT).cast("long"))
        .withColumn("cmp_wall", F.col("wall") + F.col("cmp_time"))
    )
    leaders = F.broadcast(
        events.where(F.col("role") == "leader").select("hid", F.col("node").alias("l_node"),
                                                       F.col("term").alias("l_term"), "real_ns")
    )
    served = (
        reads.join(leaders, (reads["hid"] == leaders["hid"]) & (F.col("l_node") == F.col("served_by"))
                   & (F.col("real_ns") <= F.col("cmp_wall")), "left")
        .groupBy(reads["hid"], "rid")
        .agg(F.max("l_term").alias("served_term"))
    )
    newer = (
        reads.join(leaders, (reads["hid"] == leaders["hid"]) & (F.col("real_ns") <= F.col("inv_wall")))
        .groupBy(reads["hid"], "rid")
        .agg(F.max(F.struct("l_term", "l_node", "real_ns", "wall")).alias("newest"))
    )
    rows = (
        reads.join(served, ["hid", "rid"]).join(newer, ["hid", "rid"])
        .where(F.col("newest.l_term") > F.coalesce("served_term", F.lit(-1)))
    )
    return anomaly_rows(
        rows,
        "stale-leader-read",
        F.col("rid"),
        read=read_ref(),
        mode=F.col("read_mode"),
        served_by=F.col("served_by"),
        served_term=F.col("served_term"),
        leader=F.col("newest.l_node"),
        leader_term=F.col("newest.l_term"),
        elected_time=F.col("newest.real_ns") - F.col("newest.wall"),
    )
