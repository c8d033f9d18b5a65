"""Check a results folder: durability and linearizability of the log, replicas, elections.

Checks on the checker service when one answers, else starts one in the background and checks
on it (it exits after 10 minutes without a request; `--local` or $CHECKER_AUTOSTART=0 check in
this process instead, `checkers.service.autostart`); writes
RESULTS_DIR/results.json and RESULTS_DIR/report.html with the verdict, prints a verdict
table, exits 0 valid, 1 invalid, 2 unknown, 254 on bad arguments or a missing/malformed
input file, 255 on internal error.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from checkers.checks.anomalies import DEFAULT_WITNESSES
from checkers.checks.check import internal_error
from checkers.checks.verdict import exit_code, table
from checkers.engine.spark import master_url
from checkers.jsonlines import InputError
from checkers.pages.report import write_report
from checkers.service import autostart
from checkers.service.server import add_place_arguments, check_folder
from nodes.cliparse import EXIT_BAD_ARGS, EXIT_INTERNAL, non_negative


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "results_dir",
        type=Path,
        metavar="RESULTS_DIR",
        help="a results folder holding history.jsonl (results/<test>/<time>/)",
    )
    add_place_arguments(
        parser, "checker service to use when it answers (default: $CHECKER_SOCKET, else the per-user one)"
    )
    parser.add_argument(
        "--local",
        action="store_true",
        help="check in this process: use no checker service and start none",
    )
    parser.add_argument(
        "--witnesses",
        type=non_negative,
        default=DEFAULT_WITNESSES,
        metavar="N",
        help=f"witnesses kept per check (default {DEFAULT_WITNESSES})",
    )


def say_progress(message: str) -> None:
    """A check's progress line, on standard error (the verdict table goes to standard output)."""
    print(f"checking: {message}", file=sys.stderr, flush=True)


def run(args: argparse.Namespace) -> int:
    try:
        result, checker = check_folder(
            args.results_dir,
            spark_master=args.spark_master,
            witnesses=args.witnesses,
            sock=args.socket,
            local=args.local,
            autostart=autostart.wanted(),
            progress=say_progress,
        )
        print(table(result))
        print(f"wrote {Path(args.results_dir) / 'results.json'} (checked by {checker})")
        print(f"report: {write_report(args.results_dir, result)}")
    except InputError as e:
        print(f"check: {e}", file=sys.stderr)
        return EXIT_BAD_ARGS
    except Exception as e:
        print(f"check: {internal_error(e, master_url(args.spark_master))}", file=sys.stderr)
        return EXIT_INTERNAL
    return exit_code(result["valid"])
