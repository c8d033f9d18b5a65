"""A checker service never outlives its use: it stops, JVM and all, when the process that started
it dies (even by kill -9), or when no request has reached it for its idle time."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from checkers.service.autostart import IDLE_S
from checkers.service.server import ping
from checkers.synth import simulate
from harness.wait import wait_for
from tests.support.checkerservice import checker_service
from tests.support.processes import children, command, java_children, running

pytestmark = pytest.mark.spark
ROOT = Path(__file__).resolve().parents[2]

# A test process of its own: starts a service as the test suite does, says its pid, waits.
PARENT = """
import sys, threading
from pathlib import Path
from tests.support.checkerservice import checker_service
with checker_service(Path(sys.argv[1]), warm_lines=0) as (sock, proc, log):
    print(proc.pid, flush=True)
    threading.Event().wait()
"""


def test_a_service_stops_with_its_jvm_when_the_process_that_started_it_is_killed(tmp_path: Path) -> None:
    parent = subprocess.Popen([sys.executable, "-c", PARENT, str(tmp_path)], cwd=ROOT,
                              stdout=subprocess.PIPE, text=True)
    try:
        assert parent.stdout is not None
        service = int(parent.stdout.readline())  # the helper has waited until the service is ready
        jvms = java_children(service)
        assert len(jvms) == 1, [command(pid) for pid in children(service)]
        os.kill(parent.pid, signal.SIGKILL)
        parent.wait(timeout=10)
        wait_for(lambda: not any(running(pid) for pid in (service, *jvms)), 60,
                 f"the service {service} or its JVM {jvms} outlived the process that started it")
    finally:
        if parent.poll() is None:
            parent.kill()
            parent.wait()
    log = (tmp_path / "service.log").read_text()
    assert f"stopping: process {parent.pid}, which started it, exited" in log
    assert ping(tmp_path / "checker.sock") is None and not (tmp_path / "checker.sock").exists()


def test_a_service_with_an_idle_time_stops_when_no_request_comes(tmp_path: Path) -> None:
    with checker_service(tmp_path, warm_lines=0, extra=("--idle-timeout", "2")) as (sock, proc, log):
        jvms = java_children(proc.pid)
        assert len(jvms) == 1
        assert ping(sock) is not None  # a request: the idle time starts again after it
        wait_for(lambda: proc.poll() is not None, 60, "the idle service did not stop")
        assert proc.returncode == 0
        wait_for(lambda: not any(running(pid) for pid in jvms), 30, f"its JVM {jvms} outlived it")
        assert "stopping: no request for 2 s" in log.read_text()


def test_a_check_starts_a_service_that_later_checks_reuse(tmp_path: Path) -> None:
    """`python -m checkers check` with no service answering starts one in the background (its own
    session: it outlives the check, with an idle time), and the next check goes through it."""
    folder = simulate(3, 40).write(tmp_path / "run")
    sock = tmp_path / "auto.sock"
    env = {**os.environ, "CHECKER_AUTOSTART": "1", "CHECKER_SOCKET": str(sock)}
    argv = [sys.executable, "-m", "checkers", "check", str(folder)]
    first = subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    status = ping(sock)
    assert status is not None, first.stderr
    jvms = java_children(status["pid"])
    try:
        assert first.returncode == 2, first.stderr  # valid but for the missing store files: unknown
        assert f"starting a checker service at {sock}" in first.stderr
        assert "started by this check" in first.stdout
        assert status["state"] == "ready" and status["checks"] == 1 and len(jvms) == 1
        second = subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
        assert second.returncode == 2, second.stderr
        assert f"checked by the checker service at {sock} (pid {status['pid']})" in second.stdout
        assert "started by this check" not in second.stdout
        assert ping(sock)["checks"] == 2
        assert f"--idle-timeout {IDLE_S}" in command(status["pid"])
    finally:
        if ping(sock) is not None:
            subprocess.run([sys.executable, "-m", "checkers", "serve", "--socket", str(sock), "--stop"],
                           cwd=ROOT, capture_output=True, timeout=60)
    wait_for(lambda: not any(running(pid) for pid in (status["pid"], *jvms)), 60, "it outlived --stop")
