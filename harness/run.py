"""Run chaos tests against a DLedger cluster in containers, then check and report each one.

Phases of one test: setup → workload + nemesis for the time limit → heal everything → wait
(bounded) for a leader and catch-up → final reads from every node → collect files →
teardown → check → report. The results folder is complete even when a run is interrupted:
test.json and the history prefix are always there, and the cluster is always torn down.
"""

from __future__ import annotations

import argparse
import logging
import random
import shlex
import signal
import sys
import threading
import time
from pathlib import Path
from typing import Any

from harness.cluster import connect
from harness.errors import HarnessError
from harness.final import read_final_logs, wait_for_catch_up
from harness.generator import Mix, nemesis_schedule, parse_concurrency
from harness.history import History
from harness.nemesis_runner import NemesisRunner
from harness.progress import ProgressLine, run_status
from harness.results import create_run_dir, git_commit, point_latest, write_json
from harness.workload import WorkloadState, start_workers
from nemesis.catalogue import BUILDERS, NemesisOptions, build, parse_nemesis
from nodes.client import Client
from nodes.cliparse import EXIT_BAD_ARGS, EXIT_INTERNAL, EXIT_UNKNOWN, UsageError
from nodes.messages import ReadMode

log = logging.getLogger("harness")
REPO = Path(__file__).resolve().parent.parent


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--nodes", type=int, default=5, help="cluster size, 3 to 9 (default 5)")
    parser.add_argument("--time-limit", type=float, default=60, help="seconds of workload (default 60)")
    parser.add_argument(
        "--concurrency", default="2n", help="workers: a number, or Nn for N per node (default 2n)"
    )
    parser.add_argument(
        "--rate", type=float, default=500, help="target ops/s over all workers; 0 for no pacing"
    )
    parser.add_argument(
        "--nemesis",
        default="kill,partition",
        help=f"comma-separated faults from {', '.join(BUILDERS)}, or none (default kill,partition)",
    )
    parser.add_argument(
        "--nemesis-interval", type=float, default=10, help="seconds between fault changes (default 10)"
    )
    parser.add_argument(
        "--partition-shapes",
        default="isolate-leader,halves",
        help="partition shapes to draw from: isolate-leader, isolate-one, halves, bridge",
    )
    parser.add_argument(
        "--kill-targets",
        default="one,leader,minority",
        help="whom kill faults hit, drawn from: one, leader, minority",
    )
    parser.add_argument("--payload-size", type=int, default=100, help="bytes per appended body (default 100)")
    parser.add_argument("--flush", choices=("async", "sync"), default="sync", help="node flush policy")
    parser.add_argument(
        "--timing", choices=("default", "dledger"), default="default", help="node timing profile"
    )
    parser.add_argument(
        "--read-mode", choices=[m.label for m in ReadMode], default="read-index", help="how nodes serve reads"
    )
    parser.add_argument("--read-fraction", type=float, default=0.25, help="share of ops that are reads")
    parser.add_argument("--op-timeout", type=float, default=3.0, help="client timeout per op, seconds")
    parser.add_argument(
        "--catch-up-timeout",
        type=float,
        default=30.0,
        help="seconds to wait after healing for a leader and lagging nodes",
    )
    parser.add_argument("--seed", type=int, help="seed for every random choice (default: a fresh one)")
    parser.add_argument(
        "--test-count", type=int, default=1, help="run this many tests (seeds seed, seed+1, ...)"
    )
    parser.add_argument("--name", help="test name (default: dledger-<nemeses>)")
    parser.add_argument("--results-dir", type=Path, default=Path("results"), help="where results go")
    parser.add_argument("--witnesses", type=int, default=10, help="witnesses per anomaly in results.json")
    parser.add_argument("--spark-master", help="check on this Spark master instead of local mode")
    parser.add_argument(
        "--leave-running",
        action="store_true",
        help="leave the cluster up after the run (remove it with python -m harness clean)",
    )


def validate(args: argparse.Namespace) -> list[str]:
    """Parse the compound flags; returns the nemesis names. ValueError with a message when invalid."""
    if not 3 <= args.nodes <= 9:
        raise ValueError(f"--nodes {args.nodes}: give 3 to 9 nodes")
    for flag in ("time_limit", "op_timeout", "catch_up_timeout"):
        if getattr(args, flag) <= 0:
            raise ValueError(f"--{flag.replace('_', '-')} must be positive")
    if args.rate < 0 or args.nemesis_interval <= 0 or args.test_count < 1:
        raise ValueError("--rate must be >= 0, --nemesis-interval > 0 and --test-count >= 1")
    if not 0 <= args.read_fraction <= 1:
        raise ValueError("--read-fraction must be between 0 and 1")
    if args.payload_size < 0 or args.witnesses < 0:
        raise ValueError("--payload-size and --witnesses must not be negative")
    args.workers = parse_concurrency(args.concurrency, args.nodes)
    args.nemesis_options = NemesisOptions(
        partition_shapes=tuple(s.strip() for s in args.partition_shapes.split(",") if s.strip()),
        kill_targets=tuple(s.strip() for s in args.kill_targets.split(",") if s.strip()),
    )
    args.nemesis_options.validate()
    return parse_nemesis(args.nemesis)


