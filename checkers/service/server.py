"""Keep one Spark JVM warm and check results folders on request (the checker service).

A check in a fresh process spends most of its time starting Spark and compiling and
warming its queries, not on the history: a service started once checks each folder with
the JVM warm, about twice as fast (bench/README.md, "Checker scale"). It warms up on
synthetic histories (`checkers.synth`) as it starts. `python -m checkers check` and
`harness run` use it whenever its socket answers, else they check in their own process
(`python -m checkers check` first starts one in the background: `checkers.service.autostart`).
It runs until stopped, or until the process that started it exits (`--parent`) or no request
has come for a while (`--idle-timeout`): see `checkers.service.lifeline`.

Protocol: a Unix socket (`--socket`, `$CHECKER_SOCKET`, else one per user in the temp
folder), one JSON request line and one JSON reply line per connection:
`{"op": "ping"}`, `{"op": "check", "results_dir": ..., "witnesses": N}`, `{"op": "stop"}`, and
`{"op": "load", "results_dir": ..., "part": "history" | "finals", "witnesses": N}`, which
loads the folder's history or final logs ahead of its check, and screens them once both are
loaded (`checkers.engine.preload`). Replies carry `ok`; a failed
check says why (`error`) and the exit code it means (`exit`).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import socket
import socketserver
import stat
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from checkers.jsonlines import InputError
from checkers.service.lifeline import IdleClock, on_exit
from nodes.cliparse import EXIT_BAD_ARGS, EXIT_INTERNAL, EXIT_VALID, non_negative

DEFAULT_WARM_LINES = 50_000
DEFAULT_WARM_ROUNDS = 2
MAX_REQUEST = 1 << 20
PING_TIMEOUT_S = 5.0

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from checkers.engine.preload import Part
    from checkers.engine.progress import Progress


class ServiceError(RuntimeError):
    """The service failed a check for a reason of its own (exit 255), or went away."""


def default_socket() -> Path:
    """`$CHECKER_SOCKET`, else dledger-checker-<uid>.sock in the temp folder."""
    chosen = os.environ.get("CHECKER_SOCKET")
    return Path(chosen) if chosen else Path(tempfile.gettempdir()) / f"dledger-checker-{os.getuid()}.sock"


def request(
    path: Path, payload: dict[str, Any], timeout: float | None = None, progress: Progress | None = None
) -> dict[str, Any]:
    """Send one request to the service at `path` and return its reply (OSError if none); the
    `{"progress": ...}` lines a check sends before it go to `progress`."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(timeout)
        sock.connect(str(path))
        sock.sendall((json.dumps(payload) + "\n").encode())
        with sock.makefile("rb") as replies:
            while (line := replies.readline()) and "progress" in (reply := json.loads(line)):
                if progress is not None:
                    progress(reply["progress"])
    if not line:
        raise ServiceError(
            f"the checker service at {path} closed the connection without a reply (did it stop?)"
        )
    return reply


def ping(path: Path) -> dict[str, Any] | None:
    """The service's status, or None when nothing answers at `path` (missing or stale socket)."""
    try:
        return request(path, {"op": "ping"}, timeout=PING_TIMEOUT_S)
    except (OSError, ServiceError, ValueError):
        return None


def serving(path: Path, spark_master: str | None) -> dict[str, Any] | None:
    """The status of the service at `path` if it answers and runs on `spark_master` (any
    master when None), else None: the work is then done in this process."""
    from checkers.engine.spark import master_url

    status = ping(path)
    if status is None or (spark_master is not None and master_url(spark_master) != status["master"]):
        return None
    return status


