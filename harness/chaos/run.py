"""Run chaos tests against a DLedger cluster, in containers or on the hosts of an inventory
(`--hosts`), then check and report each one.

Phases of one test: setup → workload + nemesis for the time limit → heal everything → wait
(bounded) for a leader and catch-up → final reads from every node → collect files →
check → teardown → report. Most of the check runs while the test ends (`Preload`): the
history is loaded once the last fault is stopped, the final logs once they are read, and
the screen runs over both while the files are collected; the verdict comes before the
teardown. The results folder is complete
even when a run is interrupted: test.json and the history prefix are always there, and the
cluster is always torn down.
"""

from __future__ import annotations

import argparse
import logging
import queue
import random
import signal
import sys
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Any

from checkers.run.afterrun import AfterRun
from harness.chaos import flags
from harness.chaos.consumers import Puller, start_consumers
from harness.chaos.generator import QUIET_END, Mix, Slotted, nemesis_schedule, sure_time_limit
from harness.chaos.history import History
from harness.chaos.modes import read_choices
from harness.chaos.nemesis_runner import NemesisRunner
from harness.chaos.progress import LeaderWatch, ProgressLine, run_status
from harness.chaos.results import create_run_dir, git_commit, point_latest, write_json
from harness.chaos.rundb import RunDb, check_hosts, open_db
from harness.chaos.workload import LeaseGate, LogClient, WorkloadState, start_workers
from harness.containers.cluster import connect
from harness.errors import HarnessError, HostsRefused, SshRefused
from nemesis import catalogue
from nodes.cliparse import EXIT_BAD_ARGS, EXIT_INTERNAL, EXIT_UNKNOWN, UsageError

if TYPE_CHECKING:
    from checkers.engine.preload import Part

log = logging.getLogger("harness")
REPO = Path(__file__).resolve().parents[2]
WARM_LINES = 1_000  # the warm-up compiles the queries: its time hardly depends on the lines


def add_arguments(parser: argparse.ArgumentParser) -> None:
    flags.add_arguments(parser)


def _terminate(signum: int, frame: object) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


def run(args: argparse.Namespace) -> int:
    """Run `--test-count` tests (a summary line each when more than one); the worst verdict's exit code.

    Bad flags (and a bad `--hosts` inventory) raise `UsageError` (exit 254 with the usage) and a
    missing Docker engine raises `EngineUnavailable` (one sentence, exit 255), both before any
    results folder is made. With `--hosts`, every host is probed first: one that refuses the
    login or lacks what the faults need exits 254, one that cannot be reached 255.
    """
    try:
        flags.validate(args)
    except ValueError as e:
        raise UsageError(str(e)) from None
    faults = args.faults
    if args.inventory is None:
        connect().close()
    else:
        try:
            check_hosts(args.inventory, faults)
        except (HostsRefused, SshRefused) as e:
            print(f"error: {e}", file=sys.stderr)
            return EXIT_BAD_ARGS
    if args.test_count > 1:
        warm_checker(args.spark_master)
    seed = args.seed if args.seed is not None else random.SystemRandom().randrange(2**31)
    name = args.name or "-".join([*([f"mutant-{args.mutant}"] if args.mutant else []),
                                  args.mode or args.system,
                                  "-".join(catalogue.resolve_words(args.nemesis)) or "no-faults"])
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


def warm_checker(spark_master: str | None) -> None:
    """Start Spark and run the checker's queries once on a small synthetic history, in the background,
    so the first run's check finds the JVM warm; every check after reuses that session (a process has
    one). Nothing when a checker service answers: the checks go there."""
    from checkers.service.server import Service, default_socket, serving

    if serving(default_socket(), spark_master) is None:
        warm = Service(spark_master, warm_lines=WARM_LINES, warm_rounds=1)
        threading.Thread(target=warm.start, name="checker-warm-up", daemon=True).start()


