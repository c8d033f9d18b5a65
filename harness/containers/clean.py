"""Remove what crashed runs left behind: containers, networks and volumes labelled by the harness.

The rule is the label `dledger-chaos.run`: every run's resources carry it, and so do the
compose projects the test suite starts (tests/support/compose.py), so nothing an interrupted
`make test` started survives; a user's own compose cluster carries none and is never touched.

`python -m harness clean` removes every run's leftovers; `--run ID` only one run's.
`--images` also removes the cached images (base, node, seeded bugs, NATS, etcd; the next run
rebuilds them).
`--hosts hosts.toml` cleans the machines of an inventory instead: it stops the nodes, the
nemesis's agents and rules any run left there and removes the files and the copied code the
harness made (`--keep`: not the code); it exits 255 if anything of the harness is still there.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from harness.containers.cluster import connect, remove_labelled
from harness.containers.image import remove_images
from nodes.cliparse import EXIT_INTERNAL, UsageError


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--run", metavar="RUN_ID", help="only this run's resources (default: every run's)")
    parser.add_argument("--images", action="store_true",
                        help="also remove the cached images (base, node, mutant, NATS, etcd)")
    parser.add_argument("--hosts", metavar="FILE", help="clean the machines of this inventory instead")
    parser.add_argument("--keep", action="store_true", help="with --hosts: leave the copied code")


def run(args: argparse.Namespace) -> int:
    if args.hosts:
        if args.run or args.images:
            raise UsageError("--hosts cleans machines of an inventory: --run and --images are for containers")
        return clean_inventory(Path(args.hosts), args.keep)
    if args.keep:
        raise UsageError("--keep: only with --hosts")
    client = connect()
    removed = remove_labelled(client, args.run)
    print(f"removed {removed.containers} containers, {removed.networks} networks, {removed.volumes} volumes")
    if args.images:
        print(f"removed {remove_images(client)} images")
    return 0


def clean_inventory(path: Path, keep: bool) -> int:
    from harness.hosts.db import clean_hosts
    from harness.hosts.inventory import InventoryError, load_inventory

    try:
        inventory = load_inventory(path)
    except InventoryError as e:
        raise UsageError(str(e)) from None
    left = False
    for name, lines in clean_hosts(inventory, keep_code=keep).items():
        print(f"{name}: {'; '.join(lines) or 'nothing to remove'}")
        left = left or any(line.startswith("left: ") for line in lines)
    return EXIT_INTERNAL if left else 0
