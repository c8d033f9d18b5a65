"""Remove what crashed runs left behind: containers, networks and volumes labelled by the harness.

`python -m harness clean` removes every run's leftovers; `--run ID` only one run's.
`--images` also removes the cached base and node images (the next run rebuilds them).
"""

from __future__ import annotations

import argparse

from harness.cluster import connect, remove_labelled
from harness.image import remove_images


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--run", metavar="RUN_ID", help="only this run's resources (default: every run's)")
    parser.add_argument("--images", action="store_true", help="also remove the cached base and node images")


def run(args: argparse.Namespace) -> int:
    client = connect()
    removed = remove_labelled(client, args.run)
    print(f"removed {removed.containers} containers, {removed.networks} networks, {removed.volumes} volumes")
    if args.images:
        print(f"removed {remove_images(client)} images")
    return 0
