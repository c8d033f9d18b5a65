"""The checker's SparkSession helpers, on the real session."""

from __future__ import annotations

import pytest

from checkers.engine.spark import driver_host, shuffle_partitions_for, sql_conf

pytestmark = pytest.mark.spark
BYPASS = "spark.sql.execution.bypassPartialAggregation"


def test_sql_conf_sets_a_setting_for_its_block_and_restores_it(spark):
    spark.conf.unset(BYPASS)
    default = spark.conf.get(BYPASS)
    with sql_conf(spark, BYPASS, "true"):
        assert spark.conf.get(BYPASS) == "true"
    assert spark.conf.get(BYPASS) == default
    spark.conf.set("spark.sql.shuffle.partitions", "7")
    with pytest.raises(RuntimeError), sql_conf(spark, "spark.sql.shuffle.partitions", "3"):
        assert spark.conf.get("spark.sql.shuffle.partitions") == "3"
        raise RuntimeError("a failed query")
    assert spark.conf.get("spark.sql.shuffle.partitions") == "7"


def test_shuffle_partitions_follow_the_input_at_least_one_per_core():
    assert shuffle_partitions_for(0, 2) == 2
    assert shuffle_partitions_for(1387 << 20, 2) == 6, "about 256 MiB of JSON per partition"
    assert shuffle_partitions_for(1387 << 20, 16) == 16
    assert shuffle_partitions_for(1 << 40, 2) == 256


def test_the_driver_binds_loopback_unless_told_the_address_a_cluster_reaches(monkeypatch) -> None:
    monkeypatch.delenv("SPARK_DRIVER_HOST", raising=False)
    assert driver_host() == "127.0.0.1"
    monkeypatch.setenv("SPARK_DRIVER_HOST", "10.0.0.5")
    assert driver_host() == "10.0.0.5"
