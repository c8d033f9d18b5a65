"""Anomaly rows, the shape every Spark check returns, and collecting them into counts and witnesses.

A row is `hid, check, key, witness`: witness is a JSON object naming the ops (history
indexes and times) or log entries that prove the anomaly; key orders witnesses, earliest first.
"""

from __future__ import annotations

import json
from typing import Any

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

SUSPECT = "~"


def anomaly(check: str, key: Column, **witness: Column) -> Column:
    """One anomaly as a struct: `check`, `key` (orders witnesses) and `witness` (JSON)."""
    body = F.to_json(F.struct(*[col.alias(name) for name, col in witness.items()]))
    return F.struct(F.lit(check).alias("check"), key.cast("long").alias("key"), body.alias("witness"))


def suspect(check: str, **witness: Column) -> Column:
    """A `~<check>` row: the screen saw what `check` may find (see `screen`)."""
    return anomaly(SUSPECT + check, F.lit(0), **witness)


def anomaly_rows(df: DataFrame, check: str, key: Column, **witness: Column) -> DataFrame:
    """One anomaly per row of `df`: the `hid, check, key, witness` shape every check returns."""
    return anomalies_where(df, [(F.lit(True), anomaly(check, key, **witness))])


def anomalies_where(df: DataFrame, cases: list[tuple[Column, Column]]) -> DataFrame:
    """Anomaly rows from one pass over `df`: each (condition, anomaly) case that holds on a row."""
    found = F.filter(F.array(*[F.when(cond, a) for cond, a in cases]), lambda a: a.isNotNull())
    return df.select("hid", F.explode(found).alias("a")).select("hid", "a.check", "a.key", "a.witness")


DEFAULT_WITNESSES = 10  # witnesses kept per check
# hid -> check -> (count, first witnesses)
Found = dict[int, dict[str, tuple[int, list[Any]]]]


def collect_anomalies(anomalies: DataFrame, witnesses: int) -> Found:
    """hid -> check -> (count, first `witnesses` witnesses), in one Spark job."""
    rank = Window.partitionBy("hid", "check").orderBy("key", "witness")
    ranked = anomalies.withColumn("rn", F.row_number().over(rank))
    first = F.when(F.col("rn") <= witnesses, F.struct("rn", "witness"))
    rows = (
        ranked.groupBy("hid", "check")
        .agg(F.count("*").alias("count"), F.sort_array(F.collect_list(first)).alias("first"))
        .collect()
    )
    found: Found = {}
    for row in rows:
        found.setdefault(row["hid"], {})[row["check"]] = (
            row["count"],
            [json.loads(w["witness"]) for w in row["first"]],
        )
    return found