def check_folder(
    results_dir: Path,
    *,
    spark_master: str | None,
    witnesses: int,
    sock: Path | None = None,
    local: bool = False,
    autostart: bool = False,
    progress: Progress | None = None,
) -> tuple[dict[str, Any], str]:
    """Check `results_dir` on the service when one answers at `sock` on the same master, else
    in this process, or with `autostart` on a service it starts in the background
    (`checkers.service.autostart`); `progress` hears how the check goes. Returns the verdict and what
    checked it; raises InputError on bad input.
    """
    from checkers.checks.check import check
    from checkers.service import autostart as daemon

    path = sock or default_socket()
    status = None if local else serving(path, spark_master)
    started = ""
    if status is None and autostart and not local:
        print(f"starting a checker service at {path} (log {daemon.log_path(path)})", file=sys.stderr)
        status = daemon.start(path, spark_master) or serving(path, spark_master)  # or a rival's
        started = f", started by this check: it exits after {daemon.IDLE_S} s without a request"
    if status is None:
        verdict = check(results_dir, spark_master=spark_master, witnesses=witnesses, progress=progress)
        return verdict, "this process"
    if status["state"] != "ready":
        print(f"the checker service at {path} is {status['state']}; the check waits for it", file=sys.stderr)
    reply = request(
        path, {"op": "check", "results_dir": str(Path(results_dir).resolve()), "witnesses": witnesses},
        progress=progress,
    )
    if reply["ok"]:
        return reply["result"], f"the checker service at {path} (pid {status['pid']}{started})"
    if reply["exit"] == EXIT_BAD_ARGS:
        raise InputError(reply["error"])
    raise ServiceError(f"the checker service at {path}: {reply['error']}")


def preload_folder(
    results_dir: Path,
    part: Part = "history",
    *,
    spark_master: str | None,
    witnesses: int,
    sock: Path | None = None,
) -> str:
    """Load `results_dir`'s `part` (history or final logs) ahead of its check with `witnesses`
    (see `check_folder` for where); returns where. Files that cannot be loaded are left for
    the check to report.
    """
    from checkers.engine.preload import PRELOADED
    from checkers.engine.spark import session
    from checkers.layout import ResultsDir

    path = sock or default_socket()
    if serving(path, spark_master) is not None:
        folder = str(Path(results_dir).resolve())
        request(path, {"op": "load", "results_dir": folder, "part": part, "witnesses": witnesses})
        return f"the checker service at {path}"
    with contextlib.suppress(InputError):
        PRELOADED.load(session(spark_master), ResultsDir.open(results_dir), part, witnesses=witnesses)
    return "this process"


