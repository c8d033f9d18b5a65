"""The compiled simulator (nodes/sim/compiled.py): a build is used only for the sources it was
made from, and it runs every seed exactly as the interpreted sources do."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from nodes.cliparse import EXIT_BAD_ARGS, UsageError
from nodes.sim import compiled
from nodes.sim.cli import flush_policy
from nodes.sim.cluster import run_seed
from nodes.sim.many import MIXES, configs

REPO = compiled.PACKAGE.parent
SEEDS = 57  # every size of 3, 5, 7 with every fault mix, once
ASYNC_LOSS = 54  # with async flush this seed of the rotation loses a committed entry


def _outcomes(count: int) -> list[tuple[object, ...]]:
    """What `count` seeds of the default rotation and one async seed with a violation did:
    all of it that could tell two runs apart, and the violating run's report and trace."""
    out = []
    sync, asynchronous = flush_policy("sync"), flush_policy("async")
    rotation = [*configs(0, count, [3, 5, 7], list(MIXES), 4000, sync, "fast", 3),
                [*configs(0, ASYNC_LOSS + 1, [3, 5, 7], list(MIXES), 4000, asynchronous, "fast", 3)][-1]]
    for c in rotation:
        r = run_seed(c)
        out.append((c.seed, c.durability.flag, r.steps, r.sim_ms, sorted(r.stats.items()),
                    sorted(r.coverage.items()), r.violation and (r.summary(), r.trace)))
    return out


def _write_package(root: Path, files: dict[str, str]) -> Path:
    package = root / "nodes"
    for name, text in files.items():
        (package / name).parent.mkdir(parents=True, exist_ok=True)
        (package / name).write_text(text)
    return package


def test_the_digest_changes_with_any_source_and_ignores_bytecode(tmp_path: Path) -> None:
    package = _write_package(tmp_path, {"__init__.py": "", "sim/cluster.py": "X = 1\n"})
    before = compiled.source_digest(package)
    (package / "__pycache__").mkdir()
    (package / "__pycache__" / "cluster.py").write_text("stale")
    assert compiled.source_digest(package) == before
    (package / "sim" / "cluster.py").write_text("X = 2\n")
    assert compiled.source_digest(package) != before
    (package / "sim" / "cluster.py").write_text("X = 1\n")
    (package / "sim" / "new.py").write_text("")
    assert compiled.source_digest(package) != before


def test_only_a_complete_build_for_this_digest_counts(tmp_path: Path) -> None:
    build = tmp_path / "abc"
    build.mkdir()
    assert compiled.fresh_build(tmp_path, "abc") is None  # interrupted: no marker
    (build / compiled.COMPLETE).write_text("other\nnodes.core\n")
    assert compiled.fresh_build(tmp_path, "abc") is None  # a marker for other sources
    (build / compiled.COMPLETE).write_text("abc\nnodes.core\n")
    assert compiled.fresh_build(tmp_path, "abc") == build
    assert compiled.fresh_build(tmp_path, "abd") is None


def test_without_a_build_compiled_is_refused_and_auto_runs_interpreted_saying_so(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("DLEDGER_CHAOS_SIM_BUILD", str(tmp_path))
    with pytest.raises(UsageError, match="make sim-build"):
        compiled.choose("compiled")
    assert compiled.choose("auto") is None
    assert "running interpreted" in capsys.readouterr().err
    assert compiled.choose("interpreted") is None
    with pytest.raises(UsageError, match="use one of"):
        compiled.choose("fast")


def test_the_simulator_imports_nothing_it_cannot_compile_but_what_is_listed() -> None:
    modules = compiled.modules_to_compile(compiled.PACKAGE)
    assert {"nodes.core", "nodes.driver", "nodes.sim.cluster", "nodes.sim.simfs",
            "nodes.store.mmapstore", "nodes.store.recovery", "nodes.store.termfile"} <= set(modules)
    parts = {"loop", "nodes", "workload", "faults", "nemesis", "liveness"}  # the simulator's parts
    assert {f"nodes.sim.{part}" for part in parts} <= set(modules)
    assert not set(modules) & set(compiled.INTERPRETED)


def test_a_module_mypyc_rejects_fails_the_build_with_the_reason(tmp_path: Path) -> None:
    _write_package(tmp_path, {"__init__.py": "", "bad.py": 'COUNT: int = "three"\n'})
    progress: list[str] = []
    with pytest.raises(RuntimeError, match="compiling the simulator failed") as failed:
        compiled._compile(tmp_path, ["nodes/bad.py"], progress.append)
    assert "bad.py:1: error" in str(failed.value) and "C compiler" in str(failed.value)
    assert not list(tmp_path.rglob("*.so"))


@pytest.fixture(scope="module")
def build() -> Path:
    """The build for the current sources, made here when they changed (about 45 s, on the worker
    that does not run the Docker tests under `make test`, which has time to spare)."""
    return compiled.build(log=lambda text: print(text, file=sys.stderr))


def test_the_compiled_simulator_runs_every_seed_as_the_sources_do(build: Path) -> None:
    code = ("import json; from nodes.sim import compiled; from tests.sim.test_compiled import _outcomes; "
            f"print(json.dumps([compiled.engine_here(), _outcomes({SEEDS})]))")
    env = {**os.environ, "PYTHONPATH": f"{build}{os.pathsep}{REPO}"}
    out = subprocess.run([sys.executable, "-c", code], env=env, cwd=build, check=True,
                         capture_output=True, text=True).stdout
    engine, there = json.loads(out)
    assert engine == "compiled"
    here = json.loads(json.dumps(_outcomes(SEEDS)))  # the same tuples-to-lists as the other side
    assert compiled.engine_here() == "interpreted"
    assert len(there) == SEEDS + 1
    assert there[-1][-1] and "VIOLATION" in there[-1][-1][0]  # the async seed's loss, found by both
    assert there == here


def _simulate_many(tmp_path: Path, engine: str,
                   env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "nodes", "simulate-many", "--seeds", "6", "--jobs", "2",
                           "--engine", engine, "--json", str(tmp_path / f"{engine}.json")],
                          cwd=REPO, env=env, capture_output=True, text=True, timeout=300)


def test_simulate_many_runs_its_workers_on_the_build_and_says_so(build: Path, tmp_path: Path) -> None:
    runs = {engine: _simulate_many(tmp_path, engine) for engine in ("compiled", "interpreted")}
    figures = {}
    for engine, run in runs.items():
        assert run.returncode == 0, run.stderr
        assert f"2 {engine} workers" in run.stdout
        figures[engine] = json.loads((tmp_path / f"{engine}.json").read_text())
        assert figures[engine]["engine"] == engine
    assert figures["compiled"]["coverage"] == figures["interpreted"]["coverage"]


def test_simulate_many_refuses_compiled_with_no_build_for_these_sources(tmp_path: Path) -> None:
    run = _simulate_many(tmp_path, "compiled", {**os.environ, "DLEDGER_CHAOS_SIM_BUILD": str(tmp_path)})
    assert run.returncode == EXIT_BAD_ARGS
    assert "no compiled simulator for these sources" in run.stderr
    assert not (tmp_path / "compiled.json").exists()
