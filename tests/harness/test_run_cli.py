"""`python -m harness run`: bad flags, a missing Docker engine and the `--test-count` loop, without Docker."""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

import pytest

from harness.__main__ import COMMANDS
from harness.chaos import run as run_module
from nodes.cliparse import run_subcommands

REPO = Path(__file__).resolve().parents[2]
RUN_USAGE = "usage: python -m harness run "
BAD_FLAGS = [
    ["--nodes", "2"],
    ["--nodes", "x"],
    ["--nodes"],
    ["--nemesis", "foo"],
    ["--concurrency", "x"],
    ["--partition-shapes", "zz"],
    ["--kill-targets", "everyone"],
    ["--time-limit", "0"],
    ["--read-fraction", "2"],
    ["--flush", "never"],
    ["--bogus"],
    ["stray"],
]


@pytest.mark.parametrize("flags", BAD_FLAGS, ids=" ".join)
def test_bad_flags_exit_254_with_the_run_usage(
    flags: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/no-docker.sock")  # never reach an engine
    with pytest.raises(SystemExit) as exited:
        run_subcommands(
            "python -m harness", "", COMMANDS, argv=["run", "--results-dir", str(tmp_path), *flags]
        )
    assert exited.value.code == 254
    err = capsys.readouterr().err
    assert err.startswith(RUN_USAGE)
    assert err.splitlines()[-1].startswith("python -m harness run: error: ")
    assert list(tmp_path.iterdir()) == []


def test_a_missing_engine_is_one_sentence_and_no_results_folder(tmp_path: Path) -> None:
    results = tmp_path / "results"
    (results / "old").mkdir(parents=True)
    (results / "latest").symlink_to("old")
    env = {**os.environ, "DOCKER_HOST": f"unix://{tmp_path}/no-docker.sock"}
    done = subprocess.run(
        [sys.executable, "-m", "harness", "run", "--results-dir", str(results), "--time-limit", "1"],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 255  # as `harness clean` and `harness image`: the environment, not the flags
    assert done.stderr.startswith("error: The Docker engine is not reachable")
    assert len(done.stderr.strip().splitlines()) == 1
    assert done.stdout == ""
    assert sorted(p.name for p in results.iterdir()) == ["latest", "old"]
    assert (results / "latest").readlink() == Path("old")


@pytest.mark.parametrize(("codes", "worst"), [([0, 0, 0], 0), ([0, 2, 0], 2), ([2, 1, 0], 1), ([0, 1, 2], 1)])
def test_test_count_runs_each_seed_and_returns_the_worst_verdict(
    codes: list[int],
    worst: int,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    seeds: list[int] = []

    def fake_test(args: argparse.Namespace, faults: list[str], name: str, seed: int) -> tuple[int, Path]:
        seeds.append(seed)
        return codes[len(seeds) - 1], tmp_path / f"run-{seed}"

    warmed: list[str | None] = []  # the real warm-up would start Spark in a thread the test outlives
    monkeypatch.setattr(run_module, "connect", lambda: argparse.Namespace(close=lambda: None))
    monkeypatch.setattr(run_module, "run_test", fake_test)
    monkeypatch.setattr(run_module, "warm_checker", warmed.append)
    parser = argparse.ArgumentParser()
    run_module.add_arguments(parser)
    args = parser.parse_args(["--seed", "40", "--test-count", "3", "--results-dir", str(tmp_path)])
    assert run_module.run(args) == worst
    assert seeds == [40, 41, 42]
    assert warmed == [None]  # several tests: the checker is warmed once, ahead of the first check
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 3
    for i, (line, code) in enumerate(zip(lines, codes, strict=True)):
        word = run_module.VERDICT_WORDS[code]
        assert line == f"test {i + 1}/3 seed {40 + i}: {word}  {tmp_path / f'run-{40 + i}'}"
