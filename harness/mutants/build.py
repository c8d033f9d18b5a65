"""A mutant's copy of `nodes/`: copied from the checkout, its edits applied, kept by digest.

`mutant_tree(m)` returns a directory holding the mutated `nodes` package (put it first on
`sys.path` or `PYTHONPATH` to import it), under `build/mutants/<name>-<digest>/`; the digest
covers the checkout's `nodes/` sources and the mutant's edits, so an edited source or catalogue
gets a new copy and a stale one never runs. An edit whose text is not in its file exactly once
raises `MutantError` naming the mutant, the edit and what to do.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
from pathlib import Path

import nodes
from harness.errors import HarnessError
from harness.mutants.model import Edit, Mutant

NODES_DIR = Path(nodes.__file__).resolve().parent
COMPLETE = "COMPLETE"  # written last: a copy without it was interrupted


class MutantError(HarnessError):
    """A mutant that cannot be built: an edit that no longer matches the code, or an unknown name."""


def build_root() -> Path:
    """Where mutant copies live: $DLEDGER_CHAOS_MUTANT_BUILD, else `build/mutants` in the checkout."""
    return Path(os.environ.get("DLEDGER_CHAOS_MUTANT_BUILD") or NODES_DIR.parent / "build" / "mutants")


def source_files(package: Path = NODES_DIR) -> list[Path]:
    """The package's files a copy holds (no bytecode)."""
    return sorted(p for p in package.rglob("*") if p.is_file() and "__pycache__" not in p.parts
                  and p.suffix != ".pyc")


def digest(mutant: Mutant, package: Path = NODES_DIR) -> str:
    """A digest of the package's sources and the mutant's edits."""
    h = hashlib.sha256(mutant.name.encode())
    for path in source_files(package):
        h.update(f"\0{path.relative_to(package).as_posix()}\0".encode())
        h.update(path.read_bytes())
    for edit in mutant.edits:
        h.update(f"\0{edit.path}\0{edit.old}\0{edit.new}".encode())
    return h.hexdigest()[:16]


def apply_edit(mutant: Mutant, k: int, edit: Edit, package: Path) -> None:
    """Apply `edit` (the k-th of `mutant`, from 1) to the copy `package`; MutantError if it does not fit."""
    path = package / edit.path
    where = f"mutant {mutant.name}, edit {k} ({edit.path})"
    if not path.is_file():
        raise MutantError(f"{where}: no such file in nodes/; update harness/mutants/catalogue.py")
    text = path.read_text()
    found = text.count(edit.old)
    if found != 1:
        raise MutantError(f"{where}: the text to replace occurs {found} times, not once (the code "
                          f"moved on); update the edit in harness/mutants/catalogue.py:\n{edit.old}")
    path.write_text(text.replace(edit.old, edit.new))


def mutant_tree(mutant: Mutant, root: Path | None = None) -> Path:
    """The directory holding `mutant`'s `nodes` package, made now unless a complete copy exists."""
    root = root or build_root()
    target = root / f"{mutant.name}-{digest(mutant)}"
    if (target / COMPLETE).is_file():
        return target
    root.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=f".work-{mutant.name}-", dir=root))
    try:
        shutil.copytree(NODES_DIR, work / "nodes", ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        for k, edit in enumerate(mutant.edits, 1):
            apply_edit(mutant, k, edit, work / "nodes")
        (work / COMPLETE).write_text(f"{mutant.name}\n")
        try:
            work.rename(target)
        except OSError:  # the target exists: another process's complete copy stays in use
            if (target / COMPLETE).is_file():
                return target
            shutil.rmtree(target)  # an interrupted copy of the same digest
            work.rename(target)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return target


def image_source(name: str | None) -> tuple[str, Path] | None:
    """What a node image of the mutant `name` is built from (its name, the directory of its `nodes`
    package); None for the checkout's own code."""
    if name is None:
        return None
    from harness.mutants.catalogue import mutant

    return name, mutant_tree(mutant(name))
