"""Store test helpers: small segment sizes, entry bodies, and whole-directory snapshots."""

from __future__ import annotations

import hashlib
import os
import tempfile
from pathlib import Path

DATA_SEGMENT = 1024
INDEX_SEGMENT = 320  # ten index slots per file


def body_for(i: int) -> bytes:
    """A body of varying length (0..70 bytes) that names its entry."""
    return (f"e{i}-".encode() * 12)[: (i * 7) % 71]


def snapshot(directory: Path) -> dict[str, bytes]:
    """Every file under `directory`, by relative path."""
    return {str(p.relative_to(directory)): p.read_bytes() for p in sorted(directory.rglob("*"))
            if p.is_file()}


def restore(directory: Path, files: dict[str, bytes]) -> None:
    """Make `directory` hold exactly `files`."""
    for p in directory.rglob("*"):
        if p.is_file() and str(p.relative_to(directory)) not in files:
            p.unlink()
    for rel, content in files.items():
        (directory / rel).parent.mkdir(parents=True, exist_ok=True)
        (directory / rel).write_bytes(content)


def digest(directory: Path) -> str:
    return hashlib.sha256(repr(sorted(snapshot(directory).items())).encode()).hexdigest()


def scratch_dir() -> Path:
    """A fresh folder on tmpfs when there is one: the tests' fsyncs then cost nothing, so
    their time does not depend on how busy the disk is."""
    shm = Path("/dev/shm")
    base = shm if shm.is_dir() and os.access(shm, os.W_OK) else None
    return Path(tempfile.mkdtemp(prefix="store-test-", dir=base))
