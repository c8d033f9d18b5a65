"""The HTML report and its plots, from a small synthetic run folder."""

import json

import pytest

from checkers.report import write_report
from checkers.timeline import build_timeline

S = 1_000_000_000


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
    assert 5 <= len(timeline.points) < 10
    assert sum(sum(c.values()) for c in timeline.per_second.values()) == 40, "rates still count every op"


def test_torn_last_line_is_skipped_but_a_bad_middle_line_is_reported(tmp_path):
    make_run(tmp_path)
    path = tmp_path / "history.jsonl"
    with path.open("a") as f:
        f.write('{"index": 999, "ti')
    assert len(build_timeline(path).points) == 40
    lines = path.read_text().splitlines()
    lines.insert(3, "garbage")
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(ValueError, match=r"history.jsonl:4: not a JSON line"):
        build_timeline(path)


def test_report_shows_verdict_witnesses_plots_and_faults(tmp_path):
    make_run(tmp_path)
    witness = {"id": "a3", "invoke": {"index": 6}, "ack": {"log_index": 3}}
    (tmp_path / "results.json").write_text(json.dumps({
        "valid": False,
        "checks": {"lost": {"valid": False, "count": 4, "witnesses": [witness]},
                   "duplicate": {"valid": True, "count": 0, "witnesses": []},
                   "recovered": {"valid": True, "count": 1, "witnesses": [{"id": "a17"}]}},
        "stats": {"outcomes": {"ok": 39, "info": 1}},
    }))
    html = write_report(tmp_path).read_text()
    assert 'class="badge invalid">invalid<' in html
    assert html.index('href="#lost"') < html.index('href="#duplicate"'), "anomalies come first"
    assert "&#34;id&#34;: &#34;a3&#34;" in html or '"id": "a3"' in html
    assert "and 3 more" in html
    assert "python -m harness run --seed 42" in html
    assert "start-partition" in html and "stop-partition" in html
    for name in ("latency-raw.png", "latency-quantiles.png", "rate.png"):
        assert (tmp_path / name).stat().st_size > 5000
        assert f'src="{name}"' in html


def test_report_of_an_unchecked_run_says_so(tmp_path):
    make_run(tmp_path)
    html = write_report(tmp_path).read_text()
    assert "not checked" in html


def test_the_report_has_a_row_per_fault_with_its_effects(tmp_path):
    from checkers.report import write_report

    make_run(tmp_path)
    test = json.loads((tmp_path / "test.json").read_text())
    test["fault_log"] = {"leader_changes": 1, "elections": 2, "faults": [
        {"family": "kill", "label": "kill", "start_s": 7.0, "end_s": 9.0, "targets": ["n2"],
         "leader_before": "n2", "leader_hit": True, "leader_changes": 1, "elections": 2,
         "ops": {"ok": 5, "fail": 1, "info": 3}, "longest_no_append_s": 1.25, "recovery_s": 0.5}]}
    (tmp_path / "test.json").write_text(json.dumps(test))
    html = write_report(tmp_path).read_text()
    assert "What the faults did" in html and "yes (n2)" in html
    assert "5 / 1 / 3" in html and "1.25" in html and "1 leader change and" in html
