"""`python -m harness nightly`: the nightly sweep: chaos tests over every fault family, mode, flush
policy and both cluster sizes, with must-fail controls, within a time budget.

The cells and how the budget picks them are in `harness/sweeps/matrix.py` (`--dry-run` lists the pick
and its estimate, running nothing). Each run goes through `harness run`'s own code, in this
process, one after the other; one Spark session, started in the background as the sweep
begins, checks them all. Everything lands in `<results-dir>/nightly-<YYYYmmdd-HHMMSS>/`: each
run's folder, `summary.json`, `summary.html` and `junit.xml` (one test case per run). One line
per run start and end goes to stderr.

With `--hosts hosts.toml` the runs go to the machines of that inventory instead of containers
(a cell runs on its first `nodes` hosts). The hosts are probed first: a cell that needs more
nodes than the inventory names, or faults the hosts cannot do, is skipped (`harness.hosts.sweep`),
its reason in the summary and a `<skipped>` test case in junit.xml; the budget goes to the
cells that can run.

Exit 0 when every run got the verdict its cell expects (a known risk that came true is only
reported), 1 when any did not (a control that came back valid: the harness lost its teeth),
2 when interrupted before that could be said (Ctrl-C and SIGTERM still write the summary of
what ran), 254 on bad arguments (and hosts that refuse the login, cannot run any test, or can
run none of the chosen cells), 255 on an internal error.
"""

from __future__ import annotations

import argparse
import random
import signal
import sys
import time
import traceback
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from harness.chaos import flags
from harness.chaos.results import git_commit
from harness.containers.cluster import connect
from harness.errors import HostsRefused, SshRefused
from harness.hosts import sweep
from harness.hosts.inventory import InventoryError, load_inventory
from harness.mutants.cells import tonight
from harness.sweeps import matrix, simulator
from harness.sweeps.junit import write_junit
from harness.sweeps.matrix import Cell
from harness.sweeps.summary import Row, counts, row_of, skipped_row, write_summary
from nodes.cliparse import EXIT_BAD_ARGS, EXIT_INTERNAL, EXIT_INVALID, EXIT_UNKNOWN, EXIT_VALID, UsageError

REPO = Path(__file__).resolve().parents[2]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--budget-min", type=float, default=45.0,
                        help="minutes the sweep may take, estimated (default 45; the controls always run)")
    parser.add_argument("--seeds", type=int, default=1, help="seeds each chosen cell runs with (default 1)")
    parser.add_argument("--seed", type=int, default=None,
                        help="the first seed; the others follow it (default: a fresh one, in summary.json)")
    parser.add_argument("--results-dir", type=Path, default=Path("results"),
                        help="where the sweep's folder goes (default results)")
    parser.add_argument("--only", metavar="SUBSTRING[,...]",
                        help="only the cells whose name contains one of these (comma-separated)")
    parser.add_argument("--mutants", type=int, default=3,
                        help="seeded node bugs run as must-fail cells, a different few each night "
                             "(default 3; containers only; see `python -m harness mutants list`)")
    parser.add_argument("--sim-min", type=float, default=5.0,
                        help="minutes of simulator seeds drawn fresh each night, before the runs (default 5; "
                             "0 for none)")
    parser.add_argument("--dry-run", action="store_true", help="list the cells the budget picks, run nothing")
    parser.add_argument("--hosts", metavar="FILE",
                        help="run on the machines of this inventory (TOML) over SSH instead of containers; "
                             "cells they cannot run (more nodes than hosts, faults the hosts lack) are "
                             "skipped, with the reason")


