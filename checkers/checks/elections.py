"""Election safety from nodes/<node>/events.jsonl: at most one leader per term.

A node announcing itself leader of term T, and a node naming T's leader, are both claims
about who led T; two different names for one term break Raft's election safety.
"""

from __future__ import annotations

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import LongType, StringType, StructField, StructType

from checkers.checks.anomalies import anomaly_rows
from checkers.engine.sources import (
    SourceFile,
    expected_torn_lines,
    is_corrupt,
    raise_first_problem,
    read_jsonl,
)
from checkers.jsonlines import ROLES, event_line_problem
from checkers.layout import ResultsDir

EVENT_SCHEMA = StructType(
    [
        StructField("time_ns", LongType()),
        StructField("node", StringType()),
        StructField("term", LongType()),
        StructField("role", StringType()),
        StructField("leader", StringType()),
    ]
)


def load_events(spark: SparkSession, dirs: list[ResultsDir]) -> DataFrame:
    """Role-change lines of every node: hid, node, time_ns, term, role, leader."""
    files = [
        SourceFile(hid, path, node) for hid, d in enumerate(dirs) for node, path in d.event_logs().items()
    ]
    raw = read_jsonl(spark, files, EVENT_SCHEMA)
    role_line = F.col("role").isNotNull()
    bad = raw.where(
        is_corrupt() | (role_line & (~F.col("role").isin(*ROLES) | F.col("term").isNull()))
    ).count()
    if bad > expected_torn_lines(files):
        raise_first_problem(files, event_line_problem, bad)
    return raw.where(~is_corrupt() & role_line).select(
        "hid", F.coalesce("node", "src_node").alias("node"), "time_ns", "term", "role", "leader"
    )


def election_safety(events: DataFrame) -> DataFrame:
    """One row per term that had two or more leaders."""
    claims = events.withColumn(
        "claimed", F.when(F.col("role") == "leader", F.col("node")).otherwise(F.col("leader"))
    )
    rows = (
        claims.where(F.col("claimed").isNotNull())
        .groupBy("hid", "term")
        .agg(
            F.sort_array(F.collect_set("claimed")).alias("leaders"),
            F.sort_array(F.collect_list(F.struct("time_ns", "node", "role", "leader"))).alias("said"),
        )
        .where(F.size("leaders") > 1)
    )
    return anomaly_rows(
        rows,
        "election-safety",
        F.col("term"),
        term=F.col("term"),
        leaders=F.col("leaders"),
        events=F.slice("said", 1, 6),
    )
