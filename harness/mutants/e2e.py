"""Do end-to-end runs catch a seeded bug? `harness run --mutant NAME` on containers.

Two kinds of run per mutant: the default run (`make chaos`'s flags, in the mutant's mode) for up
to `seeds` seeds, stopping at the first that does not come back valid, and the run meant to catch
it (its nightly cell, `Mutant.run`) once per seed likewise. An invalid run is a catch only if the
unmodified node, run with the same flags and seed (the control), is valid: otherwise the flags
lose data by design (master-slave-async under failover) and the verdict is `invalid, control too`,
and the next seed runs. Each goes through `harness run`'s own
code in this process, as the nightly sweep's runs do, into `<out>/<run name>/`.
"""

from __future__ import annotations

import argparse
import traceback
from dataclasses import asdict, dataclass
from pathlib import Path

from harness.chaos import flags
from harness.mutants.model import Mutant
from nodes.cliparse import EXIT_INTERNAL, EXIT_INVALID, EXIT_VALID

DEFAULT_RUN = ("--nodes", "5", "--time-limit", "60", "--nemesis", "default")  # what `make chaos` runs
VERDICTS = {EXIT_VALID: "valid", EXIT_INVALID: "invalid"}
CONTROL_TOO = "invalid, control too"  # the unmodified node fails the same run: no evidence of the bug


@dataclass(frozen=True)
class RunFinding:
    """What the runs of one kind saw: the verdict of each seed, in order, and each run's folder."""

    kind: str  # "default" or "cell"
    argv: tuple[str, ...]
    verdicts: tuple[str, ...]
    seeds: tuple[int, ...]
    run_dirs: tuple[str, ...]

    @property
    def caught_at(self) -> int | None:
        """The 1-based number of the first run that ended invalid, or None."""
        return next((k for k, v in enumerate(self.verdicts, 1) if v == "invalid"), None)

    def as_dict(self) -> dict[str, object]:
        return {**asdict(self), "caught_at": self.caught_at}


def run_args(mutant: Mutant, argv: tuple[str, ...], seed: int, out: Path, name: str,
             control: bool = False) -> argparse.Namespace:
    """The validated `harness run` arguments of one run of `mutant` (of the unmodified node with
    `control`); ValueError if they are bad."""
    bug = () if control else ("--mutant", mutant.name)
    return flags.parsed([*argv, *bug, "--seed", str(seed), "--results-dir", str(out), "--name", name],
                        f"mutant {mutant.name}")


def default_argv(mutant: Mutant) -> tuple[str, ...]:
    """The default run's flags in the mutant's mode (a master-slave bug needs its mode to run at all)."""
    mode = mutant.run[mutant.run.index("--mode"):][:2] if "--mode" in mutant.run else ()
    return (*DEFAULT_RUN, *mode)


def hunt(mutant: Mutant, kind: str, seeds: list[int], out: Path) -> RunFinding:
    """Run `mutant` with the flags of `kind` ("default" or "cell") for each seed until one is not
    valid (a run that failed inside the harness tells nothing of the bug: the next seed runs)."""
    argv = default_argv(mutant) if kind == "default" else mutant.run
    name = f"mutant-{mutant.name}-{kind}"
    verdicts: list[str] = []
    run_dirs: list[str] = []
    for seed in seeds:
        code, run_dir = _run_once(mutant, argv, seed, out, name)
        verdict = VERDICTS.get(code, "unknown" if code != EXIT_INTERNAL else "error")
        if code == EXIT_INVALID:
            control, _ = _run_once(mutant, argv, seed, out, f"{name}-control", control=True)
            verdict = verdict if control == EXIT_VALID else CONTROL_TOO
        verdicts.append(verdict)
        run_dirs.append(str(run_dir))
        if verdict not in ("valid", "error", CONTROL_TOO):
            break
    return RunFinding(kind, argv, tuple(verdicts), tuple(seeds[:len(verdicts)]), tuple(run_dirs))


def _run_once(mutant: Mutant, argv: tuple[str, ...], seed: int, out: Path, name: str,
              control: bool = False) -> tuple[int, Path]:
    from harness.chaos.run import run_test

    args = run_args(mutant, argv, seed, out, name, control)
    try:
        return run_test(args, args.faults, name, seed)
    except Exception:  # one run's failure is that run's verdict; the hunt goes on
        traceback.print_exc()
        return EXIT_INTERNAL, out / name
