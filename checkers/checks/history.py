"""history.jsonl into DataFrames: appends, reads and consumes paired with their completions.

One shuffle does all the work on the lines. They are cut into buckets of consecutive
history indexes and each bucket is sorted once; inside it two windows run over the same
partitions: one over the lines in history order gives, at every line, the highest
acknowledged index and the highest index an ok read saw among the lines before it (the
real-time prefixes, see `realtime`), and one per process pairs each invoke with the next
line of its process. The few lines that are the first or last of their process in a bucket
are paired across buckets by a second, small window. Bad lines are counted in Spark and
then named, with file and line, by a Python scan of the file.

Real-time order is history order: op A precedes op B when A's completion line comes before
B's invoke line (Jepsen's convention; the harness writes lines in time order).

Consumes (`f` `consume`, their format in `checkers.jsonlines`) are paired like the others;
what they got is not a read, so it adds nothing to the real-time prefixes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pyspark.sql import Column, DataFrame, Row, SparkSession, Window
from pyspark.sql import functions as F
from pyspark.sql.types import ArrayType, BooleanType, LongType, StringType, StructField, StructType

from checkers.engine.sources import CORRUPT, SourceFile, expected_torn_lines, raise_first_problem, read_jsonl
from checkers.jsonlines import CLIENT_FS, NEMESIS, OP_TYPES, HistoryValidator
from checkers.layout import ResultsDir

BUCKET_LINES = 1 << 15
VALUE_SCHEMA = StructType(
    [
        StructField("id", StringType()),
        StructField("log_index", LongType()),
        StructField("term", LongType()),
        StructField("from", LongType()),
        StructField("to", LongType()),
        StructField("entries", ArrayType(ArrayType(StringType()))),
        StructField("commit_index", LongType()),
        StructField("consumer", LongType()),
        StructField("offset", LongType()),
        StructField("rewound", BooleanType()),
        StructField("mode", StringType()),
    ]
)
_FIELDS = [
    StructField("index", LongType()),
    StructField("time", LongType()),
    StructField("type", StringType()),
    StructField("process", StringType()),
    StructField("f", StringType()),
]
HISTORY_SCHEMA = StructType([*_FIELDS, StructField("value", VALUE_SCHEMA), StructField("node", StringType())])
# A nemesis value may be any JSON; such a line is re-read with the value kept as text.
NEMESIS_LINE_SCHEMA = StructType([*_FIELDS, StructField("value", StringType())])
COMPLETIONS = ("ok", "fail", "info")
# A client line's value as flat columns (flat columns cache and scan far cheaper than a struct).
VALUE_COLUMNS = {
    "id": "id",
    "log_index": "log_index",
    "term": "term",
    "rfrom": "from",
    "rto": "to",
    "entries": "entries",
    "commit_index": "commit_index",
    "consumer": "consumer",
    "offset": "offset",
    "mode": "mode",
}
# Columns a line hands to the invoke before it (lead) and to the line after it (lag).
NEXT = (
    "type",
    "index",
    "time",
    "f",
    "bad",
    "c_ack",
    "c_seen",
    "term",
    "rfrom",
    "rto",
    "entries",
    "commit_index",
    "offset",
    "node",
)
PREV = ("type", "f")


@dataclass
class History:
    """The client operations of one or many histories (column `hid` tells them apart).

    appends: hid, id, status (ok|fail|info), process, node, inv_index, inv_time, cmp_index,
        cmp_time, ack_index, ack_term, p_ack, p_seen (status is info for an invoke that
        never completed).
    reads (ok reads only): hid, rid (the invoke's index), process, node, inv_time, cmp_index,
        cmp_time, rfrom (0 when not given), rto (null: to the log's end), whole (the invoke
        asked for the log to its end), commit_index, seen_max (highest index seen, null if
        none), mode (the invoke's read mode, null when it names none), served_by (the node
        that answered), k (seen_max, or rfrom - 1), gap (the read's entries skip an index of rfrom..k),
        uncommitted (it saw an index past the commit index it reported), malformed (its
        entries contradict its range, `contradicts`), covers (the indexes it speaks for,
        `covers`), p_ack, p_seen.
    read_entries: hid, rid, rdone (the read's completion index), log_index, id.
    consumes (ok consumes only): hid, cid (the invoke's index), consumer, process, node (the
        completion's, else the invoke's), inv_time, cmp_index, cmp_time, cfrom, cto, offset,
        entries (as read: [[log_index, id], ...]), malformed (`contradicts`), covers (`covers`).
    observed: hid, op (the invoke's index), log_index, id: the entries that fail and info
        completions of reads and consumes carried (what the system returned anyway): seen,
        bound to no moment.

    p_ack and p_seen are the real-time prefixes at the op's invoke: the highest index
    acknowledged to an ok append, and the highest index an ok read saw, among the ops that
    completed before it was invoked (null if none).
    """

    appends: DataFrame
    reads: DataFrame
    read_entries: DataFrame
    consumes: DataFrame
    observed: DataFrame
    stats: dict[int, dict[str, Any]]
    cached: list[DataFrame]
    lines: int

    @property
    def whole_reads(self) -> bool:
        """Whether any history reads the whole log (then the stale-read rule by id runs)."""
        return any(s.get("whole_log_reads") for s in self.stats.values())

    @property
    def consumed(self) -> bool:
        """Whether any history holds a consume (then the consumer checks run)."""
        return any(s.get("consume_ops") for s in self.stats.values())

    def unpersist(self) -> None:
        for df in self.cached:
            df.unpersist()


def _corrupt() -> Column:
    """A line that is not JSON, or a client line whose fields have the wrong types."""
    reread = F.from_json(F.col(CORRUPT), NEMESIS_LINE_SCHEMA)
    nemesis_ok = (F.col("process") == NEMESIS) & reread["index"].isNotNull() & reread["f"].isNotNull()
    return F.col(CORRUPT).isNotNull() & ~F.coalesce(nemesis_ok, F.lit(False))


def _bad_line() -> Column:
    client = F.col("process") != NEMESIS
    is_append, is_read, is_consume = F.col("f") == "append", F.col("f") == "read", F.col("f") == "consume"
    invoke, ok = F.col("type") == "invoke", F.col("type") == "ok"
    bad_entry = F.exists("entries", lambda e: (F.size(e) != 2) | e[0].cast("long").isNull())
    bad_entries = F.col("entries").isNull() | F.coalesce(bad_entry, F.lit(False))
    return F.coalesce(
        F.col("corrupt")
        | F.col("index").isNull()
        | F.col("time").isNull()
        | ~F.coalesce(F.col("type").isin(*OP_TYPES), F.lit(False))
        | F.col("process").isNull()
        | F.col("f").isNull()
        | (client & F.col("process").cast("long").isNull())
        | (client & F.col("f").isin(*CLIENT_FS) & F.col("value").isNull())
        | (client & is_append & invoke & F.col("id").isNull())
        | (client & is_read & ok & bad_entries)
        | (client & (is_read | is_consume) & ~invoke & ~ok & F.col("entries").isNotNull() & bad_entries)
        | (client & is_consume & invoke & (F.col("consumer").isNull() | F.col("rfrom").isNull()))
        | (client & is_consume & ok & (bad_entries | F.col("offset").isNull())),
        F.lit(True),
    )


def _entry_indexes(entries: Column) -> Column:
    return F.transform(entries, lambda e: e[0].cast("long"))


def covers(indexes: Column, first: Column) -> Column:
    """The log indexes an answer pulled from `first` speaks for: `first` to the highest index it
    returned, gaps included (its entries skip them: they are not there); only its own indexes
    when that span is far longer than its entries (a broken answer must not explode)."""
    top = F.array_max(indexes)
    spans = (top >= first) & (top - first < F.size(indexes) * 4 + 64)
    return F.when(F.coalesce(spans, F.lit(False)), F.sequence(first, top)).otherwise(indexes)


def contradicts(indexes: Column, first: Column, last: Column) -> Column:
    """An answer's entry indexes contradict its request `[first, last]` (`last` null: to the
    log's end): out of order or repeated, outside the range, or `last` before `first - 1`."""
    unordered = (F.array_sort(indexes) != indexes) | (F.size(F.array_distinct(indexes)) != F.size(indexes))
    top = F.coalesce(last, F.lit(1 << 62))
    outside = F.exists(indexes, lambda i: (i < first) | (i > top))
    return F.coalesce(unordered | outside | F.coalesce(last < first - 1, F.lit(False)), F.lit(False))


def _lines(spark: SparkSession, files: list[SourceFile], bucket_lines: int) -> DataFrame:
    """Every line with its flags, what it contributes to the real-time prefixes, and its bucket."""
    raw = read_jsonl(spark, files, HISTORY_SCHEMA)
    client = F.col("process") != NEMESIS
    ok_client = client & (F.col("type") == "ok")
    # One projection per step (each withColumn would analyse the whole plan again).
    return (
        raw.withColumns(
            {
                "corrupt": _corrupt(),
                **{name: F.when(client, F.col("value")[key]) for name, key in VALUE_COLUMNS.items()},
            }
        )
        .withColumns(
            {
                "bad": _bad_line(),
                "c_ack": F.when(ok_client & (F.col("f") == "append"), F.col("log_index")),
                "c_seen": F.when(
                    ok_client & (F.col("f") == "read"), F.array_max(_entry_indexes(F.col("entries")))
                ),
                "_b": F.floor(F.col("index") / bucket_lines),
            }
        )
        .select(
            "hid",
            "_b",
            "index",
            "time",
            "type",
            "process",
            "f",
            "node",
            "id",
            "term",
            "rfrom",
            "rto",
            "entries",
            "commit_index",
            "consumer",
            "offset",
            "mode",
            "corrupt",
            "bad",
            "c_ack",
            "c_seen",
        )
    )


def _neighbours(lines: DataFrame) -> DataFrame:
    """Each line with the next and previous line of its process, and the in-bucket prefixes."""
    before = Window.partitionBy("hid", "_b").orderBy("index").rowsBetween(Window.unboundedPreceding, -1)
    by_process = Window.partitionBy("hid", "_b", "process").orderBy("index")
    return lines.withColumns(
        {
            "l_ack": F.max("c_ack").over(before),
            "l_seen": F.max("c_seen").over(before),
            **{f"next_{c}": F.lead(c).over(by_process) for c in NEXT},
            **{f"prev_{c}": F.lag(c).over(by_process) for c in PREV},
        }
    )


def _kept(lines: DataFrame) -> DataFrame:
    """The lines the checks need, with in-bucket neighbours; `_edge` marks a bucket's first or last.

    A sound client completion right after its invoke inside a bucket is left out: it lives on
    as the invoke's next_*. Edge lines are all kept, to pair them across buckets.
    """
    rows = _neighbours(lines)
    client, invoke = F.col("process") != NEMESIS, F.col("type") == "invoke"
    edge = F.col("prev_type").isNull() | F.col("next_type").isNull()
    keep = invoke | ~client | F.col("bad") | edge | (client & F.coalesce(_bad_pairing(), F.lit(False)))
    return rows.withColumn("_edge", edge).where(F.coalesce(keep, F.lit(True)))


def _paired_edges(kept: DataFrame) -> DataFrame:
    """The first and last lines of each bucket's processes, paired across buckets."""
    first, last = F.col("prev_type").isNull(), F.col("next_type").isNull()
    across = Window.partitionBy("hid", "process").orderBy("index")
    return kept.where(F.col("_edge")).withColumns(
        {
            **{f"next_{c}": F.when(last, F.lead(c).over(across)).otherwise(F.col(f"next_{c}")) for c in NEXT},
            **{f"prev_{c}": F.when(first, F.lag(c).over(across)).otherwise(F.col(f"prev_{c}")) for c in PREV},
        }
    )


def _events(kept: DataFrame, edge: DataFrame) -> DataFrame:
    """Every line that stands for itself: invokes (with their completion as next_*), nemesis
    lines, and bad or unpaired lines; `edge` is `_paired_edges(kept)`.
    """
    inner = kept.where(~F.col("_edge"))
    client, invoke = F.col("process") != NEMESIS, F.col("type") == "invoke"
    rows = inner.unionByName(edge).withColumn("bad_pair", client & F.coalesce(_bad_pairing(), F.lit(False)))
    # A sound client completion whose invoke is the line before it is kept as that invoke's
    # next_*; every other line is kept as its own row, so each line is counted once.
    return (
        rows.where(F.coalesce(invoke | ~client | F.col("bad") | F.col("bad_pair"), F.lit(True)))
        .withColumn(
            "next_paired",
            F.coalesce(
                client
                & invoke
                & F.col("next_type").isin(*COMPLETIONS)
                & (F.col("next_f") == F.col("f"))
                & ~F.col("next_bad"),
                F.lit(False),
            ),
        )
        .drop("c_ack", "c_seen", "prev_type", "prev_f", "_edge")
    )


def _bad_pairing() -> Column:
    """A client line out of the invoke/completion alternation of its process."""
    invoke = F.col("type") == "invoke"
    double_invoke = invoke & (F.col("next_type") == "invoke")
    orphan = ~invoke & (F.coalesce(F.col("prev_type"), F.lit("")) != "invoke")
    wrong_f = ~invoke & (F.col("prev_f") != F.col("f"))
    return double_invoke | orphan | wrong_f


def load_history(spark: SparkSession, dirs: list[ResultsDir], *, bucket_lines: int | None = None) -> History:
    """Load, validate and pair the histories of `dirs` (hid = position in the list).

    `bucket_lines` (default `BUCKET_LINES`) is how many consecutive lines a bucket holds.
    """
    bucket_lines = bucket_lines or BUCKET_LINES
    files = [SourceFile(hid, d.history) for hid, d in enumerate(dirs)]
    client = F.col("process") != NEMESIS
    invoke = F.col("type") == "invoke"
    kept = _kept(_lines(spark, files, bucket_lines)).cache()
    # Every table derived from the history reads the edges: they are paired across buckets once.
    edge = _paired_edges(kept).cache()
    events = _events(kept, edge)
    try:
        rows = _summary(events, bucket_lines)
        stats, lines = _validate(rows, files)
        carry = _carry(spark, rows, stats, bucket_lines)
    except BaseException:
        edge.unpersist()
        kept.unpersist()
        raise
    good = events.where(~F.col("bad") & client & invoke).withColumn(
        "done", F.col("next_type").isNotNull() & (F.col("next_type") != "invoke")
    )
    good = good.join(F.broadcast(carry), ["hid", "_b"], "left").withColumns(
        {"p_ack": F.greatest("l_ack", "c_ack"), "p_seen": F.greatest("l_seen", "c_seen")}
    )
    return History(*_ops(good), stats=stats, cached=[edge, kept], lines=lines)


def _ops(good: DataFrame) -> tuple[DataFrame, DataFrame, DataFrame, DataFrame, DataFrame]:
    """appends, reads, read_entries, consumes and observed from the paired, validated invokes."""
    done, ok = F.col("done"), F.col("next_type") == "ok"
    appends = good.where(F.col("f") == "append").select(
        "hid",
        "id",
        F.when(done, F.col("next_type")).otherwise("info").alias("status"),
        F.col("process").cast("long").alias("process"),
        "node",
        F.col("index").alias("inv_index"),
        F.col("time").alias("inv_time"),
        F.when(done, F.col("next_index")).alias("cmp_index"),
        F.when(done, F.col("next_time")).alias("cmp_time"),
        F.when(ok, F.col("next_c_ack")).alias("ack_index"),
        F.when(ok, F.col("next_term")).alias("ack_term"),
        "p_ack",
        "p_seen",
    )
    ok_reads = good.where((F.col("f") == "read") & ok)
    indexes = _entry_indexes(F.col("next_entries"))
    reads = ok_reads.select(
        "hid",
        F.col("index").alias("rid"),
        F.col("process").cast("long").alias("process"),
        "node",
        F.col("time").alias("inv_time"),
        F.col("next_index").alias("cmp_index"),
        F.col("next_time").alias("cmp_time"),
        F.coalesce("next_rfrom", "rfrom", F.lit(0)).alias("rfrom"),
        F.coalesce("next_rto", "rto").alias("rto"),
        F.col("rto").isNull().alias("whole"),
        F.col("next_commit_index").alias("commit_index"),
        F.col("next_c_seen").alias("seen_max"),
        "mode",
        F.col("next_node").alias("served_by"),
        indexes.alias("_indexes"),
        "p_ack",
        "p_seen",
    )
    reads = (
        reads.withColumn("k", F.coalesce("seen_max", F.col("rfrom") - 1))
        .withColumn("uncommitted", F.coalesce(F.col("seen_max") > F.col("commit_index"), F.lit(False)))
        .withColumn(
            "gap",
            F.size(
                F.array_distinct(F.filter("_indexes", lambda i: (i >= F.col("rfrom")) & (i <= F.col("k"))))
            )
            < F.col("k") - F.col("rfrom") + 1,
        )
        .withColumn("malformed", contradicts(F.col("_indexes"), F.col("rfrom"), F.col("rto")))
        .withColumn("covers", covers(F.col("_indexes"), F.col("rfrom")))
        .drop("_indexes")
    )
    read_entries = ok_reads.select(
        "hid", F.col("index").alias("rid"), F.col("next_index").alias("rdone"),
        F.explode("next_entries").alias("e"),
    ).select("hid", "rid", "rdone", F.col("e")[0].cast("long").alias("log_index"), F.col("e")[1].alias("id"))
    consumes = good.where((F.col("f") == "consume") & ok).select(
        "hid",
        F.col("index").alias("cid"),
        "consumer",
        F.col("process").cast("long").alias("process"),
        F.coalesce("next_node", "node").alias("node"),
        F.col("time").alias("inv_time"),
        F.col("next_index").alias("cmp_index"),
        F.col("next_time").alias("cmp_time"),
        F.coalesce("next_rfrom", "rfrom").alias("cfrom"),
        F.col("next_rto").alias("cto"),
        F.col("next_offset").alias("offset"),
        F.col("next_entries").alias("entries"),
    ).withColumns({
        "malformed": contradicts(_entry_indexes(F.col("entries")), F.col("cfrom"), F.col("cto")),
        "covers": covers(_entry_indexes(F.col("entries")), F.col("cfrom")),
    })
    failed = good.where(F.col("f").isin("read", "consume") & F.col("next_type").isin("fail", "info"))
    observed = failed.where(F.col("next_entries").isNotNull()).select(
        "hid", F.col("index").alias("op"), F.explode("next_entries").alias("e")
    ).select("hid", "op", F.col("e")[0].cast("long").alias("log_index"), F.col("e")[1].alias("id"))
    return appends, reads, read_entries, consumes, observed


def _summary(events: DataFrame, bucket_lines: int) -> list[Row]:
    """One job over the events: per history and bucket, the counts `_validate` needs and the
    highest index acknowledged and seen by the ok completions of that bucket (for `_carry`).

    Completions sit on their invoke's row as next_*; a row's bucket is its completion's for
    ok client ops (where its contribution to the real-time prefixes happens), else its own.
    """
    client = F.col("process") != NEMESIS
    is_invoke = F.col("type") == "invoke"
    both = F.col("next_paired")
    ok = both & client & (F.col("next_type") == "ok")

    def count(cond: Column) -> Column:
        return F.sum(F.when(cond, 1).otherwise(0))

    sound = ~F.col("corrupt")
    index, time = F.when(sound, F.col("index")), F.when(sound, F.col("time"))
    bucket = F.floor(F.coalesce(F.when(ok, F.col("next_index")), F.col("index")) / bucket_lines)
    return (
        events.groupBy("hid", bucket.alias("_b"))
        .agg(
            (count(sound) + count(both)).alias("lines"),
            count(F.col("corrupt")).alias("corrupt"),
            F.min(index).alias("min_index"),
            F.max(F.greatest(index, F.when(both, F.col("next_index")))).alias("max_index"),
            (
                F.coalesce(F.sum(index), F.lit(0))
                + F.coalesce(F.sum(F.when(both, F.col("next_index"))), F.lit(0))
            ).alias("sum_index"),
            count(F.col("bad") & sound).alias("bad"),
            count(F.col("bad_pair") & sound).alias("bad_pair"),
            count(~client & is_invoke).alias("nemesis_ops"),
            count(client & is_invoke & (F.col("f") == "append")).alias("appends"),
            count(client & is_invoke & (F.col("f") == "read")).alias("reads"),
            count(client & is_invoke & (F.col("f") == "read") & F.col("rto").isNull()).alias("whole_reads"),
            count(client & is_invoke & (F.col("f") == "consume")).alias("consumes"),
            (count(client & ~is_invoke) + count(client & both)).alias("completions"),
            F.max(F.greatest(time, F.when(both, F.col("next_time")))).alias("duration_ns"),
            F.max(F.when(ok, F.col("next_c_ack"))).alias("ack"),
            F.max(F.when(ok, F.col("next_c_seen"))).alias("seen"),
        )
        .collect()
    )


def _carry(
    spark: SparkSession, rows: list[Row], stats: dict[int, dict[str, Any]], bucket_lines: int
) -> DataFrame:
    """hid, _b, c_ack, c_seen: the real-time prefixes carried into each bucket from the ones before.

    The table has one row per bucket, so it is built on the driver from `_summary`'s rows.
    """
    tops: dict[int, dict[int, tuple[int | None, int | None]]] = {}
    for row in rows:
        if row["_b"] is not None and (row["ack"] is not None or row["seen"] is not None):
            tops.setdefault(row["hid"], {})[row["_b"]] = (row["ack"], row["seen"])
    carried: list[tuple[int, int, int | None, int | None]] = []
    for hid, st in stats.items():
        buckets = tops.get(hid, {})
        ack: int | None = None
        seen: int | None = None
        for b in range(st["history_lines"] // bucket_lines + 1):
            carried.append((hid, b, ack, seen))
            a, s = buckets.get(b, (None, None))
            ack = _max(ack, a)
            seen = _max(seen, s)
    return spark.createDataFrame(carried, "hid long, _b long, c_ack long, c_seen long")


def _max(a: int | None, b: int | None) -> int | None:
    return b if a is None else a if b is None else max(a, b)


def _validate(rows: list[Row], files: list[SourceFile]) -> tuple[dict[int, dict[str, Any]], int]:
    """Per-history line counts (from `_summary`'s rows), and all lines; InputError naming the
    first bad line if there is one."""
    agg: dict[int, dict[str, Any]] = {}
    for row in rows:
        into = agg.setdefault(row["hid"], {})
        for key, value in row.asDict().items():
            if key in ("hid", "_b", "ack", "seen") or value is None:
                continue
            old = into.get(key)
            if old is None:
                into[key] = value
            elif key == "min_index":
                into[key] = min(old, value)
            elif key in ("max_index", "duration_ns"):
                into[key] = max(old, value)
            else:
                into[key] = old + value
    corrupt = sum(a.get("corrupt", 0) for a in agg.values())
    torn = expected_torn_lines(files)
    stats: dict[int, dict[str, Any]] = {f.hid: {"history_lines": 0} for f in files}
    bad = corrupt - torn
    for hid, a in agg.items():
        n = a.get("lines", 0)
        index_ok = n == 0 or (
            a.get("min_index") == 0
            and a.get("max_index") == n - 1
            and a.get("sum_index", 0) == n * (n - 1) // 2
        )
        bad += a.get("bad", 0) + a.get("bad_pair", 0) + (0 if index_ok else 1)
        stats[hid] = {
            "history_lines": n,
            "nemesis_ops": a.get("nemesis_ops", 0),
            "append_ops": a.get("appends", 0),
            "read_ops": a.get("reads", 0),
            "whole_log_reads": a.get("whole_reads", 0),
            "consume_ops": a.get("consumes", 0),
            "client_completions": a.get("completions", 0),
            "duration_ns": a.get("duration_ns"),
        }
    if bad:
        raise_first_problem(files, HistoryValidator, bad)
    return stats, max((s["history_lines"] for s in stats.values()), default=0)
