"""Does the simulator find a seeded bug? `simulate-many` run on the mutant's copy of `nodes/`.

Each hunt runs the simulator's default rotation first (sizes 3, 5, 7, every default fault mix,
about half the seeds with lease reads), then, when the mutant names them and the rotation found
nothing, the flags aimed at it. The simulator runs in a child process with the mutant's copy
first on `PYTHONPATH` and as its working directory (interpreted: the compiled build is of the
checkout's sources), which is asked first which `nodes` it imports, so a hunt never measures
the checkout by mistake.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path

from harness.errors import HarnessError
from harness.mutants.build import mutant_tree
from harness.mutants.model import Mutant

DEFAULT_ROTATION = "default rotation"


@dataclass(frozen=True)
class SimFinding:
    """What one simulate-many run over a mutant saw."""

    where: str  # DEFAULT_ROTATION, or the aimed flags
    seeds: int
    start: int
    violating: int  # seeds that ended in a violation
    first_seed: int | None
    first_kind: str | None
    replay: str | None  # the command that replays the first violation on the mutant's copy

    @property
    def found(self) -> bool:
        return self.violating > 0

    def as_dict(self) -> dict[str, object]:
        return asdict(self)


def imported_package(tree: Path) -> Path:
    """The `nodes` package a child process with `tree` first on PYTHONPATH imports."""
    out = subprocess.run([sys.executable, "-c", "import nodes; print(nodes.__file__)"], env=_env(tree),
                         cwd=tree, capture_output=True, text=True, check=True).stdout.strip()
    return Path(out).resolve().parent


def hunt(mutant: Mutant, seeds: int, start: int, jobs: int) -> list[SimFinding]:
    """The default rotation's finding, then the aimed one's when the rotation found nothing.
    An empty list when the simulator cannot load what the mutant breaks (`mutant.sim` is None)."""
    if mutant.sim is None:
        return []
    tree = mutant_tree(mutant)
    if imported_package(tree) != (tree / "nodes").resolve():
        raise HarnessError(f"mutant {mutant.name}: a child process does not import its copy "
                           f"{tree / 'nodes'}; "
                           "is `nodes` installed other than editable?")
    findings = [_simulate(mutant, tree, (), seeds, start, jobs)]
    if not findings[0].found and mutant.sim:
        findings.append(_simulate(mutant, tree, mutant.sim, seeds, start, jobs))
    return findings


def _simulate(mutant: Mutant, tree: Path, aimed: tuple[str, ...], seeds: int, start: int,
              jobs: int) -> SimFinding:
    with tempfile.TemporaryDirectory(prefix=f"dlc-mutant-{mutant.name}-") as tmp:
        out = Path(tmp) / "sim.json"
        argv = [sys.executable, "-m", "nodes", "simulate-many", "--engine", "interpreted",
                "--seeds", str(seeds),
                "--start", str(start), "--jobs", str(jobs), "--budget", str(10**6), "--show", "1",
                "--json", str(out), *aimed]
        done = subprocess.run(argv, env=_env(tree), cwd=tree, capture_output=True, text=True)
        if not out.is_file():
            raise HarnessError(f"mutant {mutant.name}: simulate-many failed (exit {done.returncode}):\n"
                               + done.stderr[-2000:])
        report = json.loads(out.read_text())
    violations = report["violations"]
    first = violations[0] if violations else None
    return SimFinding(" ".join(aimed) or DEFAULT_ROTATION, report["seeds"], start, len(violations),
                      first and first["seed"], first and first["kind"],
                      first and _replay(done.stdout, mutant.name))


def _replay(stdout: str, name: str) -> str | None:
    """The first violation's replay line, run on the mutant's copy."""
    line = next((ln.strip() for ln in stdout.splitlines() if ln.startswith("replay: ")), None)
    if line is None:
        return None
    return f"cd $(python -m harness mutants path {name}) && PYTHONPATH=. {line.removeprefix('replay: ')}"


def _env(tree: Path) -> dict[str, str]:
    path = os.environ.get("PYTHONPATH")
    return {**os.environ, "PYTHONPATH": str(tree) + (os.pathsep + path if path else "")}
