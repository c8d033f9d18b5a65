"""Damage the newest of a stopped process's files as a failing disk does, and print what changed.

    python3 damage.py --dir /var/lib/dledger --glob 'etcd/member/wal/*.wal' \
        --mode bitflip|truncate|zero-tail --seed N

For systems whose file formats the harness does not parse (a NATS stream's `msgs/*.blk`, etcd's
`member/wal/*.wal`): stdlib only. The file is the one matching `--glob` under `--dir` that was
written last (by modification time, then name). Its written content ends at its last non-zero
byte (etcd preallocates its WAL files with zeros); the damage falls in the last `--tail` bytes
of that content:

* `bitflip`: flips one bit of one byte;
* `truncate`: cuts the file short there;
* `zero-tail`: zeroes the file's written content from there on.

The JSON printed names the file (relative to `--dir`), the offset, how many bytes changed, its
size before and after and the written end; with no matching file, or nothing written in it,
nothing is changed and the JSON says so (`"changed": false`).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
from pathlib import Path
from typing import Any

MODES = ("bitflip", "truncate", "zero-tail")
TAIL = 4096
CHUNK = 1 << 16


def newest(folder: Path, pattern: str) -> Path | None:
    """The file matching `pattern` under `folder` written last (then the greatest name), or None."""
    found = [path for path in folder.glob(pattern) if path.is_file()]
    return max(found, key=lambda path: (path.stat().st_mtime_ns, path.name)) if found else None


def written_end(path: Path) -> int:
    """One past the file's last non-zero byte (0 when it holds only zeros)."""
    size = path.stat().st_size
    with path.open("rb") as f:
        end = size
        while end > 0:
            start = max(0, end - CHUNK)
            f.seek(start)
            chunk = f.read(end - start).rstrip(b"\0")
            if chunk:
                return start + len(chunk)
            end = start
    return 0


def damage(folder: Path, pattern: str, mode: str, rng: random.Random, tail: int = TAIL) -> dict[str, Any]:
    """Apply one damage to the newest file of `pattern` under `folder`; the JSON-able account."""
    if mode not in MODES:
        raise ValueError(f"mode {mode!r}: choose from {', '.join(MODES)}")
    path = newest(folder, pattern)
    if path is None:
        return {"changed": False, "mode": mode, "glob": pattern, "reason": "no file matches"}
    end = written_end(path)
    if end == 0:
        return {"changed": False, "mode": mode, "path": str(path.relative_to(folder)),
                "reason": "nothing written"}
    at = rng.randrange(max(0, end - tail), end)
    size_before = path.stat().st_size
    with path.open("r+b") as f:
        f.seek(at)
        byte = f.read(1)[0]
        if mode == "bitflip":
            bit = rng.randrange(8)
            f.seek(at)
            f.write(bytes([byte ^ (1 << bit)]))
            changed, detail = 1, {"bit": bit}
        elif mode == "truncate":
            f.truncate(at)
            changed, detail = end - at, {}
        else:
            f.seek(at)
            f.write(bytes(end - at))
            changed, detail = end - at, {}
        f.flush()
        os.fsync(f.fileno())
    return {"changed": True, "mode": mode, "path": str(path.relative_to(folder)), "offset": at,
            "length": changed, "written_end": end, **detail,
            "file_size": {"before": size_before, "after": path.stat().st_size}}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dir", required=True, type=Path, help="the node's data directory")
    parser.add_argument("--glob", required=True, help="the files to damage, relative to --dir")
    parser.add_argument("--mode", required=True, choices=MODES)
    parser.add_argument("--seed", type=int, default=0, help="seeds the offset and bit")
    parser.add_argument("--tail", type=int, default=TAIL, help="damage within this many last written bytes")
    args = parser.parse_args(argv)
    print(json.dumps(damage(args.dir, args.glob, args.mode, random.Random(args.seed), args.tail)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
