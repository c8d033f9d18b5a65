"""Damage a stopped node's store files as a failing disk does, and print exactly what changed.

    python3 corrupt.py --dir /var/lib/dledger --file data|index --mode bitflip|truncate|zero-tail --seed N

Run while the node process is down. It walks the store's data files read-only with the
node's own modules (on the path in the image through a .pth file), picks one of the last
`--tail` sound entries of the last data file, and damages that entry's bytes in the data
file, or its 32-byte slot in the index file:

* `bitflip`: flips one bit of the entry (header or body) or of its slot;
* `truncate`: cuts the file short at a point inside the entry or slot (the store extends a
  short last data file with zeros and rebuilds an index file of the wrong length);
* `zero-tail`: zeroes the file's written content from a point inside the entry or slot on.

Truncate and zero-tail points are drawn so that at least one byte of the chosen entry
really changes. The JSON printed names the file, the offsets, the entry the damage starts
in (`first_changed` lies in it), the log's end before, and the end index recovery must
leave: the entry before the damaged one for data damage, unchanged for index damage (the
index is derived from the data and rebuilt from it). With no entry in the last data file
nothing is changed and the JSON says so (`"changed": false`).
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import random
import sys
from pathlib import Path
from typing import Any

from nodes.store.entrycodec import INDEX_SIZE
from nodes.store.entryscan import StoredEntry
from nodes.store.readfile import scan_store
from nodes.store.segments import is_segment_name

FILES = ("data", "index")
MODES = ("bitflip", "truncate", "zero-tail")
TAIL = 8
# (first byte, name) of each field, in order, from nodes.store.entrycodec's HEADER and INDEX
HEADER_FIELDS = ((0, "magic"), (4, "size"), (8, "index"), (16, "term"), (24, "pos"), (32, "channel"),
                 (36, "chain_crc"), (40, "body_crc"), (44, "body_len"), (48, "body"))
INDEX_FIELDS = ((0, "magic"), (4, "pos"), (12, "size"), (16, "index"), (24, "term"))


def segment_files(folder: Path) -> list[tuple[int, Path]]:
    """(starting offset, path) of the segment files in `folder`, by offset."""
    return sorted((int(e.name), Path(e.path)) for e in os.scandir(folder)
                  if e.is_file() and is_segment_name(e.name))


def tail_entries(store: Path, tail: int = TAIL) -> list[StoredEntry]:
    """The last `tail` sound entries (before any bad one) that lie in the last data file."""
    folder = store / "data"
    files = segment_files(folder) if folder.is_dir() else []
    if not files:
        return []
    last: collections.deque[StoredEntry] = collections.deque(maxlen=tail)
    for entry in scan_store(store):
        if not entry.ok:
            break
        last.append(entry)
    return [e for e in last if e.pos >= files[-1][0]]


def holder(folder: Path, offset: int) -> tuple[Path, int]:
    """The segment file of `folder` that holds absolute `offset`, and its starting offset."""
    for start, path in reversed(segment_files(folder)):
        if start <= offset < start + path.stat().st_size:
            return path, start
    raise FileNotFoundError(f"no file in {folder} holds offset {offset}")


def field_at(fields: tuple[tuple[int, str], ...], rel: int) -> str:
    return next(name for start, name in reversed(fields) if rel >= start)


def damage(store: Path, file: str, mode: str, rng: random.Random, tail: int = TAIL) -> dict[str, Any]:
    """Apply one damage to `store` (a stopped node's store directory); the JSON-able account."""
    if file not in FILES or mode not in MODES:
        raise ValueError(f"file {file!r} / mode {mode!r}: choose from {FILES} / {MODES}")
    entries = tail_entries(store, tail)
    if not entries:
        return {"changed": False, "file": file, "mode": mode, "reason": "no entry in the last data file"}
    end = entries[-1].index
    entry = rng.choice(entries)
    fields: tuple[tuple[int, str], ...]
    if file == "data":
        path, base = holder(store / "data", entry.pos)
        start, length, fields = entry.pos - base, entry.size, HEADER_FIELDS
        written = entries[-1].pos + entries[-1].size - base
        expect = entry.index - 1
    else:
        path, base = holder(store / "index", entry.index * INDEX_SIZE)
        start, length, fields = entry.index * INDEX_SIZE - base, INDEX_SIZE, INDEX_FIELDS
        written = min((end + 1) * INDEX_SIZE - base, path.stat().st_size)
        expect = end
    size_before = path.stat().st_size
    with path.open("r+b") as f:
        f.seek(start)
        region = f.read(length)
        if mode == "bitflip":
            at, bit = rng.randrange(length), rng.randrange(8)
            f.seek(start + at)
            f.write(bytes([region[at] ^ (1 << bit)]))
            cut, first, span = start + at, start + at, 1
            detail: dict[str, Any] = {"bit": bit, "field": field_at(fields, at)}
        else:
            nonzero = [i for i, byte in enumerate(region) if byte]
            at = rng.randint(0, nonzero[-1])
            cut, first, span = start + at, start + next(i for i in nonzero if i >= at), written - start - at
            detail = {"field": field_at(fields, first - start)}
            if mode == "truncate":
                f.truncate(cut)
            else:
                f.seek(cut)
                f.write(bytes(span))
        f.flush()
        os.fsync(f.fileno())
    return {
        "changed": True, "file": file, "mode": mode, "path": f"{file}/{path.name}",
        "offset": cut, "length": span, "first_changed": first, **detail,
        "file_size": {"before": size_before, "after": path.stat().st_size},
        "entry": {"index": entry.index, "term": entry.term, "pos": entry.pos, "size": entry.size},
        "end_index_before": end, "expect_end_index": expect,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dir", required=True, type=Path, help="the node's store directory (data/, index/)")
    parser.add_argument("--file", required=True, choices=FILES)
    parser.add_argument("--mode", required=True, choices=MODES)
    parser.add_argument("--seed", type=int, default=0, help="seeds which entry, byte and bit")
    parser.add_argument("--tail", type=int, default=TAIL, help="draw among this many last entries")
    args = parser.parse_args(argv)
    print(json.dumps(damage(args.dir, args.file, args.mode, random.Random(args.seed), args.tail)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
