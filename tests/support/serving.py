"""`python -m harness serve` as a child process on a free loopback port, for tests that talk to it."""

from __future__ import annotations

import selectors
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path


@dataclass
class Served:
    proc: subprocess.Popen
    url: str  # http://127.0.0.1:<port>/


def _url(proc: subprocess.Popen, timeout: float) -> str:
    """The URL the server prints once it listens, read from its stderr within `timeout` seconds."""
    deadline = time.monotonic() + timeout
    with selectors.DefaultSelector() as sel:
        sel.register(proc.stderr, selectors.EVENT_READ)
        while time.monotonic() < deadline and sel.select(deadline - time.monotonic()):
            line = proc.stderr.readline()
            if not line:
                break
            if line.startswith("serving "):
                return line.split(" at ", 1)[1].split()[0]
    raise AssertionError(f"harness serve did not say where it listens (exit code {proc.poll()})")


@contextmanager
def serve(results: Path, timeout: float = 60) -> Iterator[Served]:
    """Run the server over `results` until the block ends; it is stopped with Ctrl-C (SIGINT)."""
    argv = [sys.executable, "-m", "harness", "serve", "--port", "0", "--results", str(results)]
    proc = subprocess.Popen(argv, stderr=subprocess.PIPE, text=True)
    try:
        yield Served(proc, _url(proc, timeout))
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGINT)
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        proc.stderr.close()
