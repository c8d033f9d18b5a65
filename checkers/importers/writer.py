"""What the importers share: the refusal, one key's history as it is built, and writing OUTDIR.

A `Folder` takes the lines of one key's history in history order; `close_open` ends each
operation the source left without a completion with an `info` completion at the end (its
outcome is unknown). `write` puts every folder of an `Imported` source into a fresh OUTDIR at
once: it refuses an OUTDIR that exists and is not empty, and builds the folders beside it
first, so a refused or failed import leaves nothing behind.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

NO_COMPLETION = "no completion in the source"
UNFINISHED = "an invoke without a completion gets an info completion at the end of the history"
MANIFEST = "import.json"


class Refused(ValueError):
    """A source (or one key of it) that cannot be imported, with the reason naming its line."""


@dataclass
class Folder:
    """One key's history, built line by line in history order."""

    key: str
    lines: list[dict[str, Any]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # what the importer did to this key (cut, left out ...)
    source_ops: int = 0  # operations of the source that went into it
    _open: dict[int | str, dict[str, Any]] = field(default_factory=dict)
    _latest: int = 0

    def invoke(self, time: int, process: int | str, f: str, value: Any, source_line: int) -> None:
        """An invoke; `process` must have no operation open."""
        if process in self._open:
            raise AssertionError(f"process {process} invokes {f} with {self._open[process]['f']} open")
        self._open[process] = self._line("invoke", time, process, f, value, source_line)

    def complete(self, kind: str, time: int, process: int | str, f: str, value: Any, source_line: int,
                 error: str | None = None) -> None:
        """The completion (`ok`, `fail` or `info`) of `process`'s open `f`."""
        opened = self._open.pop(process)
        if opened["f"] != f:
            raise AssertionError(f"process {process} completes {f} with {opened['f']} open")
        line = self._line(kind, time, process, f, value, source_line)
        if error is not None:
            line["error"] = error

    def is_open(self, process: int | str) -> bool:
        return process in self._open

    def close_open(self, why: str = NO_COMPLETION, processes: list[int] | None = None) -> int:
        """End the open operation of each of `processes` (default: every one) with an info completion
        at the end of the history, its error `why`, its value the invoke's (a nemesis's: null, as for a
        fault that did not take effect); how many it ended."""
        opened = [(p, line) for p, line in self._open.items() if processes is None or p in processes]
        for process, line in opened:
            value = None if process == "nemesis" else line["value"]
            self.complete("info", self._latest, process, line["f"], value, line["source_line"], why)
        return len(opened)

    def counts(self) -> dict[str, Counter[str]]:
        """f -> completions by type (nemesis operations under `nemesis`)."""
        found: dict[str, Counter[str]] = {}
        for line in self.lines:
            if line["type"] != "invoke":
                f = "nemesis" if line["process"] == "nemesis" else line["f"]
                found.setdefault(f, Counter())[line["type"]] += 1
        return found

    def summary(self) -> str:
        """`append 6 (ok 4, fail 0, info 2), read 3 (...)`: the operations of each kind, by outcome."""
        parts = []
        for f, by_type in sorted(self.counts().items()):
            if f == "nemesis":
                parts.append(f"nemesis {sum(by_type.values())}")
            else:
                outcomes = ", ".join(f"{t} {by_type[t]}" for t in ("ok", "fail", "info"))
                parts.append(f"{f} {sum(by_type.values())} ({outcomes})")
        return "; ".join(parts) or "no operations"

    def _line(self, kind: str, time: int, process: int | str, f: str, value: Any,
              source_line: int) -> dict[str, Any]:
        line = {"index": len(self.lines), "time": time, "type": kind, "process": process, "f": f,
                "value": value, "source_line": source_line}
        self.lines.append(line)
        self._latest = max(self._latest, time)
        return line


@dataclass
class Imported:
    """What an importer made of a source file: a folder per key, and the keys it refused."""

    importer: str
    path: Path
    fmt: str  # the source's format: "edn" or "json"
    folders: list[Folder]
    refused: dict[str, str] = field(default_factory=dict)  # key -> why
    mapping: dict[str, str] = field(default_factory=dict)  # test.json source's word on each choice made


def write(imported: Imported, outdir: Path) -> list[tuple[Folder, Path]]:
    """Write each folder to OUTDIR/<key>/ (history.jsonl, test.json) and OUTDIR/import.json."""
    if not imported.folders:
        raise Refused(f"{imported.path}: nothing to import: every key was refused "
                      f"({'; '.join(f'{k}: {why}' for k, why in imported.refused.items())})")
    if outdir.exists() and (not outdir.is_dir() or any(outdir.iterdir())):
        raise Refused(f"{outdir}: exists and is not empty; pass a new folder (an import never writes into "
                      "an earlier one)")
    digest = sha256(imported.path)
    names = folder_names([f.key for f in imported.folders])
    outdir.parent.mkdir(parents=True, exist_ok=True)
    staging = outdir.parent / f".{outdir.name}.importing-{os.getpid()}"
    shutil.rmtree(staging, ignore_errors=True)
    try:
        for folder, name in zip(imported.folders, names, strict=True):
            (staging / name).mkdir(parents=True)
            with (staging / name / "history.jsonl").open("w", encoding="utf-8") as out:
                for line in folder.lines:
                    out.write(json.dumps(line, separators=(",", ":")) + "\n")
            test = test_json(imported, folder, name, digest)
            (staging / name / "test.json").write_text(json.dumps(test, indent=1) + "\n")
        manifest = {
            "importer": imported.importer,
            "file": str(imported.path),
            "sha256": digest,
            "folders": dict(zip([f.key for f in imported.folders], names, strict=True)),
            "refused": imported.refused,
        }
        (staging / MANIFEST).write_text(json.dumps(manifest, indent=1) + "\n")
        if outdir.exists():
            outdir.rmdir()
        staging.rename(outdir)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return [(folder, outdir / name) for folder, name in zip(imported.folders, names, strict=True)]


def test_json(imported: Imported, folder: Folder, name: str, digest: str) -> dict[str, Any]:
    """An imported folder's test.json: the history is all its evidence, held to linearizability."""
    return {
        "name": f"{imported.importer}-{imported.path.stem}-{name}",
        "read_mode": "linearizable",
        "inputs": ["history"],
        "source": {
            "importer": imported.importer,
            "file": str(imported.path),
            "sha256": digest,
            "format": imported.fmt,
            "key": folder.key,
            "ops": folder.source_ops,
            "notes": folder.notes,
            "mapping": imported.mapping,
        },
    }


def plural(n: int, word: str) -> str:
    """`1 operation`, `2 operations`."""
    return f"{n} {word}{'' if n == 1 else 's'}"


def folder_names(keys: list[str]) -> list[str]:
    """A folder name per key: the key with anything but letters, digits, `.`, `_` and `-` made `_`;
    `-2`, `-3` ... when two keys come out the same."""
    names: list[str] = []
    taken: set[str] = set()  # lower case: folders differing in case alone clash on some file systems
    for key in keys:
        base = re.sub(r"[^A-Za-z0-9._-]", "_", key).strip(".") or "_"
        name, n = base, 1
        while name.lower() in taken or name == MANIFEST:
            n += 1
            name = f"{base}-{n}"
        names.append(name)
        taken.add(name.lower())
    return names


def sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()
