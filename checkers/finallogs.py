"""final/<node>.jsonl into DataFrames: every node's committed log and the cluster's final log.

The cluster's final log is the longest node's (DESIGN.md: every node's final log must be a
prefix of it; the divergence check holds them to that).
"""

from __future__ import annotations

from dataclasses import dataclass

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import LongType, StringType, StructField, StructType

from checkers.blocksums import Sums, block_sums, sums_table
from checkers.jsonlines import final_line_problem
from checkers.layout import ResultsDir
from checkers.sources import SourceFile, expected_torn_lines, is_corrupt, raise_first_problem, read_jsonl

FINAL_SCHEMA = StructType(
    [
        StructField("log_index", LongType()),
        StructField("term", LongType()),
        StructField("id", StringType()),
    ]
)


@dataclass
class FinalLogs:
    """entries: hid, node, log_index, term, id. cluster: hid, log_index, term, id.

    `ends[hid][node]` is the node's highest index (-1 for an empty log); `longest[hid]`
    the node whose log is the cluster's. A hid absent from `longest` has no final logs.
    `blocks[(hid, node, b)]` are the sums of block `b` of the node's log (`blocksums`).
    """

    entries: DataFrame
    cluster: DataFrame
    ends: dict[int, dict[str, int]]
    longest: dict[int, str]
    blocks: dict[tuple, Sums]
    cached: DataFrame

    def unpersist(self) -> None:
        self.cached.unpersist()


def load_final_logs(spark: SparkSession, dirs: list[ResultsDir]) -> FinalLogs:
    files = [
        SourceFile(hid, path, node) for hid, d in enumerate(dirs) for node, path in d.final_logs().items()
    ]
    raw = read_jsonl(spark, files, FINAL_SCHEMA)
    bad = is_corrupt() | F.col("log_index").isNull() | (F.col("log_index") < 0)
    parsed = raw.select(
        "hid",
        F.col("src_node").alias("node"),
        "log_index",
        "term",
        "id",
        F.coalesce(bad, F.lit(True)).alias("bad"),
    ).cache()
    # One pass: each node's end and bad lines, and the block sums the screen compares.
    rows = block_sums(
        parsed,
        ["hid", "node"],
        F.max(F.when(~F.col("bad"), F.col("log_index"))).alias("end"),
        F.sum(F.col("bad").cast("long")).alias("bad"),
        sound=~F.col("bad"),
    ).collect()
    bad_lines = sum(row["bad"] for row in rows)
    if bad_lines > expected_torn_lines(files):
        parsed.unpersist()
        raise_first_problem(files, final_line_problem, bad_lines)
    entries = parsed.where(~F.col("bad")).drop("bad")
    ends: dict[int, dict[str, int]] = {}
    for f in files:
        ends.setdefault(f.hid, {})[f.node or ""] = -1
    for row in rows:
        if row["end"] is not None:
            ends[row["hid"]][row["node"]] = max(row["end"], ends[row["hid"]][row["node"]])
    longest = {hid: min(nodes, key=lambda n: (-nodes[n], n)) for hid, nodes in ends.items()}
    chosen = spark.createDataFrame(list(longest.items()), "hid long, node string")
    cluster = entries.join(F.broadcast(chosen), ["hid", "node"]).select("hid", "log_index", "term", "id")
    return FinalLogs(entries, cluster, ends, longest, sums_table(rows, ["hid", "node"]), parsed)
