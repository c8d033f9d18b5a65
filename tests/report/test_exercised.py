"""What a run exercised (`checkers.run.exercised`): rules summed over nodes and incarnations, the
elections, whether the faults bit; the verdict line's clause and the report's rules table."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from checkers.checks.verdict import decide, table, verdict_line
from checkers.jsonlines import InputError
from checkers.layout import ResultsDir
from checkers.pages.report import write_report
from checkers.run.exercised import NO_BITE, NO_FAULT, bite, exercised, run_summary
from nodes.coverage import RULES
from tests.report.synthrun import build_run

WALL = 1_700_000_000_000_000_000


def role(node: str, at: int, term: int, what: str, leader: str | None = None) -> dict:
    return {"time_ns": WALL + at, "real_ns": WALL + at, "node": node, "event": "role", "term": term,
            "role": what, "leader": node if what == "leader" else leader}


def rules(node: str, at: int, counts: dict[str, int]) -> dict:
    return {"time_ns": WALL + at, "real_ns": WALL + at, "node": node, "event": "rules", "counts": counts}


def commit(node: str, at: int, index: int) -> dict:
    return {"time_ns": WALL + at, "real_ns": WALL + at, "node": node, "event": "commit", "term": 1,
            "commit_index": index}


def write_events(folder: Path, lines: dict[str, list[dict]], tail: str = "") -> dict[str, Path]:
    """Each node's lines in nodes/<node>/events.jsonl, compact as the nodes write them."""
    paths = {}
    for node, events in lines.items():
        path = folder / "nodes" / node / "events.jsonl"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("".join(json.dumps(e, separators=(",", ":")) + "\n" for e in events) + tail)
        paths[node] = path
    return paths


# n1 leads term 1, is killed and comes back (a second incarnation, its counts from zero);
# n2 leads term 2 and steps down; n3 leads term 3.
THREE_NODES = {
    "n1": [role("n1", 1, 1, "candidate"), role("n1", 2, 1, "leader"), commit("n1", 3, 0),
           rules("n1", 4, {"push.resend-timeout": 2}), commit("n1", 5, 1),
           role("n1", 10, 1, "candidate"), rules("n1", 11, {"recovery.cut-tail": 1}),
           role("n1", 12, 2, "follower", "n2"), rules("n1", 13, {"push.compare.match": 1})],
    "n2": [role("n2", 1, 1, "follower", "n1"), role("n2", 9, 2, "candidate"), role("n2", 10, 2, "leader"),
           rules("n2", 11, {"vote.reject.already-voted": 1, "push.compare.match": 3}),
           role("n2", 20, 3, "candidate"), role("n2", 21, 3, "follower", "n3")],
    "n3": [role("n3", 1, 1, "follower", "n1"), role("n3", 19, 3, "candidate"), role("n3", 20, 3, "leader"),
           rules("n3", 21, {"step-down.higher-term": 1})],
}


def test_rules_and_elections_sum_over_the_nodes_and_the_incarnations(tmp_path):
    logs = write_events(tmp_path, THREE_NODES, tail='{"event":"rules","counts":{"push.tru')  # torn: skipped
    found = exercised(logs)
    assert found["rules"] == {"vote.reject.already-voted": 1, "push.compare.match": 4,
                              "push.resend-timeout": 2, "step-down.higher-term": 1, "recovery.cut-tail": 1}
    assert list(found["rules"]) == [r for r in RULES if r in found["rules"]], "in RULES' order"
    assert found["never_fired"] == [r for r in RULES if r not in found["rules"]]
    assert (found["elections"], found["leaders"], found["leader_changes"]) == (3, ["n1", "n2", "n3"], 2)
    assert found["step_downs"] == 2, "n1 killed and back, n2 stepped down; n3 still leads"
    assert found["summary"] == (f"3 elections won by 3 leaders, 2 leader changes, 2 step-downs; "
                                f"5 of {len(RULES)} guarded rules fired (9 firings), {len(RULES) - 5} never")


