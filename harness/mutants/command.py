"""`python -m harness mutants`: the catalogue of seeded node bugs, and how well the harness catches them.

`list` shows the catalogue; `path NAME` prints the directory of a mutant's copy of `nodes/` (to
replay a simulator seed there); `hunt [NAME ...]` measures each mutant: the simulator's default
rotation (and the flags aimed at it), the default end-to-end run for up to `--run-seeds` seeds
and its nightly cell, into `<results-dir>/mutants-<time>/` (`mutants.json` and `table.md`,
rewritten after each mutant, so an interrupted hunt leaves what it measured). Exit 0 when every
mutant hunted was caught by something, 1 when one escaped everything, 2 when interrupted.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from pathlib import Path
from typing import Any

from harness.mutants import e2e, simhunt
from harness.mutants.build import mutant_tree
from harness.mutants.catalogue import CATALOGUE, mutant
from harness.mutants.model import Mutant
from harness.mutants.table import markdown
from nodes.cliparse import EXIT_INVALID, EXIT_UNKNOWN, EXIT_VALID, UsageError

RUN_KINDS = ("default", "cell")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("action", choices=("list", "path", "hunt"), metavar="ACTION",
                        help="list: the catalogue; path: the directory of each named mutant's copy of "
                             "nodes/; "
                             "hunt: measure what catches each named mutant (default: every one)")
    parser.add_argument("names", nargs="*", metavar="NAME", help="mutants (`path` needs one)")
    parser.add_argument("--sim-seeds", type=int, default=2000,
                        help="hunt: simulator seeds per search, 0 for none (default 2000)")
    parser.add_argument("--runs", default="default,cell",
                        help="hunt: end-to-end runs: default (make chaos's flags), cell (the nightly cell "
                             "meant "
                             "to catch it), both comma-separated, or none (default default,cell)")
    parser.add_argument("--run-seeds", type=int, default=3,
                        help="hunt: seeds each kind of run tries (default 3)")
    parser.add_argument("--start", type=int, default=None,
                        help="hunt: first seed of every search (default: a fresh one, in mutants.json)")
    parser.add_argument("--jobs", type=int, default=2, help="hunt: simulator worker processes (default 2)")
    parser.add_argument("--results-dir", type=Path, default=Path("results"),
                        help="hunt: where its folder goes (default results)")


def run(args: argparse.Namespace) -> int:
    if args.action == "list":
        for m in CATALOGUE:
            print(f"{m.name:36} {m.family:12} {m.what}")
        return EXIT_VALID
    if args.action == "path":
        if not args.names:
            raise UsageError("path: name a mutant (see `python -m harness mutants list`)")
        for name in args.names:
            print(mutant_tree(_named(name)))
        return EXIT_VALID
    return _hunt(args)


def _named(name: str) -> Mutant:
    try:
        return mutant(name)
    except KeyError as e:
        raise UsageError(str(e.args[0])) from None


def _hunt(args: argparse.Namespace) -> int:
    kinds = [] if args.runs == "none" else args.runs.split(",")
    if any(k not in RUN_KINDS for k in kinds):
        raise UsageError(f"--runs {args.runs}: use default, cell, both comma-separated, or none")
    if args.sim_seeds < 0 or args.run_seeds < 1 or args.jobs < 1:
        raise UsageError("--sim-seeds must be 0 or more, --run-seeds and --jobs at least 1")
    mutants = [_named(n) for n in args.names] if args.names else list(CATALOGUE)
    start = args.start if args.start is not None else random.SystemRandom().randrange(2**31)
    out = args.results_dir / f"mutants-{time.strftime('%Y%m%d-%H%M%S')}"
    out.mkdir(parents=True)
    report: dict[str, object] = {"start": start, "sim_seeds": args.sim_seeds, "runs": kinds,
                                 "run_seeds": args.run_seeds, "mutants": []}
    rows: list[dict[str, object]] = report["mutants"]  # type: ignore[assignment]
    print(f"mutants: hunting {len(mutants)} seeded bugs from seed {start}; results in {out}", file=sys.stderr)
    try:
        for k, m in enumerate(mutants, 1):
            rows.append(_hunt_one(m, args, kinds, start, out, f"[{k}/{len(mutants)}]"))
            _write(out, report)
    except KeyboardInterrupt:
        print(f"interrupted: {len(rows)} of {len(mutants)} hunted, in {out}", file=sys.stderr)
        return EXIT_UNKNOWN
    print(markdown(rows))
    print(f"\nresults: {out / 'table.md'}", file=sys.stderr)
    return EXIT_VALID if all(_caught(row) for row in rows) else EXIT_INVALID


def _hunt_one(m: Mutant, args: argparse.Namespace, kinds: list[str], start: int, out: Path,
              step: str) -> dict[str, object]:
    row: dict[str, object] = {"name": m.name, "family": m.family, "what": m.what}
    if args.sim_seeds:
        print(f"mutants {step} {m.name}: simulator, {args.sim_seeds} seeds", file=sys.stderr, flush=True)
        row["sim"] = [f.as_dict() for f in simhunt.hunt(m, args.sim_seeds, start, args.jobs)]
    seeds = [start + i for i in range(args.run_seeds)]
    for kind in kinds:
        print(f"mutants {step} {m.name}: {kind} run, up to {len(seeds)} seeds", file=sys.stderr, flush=True)
        row[kind] = e2e.hunt(m, kind, seeds, out).as_dict()
    return row


def _caught(row: dict[str, Any]) -> bool:  # a row of _hunt_one: JSON values
    sims = row.get("sim") or []
    runs = [row[k] for k in RUN_KINDS if k in row]
    return any(f["violating"] for f in sims) or any(r["caught_at"] for r in runs)


def _write(out: Path, report: dict[str, object]) -> None:
    (out / "mutants.json").write_text(json.dumps(report, indent=1) + "\n")
    (out / "table.md").write_text(markdown(report["mutants"]) + "\n")  # type: ignore[arg-type]
