"""Re-render report.html of a results folder from its results.json and history, without re-checking.

Exits with the verdict results.json holds: 0 valid, 1 invalid, 2 unknown (also for a folder
never checked); 254 when the folder or one of its files is missing or malformed.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from checkers.checks.verdict import exit_code
from checkers.jsonlines import InputError
from checkers.pages.report import load_results, write_report
from nodes.cliparse import EXIT_BAD_ARGS


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("results_dir", type=Path, metavar="RESULTS_DIR",
                        help="a results folder holding history.jsonl (results/<test>/<time>/)")


def run(args: argparse.Namespace) -> int:
    try:
        results = load_results(args.results_dir)
        report = write_report(args.results_dir, results)
    except InputError as e:
        print(f"report: {e}", file=sys.stderr)
        return EXIT_BAD_ARGS
    if results is None:
        print(f"report: {args.results_dir} was never checked (no results.json); "
              f"check it with: python -m checkers check {args.results_dir}", file=sys.stderr)
    print(f"report: {report}")
    return exit_code(results["valid"] if results else "unknown")
