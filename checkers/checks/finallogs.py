"""final/<node>.jsonl into DataFrames: every node's committed log and the cluster's final log.

The cluster's final log is the longest node's (docs/formats.md: every node's final log must be a
prefix of it; the divergence check holds them to that).

Nodes that agree usually write byte-identical files: each set of identical files of a
results folder is parsed once, and its rows stand for every node of the set.
"""

from __future__ import annotations

import filecmp
from dataclasses import dataclass

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import LongType, StringType, StructField, StructType

from checkers.checks.blocksums import Sums, block_sums, sums_table
from checkers.engine.sources import (
    SourceFile,
    expected_torn_lines,
    is_corrupt,
    raise_first_problem,
    read_jsonl,
)
from checkers.jsonlines import final_line_problem
from checkers.layout import ResultsDir

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


def _same_files(dirs: list[ResultsDir]) -> dict[SourceFile, list[str]]:
    """Each distinct final-log file (its first node's) -> the nodes whose files hold the same bytes."""
    sets: dict[SourceFile, list[str]] = {}
    for hid, d in enumerate(dirs):
        firsts: list[SourceFile] = []
        for node, path in sorted(d.final_logs().items()):
            first = next((f for f in firsts if filecmp.cmp(f.path, path, shallow=False)), None)
            if first is None:
                first = SourceFile(hid, path, node)
                firsts.append(first)
                sets[first] = []
            sets[first].append(node)
    return sets


def load_final_logs(spark: SparkSession, dirs: list[ResultsDir]) -> FinalLogs:
    sets = _same_files(dirs)
    files = list(sets)
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
    first_ends: dict[tuple[int, str], int] = {}
    for row in rows:
        if row["end"] is not None:
            key = (row["hid"], row["node"])
            first_ends[key] = max(row["end"], first_ends.get(key, -1))
    ends: dict[int, dict[str, int]] = {}
    first_of: dict[tuple[int, str], str] = {}
    for f, nodes in sets.items():
        for node in nodes:
            ends.setdefault(f.hid, {})[node] = first_ends.get((f.hid, f.node or ""), -1)
            first_of[f.hid, node] = f.node or ""
    longest = {hid: min(nodes, key=lambda n: (-nodes[n], n)) for hid, nodes in ends.items()}
    sound = parsed.where(~F.col("bad")).drop("bad")
    as_nodes = spark.createDataFrame(
        [(hid, first, node) for (hid, node), first in first_of.items()],
        "hid long, node string, as_node string",
    )
    entries = sound.join(F.broadcast(as_nodes), ["hid", "node"]).select(
        "hid", F.col("as_node").alias("node"), "log_index", "term", "id"
    )
    chosen = spark.createDataFrame(
        [(hid, first_of[hid, node]) for hid, node in longest.items()], "hid long, node string"
    )
    cluster = sound.join(F.broadcast(chosen), ["hid", "node"]).select("hid", "log_index", "term", "id")
    blocks_of: dict[tuple[int, str], dict[int, Sums]] = {}
    for (hid, first, b), sums in sums_table(rows, ["hid", "node"]).items():
        blocks_of.setdefault((hid, first), {})[b] = sums
    blocks = {
        (hid, node, b): sums
        for (hid, node), first in first_of.items()
        for b, sums in blocks_of.get((hid, first), {}).items()
    }
    return FinalLogs(entries, cluster, ends, longest, blocks, parsed)
