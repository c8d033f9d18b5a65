"""The catalogue of seeded node bugs: every mutant applies and builds, a hunt measures the mutant
and not the checkout, and its cell and flags are ones the harness runs."""

from __future__ import annotations

import argparse
import filecmp
import py_compile
from pathlib import Path

import pytest

from harness.chaos import flags
from harness.mutants import build, cells, e2e, simhunt
from harness.mutants.catalogue import CATALOGUE, mutant
from harness.mutants.model import FAMILIES, Edit, Mutant
from harness.mutants.table import markdown
from tests.harness.test_nightly import hosts_file

NAMES = [m.name for m in CATALOGUE]


@pytest.fixture(scope="module")
def trees(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("mutants")
    return {m.name: build.mutant_tree(m, root) for m in CATALOGUE}


def test_the_catalogue_covers_every_family_with_at_least_20_distinct_bugs() -> None:
    assert len(set(NAMES)) == len(NAMES) >= 20
    assert {m.family for m in CATALOGUE} == set(FAMILIES)


@pytest.mark.parametrize("name", NAMES)
def test_each_mutant_applies_to_a_copy_that_compiles_and_differs_only_where_it_says(
        name: str, trees: dict[str, Path]) -> None:
    m = mutant(name)
    package = trees[name] / "nodes"
    edited = {e.path for e in m.edits}
    for path in build.source_files(build.NODES_DIR):
        rel = path.relative_to(build.NODES_DIR).as_posix()
        copy = package / rel
        assert filecmp.cmp(path, copy, shallow=False) is (rel not in edited), rel
        if copy.suffix == ".py":
            py_compile.compile(str(copy), doraise=True, cfile=str(copy) + ".check")


def test_an_edit_that_no_longer_matches_the_code_fails_naming_the_mutant_and_the_edit(tmp_path: Path) -> None:
    stale = Mutant("stale", "election", "gone", (Edit("core.py", "no such text anywhere", "x"),), ())
    with pytest.raises(build.MutantError, match=r"mutant stale, edit 1 \(core.py\): the text to replace occ"):
        build.mutant_tree(stale, tmp_path)
    assert not any(p.name.startswith("stale-") for p in tmp_path.iterdir())  # no half-made copy is kept


def test_a_copy_is_reused_while_sources_and_edits_stay_and_made_anew_when_an_edit_changes(
        tmp_path: Path) -> None:
    m = CATALOGUE[0]
    first = build.mutant_tree(m, tmp_path)
    assert build.mutant_tree(m, tmp_path) == first
    changed = Mutant(m.name, m.family, m.what, (*m.edits, Edit("__init__.py", "\n", "\n\n")), m.run, m.sim)
    assert build.mutant_tree(changed, tmp_path) != first


def test_an_unknown_name_lists_the_catalogue() -> None:
    with pytest.raises(KeyError, match=NAMES[0]):
        mutant("no-such-bug")


def test_a_child_process_imports_the_mutants_copy_not_the_checkout(trees: dict[str, Path]) -> None:
    tree = trees[NAMES[0]]
    assert simhunt.imported_package(tree) == (tree / "nodes").resolve()


def test_the_simulator_hunt_finds_a_seeded_bug_in_the_mutants_copy() -> None:
    [finding] = simhunt.hunt(mutant("ack-before-quorum"), seeds=20, start=0, jobs=1)
    assert finding.where == simhunt.DEFAULT_ROTATION and finding.found, finding
    assert finding.replay and "python -m harness mutants path ack-before-quorum" in finding.replay


def test_a_mutant_the_simulator_cannot_load_is_not_hunted_there() -> None:
    m = CATALOGUE[0]
    assert simhunt.hunt(Mutant(m.name, m.family, m.what, m.edits, m.run, None), 10, 0, 1) == []


def test_the_simulator_hunt_finds_a_master_slave_bug_in_its_mode() -> None:
    findings = simhunt.hunt(mutant("slave-reports-unflushed"), seeds=8, start=0, jobs=1)
    assert any(f.found for f in findings), findings


@pytest.mark.parametrize("name", NAMES)
def test_each_mutants_runs_are_flags_the_run_command_takes(name: str, tmp_path: Path) -> None:
    m = mutant(name)
    for argv in (m.run, e2e.default_argv(m)):
        args = e2e.run_args(m, argv, 1, tmp_path, "t")
        assert args.mutant == name and args.faults
    cell = cells.mutant_cell(m)
    assert cell.expect == "invalid" and cell.name.endswith(f"mutant-{name}")
    parser = argparse.ArgumentParser()
    flags.add_arguments(parser)
    assert parser.parse_args(cell.argv()).mutant == name


def test_the_run_flag_refuses_an_unknown_mutant_and_hosts(tmp_path: Path) -> None:
    m = CATALOGUE[0]
    with pytest.raises(ValueError, match="--mutant nope: .*" + m.name):
        e2e.run_args(Mutant("nope", m.family, m.what, m.edits, ()), (), 1, tmp_path, "t")
    with pytest.raises(ValueError, match="--mutant: runs in containers only"):
        e2e.run_args(m, ("--hosts", str(hosts_file(tmp_path, 3))), 1, tmp_path, "t")


def test_a_night_runs_a_different_few_mutants_and_only_recorded_catches_are_controls(
        monkeypatch: pytest.MonkeyPatch) -> None:
    one, two = cells.tonight(0, 3), cells.tonight(1, 3)
    assert len(one) == 3 and [c.name for c in one] != [c.name for c in two]
    recorded = {f"mutant-{name}" for name in cells.CAUGHT_BY_CELL}
    assert all(c.control == (c.variant in recorded) == (c.known_risk is None) for c in cells.tonight(0, 99))
    unrecorded = next(m.name for m in CATALOGUE if m.name not in cells.CAUGHT_BY_CELL)
    assert not cells.mutant_cell(mutant(unrecorded)).control
    monkeypatch.setitem(cells.CAUGHT_BY_CELL, unrecorded, "measured")
    cell = cells.mutant_cell(mutant(unrecorded))
    assert cell.control and cell.known_risk is None
    assert cells.tonight(5, 0) == []


def test_the_table_says_what_caught_each_bug_and_the_totals() -> None:
    row = {"name": "b", "family": "election", "what": "w",
           "sim": [{"where": simhunt.DEFAULT_ROTATION, "seeds": 300, "violating": 0, "first_seed": None,
                    "first_kind": None},
                   {"where": "--nodes 3", "seeds": 300, "violating": 2, "first_seed": 7,
                    "first_kind": "leader completeness"}],
           "default": {"verdicts": ["valid", "invalid"], "caught_at": 2}, "cell": {"verdicts": ["valid"] * 3,
                                                                                  "caught_at": None}}
    text = markdown([row])
    assert ("| `b` | election | none in 300 seeds | 2 of 300 seeds (first 7: leader completeness) "
            "(`--nodes 3`) "
            "| invalid at run 2 | valid x3 |") in text
    assert text.endswith("simulator: 0 of 1 in the default rotation, 1 with the aimed flags too; "
                         "default run: 1 of 1 (100 %); nightly cell: 0 of 1 (0 %)")


def test_a_copy_another_process_finished_meanwhile_is_kept_not_replaced(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    m = CATALOGUE[0]
    target = tmp_path / f"{m.name}-{build.digest(m)}"
    real = build.apply_edit

    def racing(mutant: Mutant, k: int, edit: Edit, package: Path) -> None:
        real(mutant, k, edit, package)
        if not target.exists():  # the other process renames its complete copy into place now
            (target / "nodes").mkdir(parents=True)
            (target / "in-use").write_text("")
            (target / build.COMPLETE).write_text(f"{m.name}\n")

    monkeypatch.setattr(build, "apply_edit", racing)
    assert build.mutant_tree(m, tmp_path) == target
    assert (target / "in-use").is_file()  # still the other process's copy
    assert not any(p.name.startswith(".work-") for p in tmp_path.iterdir())


@pytest.mark.parametrize(("mutated", "control", "verdicts", "caught_at"), [
    ([1], [0], ("invalid",), 1),  # the unmodified node is valid: a catch
    ([1, 1], [1, 0], (e2e.CONTROL_TOO, "invalid"), 2),  # the first run proves nothing
    ([1, 1, 1], [1, 1, 1], (e2e.CONTROL_TOO,) * 3, None),
    ([0, 0, 0], [], ("valid",) * 3, None),
    ([255, 1], [0], ("error", "invalid"), 2),  # a run the harness failed tells nothing: the next seed runs
])
def test_an_invalid_run_counts_only_when_the_unmodified_node_passes_it(
        monkeypatch, tmp_path, mutated, control, verdicts, caught_at):
    codes = {False: iter(mutated), True: iter(control)}
    monkeypatch.setattr(e2e, "_run_once", lambda m, argv, seed, out, name, control=False:
                        (next(codes[control]), out / name))
    found = e2e.hunt(mutant("ack-before-quorum"), "default", [1, 2, 3], tmp_path)
    assert (found.verdicts, found.caught_at) == (verdicts, caught_at)
    assert next(codes[True], None) is None  # a control ran after each invalid run, and only then
    cell = markdown([{"name": "ack-before-quorum", "family": "durability", "default": found.as_dict()}])
    caught = f"invalid at run {caught_at}"
    expected = caught if caught_at else "; ".join(verdicts) if mutated[0] else "valid x3"
    assert expected in cell