def run(args: argparse.Namespace) -> int:
    if args.budget_min <= 0 or args.seeds < 1 or args.mutants < 0 or args.sim_min < 0:
        raise UsageError("--budget-min must be positive, --seeds at least 1, --mutants and --sim-min "
                         "0 or more")
    cells = matrix.chosen(args.only)
    if not cells:
        raise UsageError(f"--only {args.only}: no cell's name contains that (see --dry-run)")
    try:
        skipped = skips(cells, args.hosts)
    except (HostsRefused, SshRefused) as e:
        print(f"error: {e}", file=sys.stderr)
        return EXIT_BAD_ARGS
    if len(skipped) == len(cells):
        reasons = "\n".join(f"  {name}: {why}" for name, why in skipped.items())
        print(f"error: the hosts of {args.hosts} can run none of the chosen cells:\n{reasons}",
              file=sys.stderr)
        return EXIT_BAD_ARGS
    runnable = [cell for cell in cells if cell.name not in skipped]
    seed = args.seed if args.seed is not None else random.SystemRandom().randrange(2**31)
    mutants = [] if args.hosts else [c for c in tonight(seed, args.mutants) if matrix.matches(c, args.only)]
    budget_s = args.budget_min * 60 - args.sim_min * 60 - args.seeds * sum(c.estimate_s for c in mutants)
    picked = [*mutants, *matrix.plan(runnable, budget_s, args.seeds)]
    runs = [(cell, seed + i) for cell in picked for i in range(args.seeds)]
    for cell, run_seed in runs:  # a cell the run command refuses is a bug of the matrix: before anything runs
        run_args(cell, run_seed, args.results_dir, args.hosts)
    print(describe([*mutants, *cells], picked, args.budget_min, args.seeds, seed, skipped))
    if args.sim_min:
        print(f"simulator: {args.sim_min:g} min of seeds from {seed} first ({simulator.replay_hint(seed)})")
    if args.dry_run:
        return EXIT_VALID
    if args.hosts is None:
        connect().close()  # a missing Docker engine: one sentence, before any folder is made
    out = args.results_dir / f"nightly-{time.strftime('%Y%m%d-%H%M%S')}"
    out.mkdir(parents=True)
    sim_rows = simulator.run_simulator(seed, args.sim_min * 60, out) if args.sim_min else []
    meta = {"name": out.name, "seed": seed, "seeds": args.seeds, "budget_min": args.budget_min,
            "only": args.only, "hosts": args.hosts, "estimate_s": sum(cell.estimate_s for cell, _ in runs),
            "git_commit": git_commit(REPO)}
    skipped_rows = [skipped_row(cell, seed + i, skipped[cell.name]) for cell in cells if cell.name in skipped
                    for i in range(args.seeds)]
    return execute(runs, out, meta, skipped_rows, args.hosts, sim_rows)


def skips(cells: list[Cell], hosts: str | None) -> dict[str, str]:
    """{cell name: why the hosts of the inventory `hosts` cannot run it}; none without hosts (containers).

    UsageError for an inventory with a mistake; see `harness.hosts.sweep.probe` for the hosts' own errors."""
    if hosts is None:
        return {}
    try:
        inventory = load_inventory(Path(hosts))
    except InventoryError as e:
        raise UsageError(str(e)) from None
    facts = sweep.probe(inventory)
    reasons = {cell.name: sweep.why_not(cell, inventory, facts) for cell in cells}
    return {name: why for name, why in reasons.items() if why}


def run_args(cell: Cell, seed: int, results_dir: Path, hosts: str | None = None) -> argparse.Namespace:
    """The `harness run` arguments of one run of `cell` (on the inventory `hosts`, when given), validated;
    ValueError if they are bad."""
    argv = [*cell.argv(), "--seed", str(seed), "--results-dir", str(results_dir), "--name", cell.name,
            *(["--hosts", hosts] if hosts else [])]
    return flags.parsed(argv, f"nightly cell {cell.name}")


def describe(cells: list[Cell], picked: list[Cell], budget_min: float, seeds: int, seed: int,
             skipped: dict[str, str] | None = None) -> str:
    """The plan as text: each chosen cell with its expectation and estimate, then what is left out, then
    the cells the hosts cannot run (`skipped`: their reasons)."""
    skipped = skipped or {}
    total = seeds * sum(cell.estimate_s for cell in picked)
    lines = [f"nightly: {len(picked)} of {len(cells)} cells within {budget_min:g} min, {seeds} seed(s) each "
             f"from seed {seed}: about {total / 60:.1f} min"]
    for k, cell in enumerate(picked, 1):
        tag = "control" if cell.control else "known risk" if cell.known_risk else ""
        line = f"{k:>4}  {cell.name:<50} expects {cell.expect:<8} {cell.estimate_s:>4.0f} s  {tag}"
        lines.append(line.rstrip())
    controls = seeds * sum(cell.estimate_s for cell in picked if cell.control)
    if controls > budget_min * 60:
        lines.append(f"warning: the controls alone take about {controls / 60:.1f} min, more than the budget")
    left = [cell.name for cell in cells if cell not in picked and cell.name not in skipped]
    if left:
        lines.append(f"left out (over the budget): {', '.join(left)}")
    lines += [f"skipped: {name}: {why}" for name, why in skipped.items()]
    return "\n".join(lines)


