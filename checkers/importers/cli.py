"""Import another tool's history (Jepsen, Porcupine kv) as results folders, one per key, for `check`.

Writes OUTDIR/<key>/ (history.jsonl and test.json) per key of FILE and OUTDIR/import.json,
prints per folder the key, its operations and what was cut; prints each refused key with the
reason. OUTDIR must not exist or be empty. Exit 0 when at least one folder was written, 254
when FILE cannot be imported (the message names its line) or OUTDIR is not empty, 255 on an
internal error.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from checkers.importers import jepsen, porcupine
from checkers.importers.writer import Folder, Imported, Refused, write
from nodes.cliparse import EXIT_BAD_ARGS, EXIT_INTERNAL

IMPORTERS = {"jepsen": jepsen.convert, "porcupine-kv": porcupine.convert}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "importer",
        choices=sorted(IMPORTERS),
        metavar="IMPORTER",
        help="the source's kind: jepsen (EDN or JSON: sends/polls, list append) or porcupine-kv",
    )
    parser.add_argument("file", type=Path, metavar="FILE", help="the history to import")
    parser.add_argument(
        "outdir", type=Path, metavar="OUTDIR", help="where to write one results folder per key (new or empty)"
    )


def run(args: argparse.Namespace) -> int:
    try:
        try:
            if not args.file.is_file():
                raise Refused("no such file")
            imported = IMPORTERS[args.importer](args.file)
        except Refused as e:
            raise Refused(f"{args.file}: {e}") from None
        written = write(imported, args.outdir)
    except Refused as e:
        print(f"import: refused: {e}", file=sys.stderr)
        return EXIT_BAD_ARGS
    except Exception as e:  # a bug of the importer: say what, in one line
        first = str(e).strip().splitlines()[0] if str(e).strip() else ""
        print(f"import: internal error: {type(e).__name__}: {first}", file=sys.stderr)
        return EXIT_INTERNAL
    report(imported, written)
    return 0


def report(imported: Imported, written: list[tuple[Folder, Path]]) -> None:
    """Per folder: the key, its operations and the notes; then each refused key and why."""
    for folder, path in written:
        print(f"key {folder.key!r} -> {path}: {folder.summary()}")
        for note in folder.notes:
            print(f"  {note}")
    for key, why in imported.refused.items():
        print(f"key {key!r}: refused: {why}")
    print(f"check each with: python -m checkers check {written[0][1].parent}/<key>")
