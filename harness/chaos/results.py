"""The results folder: `results/<test-name>/<timestamp>/` with test.json, and `results/latest`."""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path
from typing import Any


def create_run_dir(root: Path, test_name: str) -> Path:
    """Make a fresh `root/<test_name>/<YYYYmmddTHHMMSS>/` (suffixed if that second is taken)."""
    stamp = time.strftime("%Y%m%dT%H%M%S")
    base = root / test_name
    base.mkdir(parents=True, exist_ok=True)
    run_dir = base / stamp
    suffix = 1
    while True:
        try:
            run_dir.mkdir()
            break
        except FileExistsError:
            suffix += 1
            run_dir = base / f"{stamp}-{suffix}"
    (run_dir / "final").mkdir()
    (run_dir / "nodes").mkdir()
    return run_dir


def point_latest(root: Path, run_dir: Path) -> None:
    """Make `root/latest` a relative symlink to `run_dir`, replaced atomically."""
    link = root / "latest"
    tmp = root / f".latest.{os.getpid()}"
    tmp.unlink(missing_ok=True)
    tmp.symlink_to(run_dir.relative_to(root))
    tmp.replace(link)


def git_commit(repo: Path) -> str | None:
    """The checkout's commit (with `-dirty` when it has uncommitted changes), or None outside git."""
    try:
        head = subprocess.run(["git", "-C", str(repo), "rev-parse", "HEAD"], capture_output=True,
                              text=True, check=True, timeout=10).stdout.strip()
        dirty = subprocess.run(["git", "-C", str(repo), "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, check=True, timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None
    return f"{head}-dirty" if dirty else head


def write_json(path: Path, data: dict[str, Any]) -> None:
    """Write `data` as indented JSON via a temporary file, so readers never see half a file."""
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    tmp.replace(path)