def execute(runs: list[tuple[Cell, int]], out: Path, meta: dict[str, Any], skipped: Sequence[Row] = (),
            hosts: str | None = None, before: Sequence[Row] = ()) -> int:
    """Run `runs` one after the other (on the inventory `hosts`, when given), then write the summary (the
    `before` rows first, the simulator's; the `skipped` rows after the runs'), also after an interrupt;
    the exit code."""
    warm_checker()
    rows: list[Row] = []
    began, started = time.monotonic(), time.strftime("%Y-%m-%dT%H:%M:%S%z")
    interrupted = False
    previous = signal.signal(signal.SIGTERM, _terminate)
    try:
        for k, (cell, seed) in enumerate(runs, 1):
            _progress(k, runs, rows, began, f"start {cell.name} seed {seed}: expects {cell.expect}")
            row, interrupted = run_one(cell, seed, out, rows, hosts)
            if row is not None:
                rows.append(row)
                _progress(k, runs, rows, began, f"{row.outcome} {cell.name} seed {seed}: {row.verdict} "
                                                f"(expected {cell.expect}) in {row.duration_s:.0f} s")
            if interrupted:
                break
    except KeyboardInterrupt:
        interrupted = True
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_DFL if previous is None else previous)
        meta.update(started=started, finished=time.strftime("%Y-%m-%dT%H:%M:%S%z"), interrupted=interrupted,
                    not_run=[f"{cell.name} seed {seed}" for cell, seed in runs[len(rows):]])
        every = [*before, *rows, *skipped]
        summary, html = write_summary(out, every, meta)
        junit = write_junit(out / "junit.xml", every, "nightly", started)
    for row in every:
        if row.message:
            print(f"nightly: {row.outcome}: {row.message}", file=sys.stderr)
    tally = counts(every)
    outcomes = ", ".join(f"{n} {outcome}" for outcome, n in tally.items() if n) or "none"
    print(f"nightly: {len(rows)} runs: {outcomes}{'; interrupted' if interrupted else ''}\n"
          f"summary: {html}\n{summary}\n{junit}")
    if tally["fail"]:
        return EXIT_INVALID
    return EXIT_UNKNOWN if interrupted else EXIT_VALID


def run_one(cell: Cell, seed: int, out: Path, rows: list[Row],
            hosts: str | None = None) -> tuple[Row | None, bool]:
    """One run of `cell` through `harness run`'s code, and whether an interrupt cut it short. Its row is
    None when the interrupt came before it made a folder. A run that raises is that run's failure."""
    from harness.chaos.run import run_test

    args = run_args(cell, seed, out, hosts)
    t = time.monotonic()
    code, error, run_dir, interrupted = EXIT_UNKNOWN, None, None, False
    try:
        code, run_dir = run_test(args, args.faults, cell.name, seed)
    except KeyboardInterrupt:
        interrupted = True
    except Exception as e:  # the sweep goes on: a nightly reports every run
        traceback.print_exc()
        code, error = EXIT_INTERNAL, f"{type(e).__name__}: {e}"
    interrupted = interrupted or bool(getattr(args, "interrupted", False))
    run_dir = run_dir or _latest(out, rows)  # the folder of a run cut short, if it made one
    if run_dir is None and interrupted:
        return None, True
    return row_of(cell, seed, run_dir or out / cell.name, code, time.monotonic() - t, out, error=error,
                  interrupted=interrupted), interrupted


def warm_checker() -> None:
    """Warm the checker on the local master in the background (`harness.chaos.run.warm_checker`)."""
    from harness.chaos.run import warm_checker as start

    start(None)


def _latest(out: Path, rows: list[Row]) -> Path | None:
    """The folder of the run an interrupt cut short: `out/latest`, unless it is a finished run's."""
    latest = out / "latest"
    if not latest.is_symlink():
        return None
    run_dir = out / latest.readlink()
    return None if str(run_dir) in {row.run_dir for row in rows} else run_dir


def _progress(k: int, runs: list[tuple[Cell, int]], rows: list[Row], began: float, text: str) -> None:
    """One line: the run's number, what happened, the time so far and the estimate of the rest."""
    elapsed = time.monotonic() - began
    done_estimate = sum(cell.estimate_s for cell, _ in runs[:len(rows)])
    pace = elapsed / done_estimate if rows and done_estimate else 1.0
    eta = pace * sum(cell.estimate_s for cell, _ in runs[len(rows):])
    print(f"nightly [{k}/{len(runs)}] {text}  elapsed {_clock(elapsed)}, eta {_clock(eta)}", file=sys.stderr,
          flush=True)


def _clock(seconds: float) -> str:
    minutes, secs = divmod(int(seconds), 60)
    return f"{minutes}:{secs:02d}"


def _terminate(signum: int, frame: object) -> None:
    raise KeyboardInterrupt(f"signal {signum}")
