"""`python -m harness compare`: the same seeded chaos test against each design (`--modes`), then one
table of what each lost and how available it stayed.

Every mode runs the same flags, seed and fault schedule (`python -m harness run` for each,
one after the other), so the differences are the designs'. Columns: the verdict,
acknowledged appends, acknowledged appends lost, consumed-then-lost entries, recovered
entries (informational), the other anomalies, the share of client ops that succeeded while
faults were in force, the longest stretch with no successful append during a fault, the
longest consumer stall during a fault, and acknowledged appends per second. The table goes
to stdout and, with each run's report, to `<results-dir>/compare/<time>/compare.json` and
`compare.txt`. Exit 0 once every mode ran and was checked, whatever its verdict (an
ASYNC_MASTER is expected to lose writes); 255 when a run could not finish.
"""

from __future__ import annotations

import argparse
import copy
import json
import random
import sys
import time
from pathlib import Path
from typing import Any

from harness.chaos import flags
from harness.chaos.modes import MODES
from harness.containers.cluster import connect
from nemesis import catalogue
from nodes.cliparse import EXIT_INTERNAL, UsageError

HEADLINE = ("lost", "consumed-then-lost", "recovered")
COLUMNS = (("mode", "mode"), ("verdict", "verdict"), ("acknowledged", "acked"), ("lost", "lost"),
           ("consumed-then-lost", "consumed-lost"), ("recovered", "recovered"), ("other", "other anomalies"),
           ("ok_share_in_faults", "ok in faults"), ("longest_outage_s", "outage s"),
           ("consumer_stall_s", "stall s"), ("throughput", "acks/s"))


# compare runs our node's modes
NOT_COMPARED = ("system", "mode", "mutant", "nats-sync-interval", "etcd-unsafe-no-fsync")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    flags.add_arguments(parser, without=NOT_COMPARED)
    parser.add_argument("--modes", default=",".join(MODES),
                        help=f"the modes to compare, comma-separated (default {','.join(MODES)})")


def run(args: argparse.Namespace) -> int:
    from harness.chaos.run import run_test

    modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    unknown = [m for m in modes if m not in MODES]
    if unknown or not modes:
        what = ", ".join(unknown) or "none given"
        raise UsageError(f"--modes: unknown {what}; choose from {', '.join(MODES)}")
    seed = args.seed if args.seed is not None else random.SystemRandom().randrange(2**31)
    runs: list[tuple[str, argparse.Namespace]] = []
    for mode in modes:
        mode_args = copy.copy(args)
        for flag in flags.FLAGS:  # the flags compare does not take: unset
            if flag.name in NOT_COMPARED:
                setattr(mode_args, flag.dest, False if flag.switch else None)
        mode_args.system, mode_args.mode, mode_args.seed, mode_args.test_count = "dledger", mode, seed, 1
        try:
            flags.validate(mode_args)
        except ValueError as e:
            raise UsageError(str(e)) from None
        runs.append((mode, mode_args))
    if runs[0][1].inventory is None:
        connect().close()  # a missing Docker engine: one sentence, before any run
    words = "-".join(catalogue.resolve_words(args.nemesis)) or "no-faults"
    rows = []
    for mode, mode_args in runs:
        print(f"== {mode} (seed {seed})", file=sys.stderr)
        code, run_dir = run_test(mode_args, mode_args.faults, args.name or f"compare-{mode}-{words}", seed)
        if code == EXIT_INTERNAL or getattr(mode_args, "interrupted", False):
            print(f"compare: the {mode} run did not finish; see {run_dir}", file=sys.stderr)
            return EXIT_INTERNAL
        rows.append(summarize(run_dir))
    out = args.results_dir / "compare" / time.strftime("%Y%m%dT%H%M%S")
    out.mkdir(parents=True, exist_ok=True)
    text = table(rows)
    (out / "compare.json").write_text(json.dumps({"seed": seed, "rows": rows}, indent=1) + "\n")
    (out / "compare.txt").write_text(text + "\n")
    print(text)
    print(f"compare: {out}")
    return 0


def summarize(run_dir: Path) -> dict[str, Any]:
    """One row of the table from a checked results folder."""
    from checkers.jsonlines import history_line_problem, records

    test = json.loads((run_dir / "test.json").read_text())
    results = json.loads((run_dir / "results.json").read_text())
    checks = results["checks"]
    acked = sum(1 for op in records(run_dir / "history.jsonl", history_line_problem)
                if op["f"] == "append" and op["type"] == "ok")
    faults = test.get("fault_log", {}).get("faults", [])
    during = {kind: sum(f["ops"][kind] for f in faults) for kind in ("ok", "fail", "info")}
    total = sum(during.values())
    other = {name: c["count"] for name, c in checks.items()
             if name not in HEADLINE and c.get("valid") is False}
    return {
        "mode": test.get("mode", "dledger"),
        "verdict": {True: "valid", False: "INVALID"}.get(results["valid"], "unknown"),
        "acknowledged": acked,
        **{name: checks.get(name, {}).get("count", 0) for name in HEADLINE},
        "other": other,
        "ok_share_in_faults": round(during["ok"] / total, 3) if total else None,
        "longest_outage_s": max((f["longest_no_append_s"] for f in faults), default=None),
        "consumer_stall_s": max((f.get("consumer_stall_s", 0.0) for f in faults), default=None),
        "throughput": round(acked / test["time_limit"], 1),
        "report": str(run_dir / "report.html"),
    }


def table(rows: list[dict[str, Any]]) -> str:
    """The rows as an aligned text table, with each run's report below."""
    def cell(value: Any) -> str:
        if isinstance(value, dict):
            return ", ".join(f"{k} {v}" for k, v in value.items()) or "-"
        return "-" if value is None else str(value)

    cells = [[title for _, title in COLUMNS]] + [[cell(row[key]) for key, _ in COLUMNS] for row in rows]
    widths = [max(len(line[i]) for line in cells) for i in range(len(COLUMNS))]
    lines = ["  ".join(text.ljust(w) for text, w in zip(line, widths, strict=True)).rstrip()
             for line in cells]
    return "\n".join([*lines, "", *(f"{row['mode']}: {row['report']}" for row in rows)])
