"""Remove what crashed runs left behind: containers, networks and volumes labelled by the harness.

`python -m harness clean` removes every run's leftovers; `--run ID` only one run's. Images
are kept (they are a cache; `docker rmi dledger-chaos/node dledger-chaos/base` drops them).
"""

from __future__ import annotations

import argparse

from harness.cluster import connect, remove_labelled


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--run", metavar="RUN_ID", help="only this run's resources (default: every run's)")


def run(args: argparse.Namespace) -> int:
    removed = remove_labelled(connect(), args.run)
    print(f"removed {removed.containers} containers, {removed.networks} networks, {removed.volumes} volumes")
    return 0