def _configure_logging(run_dir: Path) -> logging.Handler:
    handler = logging.FileHandler(run_dir / "harness.log", encoding="utf-8")
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(threadName)s %(name)s: %(message)s"))
    root = logging.getLogger()
    root.setLevel(logging.INFO)
    root.addHandler(handler)
    for noisy in ("paramiko", "docker", "urllib3", "py4j", "matplotlib"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    return handler


def run_test(args: argparse.Namespace, faults: list[str], name: str, seed: int) -> tuple[int, Path]:
    """One test from setup to report; returns its exit code and results folder."""
    root: Path = args.results_dir
    run_dir = create_run_dir(root, name)
    point_latest(root, run_dir)
    handler = _configure_logging(run_dir)
    test: dict[str, Any] = {
        "name": name,
        "seed": seed,
        **flags.replayed(args, faults),
        "concurrency": args.workers + args.consumers,  # client threads: process mod this is the thread
        "workers": args.workers,
        "nemesis": faults,
        **({"faults_left_out": args.left_out} if args.left_out else {}),
        "faults": catalogue.vocabulary(faults),
        "inputs": list(args.under_test.inputs),
        "git_commit": git_commit(REPO),
        **({"inventory": args.inventory.record()} if args.inventory else {}),
        "started": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "reproduce": flags.reproduce_command(args, faults, seed, name),
        "argv": sys.argv,
        "phases": {},
    }
    write_json(run_dir / "test.json", test)
    print(f"test {name}, seed {seed}: results in {run_dir}", file=sys.stderr)
    for family, why in args.left_out.items():
        print(f"note: --system {args.system} leaves out {family}: {why}", file=sys.stderr)
    started = time.monotonic()
    run = TestRun(args, faults, seed, run_dir, test)
    outcome: int | None = None  # an exit code when the run itself failed, else the verdict's below
    try:
        try:
            run.execute()
        except KeyboardInterrupt:
            args.interrupted = True
            test["interrupted"] = True
            print(
                f"\ninterrupted: tearing the cluster down; the history prefix is in {run_dir}\n"
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
            if "history_wall_ns" in test:
                try:
                    test["fault_log"] = run.fault_log()
                except (OSError, ValueError, KeyError) as e:
                    log.exception("fault log")
                    test["fault_log_error"] = str(e)
                    run.after = None  # the report reads the files itself, and says what is wrong
            write_json(run_dir / "test.json", test)
        result = None if outcome is not None else check_run(args, run_dir, run.preload)
    finally:
        run.teardown()
        logging.getLogger().removeHandler(handler)
        handler.close()
    if result is not None:
        outcome = report(run_dir, result, run.after)
    assert outcome is not None  # no exit code from the run: it was checked, and the verdict's is set
    return outcome, run_dir


def check_run(args: argparse.Namespace, run_dir: Path, preload: Preload | None = None) -> dict[str, Any]:
    """Check the run with the Spark checker (once `preload` is done) and print the verdict."""
    from checkers.checkcli import say_progress
    from checkers.checks.verdict import table
    from checkers.service.server import check_folder

    print("checking ...", file=sys.stderr)
    if preload is not None:
        preload.join()
    result, checker = check_folder(run_dir, spark_master=args.spark_master, witnesses=args.witnesses,
                                   progress=say_progress)
    print(f"checked by {checker}", file=sys.stderr)
    print(table(result))
    return result


def report(run_dir: Path, result: dict[str, Any], after: AfterRun | None = None) -> int:
    """Write the run's report from its verdict and its after-run readers (None: read the files now),
    print its path; the verdict's exit code."""
    from checkers.checks.verdict import exit_code
    from checkers.pages.report import write_report

    print(f"report: {write_report(run_dir, result, after)}")
    return exit_code(result["valid"])


class Preload:
    """Loads a run's history and final logs for its check in the background, each once the run
    says it is written (`ready`), and screens them (`checkers.engine.preload`)."""

    def __init__(self, run_dir: Path, spark_master: str | None, witnesses: int) -> None:
        self.run_dir = run_dir
        self.spark_master = spark_master
        self.witnesses = witnesses
        self._parts: queue.SimpleQueue[Part | None] = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._load, name="check-preload", daemon=True)
        self._thread.start()

    def ready(self, part: Part) -> None:
        """`part` is written: load it (after the parts before it)."""
        self._parts.put(part)

    def join(self) -> None:
        """Wait for the parts said ready to be loaded."""
        self._parts.put(None)
        self._thread.join()

    def _load(self) -> None:
        from checkers.service.server import preload_folder

        while (part := self._parts.get()) is not None:
            try:
                where = preload_folder(self.run_dir, part, spark_master=self.spark_master,
                                       witnesses=self.witnesses)
            except Exception:  # the check meets the same trouble and reports it
                log.exception("loading the %s ahead of the check", part)
            else:
                log.info("%s loaded for the check in %s", part, where)


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
        self.db: RunDb | None = None
        self.preload: Preload | None = None
        self.after: AfterRun | None = None  # the after-run readers (fault log, report): `history_written`
        self.history_read: Future[None] | None = None  # their pass over the history

    def phase(self, name: str, since: float) -> None:
        self.test["phases"][name] = round(time.monotonic() - since, 3)
        write_json(self.run_dir / "test.json", self.test)
        log.info("phase %s done in %.1f s", name, time.monotonic() - since)

    def execute(self) -> None:
        """Setup, workload, heal, final reads, collect; `teardown` removes the cluster after.

        Once the last fault is stopped (the history is complete) the history's loading for the
        check, and the after-run readers' pass over it, start in the background (`history_written`);
        the final logs' loading once the final reads are done.
        """
        args = self.args
        system = args.under_test
        t = time.monotonic()
        db = open_db(args.inventory, args.nodes, self.run_dir, self.faults, system, keep=args.keep)
        self.test["run_id"] = db.run_id
        write_json(self.run_dir / "test.json", self.test)
        db.setup()
        self.db = db
        try:
            db.start()
            system.prepare(db)
            self.test["first_leader"] = db.wait_for_leader(timeout=30)
            self.phase("setup", t)
            with History(self.run_dir / "history.jsonl") as history:
                self.test["history_wall_ns"] = history.start_wall_ns
                self.workload(db, history)
            t = time.monotonic()
            finish = system.finish(db, self.run_dir / "final", args.catch_up_timeout, args.op_timeout)
            self.test["catch_up"] = finish.catch_up
            self.test["final_logs"] = finish.final_logs
            assert self.preload is not None  # started when the last fault was stopped
            self.preload.ready("finals")
            self.test["phases"]["catch-up"] = caught_s = finish.catch_up.get("seconds") or 0.0
            self.phase("final-reads", t + caught_s)
        finally:
            t = time.monotonic()
            try:
                db.collect(self.run_dir)
            except HarnessError as e:
                self.test["collect_error"] = str(e)
                log.warning("collect: %s", e)
            self.phase("collect", t)

    def history_written(self) -> None:
        """Start loading the history for the check, and the after-run readers' pass over it."""
        self.preload = Preload(self.run_dir, self.args.spark_master, self.args.witnesses)
        self.preload.ready("history")
        self.after = AfterRun(self.run_dir, self.test, for_fault_log=True)
        reader = ThreadPoolExecutor(1, thread_name_prefix="after-run")
        self.history_read = reader.submit(self.after.read_history)
        reader.shutdown(wait=False)

    def fault_log(self) -> dict[str, Any]:
        """The fault log, from the after-run readers' pass over the history (begun by
        `history_written`, else made now) and then over the nodes' events."""
        if self.history_read is None:
            self.after = AfterRun(self.run_dir, self.test, for_fault_log=True)
            self.after.read_history()
        else:
            self.history_read.result()
        assert self.after is not None
        self.after.read_events()
        return self.after.fault_log()

    def teardown(self) -> None:
        """Remove the cluster (or leave it running with `--leave-running`); safe when never set up."""
        if self.db is None:
            return
        if self.args.leave_running:
            self.test["left_running"] = self.db.run_id
            write_json(self.run_dir / "test.json", self.test)
            print(self.db.left_running(), file=sys.stderr)
        else:
            self.db.teardown()

    def overtime(self, runner: NemesisRunner, state: WorkloadState) -> None:
        """A nemesis behind its schedule (fault ops slower than planned, as on a loaded machine)
        gets up to one more time limit to run the rest, then the quiet end the schedule promised."""
        if runner.finish(0):
            return
        print(f"the nemesis is {runner.late:.1f} s behind its schedule: the workload goes on until its "
              f"last fault has stopped", file=sys.stderr)
        since = time.monotonic()
        if runner.finish(self.args.time_limit):
            state.stop.wait(self.args.nemesis_interval * QUIET_END)
        self.test["overtime_s"] = round(time.monotonic() - since, 3)

    def workload(self, db: RunDb, history: History) -> None:
        """Clients and nemesis for the time limit, then heal everything and restart dead nodes."""
        args = self.args
        t = time.monotonic()
        system = args.under_test
        state = WorkloadState(leases=LeaseGate(system.lease_quiet_s()))
        families = {name: catalogue.FAMILIES[name] for name in self.faults}
        faults = catalogue.build(self.faults, db, args.fault_options)
        slotted = [Slotted(f.name, f.weight, f.instant, args.fault_options[f.repeat] if f.repeat else None)
                   for f in families.values()]
        schedule = nemesis_schedule(self.seed, slotted, args.nemesis_interval, args.time_limit,
                                    args.nemesis_concurrency)
        self.test["schedule"] = [[s.at, s.action, s.fault] for s in schedule]
        if self.faults and not schedule:
            print(f"warning: the nemesis schedule holds no fault: --time-limit {args.time_limit:g} leaves no "
                  f"slot of --nemesis-interval {args.nemesis_interval:g} at this seed (one always fits from "
                  f"{sure_time_limit(args.nemesis_interval):g} s); the verdict will say no fault ran",
                  file=sys.stderr)
        runner = NemesisRunner(families, faults, schedule, history, random.Random(f"{self.seed}/targets"),
                               state.leases)
        mix = Mix(payload_size=args.payload_size, read_fraction=args.read_fraction,
                  read_modes=read_choices(args.read_mode),
                  nodes=tuple(db.names) if system.directed_reads else ())
        watch = LeaderWatch(self.test.get("first_leader"))

        def connect() -> LogClient:
            return system.client(db, args.op_timeout)

        def puller() -> Puller:
            return system.puller(db, args.op_timeout)

        def render() -> str:
            watch.see(db.leader(timeout=0.5))
            return run_status(t, args.time_limit, history.counts, runner.active(), watch.leader,
                              watch.changes)

        progress = ProgressLine(render)
        workers: list[threading.Thread] = []
        try:  # everything started inside, so an interrupt at any point still stops it all
            progress.start()
            threads = args.workers + args.consumers
            workers += start_workers(args.workers, self.seed, args.rate, mix, history, state, connect,
                                     threads)
            workers += start_consumers(args.consumers, args.workers, threads, db.names, self.seed, history,
                                       state.stop, puller)
            runner.start(t)
            state.stop.wait(args.time_limit)
            self.overtime(runner, state)
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
            runner.stop_faults()
            history.close()  # complete: the heal below writes no line
            if sys.exc_info()[0] is None:  # an interrupted run is not checked
                self.history_written()
            left = runner.heal_all(db)
            self.test["nemesis_errors"] = runner.errors
            self.test["nemesis_late_s"] = round(runner.late, 3)
            if unrun := runner.unrun():
                self.test["nemesis_unrun"] = unrun
            if runner.exited:
                self.test["exited_at_start"] = runner.exited
                log.warning("nodes the system would not start again: %s", ", ".join(sorted(runner.exited)))
            self.phase("heal", t)
        if left:
            self.test["heal_leftovers"] = left
            raise HarnessError(f"healing left faults in force: {left}")
        self.test["client_outcomes"] = dict(history.counts)
        self.test["directed_read_refusals"] = history.refused_directed
        if args.consumers:
            self.test["consume_outcomes"] = dict(history.consumes)
        self.test["achieved_rate"] = round(sum(history.counts.values()) / self.test["phases"]["workload"], 1)
        print(f"workload done: {history.counts} ({self.test['achieved_rate']} ops/s)", file=sys.stderr)
        if runner.errors:
            print(f"warning: {len(runner.errors)} fault op(s) could not take effect: {runner.errors[:3]}",
                  file=sys.stderr)
