"""Spark's driver JVM, started with its standard error passed on less the JDK's incubator warning.

Spark's launcher puts `--add-modules=jdk.incubator.vector` on every driver JVM's command line
(org.apache.spark.launcher.JavaModuleOptions, for MLlib's vectorised BLAS, which the checker
never uses), and the JDK then prints `WARNING: Using incubator modules: jdk.incubator.vector`
to standard error at start-up; neither has an option to leave it out. So the gateway is
launched here (as `SparkContext(gateway=...)` allows) with its standard error on a pipe that
a thread copies, line by line, to this process's standard error, that one line dropped.
"""

from __future__ import annotations

import contextlib
import os
import threading
from typing import TYPE_CHECKING, BinaryIO

if TYPE_CHECKING:
    from py4j.java_gateway import JavaGateway
    from pyspark import SparkConf

INCUBATOR_WARNING = b"WARNING: Using incubator modules: jdk.incubator.vector"


def forward(source: BinaryIO, fd: int = 2) -> None:
    """Copy `source` to file descriptor `fd` until it ends, without the incubator warning.

    Written to the descriptor, not `sys.stderr`: whatever fd 2 is when a line comes (a
    terminal, the service's log, pytest's capture) gets it, as when the JVM wrote it itself.
    """
    with source:
        for line in iter(source.readline, b""):
            if line.rstrip(b"\r\n") != INCUBATOR_WARNING:
                with contextlib.suppress(OSError):  # standard error closed: the line is lost
                    os.write(fd, line)


def launch(conf: SparkConf) -> JavaGateway:
    """Start the driver JVM with `conf` (pyspark's `launch_gateway`), its standard error forwarded.

    The pipe's reader runs before the JVM starts, so a JVM that fails at start-up still has its
    reasons shown.
    """
    from pyspark.java_gateway import launch_gateway

    read, write = os.pipe()
    threading.Thread(target=forward, args=(os.fdopen(read, "rb"),), name="spark-jvm-stderr",
                     daemon=True).start()
    try:
        return launch_gateway(conf, popen_kwargs={"stderr": write})
    finally:
        os.close(write)  # the JVM holds its own copy; the pipe ends when the JVM does
