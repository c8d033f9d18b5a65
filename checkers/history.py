"""history.jsonl into DataFrames: appends and reads paired with their completions.

Invokes pair with the next line of the same process (the contract: each invoke is followed
by exactly one completion of the same process and `f`). An invoke with no completion (a run
cut off mid-way) is indeterminate, like `info`. Bad lines are counted in Spark and then named,
with file and line, by a Python scan of the file.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pyspark.sql import Column, DataFrame, SparkSession, Window
from pyspark.sql import functions as F
from pyspark.sql.types import ArrayType, LongType, StringType, StructField, StructType

from checkers.jsonlines import NEMESIS, OP_TYPES, HistoryValidator
from checkers.layout import ResultsDir
from checkers.sources import SourceFile, expected_torn_lines, is_corrupt, raise_first_problem, read_jsonl

HISTORY_SCHEMA = StructType(
    [
        StructField("index", LongType()),
        StructField("time", LongType()),
        StructField("type", StringType()),
        StructField("process", StringType()),
        StructField("f", StringType()),
        StructField("value", StringType()),
        StructField("node", StringType()),
        StructField("error", StringType()),
    ]
)
VALUE_SCHEMA = StructType(
    [
        StructField("id", StringType()),
        StructField("log_index", LongType()),
        StructField("term", LongType()),
        StructField("from", LongType()),
        StructField("to", LongType()),
        StructField("entries", ArrayType(ArrayType(StringType()))),
        StructField("commit_index", LongType()),
    ]
)


@dataclass
class History:
    """The client operations of one or many histories (column `hid` tells them apart).

    appends: hid, id, status (ok|fail|info), process, node, inv_index, inv_time, cmp_index,
        cmp_time, ack_index, ack_term (status is info for an invoke that never completed).
    reads (ok reads only): hid, rid (the invoke's index), process, node, inv_time, cmp_index,
        cmp_time, rfrom, rto, commit_index, seen_max (highest index seen, null if none),
        k (seen_max, or rfrom - 1), gap (the read's entries skip an index of rfrom..k).
    read_entries: hid, rid, log_index, id.
    """

    appends: DataFrame
    reads: DataFrame
    read_entries: DataFrame
    stats: dict[int, dict[str, Any]]
    paired: DataFrame

    def unpersist(self) -> None:
        self.paired.unpersist()


def _bad_line() -> Column:
    v, client = F.col("v"), F.col("process") != NEMESIS
    is_append, is_read = F.col("f") == "append", F.col("f") == "read"
    invoke, ok = F.col("type") == "invoke", F.col("type") == "ok"
    bad_entry = F.exists(v["entries"], lambda e: (F.size(e) != 2) | e[0].cast("long").isNull())
    return (
        is_corrupt()
        | F.col("index").isNull()
        | F.col("time").isNull()
        | ~F.coalesce(F.col("type").isin(*OP_TYPES), F.lit(False))
        | F.col("process").isNull()
        | F.col("f").isNull()
        | (client & F.col("pid").isNull())
        | (client & is_append & invoke & v["id"].isNull())
        | (client & is_append & ok & v["log_index"].isNull())
        | (client & is_read & invoke & (v["from"].isNull() | v["to"].isNull()))
        | (client & is_read & ok & (v["entries"].isNull() | F.coalesce(bad_entry, F.lit(False))))
    )


def _bad_pairing() -> Column:
    """A client line out of the invoke/completion alternation of its process."""
    invoke = F.col("type") == "invoke"
    double_invoke = invoke & (F.col("next_type") == "invoke")
    orphan = ~invoke & (F.coalesce(F.col("prev_type"), F.lit("")) != "invoke")
    wrong_f = ~invoke & (F.col("prev_f") != F.col("f"))
    return double_invoke | orphan | wrong_f


def load_history(spark: SparkSession, dirs: list[ResultsDir]) -> History:
    """Load, validate and pair the histories of `dirs` (hid = position in the list)."""
    files = [SourceFile(hid, d.history) for hid, d in enumerate(dirs)]
    raw = read_jsonl(spark, files, HISTORY_SCHEMA)
    client = F.col("process") != NEMESIS
    rows = (
        raw.withColumn("pid", F.when(client, F.col("process").cast("long")))
        .withColumn("v", F.when(client, F.from_json("value", VALUE_SCHEMA)))
        .withColumn("bad", _bad_line())
        .withColumn("corrupt", is_corrupt())
        .drop("value", "error", "_corrupt_record")
    )
    by_process = Window.partitionBy("hid", "process").orderBy("index")
    rows = (
        rows.withColumn("next_type", F.lead("type").over(by_process))
        .withColumn("next_index", F.lead("index").over(by_process))
        .withColumn("next_time", F.lead("time").over(by_process))
        .withColumn("next_v", F.lead("v").over(by_process))
        .withColumn("prev_type", F.lag("type").over(by_process))
        .withColumn("prev_f", F.lag("f").over(by_process))
    )
    paired = rows.withColumn("bad_pair", client & F.coalesce(_bad_pairing(), F.lit(False))).cache()
    try:
        stats = _validate(paired, files)
    except BaseException:
        paired.unpersist()
        raise
    good = paired.where(~F.col("bad") & client)
    invokes = good.where(F.col("type") == "invoke").withColumn(
        "done", F.col("next_type").isNotNull() & (F.col("next_type") != "invoke")
    )
    appends = invokes.where(F.col("f") == "append").select(
        "hid",
        F.col("v")["id"].alias("id"),
        F.when(F.col("done"), F.col("next_type")).otherwise("info").alias("status"),
        F.col("pid").alias("process"),
        "node",
        F.col("index").alias("inv_index"),
        F.col("time").alias("inv_time"),
        F.when(F.col("done"), F.col("next_index")).alias("cmp_index"),
        F.when(F.col("done"), F.col("next_time")).alias("cmp_time"),
        F.when(F.col("next_type") == "ok", F.col("next_v")["log_index"]).alias("ack_index"),
        F.when(F.col("next_type") == "ok", F.col("next_v")["term"]).alias("ack_term"),
    )
    ok_reads = invokes.where((F.col("f") == "read") & (F.col("next_type") == "ok"))
    indexes = F.transform(F.col("next_v")["entries"], lambda e: e[0].cast("long"))
    reads = ok_reads.select(
        "hid",
        F.col("index").alias("rid"),
        F.col("pid").alias("process"),
        "node",
        F.col("time").alias("inv_time"),
        F.col("next_index").alias("cmp_index"),
        F.col("next_time").alias("cmp_time"),
        F.coalesce(F.col("next_v")["from"], F.col("v")["from"]).alias("rfrom"),
        F.coalesce(F.col("next_v")["to"], F.col("v")["to"]).alias("rto"),
        F.col("next_v")["commit_index"].alias("commit_index"),
        F.array_max(indexes).alias("seen_max"),
        indexes.alias("_indexes"),
    )
    reads = (
        reads.withColumn("k", F.coalesce("seen_max", F.col("rfrom") - 1))
        .withColumn(
            "gap",
            F.size(
                F.array_distinct(F.filter("_indexes", lambda i: (i >= F.col("rfrom")) & (i <= F.col("k"))))
            )
            < F.col("k") - F.col("rfrom") + 1,
        )
        .drop("_indexes")
    )
    read_entries = ok_reads.select(
        "hid", F.col("index").alias("rid"), F.explode(F.col("next_v")["entries"]).alias("e")
    ).select("hid", "rid", F.col("e")[0].cast("long").alias("log_index"), F.col("e")[1].alias("id"))
    return History(appends, reads, read_entries, stats, paired)


def _validate(paired: DataFrame, files: list[SourceFile]) -> dict[int, dict[str, Any]]:
    """Per-history line counts; InputError naming the first bad line if there is one."""
    client = F.col("process") != NEMESIS
    is_invoke = F.col("type") == "invoke"

    def count(cond: Column) -> Column:
        return F.sum(F.when(cond, 1).otherwise(0))

    sound = ~F.col("corrupt")
    agg = (
        paired.groupBy("hid")
        .agg(
            count(sound).alias("lines"),
            count(F.col("corrupt")).alias("corrupt"),
            F.min(F.when(sound, F.col("index"))).alias("min_index"),
            F.max(F.when(sound, F.col("index"))).alias("max_index"),
            F.sum(F.when(sound, F.col("index"))).alias("sum_index"),
            count(F.col("bad") & sound).alias("bad"),
            count(F.col("bad_pair") & sound).alias("bad_pair"),
            count(~client & is_invoke).alias("nemesis_ops"),
            count(client & is_invoke & (F.col("f") == "append")).alias("appends"),
            count(client & is_invoke & (F.col("f") == "read")).alias("reads"),
            count(client & ~is_invoke).alias("completions"),
            F.max(F.when(sound, F.col("time"))).alias("duration_ns"),
        )
        .collect()
    )
    corrupt = sum(row["corrupt"] for row in agg)
    torn = expected_torn_lines(files)
    stats: dict[int, dict[str, Any]] = {f.hid: {"history_lines": 0} for f in files}
    bad = corrupt - torn
    for row in agg:
        n = row["lines"]
        index_ok = n == 0 or (
            row["min_index"] == 0 and row["max_index"] == n - 1 and row["sum_index"] == n * (n - 1) // 2
        )
        bad += row["bad"] + row["bad_pair"] + (0 if index_ok else 1)
        stats[row["hid"]] = {
            "history_lines": n,
            "nemesis_ops": row["nemesis_ops"],
            "append_ops": row["appends"],
            "read_ops": row["reads"],
            "client_completions": row["completions"],
            "duration_ns": row["duration_ns"],
        }
    if bad:
        raise_first_problem(files, HistoryValidator, bad)
    return stats