def _terminate(signum: int, frame: object) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


def run(args: argparse.Namespace) -> int:
    """Run `--test-count` tests (a summary line each when more than one); the worst verdict's exit code.

    Bad flags raise `UsageError` (exit 254 with the usage) and a missing Docker engine raises
    `EngineUnavailable` (one sentence, exit 255), both before any results folder is made.
    """
    try:
        faults = validate(args)
    except ValueError as e:
        raise UsageError(str(e)) from None
    connect().close()
    seed = args.seed if args.seed is not None else random.SystemRandom().randrange(2**31)
    name = args.name or f"dledger-{'-'.join(faults) or 'no-faults'}"
    codes = []
    previous = signal.signal(signal.SIGTERM, _terminate)
    try:
        for i in range(args.test_count):
            code, run_dir = run_test(args, faults, name, seed + i)
            codes.append(code)
            if args.test_count > 1:
                verdict = VERDICT_WORDS.get(code, code)
                print(f"test {i + 1}/{args.test_count} seed {seed + i}: {verdict}  {run_dir}")
            if code in (EXIT_INTERNAL, EXIT_BAD_ARGS) or getattr(args, "interrupted", False):
                break
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_DFL if previous is None else previous)
    return max(codes, key=lambda c: SEVERITY.get(c, 0))


VERDICT_WORDS = {0: "valid", 1: "INVALID", 2: "unknown", 255: "error"}
SEVERITY = {0: 0, 2: 1, 1: 2, 255: 3}


