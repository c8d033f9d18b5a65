"""The checker service for real: `python -m checkers serve` keeps one Spark JVM, the command
line checks through it, and its verdicts are local mode's.

The session's service (local[2], a small warm-up, shared with the tests that run the harness)
serves this module's tests; the test of `--stop` starts one of its own.
"""

from __future__ import annotations

import argparse
import json
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from checkers.checks.verdict import exit_code
from checkers.service.server import ping, request
from tests.support.checkerservice import checker_service

pytestmark = pytest.mark.spark
ROOT = Path(__file__).resolve().parents[2]


def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "checkers", *args], cwd=ROOT, capture_output=True, text=True, timeout=600
    )


@pytest.fixture
def service(session_checker_service):
    return session_checker_service


@pytest.mark.parametrize("name", ["inject-lost", "stores-disagree", "ok-0"])
def test_service_verdicts_are_local_modes(service, checked, tmp_path, name):
    sock, _, _ = service
    local = checked[name][1]
    folder = shutil.copytree(checked[name][0].path, tmp_path / name)
    done = _cli("check", str(folder), "--socket", str(sock), "--witnesses", "1000")
    assert done.returncode == exit_code(local["valid"]), done.stderr[-3000:]
    assert f"checked by the checker service at {sock}" in done.stdout
    progress = [line for line in done.stderr.splitlines()
                if line.startswith("checking: ") and " tasks of " not in line]  # stages, not task counts
    assert progress[0] == "checking: loading the history and final logs", done.stderr
    assert progress[1].startswith("checking: screening "), "the service passes the check's progress on"
    remote = json.loads((folder / "results.json").read_text())
    assert remote["valid"] == local["valid"]
    assert remote["checks"] == local["checks"]


def test_harness_checks_a_run_through_the_service(service, checked, tmp_path, monkeypatch, capsys):
    from harness.chaos.run import Preload, check_run, report

    sock, _, _ = service
    monkeypatch.setenv("CHECKER_SOCKET", str(sock))
    before = ping(sock)["checks"]
    folder = shutil.copytree(checked["inject-hole"][0].path, tmp_path / "run")
    args = argparse.Namespace(spark_master=None, witnesses=10)
    preload = Preload(folder, None, 10)
    preload.ready("history")
    preload.ready("finals")
    result = check_run(args, folder, preload)
    assert result["stats"]["history_preloaded"], "the service loaded the history before the check"
    assert result["stats"]["final_logs_preloaded"], "and the final logs"
    assert result["stats"]["screen_preloaded"], "and screened them"
    assert report(folder, result) == exit_code(checked["inject-hole"][1]["valid"])
    assert _counts(result) == _counts(checked["inject-hole"][1])
    out = capsys.readouterr()
    assert f"checked by the checker service at {sock}" in out.err
    assert f"report: {folder}/report.html" in out.out and (folder / "report.html").stat().st_size > 0
    assert ping(sock)["checks"] == before + 1


def test_what_was_loaded_ahead_is_used_only_while_its_files_are_unchanged(spark, checked, tmp_path):
    from checkers.checks.check import check
    from checkers.engine.preload import PRELOADED
    from checkers.layout import ResultsDir

    folder = shutil.copytree(checked["inject-hole"][0].path, tmp_path / "run")
    for part in ("history", "finals"):
        PRELOADED.load(spark, ResultsDir.open(folder), part)
    first = check(folder)["stats"]
    assert first["history_preloaded"] and first["final_logs_preloaded"] and first["screen_preloaded"]
    again = check(folder)
    assert not again["stats"]["history_preloaded"] and not again["stats"]["final_logs_preloaded"], (
        "what was loaded serves one check"
    )
    assert _counts(again) == _counts(checked["inject-hole"][1])
    for part in ("history", "finals"):
        PRELOADED.load(spark, ResultsDir.open(folder), part)
    final_log = sorted((folder / "final").glob("*.jsonl"))[0]
    final_log.write_bytes(final_log.read_bytes())  # rewritten after the load: read again
    changed = check(folder)
    assert changed["stats"]["history_preloaded"] and not changed["stats"]["final_logs_preloaded"]
    assert not changed["stats"]["screen_preloaded"]
    assert _counts(changed) == _counts(checked["inject-hole"][1])
    # The rest on a history the screen clears (no exact checks: seconds instead of tens of them).
    clean = shutil.copytree(checked["ok-1"][0].path, tmp_path / "clean")
    for part in ("history", "finals"):
        PRELOADED.load(spark, ResultsDir.open(clean), part, witnesses=3)
    other = check(clean, witnesses=1)  # screened for 3 witnesses a check: screened again
    assert other["stats"]["final_logs_preloaded"] and not other["stats"]["screen_preloaded"]
    for part in ("history", "finals"):
        PRELOADED.load(spark, ResultsDir.open(clean), part)
    cleared = check(clean)
    assert cleared["stats"]["screen_preloaded"] and not cleared["stats"]["exact_checks"]
    assert _counts(cleared) == _counts(checked["ok-1"][1])
    PRELOADED.load(spark, ResultsDir.open(clean))
    with (clean / "history.jsonl").open("a") as f:
        f.write("\n")  # the file changed after the load: the check reads it again
    assert not check(clean)["stats"]["history_preloaded"]