def test_one_leader_throughout_is_no_leader_change(tmp_path):
    logs = write_events(tmp_path, {"n1": [role("n1", 1, 1, "leader"), role("n1", 5, 4, "leader")],
                                   "n2": [role("n2", 1, 1, "follower", "n1")]})
    found = exercised(logs)
    assert (found["elections"], found["leaders"], found["leader_changes"]) == (2, ["n1"], 0)
    assert found["rules"] == {} and len(found["never_fired"]) == len(RULES)


@pytest.mark.parametrize(("line", "problem"), [
    ("not json", "line 2: not valid JSON"),
    ('{"event":"rules","node":"n1","counts":{"push.truncate":-1}}', "line 2: a rules line needs `counts`"),
    ('{"event":"rules","node":"n1","counts":[1]}', "line 2: a rules line needs `counts`"),
    ('{"event":"role","node":"n1","term":1,"role":"boss","leader":null}', "line 2: `role` must be one of"),
])
def test_a_bad_middle_line_is_named_with_its_file_and_line(tmp_path, line, problem):
    path = tmp_path / "nodes" / "n1" / "events.jsonl"
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps(role("n1", 1, 1, "leader")) + "\n" + line + "\n")
    with pytest.raises(InputError, match=f"{path} {problem}"):
        exercised({"n1": path})


FAULT = {"family": "partition", "ops": {"ok": 50, "fail": 0, "info": 0}}
QUIET = {"leader_changes": 0}


@pytest.mark.parametrize(("test", "found", "expected"), [
    ({"fault_log": {"faults": [FAULT]}, "client_outcomes": {"ok": 90, "fail": 0, "info": 0}}, QUIET,
     {"faults": 1, "leader_changes": 0, "failed_ops": 0, "bit": False, "note": NO_BITE, "unrun": []}),
    ({"fault_log": {"faults": [FAULT]}, "client_outcomes": {"ok": 90, "fail": 0, "info": 0}},
     {"leader_changes": 1},
     {"faults": 1, "leader_changes": 1, "failed_ops": 0, "bit": True, "note": None, "unrun": []}),
    ({"fault_log": {"faults": [FAULT]}, "client_outcomes": {"ok": 90, "fail": 0, "info": 0},
      "consume_outcomes": {"ok": 9, "fail": 1, "info": 1}}, QUIET,
     {"faults": 1, "leader_changes": 0, "failed_ops": 2, "bit": True, "note": None, "unrun": []}),
    ({"fault_log": {"faults": [FAULT, {**FAULT, "ops": {"ok": 1, "fail": 0, "info": 3}}]}}, QUIET,
     {"faults": 2, "leader_changes": 0, "failed_ops": 3, "bit": True, "note": None, "unrun": []}),
    ({"fault_log": {"faults": [FAULT]}, "client_outcomes": {"ok": 90, "fail": 7, "info": 0},
      "directed_read_refusals": 7}, QUIET,
     {"faults": 1, "leader_changes": 0, "failed_ops": 0, "bit": False, "note": NO_BITE, "unrun": []}),
    ({"fault_log": {"faults": [FAULT]}, "client_outcomes": {"ok": 90, "fail": 3, "info": 0},
      "nemesis_unrun": ["stop", "power-loss"]}, QUIET,
     {"faults": 1, "leader_changes": 0, "failed_ops": 3, "bit": True, "note": None,
      "unrun": ["stop", "power-loss"]}),
    ({"fault_log": {"faults": []}, "client_outcomes": {"ok": 90, "fail": 0, "info": 0}}, QUIET, None),
    ({"faults": {"power-loss": {}}, "fault_log": {"faults": []}}, None,
     {"faults": 0, "leader_changes": None, "failed_ops": None, "bit": False, "note": NO_FAULT, "unrun": []}),
    ({}, QUIET, None),
    ({"fault_log": {"faults": [FAULT]}}, None, None),
], ids=["no-bite", "leader-changed", "consume-failed", "ops-while-faulted", "refusals-only", "some-never-ran",
        "no-faults",
        "asked-but-none-ran", "no-fault-log",
        "no-events"])
def test_the_faults_bit_when_a_leader_changed_or_an_op_failed(test, found, expected):
    assert bite(test, found) == expected


