"""The report's parts without Spark: the timeline, thinning, the nodes' series, the faults table,
and `python -m harness report`, which re-renders a report from results.json."""

import itertools
import json
import subprocess
import sys
from pathlib import Path

import pytest

import harness.serving.report
from checkers.checks.verdict import decide
from checkers.jsonlines import InputError
from checkers.pages.report import write_report
from checkers.pages.thinning import Thinned
from checkers.pages.timeline import build_timeline
from checkers.run.leaders import Leadership
from checkers.run.nodeseries import SeriesReader
from checkers.run.reader import RunReader
from harness.__main__ import main as harness_main
from tests.report.synthrun import WALL, build_run

S = 1_000_000_000
ROOT = Path(__file__).resolve().parents[2]


def make_run(run_dir):
    ops = []
    for i in range(40):
        t = i * S // 4
        ops.append({"time": t, "type": "invoke", "process": i % 3, "f": "append", "value": {"id": f"a{i}"}})
        kind = "info" if i == 17 else "ok"
        ops.append({"time": t + 3_000_000, "type": kind, "process": i % 3, "f": "append",
                    "value": {"id": f"a{i}", "log_index": i, "term": 1}})
    ops += [
        {"time": 2 * S, "type": "invoke", "process": "nemesis", "f": "start-partition",
         "value": {"grudge": {"n1": ["n2", "n3"]}}},
        {"time": 2 * S + 1, "type": "info", "process": "nemesis", "f": "start-partition", "value": None},
        {"time": 5 * S, "type": "invoke", "process": "nemesis", "f": "stop-partition", "value": None},
        {"time": 5 * S + 1, "type": "info", "process": "nemesis", "f": "stop-partition", "value": None},
        {"time": 7 * S, "type": "invoke", "process": "nemesis", "f": "kill", "value": ["n2"]},
    ]
    ops.sort(key=lambda op: op["time"])
    with (run_dir / "history.jsonl").open("w") as out:
        for index, op in enumerate(ops):
            out.write(json.dumps({"index": index, **op}) + "\n")
    (run_dir / "test.json").write_text(json.dumps({"name": "demo", "nodes": 3, "seed": 42,
                                                   "reproduce": "python -m harness run --seed 42"}))


def test_timeline_pairs_faults_and_keeps_open_ones_until_the_end(tmp_path):
    make_run(tmp_path)
    timeline = build_timeline(tmp_path / "history.jsonl")
    faults = [(p.fault, p.start, p.end) for p in timeline.faults]
    assert ("partition", 2.0, 5.000000001) in faults
    assert ("kill", 7.0, timeline.end) in faults, "a fault never stopped lasts to the end of the run"
    assert len(timeline.points) == 40
    assert sum(c.get(("append", "info"), 0) for c in timeline.per_second.values()) == 1


def test_raw_points_are_thinned_to_a_budget(tmp_path):
    make_run(tmp_path)
    timeline = build_timeline(tmp_path / "history.jsonl", max_points=5)
    assert 5 <= len(timeline.points) <= 10
    assert sum(sum(c.values()) for c in timeline.per_second.values()) == 40, "rates still count every op"


def test_thinning_keeps_an_even_stride_the_first_and_the_last():
    kept = Thinned(budget=10)
    for i in range(1000):
        kept.add(i)
    items = kept.items
    assert 10 <= len(items) <= 21 and items[0] == 0 and items[-1] == 999
    assert len({b - a for a, b in itertools.pairwise(items[:-1])}) == 1, "one stride"


def test_the_history_is_read_by_the_checkers_reader_torn_last_line_and_all(tmp_path):
    make_run(tmp_path)
    path = tmp_path / "history.jsonl"
    with path.open("a") as f:
        f.write('{"index": 999, "ti')
    assert len(build_timeline(path).points) == 40
    lines = path.read_text().splitlines()
    lines.insert(3, "garbage")
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(InputError, match=r"history.jsonl line 4: not valid JSON"):
        build_timeline(path)


def _role(node, t, term, role):
    return {"event": "role", "real_ns": WALL + int(t * S), "time_ns": 0, "node": node, "term": term,
            "role": role, "leader": node if role == "leader" else None}


def test_leaderships_end_at_the_next_role_line_or_a_later_leader(tmp_path):
    lines = {
        "n1": [_role("n1", 0.5, 1, "candidate"), _role("n1", 1.0, 1, "leader"),
               _role("n1", 4.0, 2, "follower")],
        "n2": [_role("n2", 2.5, 2, "candidate"), _role("n2", 3.0, 2, "leader"),
               {"event": "commit", "real_ns": WALL + 5 * S, "node": "n2", "term": 2, "commit_index": 7},
               {"event": "commit", "time_ns": 1, "node": "n2", "term": 2, "commit_index": 8}],
    }
    for node, events in lines.items():
        (tmp_path / "nodes" / node).mkdir(parents=True)
        (tmp_path / "nodes" / node / "events.jsonl").write_text("".join(json.dumps(e) + "\n" for e in events))
    reader = SeriesReader(sorted(lines), WALL)
    RunReader(tmp_path).events([reader])
    series = reader.series
    assert series.leaderships == [Leadership("n1", 1, 1.0, 3.0), Leadership("n2", 2, 3.0, None)]
    assert [(t, node) for t, node, _ in series.candidacies] == [(0.5, "n1"), (2.5, "n2")]
    assert series.commits["n2"] == [(5.0, 7)] and series.unplaced == 1
    assert series.elected("n2", 2) == 3.0 and series.committed(7) == 5.0


