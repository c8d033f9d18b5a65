"""Start a checker service in the background for `python -m checkers check`, as Gradle starts its daemon.

A check that finds no service answering starts one (`python -m checkers serve` with no warm-up,
in a session of its own so it outlives the check), waits until it can check, and checks through
it; later checks reuse its warm JVM, and it exits after `IDLE_S` seconds without a request
(`checkers.service.lifeline`). `$CHECKER_AUTOSTART=0` (the test suite sets it) or `check --local` keeps
each check in its own process. The service's output goes to a log beside its socket.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

AUTOSTART_ENV = "CHECKER_AUTOSTART"
IDLE_S = 600
START_TIMEOUT_S = 180.0


def wanted() -> bool:
    """Whether a check may start a service ($CHECKER_AUTOSTART is not 0)."""
    return os.environ.get(AUTOSTART_ENV, "1") != "0"


def log_path(sock: Path) -> Path:
    return sock.with_name(sock.name + ".log")


def start(sock: Path, spark_master: str | None, idle_s: int = IDLE_S) -> dict[str, Any] | None:
    """Start a service at `sock` that exits after `idle_s` idle seconds; its status once it is
    ready to check, or None when it exited or did not get ready within START_TIMEOUT_S."""
    from checkers.service.server import ping

    argv = [sys.executable, "-m", "checkers", "serve", "--socket", str(sock), "--warm-lines", "0",
            "--idle-timeout", str(idle_s), *(["--spark-master", spark_master] if spark_master else [])]
    with log_path(sock).open("ab") as out:
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=out, stderr=out,
                                start_new_session=True)  # its own session: it outlives this check
    deadline = time.monotonic() + START_TIMEOUT_S
    pause = threading.Event()  # never set: a bounded wait between pings
    while time.monotonic() < deadline and proc.poll() is None:
        status = ping(sock)
        if status is not None and status.get("pid") == proc.pid and status["state"] == "ready":
            return status
        pause.wait(0.2)
    if proc.poll() is None:
        proc.terminate()
    return None
