"""The SparkSession the checker runs on: local[*] on 127.0.0.1 by default, or a cluster.

`--spark-master URL` or `SPARK_MASTER` picks a cluster (e.g. `spark://127.0.0.1:7077`);
otherwise Spark runs embedded in this process. The driver binds to 127.0.0.1 unless
`SPARK_DRIVER_HOST` names the address a cluster elsewhere reaches this machine at; the UI
is off and the JVM logs only errors.
"""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from pyspark import SparkConf, SparkContext
from pyspark.sql import SparkSession

from checkers.engine.gateway import launch

LOG_CONFIG = Path(__file__).with_name("log4j2.properties")
DEFAULT_MASTER = "local[*]"
PARTITION_BYTES = 256 << 20
# Below this much input a check's expressions are interpreted rather than compiled to Java:
# compiling (and then JIT-compiling the new classes) costs more than the rows take
# (bench/README.md, "Interpreted small checks").
INTERPRET_BELOW = 32 << 20
_STARTING = threading.Lock()  # one SparkContext per process, even when two threads start it


def master_url(requested: str | None = None) -> str:
    """The master to use: the argument, else `SPARK_MASTER`, else local mode."""
    return requested or os.environ.get("SPARK_MASTER") or DEFAULT_MASTER


def driver_host() -> str:
    """The address the driver binds and a cluster's executors call back: `SPARK_DRIVER_HOST`,
    else loopback (tests and local runs keep all traffic on 127.0.0.1)."""
    return os.environ.get("SPARK_DRIVER_HOST") or "127.0.0.1"


def shuffle_partitions_for(input_bytes: int, cores: int) -> int:
    """Shuffle partitions sized to the input: about 256 MiB of JSON each, at least one per
    core, at most 256.

    Adaptive execution is off (it turns every stage into a job, which dominates small
    checks), so the partition count is chosen here, per check. Few partitions pay: every
    task costs tens of milliseconds, and most stages after the first shuffle hold little
    data (10^7 lines: 45 partitions of 32 MiB -> 6, a warm check 65 -> 47 s on 2 cores).
    """
    return min(256, max(cores, input_bytes // PARTITION_BYTES + 1))


def fit_to_input(spark: SparkSession, input_bytes: int) -> None:
    """Set the next check's shuffle partitions (`shuffle_partitions_for`) and, for an input
    under `INTERPRET_BELOW`, interpreted expressions instead of generated code."""
    cores = spark.sparkContext.defaultParallelism
    small = input_bytes < INTERPRET_BELOW
    spark.conf.set("spark.sql.shuffle.partitions", str(shuffle_partitions_for(input_bytes, cores)))
    spark.conf.set("spark.sql.codegen.wholeStage", "false" if small else "true")
    spark.conf.set("spark.sql.codegen.factoryMode", "NO_CODEGEN" if small else "FALLBACK")


def running() -> bool:
    """Whether this process has a Spark session already (then `session` starts nothing)."""
    return SparkContext._active_spark_context is not None


def session(
    master: str | None = None, *, shuffle_partitions: int = 2, driver_memory: str | None = None
) -> SparkSession:
    """Get (or create) the checker's SparkSession on `master_url(master)`.

    A second call in the same process returns the running session, whatever its master:
    a process holds one SparkContext.
    """
    host = driver_host()
    os.environ.setdefault("SPARK_LOCAL_IP", host)
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    # The throughput collector: a check is one batch of short-lived rows, and G1's
    # concurrent work cost ~15% of a 10^7-line check on 2 cores (bench/README.md).
    java_opts = f"-Dlog4j2.configurationFile={LOG_CONFIG.as_uri()} -XX:+UseParallelGC"
    memory = driver_memory or os.environ.get("CHECKER_DRIVER_MEMORY", "4g")
    settings = {
        "spark.master": master_url(master),
        "spark.app.name": "dledger-chaos-checker",
        "spark.driver.host": host,
        "spark.driver.bindAddress": host,
        "spark.driver.memory": memory,
        "spark.driver.extraJavaOptions": java_opts,
        "spark.executor.extraJavaOptions": java_opts,
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.sql.shuffle.partitions": str(shuffle_partitions),
        "spark.sql.adaptive.enabled": "false",
        "spark.sql.files.openCostInBytes": str(64 << 10),
        "spark.sql.sources.parallelPartitionDiscovery.threshold": "1000000",
        "spark.sql.session.timeZone": "UTC",
        # Compressing cached tables costs more CPU than reading them back saves.
        "spark.sql.inMemoryColumnarStorage.compressed": "false",
        "spark.executorEnv.PYTHONPATH": os.pathsep.join(sys.path),
        # Off: PySpark 4 otherwise records the Python call site of every column function in the
        # JVM, five py4j round trips each (about a third of a small check's round trips).
        "spark.python.sql.dataFrameDebugging.enabled": "false",
    }
    with _STARTING:
        if SparkContext._active_spark_context is None:
            conf = SparkConf().setAll(list(settings.items()))
            # The JVM started here (checkers.engine.gateway), unless a stopped context left one to reuse.
            SparkContext(conf=conf, gateway=None if SparkContext._gateway else launch(conf))
        # pyspark types `map` as an invariant dict of primitives (it only reads it): str values are fine
        spark = SparkSession.builder.config(map=settings).getOrCreate()  # type: ignore[arg-type]
    spark.sparkContext.setLogLevel("ERROR")
    return spark


@contextmanager
def sql_conf(spark: SparkSession, key: str, value: str) -> Iterator[None]:
    """Set a runtime SQL setting for the queries run inside the block, then restore it."""
    old = spark.conf.get(key, None)
    spark.conf.set(key, value)
    try:
        yield
    finally:
        if old is None:
            spark.conf.unset(key)
        else:
            spark.conf.set(key, old)