def test_report_of_an_unchecked_run_says_so(tmp_path):
    make_run(tmp_path)
    html = write_report(tmp_path).read_text()
    assert "Not checked." in html and f"python -m checkers check {tmp_path}" in html


def test_the_report_has_a_row_per_fault_with_its_effects(tmp_path):
    make_run(tmp_path)
    test = json.loads((tmp_path / "test.json").read_text())
    test["fault_log"] = {"leader_changes": 1, "elections": 2, "faults": [
        {"family": "kill", "label": "kill", "start_s": 7.0, "end_s": 9.0, "targets": ["n2"],
         "leader_before": "n2", "leader_hit": True, "leader_changes": 1, "elections": 2,
         "ops": {"ok": 5, "fail": 1, "info": 3}, "longest_no_append_s": 1.25, "recovery_s": 0.5,
         "detail": {"target": "leader"}, "stop_error": "node n2 did not come back"},
        {"family": "partition", "label": "partition", "start_s": 12.0, "end_s": 15.0, "targets": ["n1"],
         "leader_before": "n1", "leader_hit": True, "leader_changes": 1, "elections": 1,
         "ops": {"ok": 2, "fail": 0, "info": 1}, "longest_no_append_s": 2.0, "recovery_s": 0.25,
         "detail": {"shape": "isolate-leader", "grudge": {"n1": ["n2", "n3"], "n2": ["n1"], "n3": ["n1"]},
                    "leader": "n1"}}]}
    (tmp_path / "test.json").write_text(json.dumps(test))
    html = write_report(tmp_path).read_text()
    assert "What the faults did" in html and "yes (n2)" in html
    assert "5 / 1 / 3" in html and "1.25" in html and "0.50" in html and "1 leader change and" in html
    assert 'href="timeline.html#t=7.000"' in html and "heal error: node n2 did not come back" in html
    assert "<td>targets drawn as the leader</td>" in html  # the detail in words, not JSON
    assert "<td>shape isolate-leader; split n1 | n2, n3; leader n1</td>" in html


WITNESS = {"id": "a9", "append": {"id": "a9", "process": 1, "type": "ok", "invoke_index": 4,
                                  "invoke_time": 1, "complete_index": 5, "complete_time": 2, "ack_index": 3}}


@pytest.mark.parametrize(("found", "undecidable", "code", "words"), [
    ({}, {}, 0, "<b>Valid.</b>"),
    ({"lost": (1, [WITNESS])}, {}, 1, "<b>Invalid.</b>"),
    ({}, {"lost": "no final log (final/<node>.jsonl)"}, 2, "lost (no final log (final/&lt;node&gt;.jsonl))"),
])
def test_harness_report_renders_from_results_json_and_exits_with_its_verdict(
        tmp_path, monkeypatch, found, undecidable, code, words):
    folder = build_run(tmp_path / "run")
    (folder / "results.json").write_text(json.dumps(decide(found, undecidable, "read-index", {}, [])))
    monkeypatch.setattr(sys, "argv", ["harness", "report", str(folder)])
    assert harness_main() == code
    html = (folder / "report.html").read_text()
    assert words in html
    assert ('id="witness-lost-1"' in html) == bool(found)


def test_harness_report_of_a_folder_never_checked_is_unknown(tmp_path, monkeypatch, capsys):
    folder = build_run(tmp_path / "run")
    monkeypatch.setattr(sys, "argv", ["harness", "report", str(folder)])
    assert harness_main() == 2
    assert "never checked" in capsys.readouterr().err
    assert "Not checked." in (folder / "report.html").read_text()


def test_harness_report_bad_arguments_exit_254_and_say_why(tmp_path):
    missing = tmp_path / "absent"
    done = subprocess.run([sys.executable, "-m", "harness", "report", str(missing)], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 254 and f"{missing}: not a directory" in done.stderr
    folder = build_run(tmp_path / "run")
    (folder / "results.json").write_text('{"valid": "maybe"}')
    done = subprocess.run([sys.executable, "-m", "harness", "report", str(folder)], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 254 and "results.json: needs `valid`" in done.stderr
    done = subprocess.run([sys.executable, "-m", "harness", "report"], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 254 and "RESULTS_DIR" in done.stderr


def test_harness_report_of_a_malformed_history_exits_254(tmp_path, monkeypatch, capsys):
    folder = build_run(tmp_path / "run")
    lines = (folder / "history.jsonl").read_text().splitlines()
    lines[2] = '{"index": 2}'
    (folder / "history.jsonl").write_text("\n".join(lines) + "\n")
    monkeypatch.setattr(sys, "argv", ["harness", "report", str(folder)])
    assert harness_main() == 254
    assert "history.jsonl line 3: `time` must be an integer" in capsys.readouterr().err


def test_harness_report_internal_error_exits_255(tmp_path, monkeypatch):
    folder = build_run(tmp_path / "run")

    def broken(*_args):
        raise RuntimeError("a bug")

    monkeypatch.setattr(harness.serving.report, "write_report", broken)
    monkeypatch.setattr(sys, "argv", ["harness", "report", str(folder)])
    assert harness_main() == 255
