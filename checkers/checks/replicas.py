"""Replica agreement from the collected store files (nodes/<node>/data/), read with the store's own reader.

Each node's committed prefix is its final log's extent. At an index that two nodes both
committed their stores must hold the same term and id, agree with the node's final log, and
pass their CRCs; a committed index missing from a node's store is a disagreement too.

The screen (`replica_flags`) walks each node's store beside its own final log in a Spark
task and returns one flag a node: nothing of the stores crosses into the JVM. Stores that
each hold their node's final log over its committed prefix agree with each other wherever
the final logs do (the final logs' own screen holds them to that); a node that does not
sends the check run to `replica_disagreement`, which names the indexes.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from checkers.checks.anomalies import anomaly_rows
from checkers.checks.blocksums import NOOP_KEY
from checkers.checks.finallogs import FinalLogs
from checkers.layout import ResultsDir

if TYPE_CHECKING:
    from nodes.store.entryscan import StoredEntry

STORE_SCHEMA = "hid long, node string, log_index long, term long, magic int, id string, crc_ok boolean"


def _id(e: StoredEntry) -> str | None:
    """A stored entry's payload id, None for a no-op."""
    from nodes.payload import payload_id
    from nodes.store.logstore import MAGIC_NOOP

    return None if e.magic == MAGIC_NOOP else payload_id(e.body)


def _store_rows(item: tuple[int, str, str]) -> Iterator[tuple[int, str, int, int, int, str | None, bool]]:
    """Every sound entry of one node's store copy (runs on a Spark worker)."""
    from nodes.store.readfile import read_entries

    hid, node, path = item
    for e in read_entries(path):
        yield hid, node, e.index, e.term, e.magic, _id(e), e.ok


def _agrees(item: tuple[int, str, str, str]) -> tuple[int, str, bool]:
    """Whether one node's store holds exactly its final log's entries 0..end, CRCs sound (on a worker).

    Both are walked in index order; anything out of that order is reported as a disagreement
    for the exact check to look at.
    """
    from nodes.store.readfile import read_entries

    hid, node, store, final = item
    stored = iter(read_entries(store))
    with Path(final).open("rb") as lines:
        for expected, line in enumerate(lines):
            try:
                record = json.loads(line)
            except ValueError:  # a torn last line; load_final_logs has vetted the others
                break
            e = next(stored, None)
            if e is None or record["log_index"] != expected or e.index != expected or not e.ok:
                return hid, node, False
            if _id(e) != record.get("id") or record.get("term") not in (None, e.term):
                return hid, node, False
    return hid, node, True


def replica_flags(spark: SparkSession, dirs: list[ResultsDir]) -> dict[int, set[str]]:
    """hid -> {"replica-disagreement"} for the folders where some node's store and final log differ."""
    items = [
        (hid, node, str(store), str(finals[node]))
        for hid, d in enumerate(dirs)
        for finals in [d.final_logs()]
        for node, store in d.store_dirs().items()
        if node in finals
    ]
    if not items:
        return {}
    rows = spark.sparkContext.parallelize(items, len(items)).map(_agrees).collect()
    return {hid: {"replica-disagreement"} for hid, _, agrees in rows if not agrees}


def load_stores(spark: SparkSession, dirs: list[ResultsDir]) -> DataFrame:
    """hid, node, log_index, term, magic, id, crc_ok for every node with a store copy."""
    items = [(hid, node, str(path)) for hid, d in enumerate(dirs) for node, path in d.store_dirs().items()]
    if not items:
        return spark.createDataFrame([], STORE_SCHEMA)
    rdd = spark.sparkContext.parallelize(items, len(items)).flatMap(_store_rows)
    return spark.createDataFrame(rdd, STORE_SCHEMA)


def replica_disagreement(stores: DataFrame, finals: FinalLogs) -> DataFrame:
    """One row per log index where committed store entries disagree (see the module docstring)."""
    spark = stores.sparkSession
    bounds = F.broadcast(
        spark.createDataFrame(
            [(hid, node, end) for hid, nodes in finals.ends.items() for node, end in nodes.items()],
            "hid long, node string, committed long",
        )
    )
    stored = (
        stores.join(bounds, ["hid", "node"])
        .where(F.col("log_index") <= F.col("committed"))
        .select(
            "hid",
            "node",
            "log_index",
            F.col("term").alias("store_term"),
            F.col("id").alias("store_id"),
            "crc_ok",
            F.lit(True).alias("in_store"),
        )
    )
    stored_nodes = stores.select("hid", "node").distinct()
    final = finals.entries.join(stored_nodes, ["hid", "node"]).select(
        "hid",
        "node",
        "log_index",
        F.col("term").alias("final_term"),
        F.col("id").alias("final_id"),
        F.lit(True).alias("in_final"),
    )
    both = stored.join(final, ["hid", "node", "log_index"], "full_outer")
    in_store, in_final = F.coalesce("in_store", F.lit(False)), F.coalesce("in_final", F.lit(False))
    differs = (F.coalesce("store_id", F.lit(NOOP_KEY)) != F.coalesce("final_id", F.lit(NOOP_KEY))) | (
        F.col("store_term") != F.coalesce("final_term", "store_term")
    )
    wrong = ~in_store | ~F.col("crc_ok") | (in_final & differs)
    held = F.struct("store_term", F.coalesce("store_id", F.lit(NOOP_KEY)))
    rows = (
        both.groupBy("hid", "log_index")
        .agg(
            F.max(F.when(wrong, 1).otherwise(0)).alias("wrong"),
            F.count_distinct(F.when(in_store, held)).alias("versions"),
            F.sort_array(
                F.collect_list(F.struct("node", "store_term", "store_id", "crc_ok", "final_term", "final_id"))
            ).alias("nodes"),
        )
        .where((F.col("wrong") == 1) | (F.col("versions") > 1))
    )
    return anomaly_rows(
        rows,
        "replica-disagreement",
        F.col("log_index"),
        log_index=F.col("log_index"),
        nodes=F.slice("nodes", 1, 7),
    )
