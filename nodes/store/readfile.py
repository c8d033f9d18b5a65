"""Print the entries of a store's data files (read-only, like DLedger's readFile).

`read_entries(directory)` is the library form: it never changes the files, works on a
copy taken from a node killed mid-write, and ends at a bad tail instead of raising;
`scan_store(directory)` also tells, once iterated, where and why the walk stopped.
"""

from __future__ import annotations

import argparse
import json
import mmap
import os
import sys
from collections.abc import Iterator
from pathlib import Path

from nodes.cliparse import EXIT_BAD_ARGS, EXIT_INTERNAL, EXIT_INVALID, EXIT_VALID
from nodes.payload import payload_id
from nodes.store.entryscan import Scan, SegmentView, StoredEntry
from nodes.store.segments import is_segment_name

__all__ = ["Scan", "StoredEntry", "read_entries", "scan_store"]


def data_directory(directory: str | Path) -> Path:
    """The data segment folder: `directory/data` for a store, else `directory` itself."""
    directory = Path(directory)
    return directory / "data" if (directory / "data").is_dir() else directory


def scan_store(directory: str | Path, data_segment_size: int | None = None) -> Scan:
    """A read-only walk of the data files under `directory` (a store or its `data` folder).

    The segment size defaults to the largest file's length (a killed node may leave the
    last file short).
    """
    base = data_directory(directory)
    if not base.is_dir():
        raise FileNotFoundError(f"{base} is not a directory")
    files = sorted((int(e.name), Path(e.path), e.stat().st_size) for e in os.scandir(base)
                   if e.is_file() and is_segment_name(e.name))
    size = data_segment_size or max((length for _, _, length in files), default=0)
    return Scan([SegmentView(offset, _map(path, length), size) for offset, path, length in files])


def read_entries(directory: str | Path) -> Iterator[StoredEntry]:
    """Every structurally sound entry of the store's data files, with CRC verdicts."""
    return iter(scan_store(directory))


def _map(path: Path, length: int) -> bytes | mmap.mmap:
    if length == 0:
        return b""
    with path.open("rb") as f:
        return mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--dir", required=True, type=Path,
                        help="store directory (holding data/) or a data folder of segment files")
    parser.add_argument("--index", type=int, help="print only the entry with this log index")
    parser.add_argument("--json", action="store_true", help="one JSON object per line")
    parser.add_argument("--segment-size", type=int,
                        help="data segment size in bytes (default: the largest file's length)")


def run(args: argparse.Namespace) -> int:
    if not data_directory(args.dir).is_dir():
        print(f"read-file: {args.dir} is not a directory; pass the store directory with --dir",
              file=sys.stderr)
        return EXIT_BAD_ARGS
    try:
        return _print(args)
    except Exception as exc:  # a crash here must still say what happened, with exit 255
        print(f"read-file: internal error: {exc!r}", file=sys.stderr)
        return EXIT_INTERNAL


def _print(args: argparse.Namespace) -> int:
    scan = scan_store(args.dir, args.segment_size)
    count = bad = 0
    first = last = None
    terms: set[int] = set()
    if not args.json:
        print(f"{'index':>8} {'term':>6} {'pos':>12} {'size':>7} magic body_crc chain_crc  id")
    for e in scan:
        count += 1
        bad += not e.ok
        first = e.index if first is None else first
        last = e.index
        terms.add(e.term)
        if args.index is not None and e.index != args.index:
            continue
        if args.json:
            print(json.dumps(_entry_json(e)))
        else:
            print(f"{e.index:>8} {e.term:>6} {e.pos:>12} {e.size:>7} {e.magic:>5} "
                  f"{_ok(e.body_crc_ok):>8} {_ok(e.chain_crc_ok):>9}  {payload_id(e.body)}")
    stop = scan.stop
    summary = {
        "entries": count, "first_index": first, "last_index": last,
        "min_term": min(terms, default=None), "max_term": max(terms, default=None),
        "bad_crc": bad, "tail_clean": bool(stop and stop.clean),
        "tail_pos": stop.pos if stop else None, "tail": stop.reason if stop else None,
    }
    found = args.index is None or (first is not None and first <= args.index <= last)
    if args.json:
        print(json.dumps({"summary": summary}))
    else:
        print(f"summary: {count} entries, index {first}..{last}, terms {summary['min_term']}.."
              f"{summary['max_term']}, {bad} failing a CRC; tail "
              f"{'clean' if summary['tail_clean'] else 'DAMAGED'} at pos {summary['tail_pos']}: "
              f"{summary['tail']}")
    if not found:
        print(f"read-file: index {args.index} is not in the store (it holds {first}..{last})",
              file=sys.stderr)
        return EXIT_INVALID
    return EXIT_VALID if bad == 0 and summary["tail_clean"] else EXIT_INVALID


def _ok(flag: bool) -> str:
    return "ok" if flag else "BAD"


def _entry_json(e: StoredEntry) -> dict[str, object]:
    return {"index": e.index, "term": e.term, "pos": e.pos, "size": e.size, "magic": e.magic,
            "channel": e.channel, "body_len": len(e.body), "id": payload_id(e.body),
            "body_crc_ok": e.body_crc_ok, "chain_crc_ok": e.chain_crc_ok}
