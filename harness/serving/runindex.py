"""The runs of a results folder (`results/<test>/<timestamp>/`), newest first, read from their
test.json and results.json."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from checkers.layout import read_json_object

STAMP = re.compile(r"^(\d{8}T\d{6})(?:-(\d+))?$")
VERDICTS = ("valid", "invalid", "unknown", "not checked")


@dataclass(frozen=True)
class Run:
    """One run folder as the index shows it."""

    path: str  # relative to the results folder, with `/`
    test: str
    started: str
    verdict: str
    ops: int | None
    faults: tuple[str, ...]
    seed: Any
    files: frozenset[str] = field(default=frozenset())  # report.html, timeline.html when present
    order: tuple[float, int] = (0.0, 0)  # newest first sorts on this


@dataclass(frozen=True)
class Unreadable:
    """A folder the index could not read, and why."""

    path: str
    reason: str


def _verdict(results: dict[str, Any] | None) -> str:
    if results is None:
        return "not checked"
    verdicts: dict[bool | None, str] = {True: "valid", False: "invalid"}
    return verdicts.get(results.get("valid"), "unknown")


def _ops(results: dict[str, Any] | None) -> int | None:
    """Client ops from the checker's stats (appends + reads), else history lines."""
    stats = (results or {}).get("stats") or {}
    if isinstance(stats.get("append_ops"), int) and isinstance(stats.get("read_ops"), int):
        return stats["append_ops"] + stats["read_ops"]
    lines = stats.get("history_lines")
    return lines if isinstance(lines, int) else None


def _order(folder: Path) -> tuple[float, int]:
    """The folder's timestamp (`YYYYmmddTHHMMSS[-n]`), else its modification time."""
    match = STAMP.match(folder.name)
    if match:
        return datetime.strptime(match[1], "%Y%m%dT%H%M%S").timestamp(), int(match[2] or 1)
    return folder.stat().st_mtime, 0


def read_run(root: Path, folder: Path) -> Run:
    """The index row of one run folder; ValueError or OSError when it cannot be read."""
    test = read_json_object(folder / "test.json")
    results = read_json_object(folder / "results.json")
    if test is None and results is None and not (folder / "history.jsonl").exists():
        raise ValueError("no test.json, results.json or history.jsonl: not a run folder")
    test = test or {}
    faults = test.get("nemesis") or list(test.get("faults") or [])
    order = _order(folder)
    started = test.get("started") or datetime.fromtimestamp(order[0]).strftime("%Y-%m-%dT%H:%M:%S")
    return Run(
        path=folder.relative_to(root).as_posix(),
        test=str(test.get("name") or folder.parent.name),
        started=str(started),
        verdict=_verdict(results),
        ops=_ops(results),
        faults=tuple(str(f) for f in faults) if isinstance(faults, list) else (str(faults),),
        seed=test.get("seed"),
        files=frozenset(n for n in ("report.html", "timeline.html") if (folder / n).is_file()),
        order=order,
    )


def scan(root: Path) -> tuple[list[Run], list[Unreadable]]:
    """Every run folder two levels below `root`, newest first, and the folders that could not be read.

    Symlinks (such as `results/latest`) and hidden folders are skipped: every run is listed once.
    """
    runs: list[Run] = []
    bad: list[Unreadable] = []
    for test_dir in _subdirs(root, bad, root):
        for folder in _subdirs(test_dir, bad, root):
            try:
                runs.append(read_run(root, folder))
            except (OSError, ValueError) as e:
                bad.append(Unreadable(folder.relative_to(root).as_posix(), str(e)))
    runs.sort(key=lambda r: (r.order, r.path), reverse=True)
    return runs, bad


def _subdirs(folder: Path, bad: list[Unreadable], root: Path) -> list[Path]:
    try:
        entries = sorted(folder.iterdir())
    except OSError as e:
        bad.append(Unreadable(folder.relative_to(root).as_posix() or ".", e.strerror or str(e)))
        return []
    return [p for p in entries if p.is_dir() and not p.is_symlink() and not p.name.startswith(".")]


def select(runs: list[Run], verdict: str | None = None, test: str | None = None) -> list[Run]:
    """The runs with this verdict and test name (either filter left out when None or empty)."""
    return [r for r in runs if (not verdict or r.verdict == verdict) and (not test or r.test == test)]
