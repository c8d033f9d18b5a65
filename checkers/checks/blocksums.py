"""Per-block sums of log entries: how the screen compares final logs without sorting them.

Entries are summed by block of `FINAL_BLOCK` indexes as 31-bit hashes of (index, term, id)
under two seeds, with the hash of the index alone. Equal sums are taken as equal blocks:
two different blocks pass only if both sums collide, about one chance in 2^62.
"""

from __future__ import annotations

from typing import Any

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

FINAL_BLOCK = 1 << 14
NOOP_KEY = "\u0000noop"  # stands for a no-op's null id where ids are compared
_MASK = (1 << 31) - 1
Sums = tuple[int, int, int, int]  # entries, hash of (index, term, id) twice, hash of index


def _hash(seed: str, *cols: Column | str) -> Column:
    return F.xxhash64(F.lit(seed), *cols).bitwiseAND(F.lit(_MASK))


def block_sums(df: DataFrame, keys: list[str], *extra: Column, sound: Column | None = None) -> DataFrame:
    """`keys`, `_b` (the block) and the sums of the rows where `sound` holds, with `extra` aggregates."""
    ident = F.coalesce("id", F.lit(NOOP_KEY))
    ok = F.lit(True) if sound is None else sound

    def total(value: Column) -> Column:
        return F.coalesce(F.sum(F.when(ok, value)), F.lit(0))

    return (
        df.withColumn("_b", F.floor(F.col("log_index") / FINAL_BLOCK))
        .groupBy(*keys, "_b")
        .agg(
            total(F.lit(1)).alias("n"),
            total(_hash("a", "log_index", "term", ident)).alias("h1"),
            total(_hash("b", "log_index", "term", ident)).alias("h2"),
            total(_hash("i", "log_index")).alias("hi"),
            *extra,
        )
    )


def sums_table(rows: list[Any], keys: list[str]) -> dict[tuple, Sums]:
    """(keys..., _b) -> the block's sums, from collected `block_sums` rows (blocks with entries)."""
    return {tuple(r[k] for k in [*keys, "_b"]): (r["n"], r["h1"], r["h2"], r["hi"]) for r in rows if r["n"]}
