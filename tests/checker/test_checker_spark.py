"""The checker's SparkSession helpers, on the real session."""

from __future__ import annotations

import pytest

import checkers.engine.spark as engine
from checkers.checks.check import check_many
from checkers.engine.spark import driver_host, fit_to_input, shuffle_partitions_for, sql_conf
from checkers.layout import ResultsDir

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


def _compiled(spark) -> bool:
    """Whether a query now runs as generated code (whole-stage codegen marks its operators `*(n)`)."""
    query = spark.range(10).selectExpr("id * 2 AS twice").where("twice > 4")
    return "*(" in query._jdf.queryExecution().executedPlan().toString()


def test_a_small_input_is_interpreted_and_a_large_one_compiled(spark):
    try:
        fit_to_input(spark, 1 << 20)
        assert spark.conf.get("spark.sql.shuffle.partitions") == "2"
        assert spark.conf.get("spark.sql.codegen.factoryMode") == "NO_CODEGEN" and not _compiled(spark)
        fit_to_input(spark, 1387 << 20)
        assert spark.conf.get("spark.sql.shuffle.partitions") == "6"
        assert spark.conf.get("spark.sql.codegen.factoryMode") == "FALLBACK" and _compiled(spark)
    finally:
        fit_to_input(spark, 0)


def test_interpreted_and_compiled_checks_give_the_same_verdicts(spark, checked, monkeypatch):
    """The case folders are all small (interpreted in `checked`); the same, compiled, agree."""
    names = [*[name for name in checked if not name.startswith("random-")][::3], "random-1", "random-2"]
    monkeypatch.setattr(engine, "INTERPRET_BELOW", 0)
    compiled = check_many([ResultsDir.open(checked[name][0].path) for name in names], spark, witnesses=1000)
    monkeypatch.undo()
    assert len({r["valid"] for r in compiled}) > 1, "broken and correct histories both"
    for name, result in zip(names, compiled, strict=True):
        assert result["checks"] == checked[name][1]["checks"], name
