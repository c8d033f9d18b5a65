"""One SparkSession for every checker test (starting Spark costs seconds, so it is shared)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))


@pytest.fixture(scope="session")
def spark():
    from checkers.spark import session

    spark = session("local[2]", shuffle_partitions=2)
    yield spark
    spark.stop()
