"""The nightly sweep's simulator stage: `simulate-many` on seeds drawn fresh each night.

The night's seed is the first simulator seed (the sweep prints it), so each night tries seeds no
night tried before instead of one fixed range. The stage runs for its budget before the chaos
runs (the simulator takes every core), on the compiled simulator when it is built for these
sources. Its rows join the sweep's summary and junit.xml: one passing row for the clean seeds,
and one failing row per violating seed whose message carries the line that replays it.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

from harness.sweeps.summary import Row

WHY = "the simulator's safety and liveness properties hold on every seed"
SHOWN = 100  # violations whose full report (with its replay line) simulate-many prints


def replay_hint(seed: int) -> str:
    """How to rerun the stage's seeds by hand."""
    return f"python -m nodes simulate-many --start {seed} --budget SECONDS"


def run_simulator(seed: int, budget_s: float, out: Path) -> list[Row]:
    """Run the simulator from `seed` for `budget_s` seconds into `out/simulator.json`; its rows."""
    report = out / "simulator.json"
    argv = [sys.executable, "-m", "nodes", "simulate-many", "--start", str(seed), "--budget", f"{budget_s:g}",
            "--json", str(report), "--show", str(SHOWN)]
    print(f"nightly: simulator seeds from {seed} for {budget_s / 60:g} min", file=sys.stderr, flush=True)
    began = time.monotonic()
    with (out / "simulator.txt").open("w") as log:
        done = subprocess.run(argv, stdout=log, stderr=subprocess.STDOUT)
    took = round(time.monotonic() - began, 1)
    if not report.is_file():
        return [_row(seed, "error", "fail", f"simulator: simulate-many failed (exit {done.returncode}); see "
                     f"{out / 'simulator.txt'}", took, report)]
    figures = json.loads(report.read_text())
    replays = _replays((out / "simulator.txt").read_text())
    rows = [_row(v["seed"], "invalid", "fail", f"simulator seed {v['seed']}: {v['kind']}; replay: "
                 f"{replays.get(v['seed'], replay_hint(v['seed']))}", 0.0, report, replays.get(v["seed"]))
            for v in figures["violations"]]
    clean = f"simulator: {figures['seeds']} seeds from {seed}, {len(rows)} with a violation"
    print(f"nightly: {clean}", file=sys.stderr, flush=True)
    summary = _row(seed, "valid", "pass", None, took, report, replay_hint(seed), f"seeds {figures['seeds']}")
    return [summary, *rows]


def _replays(text: str) -> dict[int, str]:
    """seed -> the replay line simulate-many printed for it."""
    found = {}
    for line in text.splitlines():
        if line.startswith("replay: ") and " --seed " in line:
            found[int(line.split(" --seed ")[1].split()[0])] = line.removeprefix("replay: ")
    return found


def _row(seed: int, verdict: str, outcome: str, message: str | None, took: float, report: Path,
         reproduce: str | None = None, variant: str = "seed") -> Row:
    return Row(cell=f"simulator-{variant.replace(' ', '-')}", seed=seed, mode="simulator", expected="valid",
               verdict=verdict, outcome=outcome, control=False, why=WHY, known_risk=None, message=message,
               duration_s=took, run_dir=str(report), reproduce=reproduce)
