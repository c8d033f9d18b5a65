"""A distributed prefix maximum: for each row, the largest value among the rows before it.

Rows are cut into buckets by their order key (`bucket = t * B // (span + 1)`, deterministic,
so no range sampling and no caching); a window inside each (hid, bucket) gives the local
prefix and a tiny per-bucket table carries the maximum of all earlier buckets. No
unpartitioned window, no collect: O(n log n) in sorts and one small broadcast join.
"""

from __future__ import annotations

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

BUCKETS = 64


def prefix_max(
    rows: DataFrame, t: str, tie: str, values: list[str], span: int, buckets: int = BUCKETS
) -> DataFrame:
    """Add `pm_<v>` for each v in `values`: max of v over rows of the same `hid` strictly before.

    "Before" orders by (t, tie). Rows that tie on both may or may not see each other, so give
    asking rows and contributing rows different `tie` values. Null values are ignored (rows
    that only ask carry null). `span` bounds t (0 <= t <= span).
    """
    width = max(1, span + 1)
    bucketed = rows.withColumn(
        "_b", F.least(F.greatest((F.col(t) * buckets / width).cast("long"), F.lit(0)), F.lit(buckets - 1))
    )
    local = Window.partitionBy("hid", "_b").orderBy(t, tie).rowsBetween(Window.unboundedPreceding, -1)
    for v in values:
        bucketed = bucketed.withColumn(f"_l_{v}", F.max(v).over(local))
    tops = bucketed.groupBy("hid", "_b").agg(*[F.max(v).alias(f"_t_{v}") for v in values])
    earlier = Window.partitionBy("hid").orderBy("_b").rowsBetween(Window.unboundedPreceding, -1)
    carry = tops.select("hid", "_b", *[F.max(f"_t_{v}").over(earlier).alias(f"_c_{v}") for v in values])
    joined = bucketed.join(F.broadcast(carry), ["hid", "_b"])
    for v in values:
        joined = joined.withColumn(f"pm_{v}", F.greatest(f"_l_{v}", f"_c_{v}"))
    return joined.drop("_b", *[f"_l_{v}" for v in values], *[f"_c_{v}" for v in values])