def verdict(valid: bool, bit: bool | None) -> dict:
    result = decide({} if valid else {"lost": (1, [])}, {}, "read-index", {}, [])
    if bit is not None:
        result["bite"] = {"faults": 2, "leader_changes": int(bit), "failed_ops": 0, "bit": bit,
                          "note": None if bit else NO_BITE}
    return result


@pytest.mark.parametrize(("valid", "bit", "line"), [
    (True, False, f"valid: true  (read mode read-index), but {NO_BITE}"),
    (True, True, "valid: true  (read mode read-index)"),
    (True, None, "valid: true  (read mode read-index)"),
    (False, False, f"valid: false  (read mode read-index); {NO_BITE}"),
])
def test_the_verdict_line_says_when_the_faults_did_not_bite(valid, bit, line):
    result = verdict(valid, bit)
    assert verdict_line(result) == line
    assert line in table(result).splitlines()


def test_the_verdict_line_names_the_scheduled_faults_that_never_ran():
    result = verdict(True, True)
    result["bite"]["unrun"] = ["stop", "power-loss"]
    assert verdict_line(result) == ("valid: true  (read mode read-index); "
                                    "scheduled but never ran: stop, power-loss")


def test_the_table_shows_what_the_nodes_exercised(tmp_path):
    write_events(tmp_path, THREE_NODES)
    (tmp_path / "history.jsonl").write_text("")
    result = {**verdict(True, None), **run_summary(ResultsDir.open(tmp_path))}
    assert result["bite"] is None, "no test.json: no faults to bite"
    assert f"exercised: {result['exercised']['summary']}" in table(result).splitlines()


def reported(folder: Path, bit: bool | None) -> str:
    results = {**verdict(True, bit), "exercised": run_summary(ResultsDir.open(folder))["exercised"]}
    return write_report(folder, results).read_text()


def test_the_report_has_the_rules_table_and_warns_when_the_faults_did_not_bite(tmp_path):
    folder = build_run(tmp_path / "run")
    with (folder / "nodes" / "n1" / "events.jsonl").open("a") as f:
        f.write(json.dumps(rules("n1", 1, {"append.timeout": 3, "lease.expired-step-down": 1})) + "\n")
    html = reported(folder, bit=False)
    assert "What the nodes exercised" in html
    for rule, count in (("append.timeout", 3), ("lease.expired-step-down", 1)):
        about = f'<td class="muted">{RULES[rule]}</td>'
        assert f'<tr><td><code>{rule}</code></td>{about}<td class="num">{count}</td>' in html
    assert "<code>push.compare.match</code>" not in html, "rules that never fired have no row"
    assert f"{len(RULES) - 2} of the {len(RULES)} guarded rules never fired" in html
    assert 'id="no-bite"' in html and NO_BITE.capitalize() in html
    assert 'id="no-bite"' not in reported(folder, bit=True)


def test_a_report_of_results_without_the_tally_says_it_was_not_recorded(tmp_path):
    folder = build_run(tmp_path / "run")
    html = write_report(folder, verdict(True, None)).read_text()
    assert "Not recorded" in html and 'id="no-bite"' not in html


@pytest.mark.spark
def test_the_check_writes_the_tally_and_the_bite_into_results_json(spark, tmp_path):
    from checkers.checks.check import check

    folder = build_run(tmp_path / "run")
    with (folder / "nodes" / "n2" / "events.jsonl").open("a") as f:
        f.write(json.dumps(rules("n2", 1, {"push.truncate": 2})) + "\n")
    test = json.loads((folder / "test.json").read_text())
    test["client_outcomes"] = {"ok": 1, "fail": 0, "info": 0}
    (folder / "test.json").write_text(json.dumps(test))
    result = check(folder, spark_master="local[2]")
    assert json.loads((folder / "results.json").read_text()) == result
    assert result["exercised"] == run_summary(ResultsDir.open(folder))["exercised"]
    assert result["exercised"]["rules"] == {"push.truncate": 2} and result["exercised"]["elections"] > 1
    changes = result["exercised"]["leader_changes"]
    assert result["bite"] == {"faults": len(test["fault_log"]["faults"]), "leader_changes": changes,
                              "failed_ops": 0, "bit": changes > 0, "note": None if changes else NO_BITE,
                              "unrun": []}