def _counts(result: dict) -> dict:
    return {name: (c["valid"], c.get("count")) for name, c in result["checks"].items()}


def test_bad_input_is_reported_and_the_service_keeps_serving(service, checked, tmp_path):
    sock, _, _ = service
    before = ping(sock)["checks"]
    folder = shutil.copytree(checked["ok-1"][0].path, tmp_path / "broken")
    lines = (folder / "history.jsonl").read_text().splitlines()
    lines[4] = "{not json"
    (folder / "history.jsonl").write_text("\n".join(lines) + "\n")
    done = _cli("check", str(folder), "--socket", str(sock))
    assert done.returncode == 254
    assert "history.jsonl" in done.stderr and "line 5" in done.stderr and "not valid JSON" in done.stderr
    with socket.socket(socket.AF_UNIX) as raw:
        raw.connect(str(sock))
        raw.sendall(b"hello\n")
        reply = json.loads(raw.makefile().readline())
    assert reply["ok"] is False and reply["exit"] == 254
    assert request(sock, {"op": "check", "results_dir": str(tmp_path / "absent")})["exit"] == 254
    wrong_part = request(sock, {"op": "load", "results_dir": str(folder), "part": "stores"})
    assert wrong_part["exit"] == 254 and "history, finals" in wrong_part["error"]
    status = ping(sock)
    assert status["state"] == "ready" and status["checks"] == before


def test_a_second_service_on_the_same_socket_is_refused(service):
    sock, proc, _ = service
    done = _cli("serve", "--socket", str(sock), "--warm-lines", "0")
    assert done.returncode == 254
    assert f"already listens at {sock} (pid {proc.pid})" in done.stderr


def test_bad_serve_arguments_exit_254():
    done = _cli("serve", "--warm-rounds", "-1")
    assert done.returncode == 254 and "argument --warm-rounds: -1 is negative; pass 0 or more" in done.stderr


def test_a_socket_path_that_cannot_be_used_is_refused(tmp_path):
    taken = tmp_path / "notes.txt"
    taken.write_text("keep me")
    done = _cli("serve", "--socket", str(taken), "--warm-lines", "0")
    assert done.returncode == 254 and "is not a socket" in done.stderr
    assert taken.read_text() == "keep me"
    nowhere = tmp_path / "absent" / "checker.sock"
    done = _cli("serve", "--socket", str(nowhere), "--warm-lines", "0")
    assert done.returncode == 254 and f"cannot listen at {nowhere}" in done.stderr


def test_a_service_that_cannot_start_spark_says_why_and_exits_255(tmp_path):
    sock = tmp_path / "checker.sock"
    done = _cli("serve", "--socket", str(sock), "--spark-master", "bogus://nowhere", "--warm-lines", "0")
    assert done.returncode == 255
    assert "cannot start Spark on bogus://nowhere" in done.stderr and "bogus://nowhere" in done.stderr
    assert not sock.exists()


def test_ping_is_none_without_a_service(tmp_path):
    assert ping(tmp_path / "absent.sock") is None
    stale = tmp_path / "stale.sock"
    with socket.socket(socket.AF_UNIX) as s:
        s.bind(str(stale))  # bound, never listening, then closed: what a killed service leaves
    assert stale.exists() and ping(stale) is None
    done = _cli("serve", "--socket", str(stale), "--status")
    assert done.returncode == 254 and f"no checker service answers at {stale}" in done.stderr


def test_stop_ends_the_service_and_removes_its_socket(tmp_path):
    with checker_service(tmp_path, warm_lines=0) as (sock, proc, log):
        done = _cli("serve", "--socket", str(sock), "--stop")
        assert done.returncode == 0, done.stderr
        assert json.loads(done.stdout)["state"] == "ready"
        assert proc.wait(timeout=120) == 0, log.read_text()[-3000:]
        assert not sock.exists()
        assert "checker service: stopped" in log.read_text()