class Service:
    """The warm SparkSession and the one check it runs at a time."""

    def __init__(self, master: str | None, warm_lines: int, warm_rounds: int,
                 idle_s: float | None = None) -> None:
        from checkers.engine.spark import master_url

        self.master = master_url(master)
        self.warm_lines = warm_lines
        self.warm_rounds = warm_rounds
        self.state = "starting"
        self.checks = 0
        self.stopped = threading.Event()
        self.spark: SparkSession | None = None
        self.failure: str | None = None
        self._lock = threading.Lock()
        self.idle = IdleClock(idle_s)  # the warm-up and every request hold it

    def start(self) -> None:
        """Start Spark and warm it up (holding the lock, so early checks wait for it)."""
        from checkers.engine.spark import session

        with self.idle.busy(), self._lock:
            started = time.monotonic()
            try:
                self.spark = session(self.master)
                if self.warm_lines and self.warm_rounds:
                    self.state = "warming"
                    _log(f"warming up: {self.warm_rounds} rounds of {self.warm_lines}-line histories")
                    self._warm_up()
            except Exception as e:  # no Spark, no service: say why and stop
                self.failure = f"{type(e).__name__}: {str(e).strip()[:500]}"
                _log(f"cannot start Spark on {self.master}: {self.failure}")
                self.stopped.set()
                return
            self.state = "ready"
        _log(f"ready on {self.master} in {time.monotonic() - started:.1f} s")

    def _warm_up(self) -> None:
        """Check a correct history and a broken one, so both the screen and the exact checks
        have been compiled and run before the first real check."""
        from checkers.checks.check import check_many
        from checkers.layout import ResultsDir
        from checkers.synth import simulate, write_lines

        assert self.spark is not None  # started before the warm-up
        with tempfile.TemporaryDirectory(prefix="checker-warm-") as tmp:
            correct = Path(tmp, "correct")
            write_lines(correct, seed=1, n_lines=self.warm_lines)
            sim = simulate(2, n_ops=200, consumers=2)  # the consumer checks compile too
            for entries in sim.final.values():  # a hole where an entry was: the exact checks run
                del entries[len(entries) // 2]
            broken = sim.write(Path(tmp, "broken"))
            for _ in range(self.warm_rounds):
                for folder in (correct, broken):
                    check_many([ResultsDir.open(folder)], self.spark)

    def status(self) -> dict[str, Any]:
        return {
            "ok": True,
            "state": self.state,
            "master": self.master,
            "checks": self.checks,
            "pid": os.getpid(),
        }

    def answer(self, req: Any, progress: Progress | None = None) -> dict[str, Any]:
        """The reply to one request (a check tells `progress` how it goes); a failed check never
        stops the service."""
        op = req.get("op") if isinstance(req, dict) else None
        if op == "ping":
            return self.status()
        if op == "stop":
            self.stopped.set()
            return {"ok": True}
        if op not in ("check", "load") or not isinstance(req.get("results_dir"), str):
            expected = "expected op ping, check, load or stop"
            return _failure(EXIT_BAD_ARGS, f"bad request {str(req)[:200]!r}: {expected}")
        from checkers.checks.anomalies import DEFAULT_WITNESSES

        witnesses = req.get("witnesses", DEFAULT_WITNESSES)
        if not isinstance(witnesses, int) or witnesses < 0:
            return _failure(EXIT_BAD_ARGS, f"witnesses must be a number 0 or more, not {witnesses!r}")
        if op == "load":
            from checkers.engine.preload import PARTS

            part = req.get("part", "history")
            if part not in PARTS:
                return _failure(EXIT_BAD_ARGS, f"bad part {part!r}: expected one of {', '.join(PARTS)}")
            return self._load(Path(req["results_dir"]), part, witnesses)
        return self._check(Path(req["results_dir"]), witnesses, progress)

    def _load(self, results_dir: Path, part: Part, witnesses: int) -> dict[str, Any]:
        from checkers.checks.check import internal_error
        from checkers.engine.preload import PRELOADED
        from checkers.layout import ResultsDir

        with self._lock:
            if self.spark is None:
                return _failure(EXIT_INTERNAL, f"no Spark: {self.failure}")
            try:
                PRELOADED.load(self.spark, ResultsDir.open(results_dir), part, witnesses=witnesses)
            except InputError as e:
                return _failure(EXIT_BAD_ARGS, str(e))
            except Exception as e:  # the check will meet it again and report it
                return _failure(EXIT_INTERNAL, internal_error(e, self.master))
        return {"ok": True}

    def _check(self, results_dir: Path, witnesses: int, progress: Progress | None) -> dict[str, Any]:
        from checkers.checks.check import check, internal_error

        with self._lock:
            started = time.monotonic()
            try:
                result = check(results_dir, spark_master=self.master, witnesses=witnesses, progress=progress)
            except InputError as e:
                _log(f"{results_dir}: {e}")
                return _failure(EXIT_BAD_ARGS, str(e))
            except Exception as e:  # the service outlives a failed check
                message = internal_error(e, self.master)
                _log(f"{results_dir}: {message}")
                return _failure(EXIT_INTERNAL, message)
            self.checks += 1
        _log(f"{results_dir}: valid={result['valid']} in {time.monotonic() - started:.1f} s")
        return {"ok": True, "result": result}


def _failure(code: int, message: str) -> dict[str, Any]:
    return {"ok": False, "exit": code, "error": message}


def _log(message: str) -> None:
    print(f"checker service: {message}", file=sys.stderr, flush=True)


class _Handler(socketserver.StreamRequestHandler):
    def handle(self) -> None:
        line = self.rfile.readline(MAX_REQUEST)
        try:
            req = json.loads(line)
        except ValueError:
            reply = _failure(EXIT_BAD_ARGS, "a request is one JSON object on one line")
        else:
            service: Service = self.server.service  # type: ignore[attr-defined]
            with service.idle.busy():
                reply = service.answer(req, self._progress)
        self.wfile.write((json.dumps(reply) + "\n").encode())

    def _progress(self, message: str) -> None:
        """A progress line to the client; one that hung up misses it, the check goes on."""
        with contextlib.suppress(OSError):
            self.wfile.write((json.dumps({"progress": message}) + "\n").encode())
            self.wfile.flush()


class _Server(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    daemon_threads = True


def serve(path: Path, master: str | None, warm_lines: int, warm_rounds: int, *, parent: int | None = None,
          idle_s: float | None = None) -> int:
    """Listen at `path` until stopped (`--stop`, SIGTERM or Ctrl-C), process `parent` exits or no
    request came for `idle_s` seconds; 254 if one already listens."""
    running = ping(path)
    if running is not None:
        _log(
            f"one already listens at {path} (pid {running['pid']}); stop it: python -m checkers serve --stop"
        )
        return EXIT_BAD_ARGS
    if path.exists() and not stat.S_ISSOCK(path.stat().st_mode):
        _log(f"{path} exists and is not a socket; pass another --socket")
        return EXIT_BAD_ARGS
    path.unlink(missing_ok=True)  # a stale socket from a service that died
    service = Service(master, warm_lines, warm_rounds, idle_s)
    try:
        server = _Server(str(path), _Handler)
    except OSError as e:  # a missing folder, no permission, a path over the 107 bytes a socket takes
        _log(f"cannot listen at {path}: {e.strerror or e}; pass another --socket")
        return EXIT_BAD_ARGS
    server.service = service  # type: ignore[attr-defined]
    os.chmod(path, 0o600)
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: service.stopped.set())
    threading.Thread(target=server.serve_forever, name="checker-service", daemon=True).start()
    _log(f"listening at {path}")
    if parent is not None:
        on_exit(parent, lambda: _stop(service, f"process {parent}, which started it, exited"))
    try:
        threading.Thread(target=service.start, name="checker-warm-up", daemon=True).start()
        while not service.stopped.wait(1.0):
            if service.idle.expired():
                _stop(service, f"no request for {service.idle.limit_s:g} s")
    finally:
        server.shutdown()
        server.server_close()
        path.unlink(missing_ok=True)
        if service.spark is not None:
            service.spark.stop()
        _log("stopped")
    return EXIT_INTERNAL if service.failure else EXIT_VALID


def _stop(service: Service, why: str) -> None:
    _log(f"stopping: {why}")
    service.stopped.set()


def add_place_arguments(parser: argparse.ArgumentParser, socket_help: str) -> None:
    """--socket and --spark-master, as `serve` and `check` take them."""
    parser.add_argument("--socket", type=Path, metavar="PATH", help=socket_help)
    parser.add_argument(
        "--spark-master",
        metavar="URL",
        help="Spark master, e.g. spark://127.0.0.1:7077 (default: $SPARK_MASTER, else local[*])",
    )


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_place_arguments(
        parser, "Unix socket to listen at (default: $CHECKER_SOCKET, else dledger-checker-<uid>.sock in /tmp)"
    )
    parser.add_argument(
        "--warm-lines",
        type=non_negative,
        default=DEFAULT_WARM_LINES,
        metavar="N",
        help=f"lines of the synthetic history checked to warm up (default {DEFAULT_WARM_LINES}; 0: none)",
    )
    parser.add_argument(
        "--warm-rounds",
        type=non_negative,
        default=DEFAULT_WARM_ROUNDS,
        metavar="N",
        help=f"how many times the warm-up checks its histories (default {DEFAULT_WARM_ROUNDS})",
    )
    parser.add_argument(
        "--parent",
        type=int,
        metavar="PID",
        help="stop when process PID exits (a service started for a test suite or by a check)",
    )
    parser.add_argument(
        "--idle-timeout",
        type=non_negative,
        default=0,
        metavar="S",
        help="stop after S seconds with no request (default 0: never)",
    )
    action = parser.add_mutually_exclusive_group()
    action.add_argument("--stop", action="store_true", help="stop the service listening at the socket")
    action.add_argument("--status", action="store_true", help="print the status of the service at the socket")


def run(args: argparse.Namespace) -> int:
    path: Path = args.socket or default_socket()
    if args.stop or args.status:
        status = ping(path)
        if status is None:
            print(f"serve: no checker service answers at {path}", file=sys.stderr)
            return EXIT_BAD_ARGS
        if args.stop:
            request(path, {"op": "stop"}, timeout=PING_TIMEOUT_S)
        print(json.dumps(status))
        return EXIT_VALID
    return serve(path, args.spark_master, args.warm_lines, args.warm_rounds, parent=args.parent,
                 idle_s=args.idle_timeout or None)
