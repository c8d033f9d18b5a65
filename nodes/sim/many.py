"""Run many simulator seeds across cluster sizes, fault mixes and modes, within a time budget;
report seeds/s.

Seed `start + i` runs size `i mod sizes`, mix `i // sizes mod mixes` and mode `i mod modes`
(`nodes.sim.modes`: one mode a seed, e.g. `dledger*7,master-slave-sync`, the default, runs
a master-slave seed after every seven DLedger ones; eight is prime to the 57 size-and-mix
combinations of the defaults, so the master-slave seeds meet all of them). A mix is given
for every mode: a seed leaves out the faults its mode lacks (failover is master-slave's
only, transfer and votecrash DLedger's only).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections import Counter, deque
from collections.abc import Iterator
from multiprocessing.pool import AsyncResult, Pool
from pathlib import Path

from nodes.cliparse import EXIT_INTERNAL, EXIT_INVALID, EXIT_VALID
from nodes.logic import Durability
from nodes.sim.cli import add_common, cluster_size, flush_policy, positive
from nodes.sim.cluster import run_seed
from nodes.sim.compiled import ENGINES, choose, engine_here, worker_context
from nodes.sim.config import SimConfig
from nodes.sim.coverage import coverage_table
from nodes.sim.faults import parse_faults
from nodes.sim.handoffs import OUTCOMES, handoff_line, handoffs_in
from nodes.sim.modes import MODES, ROTATION, parse_rotation

MIXES = (
    # wide mixes: everything at once, and the three families of failure
    "all", "partition,crash,powerloss,repaircrash,failover", "oneway,bridge,loss,dup,delay",
    "crash,powerloss,skew,transfer,partition,leadercrash,repaircrash,failover",
    # leader churn: leaders killed mid catch-up (Figure 8), masters lost and slaves promoted
    "leaderkill,crash,leadercrash,repaircrash,failover", "leaderkill,crash,leadercrash",
    # narrow mixes, each fault often: states that a wide mix reaches too rarely
    "pause", "pause,partition", "pause,partition,crash",  # a frozen leader woken with reads queued
    "transfer,delay", "transfer,pause", "transfer,oneway,loss",  # leases across a handover
    "votecrash,leaderkill", "votecrash,pause",  # a node that voted restarts and stands
    "delay,dup,partition",  # stale vote requests and replies
    "powerloss,crash,leadercrash", "powerloss,partition,leaderkill",  # unflushed acknowledgements
    "powerloss,repaircrash,partition", "partition,crash,powerloss,repaircrash",  # torn tails, cut repairs
)  # 19 mixes: 57 size-and-mix combinations with sizes 3, 5, 7, prime to the rotation's 8 modes
DEFAULT_MODES = parse_rotation(ROTATION)


def configs(start: int, count: int | None, sizes: list[int], mixes: list[str], steps: int,
            durability: Durability, profile: str, clients: int,
            modes: tuple[str, ...] = DEFAULT_MODES) -> Iterator[SimConfig]:
    """Seed `start`, `start + 1` ...: sizes and modes rotate fastest, then fault mixes (module doc)."""
    seed = start
    while count is None or seed < start + count:
        i = seed - start
        mode = modes[i % len(modes)]
        yield SimConfig(seed=seed, nodes=sizes[i % len(sizes)],
                        faults=parse_faults(mixes[(i // len(sizes)) % len(mixes)], mode),
                        steps=steps, durability=durability, profile=profile, clients=clients, mode=mode)
        seed += 1


def _bounded(pool: Pool, source: Iterator[SimConfig], window: int,
             deadline: float) -> Iterator[Outcome]:
    """Results of `source` run on `pool`, never more than `window` queued, none started after `deadline`."""
    pending: deque[AsyncResult[Outcome]] = deque()
    for config in source:
        if time.monotonic() >= deadline:
            break
        pending.append(pool.apply_async(run_config, (config,)))
        if len(pending) >= window:
            yield pending.popleft().get()
    while pending:
        yield pending.popleft().get()


Outcome = tuple[int, str | None, str, Counter[str], Counter[str]]


def run_config(config: SimConfig) -> Outcome:
    """(seed, violation kind or None, summary when violated, rules fired, handed-over terms by
    who led them) for one seed."""
    result = run_seed(config)
    handoffs = handoffs_in(result.stats)
    if result.violation is None:
        return config.seed, None, "", result.coverage, handoffs
    return config.seed, result.violation.kind, result.summary(), result.coverage, handoffs


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--budget", type=float, default=300.0,
                        help="seconds to keep starting seeds (default 300)")
    parser.add_argument("--seeds", type=positive, help="stop after this many seeds (default: budget only)")
    parser.add_argument("--start", type=int, default=0, help="first seed (default 0)")
    parser.add_argument("--nodes", default="3,5,7", help="cluster sizes to rotate through (default 3,5,7)")
    parser.add_argument("--mixes", default=";".join(MIXES),
                        help="fault mixes to rotate through, separated by ';', each as simulate's --faults "
                             f"(default {';'.join(MIXES)})")
    chosen = parser.add_mutually_exclusive_group()
    chosen.add_argument("--modes", default=ROTATION,
                        help="modes to rotate through, one a seed: a comma list of "
                             f"{', '.join(MODES)}, each optionally *COUNT (default {ROTATION})")
    chosen.add_argument("--mode", choices=MODES, help="run every seed in this mode (short for --modes MODE)")
    parser.add_argument("--jobs", type=positive, default=min(2, os.cpu_count() or 1),
                        help="worker processes (default: 2, or 1 on one core)")
    parser.add_argument("--engine", choices=ENGINES, default="auto",
                        help="run the seeds on the compiled simulator (`make sim-build`), interpreted, or "
                             "compiled when it is built for these sources (default auto)")
    parser.add_argument("--json", type=Path, help="also write the figures to this JSON file")
    parser.add_argument("--show", type=positive, default=3,
                        help="print the full report of this many violations (default 3)")
    add_common(parser)


def run(args: argparse.Namespace) -> int:
    try:
        sizes = [cluster_size(s) for s in args.nodes.split(",")]
        mixes = [m for m in args.mixes.split(";") if m]
        modes = parse_rotation(_rotation(args))
        for mix in mixes:
            parse_faults(mix)
    except (ValueError, argparse.ArgumentTypeError) as exc:
        print(f"simulate-many: error: {exc}", file=sys.stderr)
        return 254
    build = choose(args.engine)
    started = time.monotonic()
    deadline = started + args.budget
    source = configs(args.start, args.seeds, sizes, mixes, args.steps, flush_policy(args.flush), args.profile,
                     args.clients, modes)
    done, violations = 0, []
    fired: Counter[str] = Counter()
    reached: Counter[str] = Counter()
    handoffs: Counter[str] = Counter()
    with worker_context(build) as context, context.Pool(args.jobs) as pool:
        engine = pool.apply(engine_here)
        if engine != ("compiled" if build else "interpreted"):
            print(f"simulate-many: error: the workers run {engine}, not from {build or 'the sources'}",
                  file=sys.stderr)
            return EXIT_INTERNAL
        for seed, kind, report, rules, handed in _bounded(pool, source, args.jobs * 2, deadline):
            done += 1
            fired.update(rules)
            handoffs.update(handed)
            reached.update(rules.keys())
            if kind is not None:
                violations.append((seed, kind))
                print(f"seed {seed}: VIOLATION {kind}", flush=True)
                if len(violations) <= args.show:
                    print(report, flush=True)
    elapsed = time.monotonic() - started
    rate = done / elapsed if elapsed > 0 else 0.0
    print(f"{done} seeds ({args.flush} flush, sizes {args.nodes}, {len(mixes)} fault mixes, "
          f"modes {_rotation(args)}, {args.steps} steps) in {elapsed:.1f} s on {args.jobs} {engine} workers: "
          f"{rate:.1f} seeds/s, {len(violations)} with a violation")
    print(handoff_line(handoffs))
    table = coverage_table(done, reached, fired)
    print(table.text)
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps({
            "seeds": done, "start": args.start, "flush": args.flush, "sizes": sizes, "mixes": mixes,
            "modes": _rotation(args),
            "steps": args.steps, "jobs": args.jobs, "engine": engine, "seconds": round(elapsed, 2),
            "seeds_per_second": round(rate, 2),
            "violations": [{"seed": s, "kind": k} for s, k in sorted(violations)],
            "coverage": table.rows,
            "handoffs": {o: handoffs[o] for o in OUTCOMES},
        }, indent=2) + "\n")
    return EXIT_VALID if not violations else EXIT_INVALID


def _rotation(args: argparse.Namespace) -> str:
    """The modes the seeds rotate through: `--mode`, else `--modes` (a caller's namespace may
    carry neither: the default rotation)."""
    mode = getattr(args, "mode", None)
    return mode if mode is not None else getattr(args, "modes", ROTATION)