def _configure_logging(run_dir: Path) -> logging.Handler:
    handler = logging.FileHandler(run_dir / "harness.log", encoding="utf-8")
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(threadName)s %(name)s: %(message)s"))
    root = logging.getLogger()
    root.setLevel(logging.INFO)
    root.addHandler(handler)
    for noisy in ("paramiko", "docker", "urllib3", "py4j", "matplotlib"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    return handler


REPLAYED_FLAGS = (
    "nodes",
    "time_limit",
    "concurrency",
    "rate",
    "nemesis",
    "nemesis_interval",
    "partition_shapes",
    "kill_targets",
    "payload_size",
    "flush",
    "timing",
    "read_mode",
    "read_fraction",
    "op_timeout",
)


def reproduce_command(args: argparse.Namespace, seed: int, name: str) -> str:
    """The command line that reruns this test's schedule."""
    parts = ["python", "-m", "harness", "run"]
    for flag in REPLAYED_FLAGS:
        value = getattr(args, flag)
        parts += [f"--{flag.replace('_', '-')}", f"{value:g}" if isinstance(value, float) else str(value)]
    return shlex.join([*parts, "--seed", str(seed), "--name", name])


def run_test(args: argparse.Namespace, faults: list[str], name: str, seed: int) -> tuple[int, Path]:
    """One test from setup to report; returns its exit code and results folder."""
    root: Path = args.results_dir
    run_dir = create_run_dir(root, name)
    point_latest(root, run_dir)
    handler = _configure_logging(run_dir)
    test: dict[str, Any] = {
        "name": name,
        "seed": seed,
        "nodes": args.nodes,
        "time_limit": args.time_limit,
        "concurrency": args.workers,
        "rate": args.rate,
        "nemesis": faults,
        "nemesis_interval": args.nemesis_interval,
        "partition_shapes": list(args.nemesis_options.partition_shapes),
        "kill_targets": list(args.nemesis_options.kill_targets),
        "payload_size": args.payload_size,
        "flush": args.flush,
        "timing": args.timing,
        "read_mode": args.read_mode,
        "read_fraction": args.read_fraction,
        "op_timeout": args.op_timeout,
        "git_commit": git_commit(REPO),
        "started": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "reproduce": reproduce_command(args, seed, name),
        "argv": sys.argv,
        "phases": {},
    }
    write_json(run_dir / "test.json", test)
    print(f"test {name}, seed {seed}: results in {run_dir}", file=sys.stderr)
    started = time.monotonic()
    try:
        outcome = TestRun(args, faults, seed, run_dir, test).execute()
    except KeyboardInterrupt:
        args.interrupted = True
        test["interrupted"] = True
        print(
            f"\ninterrupted: the cluster was torn down; the history prefix is in {run_dir}\n"
            f"check it with: python -m checkers check {run_dir}",
            file=sys.stderr,
        )
        outcome = EXIT_UNKNOWN
    except HarnessError as e:
        log.exception("run failed")
        test["error"] = str(e)
        print(f"error: {e}", file=sys.stderr)
        outcome = EXIT_INTERNAL
    finally:
        test["duration_s"] = round(time.monotonic() - started, 3)
        write_json(run_dir / "test.json", test)
        logging.getLogger().removeHandler(handler)
        handler.close()
    if outcome is None:
        outcome = check_and_report(args, run_dir)
    return outcome, run_dir


def check_and_report(args: argparse.Namespace, run_dir: Path) -> int:
    """Check the run with the Spark checker, write the report, print the verdict and its path."""
    from checkers.report import write_report
    from checkers.service import check_folder
    from checkers.verdict import exit_code, table

    print("checking ...", file=sys.stderr)
    result, checker = check_folder(run_dir, spark_master=args.spark_master, witnesses=args.witnesses)
    print(f"checked by {checker}", file=sys.stderr)
    report = write_report(run_dir)
    print(table(result))
    print(f"report: {report}")
    return exit_code(result["valid"])


class TestRun:
    """The phases of one test against one cluster."""

    def __init__(
        self, args: argparse.Namespace, faults: list[str], seed: int, run_dir: Path, test: dict[str, Any]
    ) -> None:
        self.args = args
        self.faults = faults
        self.seed = seed
        self.run_dir = run_dir
        self.test = test

    def phase(self, name: str, since: float) -> None:
        self.test["phases"][name] = round(time.monotonic() - since, 3)
        write_json(self.run_dir / "test.json", self.test)
        log.info("phase %s done in %.1f s", name, time.monotonic() - since)

    def execute(self) -> None:
        """Setup, workload, heal, final reads, collect; the Db is torn down whatever happens."""
        from harness.db import Db

        args = self.args
        serve_args = [
            "--flush",
            args.flush,
            "--timing",
            args.timing,
            "--read-mode",
            args.read_mode,
            "--segment-mb",
            "64",
        ]
        t = time.monotonic()
        db = Db(args.nodes, serve_args=serve_args, key_dir=self.run_dir / "ssh")
        self.test["run_id"] = db.run_id
        write_json(self.run_dir / "test.json", self.test)
        db.setup()
        try:
            db.start()
            self.test["first_leader"] = db.wait_for_leader(timeout=30)
            self.phase("setup", t)
            with History(self.run_dir / "history.jsonl") as history:
                self.workload(db, history)
            t = time.monotonic()
            with Client(db.network_peers(), timeout=args.op_timeout) as client:
                catch_up = wait_for_catch_up(client, db.names, args.catch_up_timeout)
                self.test["catch_up"] = {
                    "leader": catch_up.leader,
                    "commit_index": catch_up.commit_index,
                    "lagging": catch_up.lagging,
                    "seconds": round(catch_up.seconds, 3),
                }
                self.phase("catch-up", t)
                t = time.monotonic()
                self.test["final_logs"] = read_final_logs(client, db.names, self.run_dir / "final")
            self.phase("final-reads", t)
        finally:
            t = time.monotonic()
            try:
                db.collect(self.run_dir)
            except HarnessError as e:
                self.test["collect_error"] = str(e)
                log.warning("collect: %s", e)
            self.phase("collect", t)
            if args.leave_running:
                self.test["left_running"] = db.run_id
                print(
                    f"cluster {db.run_id} left running; client ports {db.client_peers()}; "
                    "remove it with: python -m harness clean",
                    file=sys.stderr,
                )
            else:
                db.teardown()

    def workload(self, db: Any, history: History) -> None:
        """Clients and nemesis for the time limit, then heal everything and restart dead nodes."""
        args = self.args
        t = time.monotonic()
        state = WorkloadState()
        nemeses = build(self.faults, db, args.nemesis_options)
        schedule = nemesis_schedule(self.seed, self.faults, args.nemesis_interval, args.time_limit)
        self.test["schedule"] = [[s.at, s.action, s.fault] for s in schedule]
        runner = NemesisRunner(nemeses, schedule, history, random.Random(f"{self.seed}/targets"))
        mix = Mix(payload_size=args.payload_size, read_fraction=args.read_fraction)
        leader_box: dict[str, str | None] = {"leader": self.test.get("first_leader")}

        def connect() -> Client:
            return Client(db.network_peers(), timeout=args.op_timeout)

        def render() -> str:
            leader_box["leader"] = db.leader(timeout=0.5)
            return run_status(t, args.time_limit, history.counts, runner.active(), leader_box["leader"])

        progress = ProgressLine(render)
        workers: list[threading.Thread] = []
        try:  # everything started inside, so an interrupt at any point still stops it all
            progress.start()
            workers += start_workers(args.workers, self.seed, args.rate, mix, history, state, connect)
            runner.start(t)
            state.stop.wait(args.time_limit)
        finally:
            state.stop.set()
            runner.stop(timeout=60)
            join_deadline = time.monotonic() + args.op_timeout + 5
            for worker in workers:
                worker.join(max(0.0, join_deadline - time.monotonic()))
            stuck = [w.name for w in workers if w.is_alive()]
            if stuck:
                log.warning("workers still in a call after the time limit: %s", stuck)
            progress.stop()
            self.phase("workload", t)
            t = time.monotonic()
            runner.heal_all(db)
            self.phase("heal", t)
        self.test["client_outcomes"] = dict(history.counts)
        self.test["achieved_rate"] = round(sum(history.counts.values()) / args.time_limit, 1)
        print(f"workload done: {history.counts} ({self.test['achieved_rate']} ops/s)", file=sys.stderr)
