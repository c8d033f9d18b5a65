"""`harness nightly`: the matrix and its budget, the summary and JUnit files, the exit codes, the dry run."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import xml.etree.ElementTree as ET
from dataclasses import replace
from pathlib import Path

import pytest

from harness.chaos import flags
from harness.chaos.modes import MODES
from harness.errors import HostsRefused
from harness.hosts import sweep
from harness.hosts.capabilities import TOOLS, HostFacts
from harness.hosts.inventory import load_inventory
from harness.mutants.catalogue import CATALOGUE
from harness.mutants.cells import CAUGHT_BY_CELL, mutant_cell, tonight
from harness.ssh.keys import create_key_pair
from harness.sweeps import matrix, nightly
from harness.sweeps.junit import write_junit
from harness.sweeps.summary import row_of, write_summary
from nemesis import catalogue
from systems import SYSTEMS

REPO = Path(__file__).resolve().parents[2]
MINUTE = 60.0


def by_name(name: str) -> matrix.Cell:
    mutants = [mutant_cell(m) for m in CATALOGUE]
    return next(cell for cell in (*matrix.MATRIX, *mutants) if cell.name == name)


def test_every_family_runs_alone_in_dledger_and_in_each_master_slave_mode_or_says_why_not():
    alone = {(cell.mode, cell.nemesis) for cell in matrix.MATRIX}
    for family in catalogue.FAMILIES:
        assert ("dledger", family) in alone, family
        for mode in (m for m in MODES if MODES[m].master_slave):
            assert ((mode, family) in alone) != (family in matrix.NOT_IN_MASTER_SLAVE), (mode, family)
    assert {cell.mode for cell in matrix.MATRIX} == {*MODES, *(set(SYSTEMS) - {"dledger"})}, "every system"
    assert {cell.flush for cell in matrix.MATRIX if cell.mode in MODES} == {"sync", "async"}
    assert {cell.flush for cell in matrix.MATRIX if cell.mode not in MODES} == {None}
    assert {cell.nodes for cell in matrix.MATRIX} == {3, 5}
    assert {"default", "all"} <= {cell.nemesis for cell in matrix.MATRIX}


def test_cells_have_unique_names_reasons_and_flags_the_run_command_accepts(tmp_path):
    names = [cell.name for cell in matrix.MATRIX]
    assert len(names) == len(set(names))
    for cell in matrix.MATRIX:
        assert cell.expect in ("valid", "invalid") and cell.why, cell.name
        args = nightly.run_args(cell, 5, tmp_path)
        design = args.mode if cell.mode in MODES else args.system
        assert (design, args.nodes, args.flush, args.seed) == (cell.mode, cell.nodes, cell.flush, 5)
        assert args.faults == [f for f in cell.families if f not in args.left_out], cell.name
        assert args.time_limit == cell.time_limit
    assert list(tmp_path.iterdir()) == [], "building the arguments makes no folder"


def test_the_controls_expect_invalid_and_are_the_four_known_to_lose_writes():
    assert [cell.name for cell in matrix.MATRIX if cell.control] == [
        "dledger-power-loss-async-3n-all-nodes", "master-slave-async-isolate-lose-sync-3n",
        "master-slave-async-power-loss-async-3n-all-nodes", "nats-power-loss-3n-all-nodes"]
    assert all(cell.expect == "invalid" and cell.known_risk is None for cell in matrix.CONTROLS)
    power = matrix.CONTROLS[0].argv()
    assert power[power.index("--power-loss-targets") + 1] == "all"
    assert power[len(power) - 1 - power[::-1].index("--nemesis-concurrency") + 1] == "1"


def test_designs_outside_their_fault_model_are_marked():
    lose = by_name("dledger-lose-node-sync-3n")
    assert lose.known_risk and lose.expect == "valid"
    assert by_name("dledger-isolate-lose-sync-3n").expect == "valid"
    assert by_name("master-slave-async-lose-node-sync-3n").expect == "invalid"


@pytest.mark.parametrize("minutes", [1, 5, 20, 35, 60, 1000])
def test_the_plan_is_deterministic_starts_with_every_control_and_keeps_to_the_budget(minutes):
    cells = matrix.chosen()
    picked = matrix.plan(cells, minutes * MINUTE)
    assert picked == matrix.plan(list(cells), minutes * MINUTE)
    controls = [cell for cell in cells if cell.control]
    assert picked[:len(controls)] == controls
    estimate = sum(cell.estimate_s for cell in picked)
    if estimate > minutes * MINUTE:
        assert picked == controls, "only the controls may go past the budget"
    if minutes == 1000:
        assert sorted(c.name for c in picked) == sorted(c.name for c in cells)


def test_the_default_budget_spreads_over_families_modes_systems_flush_policies_and_sizes():
    picked = matrix.plan(matrix.chosen(), 45 * MINUTE)
    assert 40 * MINUTE <= sum(cell.estimate_s for cell in picked) <= 45 * MINUTE
    assert {cell.nemesis for cell in picked if cell.mode == "dledger"} >= set(catalogue.FAMILIES)
    assert {cell.mode for cell in picked} == set(matrix.DESIGNS)
    assert {cell.flush for cell in picked if cell.mode in MODES} == {"sync", "async"}
    assert {cell.nodes for cell in picked} == {3, 5}
    assert all(sum(cell.mode == mode for cell in picked) >= 5 for mode in MODES)


def test_seeds_multiply_each_cell_and_only_keeps_the_named_cells():
    one, two = matrix.plan(matrix.chosen(), 45 * MINUTE), matrix.plan(matrix.chosen(), 45 * MINUTE, seeds=2)
    assert 2 * sum(cell.estimate_s for cell in two) <= 45 * MINUTE < 2 * sum(cell.estimate_s for cell in one)
    assert [cell.name for cell in matrix.chosen("dledger-kill,master-slave-sync-kill")] == [
        "dledger-kill-sync-3n", "master-slave-sync-kill-sync-3n"]


def run_folder(root: Path, cell: matrix.Cell, valid: bool | str | None, *, error: str | None = None) -> Path:
    """A run folder as `harness run` leaves it: test.json, and results.json and report.html if checked."""
    run_dir = root / cell.name / "20260101T000000"
    run_dir.mkdir(parents=True)
    faults = [{"family": "kill", "leader_hit": True, "leader_changes": 1,
               "ops": {"ok": 5, "fail": 1, "info": 0}},
              {"family": "kill", "leader_hit": False, "leader_changes": 0,
               "ops": {"ok": 9, "fail": 0, "info": 0}},
              {"family": "pause", "leader_hit": False, "leader_changes": 0,
               "ops": {"ok": 9, "fail": 0, "info": 2}, "error": "pause: SshError: gone"}]
    test = {"name": cell.name, "mode": cell.mode, "seed": 4, "achieved_rate": 287.5,
            "fault_log": {"faults": faults},
            "history_wall_ns": 1_000_000_000_000, "reproduce": f"python -m harness run --name {cell.name}",
            "phases": {"setup": 2.0, "workload": 30.0, "heal": 1.0, "catch-up": 0.5, "final-reads": 0.5}}
    if error:
        test["error"] = error
    (run_dir / "test.json").write_text(json.dumps(test))
    if valid is not None:
        checks = {"lost": {"valid": valid is not False, "count": 0 if valid is not False else 12},
                  "divergence": {"valid": valid is not False, "count": 0 if valid is not False else 3},
                  "hole": {"valid": "unknown" if valid == "unknown" else True, "count": 0},
                  "recovered": {"valid": True, "count": 4, "informational": True}}
        (run_dir / "results.json").write_text(json.dumps({"valid": valid, "checks": checks}))
        (run_dir / "report.html").write_text("<html></html>")
    return run_dir


def test_rows_say_outcome_anomalies_faults_that_bit_and_the_teeth_message(tmp_path):
    kill, control = by_name("dledger-kill-sync-3n"), matrix.CONTROLS[0]
    bad = row_of(kill, 4, run_folder(tmp_path, kill, False), 1, 70.04, tmp_path)
    assert (bad.verdict, bad.outcome, bad.anomalies) == ("invalid", "fail", {"lost": 12, "divergence": 3})
    assert "expected valid, got invalid (lost 12, divergence 3)" in bad.message
    assert bad.message.endswith(str(tmp_path / kill.name / "20260101T000000" / "report.html"))
    assert bad.report == f"{kill.name}/20260101T000000/report.html" and bad.throughput == 287.5
    assert bad.faults == [
        {"family": "kill", "faults": 2, "bit": 1, "leader_hit": 1, "leader_changes": 1, "errors": 0},
        {"family": "pause", "faults": 1, "bit": 1, "leader_hit": 0, "leader_changes": 0, "errors": 1}]
    toothless = row_of(control, 4, run_folder(tmp_path, control, True), 0, 80.0, tmp_path)
    assert toothless.outcome == "fail"
    assert toothless.message.startswith(f"control {control.name} came back valid: the harness lost its teeth")


def test_known_risks_errors_and_interrupts_have_their_own_outcomes(tmp_path):
    lose = by_name("dledger-lose-node-sync-3n")
    risk = row_of(lose, 4, run_folder(tmp_path / "a", lose, False), 1, 70.0, tmp_path)
    assert risk.outcome == "known-risk" and "known risk: a wiped node forgets" in risk.message
    kill = by_name("dledger-kill-sync-3n")
    failed_run = run_folder(tmp_path / "b", kill, None, error="healing left faults")
    broke = row_of(kill, 4, failed_run, 255, 9.0, tmp_path)
    assert (broke.verdict, broke.outcome, broke.report) == ("error", "fail", None)
    assert "the run failed (healing left faults)" in broke.message and broke.message.endswith("harness.log")
    cut = row_of(kill, 4, run_folder(tmp_path / "c", kill, None), 2, 9.0, tmp_path, interrupted=True)
    assert (cut.verdict, cut.outcome) == ("interrupted", "interrupted")
    unknown = row_of(kill, 4, run_folder(tmp_path / "d", kill, "unknown"), 2, 9.0, tmp_path)
    assert unknown.outcome == "fail" and "got unknown (hole undecided)" in unknown.message


def test_the_summary_and_junit_files_show_every_run(tmp_path):
    kill, control = by_name("dledger-kill-sync-3n"), matrix.CONTROLS[1]
    lose = by_name("dledger-lose-node-sync-3n")
    rows = [row_of(kill, 4, run_folder(tmp_path / "a", kill, True), 0, 61.26, tmp_path),
            row_of(control, 4, run_folder(tmp_path / "b", control, True), 0, 50.0, tmp_path),
            row_of(lose, 5, run_folder(tmp_path / "c", lose, False), 1, 70.0, tmp_path),
            row_of(kill, 5, run_folder(tmp_path / "d", kill, None, error="no leader"), 255, 12.0, tmp_path)]
    meta = {"name": "nightly-x", "seed": 4, "seeds": 2, "budget_min": 35, "estimate_s": 300, "started": "s",
            "finished": "f", "interrupted": False, "not_run": [], "git_commit": "abc"}
    summary, html = write_summary(tmp_path, rows, meta)
    data = json.loads(summary.read_text())
    assert data["counts"] == {"pass": 1, "fail": 2, "known-risk": 1, "interrupted": 0, "skipped": 0}
    assert [r["outcome"] for r in data["rows"]] == ["pass", "fail", "known-risk", "fail"]
    assert data["rows"][0]["to_verdict_s"] is not None and data["rows"][0]["faults"][0]["family"] == "kill"
    page = html.read_text()
    assert page.count('<tr class="run ') == 4
    assert 'href="a/dledger-kill-sync-3n/20260101T000000/report.html"' in page
    assert "the harness lost its teeth" in page and "leader hit 1" in page

    root = ET.parse(write_junit(tmp_path / "junit.xml", rows, "nightly", "2026-01-01T00:00:00")).getroot()
    suite = root.find("testsuite")
    assert [suite.get(key) for key in ("tests", "failures", "errors", "skipped")] == ["4", "1", "1", "1"]
    cases = suite.findall("testcase")
    assert [(c.get("classname"), c.get("name"), c.get("time")) for c in cases][:2] == [
        ("nightly.dledger", "dledger-kill-sync-3n seed 4", "61.3"),
        ("nightly.master-slave-async", "master-slave-async-isolate-lose-sync-3n seed 4", "50.0")]
    assert cases[0].find("failure") is None and cases[0].find("error") is None
    failure = cases[1].find("failure")
    assert "lost its teeth" in failure.get("message") and "report.html" in failure.get("message")
    assert "python -m harness run" in failure.text, "the failure says how to rerun it"
    assert "known risk" in cases[2].find("skipped").get("message")
    assert "no leader" in cases[3].find("error").get("message")


@pytest.fixture
def fake_sweep(tmp_path, monkeypatch):
    """`nightly.run` with `run_test` answering from `verdicts` (cell name -> valid, or an exception)."""
    from harness.chaos import run

    verdicts: dict[str, object] = {}
    ran: list[tuple[str, int]] = []

    def fake_run_test(args, faults, name, seed):
        ran.append((name, seed))
        answer = verdicts[name]
        if isinstance(answer, BaseException):
            raise answer
        run_dir = run_folder(args.results_dir / f"s{seed}", by_name(name), answer)
        return (0 if answer is True else 1), run_dir

    monkeypatch.setattr(run, "run_test", fake_run_test)
    monkeypatch.setattr(nightly, "connect", lambda: argparse.Namespace(close=lambda: None))
    monkeypatch.setattr(nightly, "warm_checker", lambda: None)

    def sweep_of(only: str, *extra: str) -> tuple[int, dict]:
        parser = argparse.ArgumentParser()
        nightly.add_arguments(parser)
        args = parser.parse_args(["--only", only, "--seed", "7", "--results-dir", str(tmp_path / "results"),
                                  "--sim-min", "0", "--mutants", "0", *extra])
        code = nightly.run(args)
        (out,) = (tmp_path / "results").iterdir()
        assert (out / "summary.html").exists() and (out / "junit.xml").exists()
        return code, json.loads((out / "summary.json").read_text())

    return verdicts, ran, sweep_of


def test_a_sweep_with_every_verdict_as_expected_exits_0(fake_sweep, capsys):
    verdicts, ran, sweep_of = fake_sweep
    verdicts.update({"master-slave-async-isolate-lose-sync-3n": False, "dledger-kill-sync-3n": True})
    code, summary = sweep_of("master-slave-async-isolate-lose,dledger-kill", "--seeds", "2")
    assert code == 0 and summary["counts"]["pass"] == 4 and summary["seed"] == 7
    control = "master-slave-async-isolate-lose-sync-3n"
    assert ran == [(control, 7), (control, 8), ("dledger-kill-sync-3n", 7), ("dledger-kill-sync-3n", 8)]
    out, err = capsys.readouterr()
    assert "nightly: 4 runs: 4 pass\nsummary: " in out
    assert "nightly [1/4] start master-slave-async-isolate-lose-sync-3n seed 7: expects invalid" in err
    assert "nightly [4/4] pass dledger-kill-sync-3n seed 8: valid (expected valid)" in err and "eta" in err


@pytest.mark.parametrize("caught_before", [False, True])
def test_tonights_seeded_bugs_run_first_and_one_caught_before_that_comes_back_valid_fails(
        fake_sweep, monkeypatch, caught_before):
    verdicts, ran, sweep_of = fake_sweep
    [bug] = tonight(7, 1)  # the sweep's seed is 7
    if caught_before:
        monkeypatch.setitem(CAUGHT_BY_CELL, bug.name.split("-mutant-")[1], "caught before")
    verdicts.update({bug.name: True, "dledger-kill-sync-3n": True})
    code, summary = sweep_of("dledger-kill-sync-3n,mutant-", "--mutants", "1")
    assert ran == [(bug.name, 7), ("dledger-kill-sync-3n", 7)]
    if caught_before:
        assert code == 1 and summary["rows"][0]["outcome"] == "fail"
        assert "the harness lost its teeth" in summary["rows"][0]["message"]
    else:  # not caught by its cell yet: reported only
        assert code == 0 and [r["outcome"] for r in summary["rows"]] == ["known-risk", "pass"]


def test_an_unexpected_verdict_exits_1(fake_sweep, capsys):
    verdicts, _, sweep_of = fake_sweep
    verdicts.update({"master-slave-async-isolate-lose-sync-3n": False, "dledger-kill-sync-3n": False})
    code, summary = sweep_of("master-slave-async-isolate-lose,dledger-kill")
    assert code == 1 and summary["counts"] == {"pass": 1, "fail": 1, "known-risk": 0, "interrupted": 0,
                                               "skipped": 0}
    err = capsys.readouterr().err
    assert "dledger-kill-sync-3n: expected valid, got invalid (lost 12, divergence 3)" in err


def test_a_control_that_comes_back_valid_exits_1_saying_the_harness_lost_its_teeth(fake_sweep, capsys):
    verdicts, _, sweep_of = fake_sweep
    verdicts["master-slave-async-isolate-lose-sync-3n"] = True
    code, _ = sweep_of("master-slave-async-isolate-lose")
    assert code == 1
    assert ("control master-slave-async-isolate-lose-sync-3n came back valid: the harness lost its teeth"
            in capsys.readouterr().err)


def test_a_known_risk_that_comes_true_is_reported_without_failing_the_sweep(fake_sweep, capsys):
    verdicts, _, sweep_of = fake_sweep
    verdicts.update({"master-slave-async-isolate-lose-sync-3n": False, "dledger-lose-node-sync-3n": False})
    code, summary = sweep_of("master-slave-async-isolate-lose,dledger-lose-node")
    assert code == 0 and summary["counts"]["known-risk"] == 1
    assert "nightly: known-risk: dledger-lose-node-sync-3n" in capsys.readouterr().err


def test_an_interrupt_writes_the_summary_of_what_ran_and_exits_2(fake_sweep):
    verdicts, ran, sweep_of = fake_sweep
    verdicts.update({"master-slave-async-isolate-lose-sync-3n": False,
                     "dledger-kill-sync-3n": KeyboardInterrupt()})
    code, summary = sweep_of("master-slave-async-isolate-lose,dledger-kill,dledger-pause-sync")
    assert code == 2 and len(ran) == 2 and summary["interrupted"] is True
    assert [row["cell"] for row in summary["rows"]] == ["master-slave-async-isolate-lose-sync-3n"]
    assert summary["not_run"] == ["dledger-kill-sync-3n seed 7", "dledger-pause-sync-3n seed 7"]


def test_a_run_that_raises_fails_that_run_and_the_sweep_goes_on(fake_sweep):
    verdicts, ran, sweep_of = fake_sweep
    verdicts.update({"master-slave-async-isolate-lose-sync-3n": RuntimeError("checker broke"),
                     "dledger-kill-sync-3n": True})
    code, summary = sweep_of("master-slave-async-isolate-lose,dledger-kill")
    assert code == 1 and len(ran) == 2
    broke = summary["rows"][0]
    assert broke["verdict"] == "error" and "RuntimeError: checker broke" in broke["message"]


def test_dry_run_lists_the_plan_through_the_cli_and_runs_nothing(tmp_path):
    command = [sys.executable, "-m", "harness", "nightly", "--dry-run", "--budget-min", "5", "--seed", "3",
               "--results-dir", str(tmp_path), "--sim-min", "0", "--mutants", "0"]
    done = subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == (f"nightly: 5 of {len(matrix.MATRIX)} cells within 5 min, 1 seed(s) each from seed 3: "
                        "about 4.5 min")
    assert lines[1].split() == ["1", "dledger-power-loss-async-3n-all-nodes", "expects", "invalid", "65", "s",
                                "control"]
    assert lines[2].split()[1] == "master-slave-async-isolate-lose-sync-3n"
    assert lines[-1].startswith("left out (over the budget): ")
    assert list(tmp_path.iterdir()) == []


def test_bad_arguments_exit_254(tmp_path):
    for extra in (["--only", "no-such-cell"], ["--budget-min", "0"], ["--seeds", "0"]):
        done = subprocess.run([sys.executable, "-m", "harness", "nightly", "--dry-run", *extra], cwd=REPO,
                              capture_output=True, text=True, timeout=120)
        assert done.returncode == 254, (extra, done.stderr)


# -- the sweep on the hosts of an inventory (--hosts) ------------------------------------------------

READY = HostFacts(uid=0, python=(3, 11, 2), peer_ip="10.0.0.1", tools=frozenset(TOOLS), iptables_works=True,
                  pyfuse3=True, dev_fuse=True, addresses={"eth0": ("10.0.0.1",)}, code_writable=True,
                  data_writable=True)
NO_IPTABLES = replace(READY, tools=READY.tools - {"iptables"})


def hosts_file(folder: Path, count: int) -> Path:
    """An inventory of hosts n1..n<count> (a key file beside it)."""
    keys = create_key_pair(folder / "keys", "nightly-test")
    lines = ["[defaults]", f'key = "{keys.private_path}"', 'data_dir = "/var/lib/dlc"']
    for k in range(1, count + 1):
        lines += [f"[hosts.n{k}]", f'address = "192.0.2.{k}"', f'peer_address = "10.0.0.{k}"']
    path = folder / f"hosts-{count}.toml"
    path.write_text("\n".join(lines) + "\n")
    return path


def test_a_cell_is_skipped_when_it_needs_more_nodes_than_hosts_or_faults_its_hosts_lack(tmp_path):
    inventory = load_inventory(hosts_file(tmp_path, 4))
    facts = {"n1": READY, "n2": READY, "n3": READY, "n4": NO_IPTABLES}
    for name in ("dledger-kill-sync-3n", "dledger-partition-sync-3n", "dledger-power-loss-sync-3n"):
        assert sweep.why_not(by_name(name), inventory, facts) is None, name
    assert sweep.why_not(by_name("dledger-partition-sync-5n"), inventory, facts) == (
        f"needs 5 nodes; {inventory.path} names 4 hosts")
    three = inventory.first(3)
    assert sweep.why_not(by_name("dledger-kill-sync-3n"), three, {**facts, "n3": NO_IPTABLES}) is None
    assert sweep.why_not(by_name("dledger-part-kill-sync-3n"), three, {**facts, "n3": NO_IPTABLES}) == (
        "n3: part-kill needs iptables, which is not installed (Debian package iptables)")
    no_fuse = {**facts, "n1": replace(READY, dev_fuse=False), "n2": replace(READY, uid=1000)}
    assert sweep.why_not(by_name("dledger-power-loss-sync-3n"), three, no_fuse) == (
        "n1: power-loss needs FUSE, but it lacks /dev/fuse; n2: power-loss needs root privileges: user root "
        "is not root (log in as root, or give root passwordless sudo and set sudo = true)")


def test_a_cell_runs_on_the_first_hosts_of_a_larger_inventory(tmp_path):
    five = hosts_file(tmp_path, 5)
    small = nightly.run_args(by_name("dledger-kill-sync-3n"), 5, tmp_path / "r", str(five))
    large = nightly.run_args(by_name("dledger-partition-sync-5n"), 5, tmp_path / "r", str(five))
    assert (small.nodes, small.inventory.names) == (3, ["n1", "n2", "n3"])
    assert (large.nodes, large.inventory.names) == (5, ["n1", "n2", "n3", "n4", "n5"])
    rerun = flags.reproduce_command(small, small.faults, 5, "x")
    assert "--nodes 3 " in rerun and f"--hosts {five} " in rerun  # the rerun takes the same three hosts


@pytest.fixture
def hosts_sweep(fake_sweep, tmp_path, monkeypatch):
    """`fake_sweep` on a 3-host inventory whose probe answers `facts`: (verdicts, the runs, `sweep(only)`:
    the exit code of `nightly.run` over the cells `only` names, facts, the hosts each run got, the file)."""
    from harness.chaos import run

    verdicts, ran, _ = fake_sweep
    facts = {"n1": READY, "n2": READY, "n3": READY}
    monkeypatch.setattr(sweep, "probe", lambda inventory: facts)
    inventories: list[list[str]] = []
    fake_run_test = run.run_test

    def recording(args, faults, name, seed):
        inventories.append(args.inventory.names)
        return fake_run_test(args, faults, name, seed)

    monkeypatch.setattr(run, "run_test", recording)
    path = hosts_file(tmp_path, 3)

    def sweep_on_hosts(only: str) -> int:
        parser = argparse.ArgumentParser()
        nightly.add_arguments(parser)
        return nightly.run(parser.parse_args(["--only", only, "--seed", "7", "--hosts", str(path),
                                              "--results-dir", str(tmp_path / "results"), "--sim-min", "0"]))

    return verdicts, ran, sweep_on_hosts, facts, inventories, path


def test_with_hosts_the_cells_they_cannot_run_are_skipped_with_the_reason_not_failed(hosts_sweep, capsys):
    verdicts, ran, sweep_on_hosts, facts, inventories, path = hosts_sweep
    facts["n3"] = NO_IPTABLES
    verdicts["dledger-kill-sync-3n"] = True
    assert sweep_on_hosts("dledger-kill-sync,dledger-partition-sync") == 0
    assert ran == [("dledger-kill-sync-3n", 7)] and inventories == [["n1", "n2", "n3"]]
    (out,) = (path.parent / "results").iterdir()
    summary = json.loads((out / "summary.json").read_text())
    assert summary["hosts"] == str(path) and summary["counts"]["skipped"] == 2
    assert [(r["cell"], r["verdict"], r["outcome"], r["message"]) for r in summary["rows"]] == [
        ("dledger-kill-sync-3n", "valid", "pass", None),
        ("dledger-partition-sync-3n", "skipped", "skipped", "dledger-partition-sync-3n: n3: partition needs "
         "iptables, which is not installed (Debian package iptables)"),
        ("dledger-partition-sync-5n", "skipped", "skipped",
         f"dledger-partition-sync-5n: needs 5 nodes; {path} names 3 hosts")]
    suite = ET.parse(out / "junit.xml").getroot().find("testsuite")
    assert [suite.get(key) for key in ("tests", "failures", "errors", "skipped")] == ["3", "0", "0", "2"]
    skipped = {c.get("name"): c.find("skipped").get("message") for c in suite.findall("testcase")
               if c.find("skipped") is not None}
    assert skipped["dledger-partition-sync-5n seed 7"].endswith(f"needs 5 nodes; {path} names 3 hosts")
    page = (out / "summary.html").read_text()
    assert page.count('<tr class="run skipped">') == 2 and "Skipped: the hosts cannot run them" in page
    printed = capsys.readouterr().out
    assert "skipped: dledger-partition-sync-5n: needs 5 nodes" in printed  # the plan says so up front
    assert "nightly: 1 runs: 1 pass, 2 skipped" in printed


def test_with_hosts_that_can_run_none_of_the_cells_or_no_test_at_all_the_sweep_exits_254(hosts_sweep,
                                                                                      monkeypatch, capsys):
    _, ran, sweep_on_hosts, facts, _, path = hosts_sweep
    facts.update(n1=NO_IPTABLES, n2=NO_IPTABLES)
    assert sweep_on_hosts("dledger-partition-sync") == 254
    err = capsys.readouterr().err
    assert f"error: the hosts of {path} can run none of the chosen cells:" in err
    assert f"  dledger-partition-sync-5n: needs 5 nodes; {path} names 3 hosts" in err

    def refused(inventory):
        raise HostsRefused(f"the hosts of {path} cannot run this test:\n  n2: python3 is not installed")

    monkeypatch.setattr(sweep, "probe", refused)
    assert sweep_on_hosts("dledger-kill-sync") == 254
    assert "n2: python3 is not installed" in capsys.readouterr().err
    assert ran == [] and not (path.parent / "results").exists()
