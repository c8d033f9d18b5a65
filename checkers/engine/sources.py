"""Reading JSON-lines files of one or many results folders into one DataFrame.

Every row is tagged with `hid` (which results folder, so many small histories can be
checked in one Spark job) and `src_node` (the node a per-node file belongs to). Malformed
lines are counted in Spark; when there are any, the file is scanned line by line in
Python to name the first bad line (see `jsonlines`).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from urllib.parse import unquote, urlparse

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import LongType, StringType, StructField, StructType

from checkers.jsonlines import InputError, Validator, first_problem, torn_last_line

CORRUPT = "_corrupt_record"


@dataclass(frozen=True)
class SourceFile:
    """One input file and what it belongs to."""

    hid: int
    path: Path
    node: str | None = None


def _uri_path(uri: str) -> Path:
    return Path(unquote(urlparse(uri).path)).resolve()


def read_jsonl(spark: SparkSession, files: list[SourceFile], schema: StructType) -> DataFrame:
    """Rows of every file with `hid`, `src_node` and `_corrupt_record` (set on unparsable lines)."""
    full = StructType([*schema.fields, StructField(CORRUPT, StringType())])
    if not files:
        extra = [StructField("hid", LongType()), StructField("src_node", StringType())]
        return spark.createDataFrame([], StructType([*full.fields, *extra]))
    df = (
        spark.read.schema(full)
        .option("mode", "PERMISSIVE")
        .option("columnNameOfCorruptRecord", CORRUPT)
        .json([str(f.path) for f in files])
    )
    if len(files) == 1:
        return df.withColumn("hid", F.lit(files[0].hid).cast("long")).withColumn(
            "src_node", F.lit(files[0].node).cast("string")
        )
    by_path = {f.path.resolve(): f for f in files}
    mapping = [(uri, by_path[_uri_path(uri)].hid, by_path[_uri_path(uri)].node) for uri in df.inputFiles()]
    map_df = spark.createDataFrame(mapping, "_file string, hid long, src_node string")
    return df.withColumn("_file", F.input_file_name()).join(F.broadcast(map_df), "_file").drop("_file")


def expected_torn_lines(files: list[SourceFile]) -> int:
    """How many of the files end in a torn last line (each shows up as one corrupt row)."""
    return sum(torn_last_line(f.path) is not None for f in files)


def raise_first_problem(files: list[SourceFile], validator: type | Validator, bad_rows: int) -> None:
    """Raise the InputError for the first bad line among `files` (Spark counted `bad_rows`).

    `validator` is a validator, or a class whose instances are (one per file, for
    validators that keep state across lines).
    """
    for f in files:
        check = validator() if isinstance(validator, type) else validator
        problem = first_problem(f.path, check)
        if problem is not None:
            raise problem
    names = ", ".join(str(f.path) for f in files[:3])
    raise InputError(f"{names}: {bad_rows} malformed line(s) (could not pin down which)")


def is_corrupt() -> Column:
    return F.col(CORRUPT).isNotNull()
