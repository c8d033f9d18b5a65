"""A real checker service (`python -m checkers serve`) for tests: started on a socket of the
test's own, waited for until ready (bounded), killed afterwards, and stopping by itself when the
test process dies first (`--parent`: an interrupted suite leaves no JVM behind)."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from tenacity import retry, retry_if_exception_type, stop_after_delay, wait_fixed

from checkers.service.server import ping

ROOT = Path(__file__).resolve().parents[2]


class NotReady(Exception):
    pass


@retry(stop=stop_after_delay(300), wait=wait_fixed(0.5), retry=retry_if_exception_type(NotReady))
def _wait_ready(sock: Path, proc: subprocess.Popen, log: Path) -> None:
    assert proc.poll() is None, f"the service exited {proc.returncode}:\n{log.read_text()[-3000:]}"
    status = ping(sock)
    if status is None or status["state"] != "ready":
        raise NotReady(str(status))


@contextmanager
def checker_service(folder: Path, warm_lines: int = 2000,
                    extra: tuple[str, ...] = ()) -> Iterator[tuple[Path, subprocess.Popen, Path]]:
    """A service on local[2] at `folder`/checker.sock (`extra`: more `serve` arguments), ready;
    yields (socket, process, log). Its driver heap is the checker's own default: the session's
    service checks every chaos cell, and with 1 GiB the third cell's check ran out of heap."""
    sock, log = folder / "checker.sock", folder / "service.log"
    with log.open("w") as out:
        serve = ["serve", "--socket", str(sock), "--spark-master", "local[2]", "--warm-lines",
                 str(warm_lines), "--warm-rounds", "1", "--parent", str(os.getpid()), *extra]
        proc = subprocess.Popen([sys.executable, "-m", "checkers", *serve], cwd=ROOT, stdout=out,
                                stderr=subprocess.STDOUT, start_new_session=True)
    try:
        _wait_ready(sock, proc, log)
        yield sock, proc, log
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=60)
