"""The distributed path for real: a standalone Spark master and one worker on loopback run the check.

The master and worker come from the launcher the pyspark package ships (`bin/spark-class`);
the checker runs as a user would run it, `python -m checkers check DIR --spark-master URL`,
on a folder with store files (read by the node's store reader on the worker). Its verdict
must match local mode's, and its exit code, table and results.json are the command line's.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import urllib.request
from pathlib import Path

import pyspark
import pytest
from tenacity import retry, retry_if_exception_type, stop_after_delay, wait_fixed

pytestmark = pytest.mark.spark
ROOT = Path(__file__).resolve().parents[2]
SPARK_HOME = Path(pyspark.__file__).parent


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class NotReady(Exception):
    pass


@retry(
    stop=stop_after_delay(120),
    wait=wait_fixed(0.5),
    # ValueError: a master that is still starting answers with an empty page
    retry=retry_if_exception_type((NotReady, OSError, ValueError)),
    reraise=True,
)
def _wait_for_worker(ui_port: int) -> None:
    with urllib.request.urlopen(f"http://127.0.0.1:{ui_port}/json/", timeout=5) as reply:
        if json.load(reply).get("aliveworkers", 0) < 1:
            raise NotReady("no worker registered yet")


def _spawn(args: list[str], log: Path, env: dict[str, str]) -> subprocess.Popen:
    with log.open("w") as out:
        return subprocess.Popen(
            [str(SPARK_HOME / "bin" / "spark-class"), *args],
            stdout=out,
            stderr=subprocess.STDOUT,
            env=env,
            start_new_session=True,
        )


def _stop(proc: subprocess.Popen) -> None:
    proc.terminate()
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=30)


@pytest.fixture
def standalone(tmp_path):
    env = {
        **os.environ,
        "SPARK_HOME": str(SPARK_HOME),
        "SPARK_LOCAL_IP": "127.0.0.1",
        "SPARK_NO_DAEMONIZE": "1",
        "SPARK_WORKER_DIR": str(tmp_path / "work"),
        "PYSPARK_PYTHON": sys.executable,
    }
    port, ui, worker_ui = _free_port(), _free_port(), _free_port()
    master = _spawn(
        [
            "org.apache.spark.deploy.master.Master",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--webui-port",
            str(ui),
        ],
        tmp_path / "master.log",
        env,
    )
    worker = None
    try:
        worker = _spawn(
            [
                "org.apache.spark.deploy.worker.Worker",
                f"spark://127.0.0.1:{port}",
                "--host",
                "127.0.0.1",
                "--webui-port",
                str(worker_ui),
                "--cores",
                "2",
                "--memory",
                "2g",
                "--work-dir",
                str(tmp_path / "work"),
            ],
            tmp_path / "worker.log",
            env,
        )
        _wait_for_worker(ui)
        yield f"spark://127.0.0.1:{port}"
    finally:
        if worker is not None:
            _stop(worker)
        _stop(master)


def test_cluster_check_matches_local_mode(standalone, checked, tmp_path):
    local = checked["stores-disagree"][1]
    folder = shutil.copytree(checked["stores-disagree"][0].path, tmp_path / "run")
    env = {**os.environ, "CHECKER_DRIVER_MEMORY": "1g"}
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "checkers",
            "check",
            str(folder),
            "--spark-master",
            standalone,
            "--witnesses",
            "1000",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
        env=env,
    )
    assert done.returncode == 1, done.stderr[-3000:]
    assert (
        "replica-disagreement" in done.stdout and "INVALID" in done.stdout and "valid: false" in done.stdout
    )
    remote = json.loads((folder / "results.json").read_text())
    assert remote["stats"]["spark_master"] == standalone
    assert remote["valid"] == local["valid"]
    assert {n: (c["valid"], c["count"]) for n, c in remote["checks"].items()} == {
        n: (c["valid"], c["count"]) for n, c in local["checks"].items()
    }
    assert (
        remote["checks"]["replica-disagreement"]["witnesses"]
        == local["checks"]["replica-disagreement"]["witnesses"]
    )
