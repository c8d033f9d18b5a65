"""timeline.html and its chunks, from small hand-made histories: what the page is given to draw."""

from __future__ import annotations

import itertools
import json
import re
from pathlib import Path
from typing import Any

import pytest

from checkers.jsonlines import InputError
from checkers.pages import optimeline
from checkers.pages.optimeline import witnesses, write_timeline
from nemesis import catalogue

MS = 1_000_000


def write_history(folder: Path, ops: list[dict[str, Any]], **test: Any) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    with (folder / "history.jsonl").open("w") as out:
        for index, op in enumerate(ops):
            out.write(json.dumps({"index": index, **op}) + "\n")
    (folder / "test.json").write_text(json.dumps({"name": "tl", "faults": catalogue.vocabulary(["partition"]),
                                                  **test}))
    return folder


def op(t_ms: float, kind: str, process: Any, f: str = "append", value: Any = None, **extra: Any) -> dict:
    """A history line at `t_ms`; an append without a value appends id `x`."""
    if value is None and f == "append":
        value = {"id": "x", "log_index": 0} if kind == "ok" else {"id": "x"}
    return {"time": int(t_ms * MS), "type": kind, "process": process, "f": f, "value": value, **extra}


def page_data(page: Path) -> dict[str, Any]:
    found = re.search(r'<script type="application/json" id="tl-data">(.*?)</script>', page.read_text(), re.S)
    assert found, "the page inlines its data"
    return json.loads(found[1])


def chunk_rows(folder: Path) -> list[dict[str, Any]]:
    """Every op of every chunk file, as one dict per op."""
    rows = []
    for path in sorted((folder / "timeline").glob("chunk-*.js")):
        found = re.fullmatch(r"TL\.chunk\((\d+),(.*)\);\n", path.read_text(), re.S)
        assert found, f"{path.name} calls TL.chunk(k, columns)"
        cols = json.loads(found[2])
        rows += [dict(zip(cols, values, strict=True)) for values in zip(*cols.values(), strict=True)]
    return rows


@pytest.fixture
def small_run(tmp_path: Path) -> Path:
    ops = [
        op(0, "invoke", 0, value={"id": "a1"}, node="n1"),
        op(1, "invoke", 1, "read", {"from": 0, "to": 1}, node="n2"),
        op(5, "ok", 0, value={"id": "a1", "log_index": 1, "term": 1}, node="n1"),
        op(6, "invoke", "nemesis", "start-partition", {"grudge": {"n1": ["n2"]}}),
        op(7, "info", "nemesis", "start-partition", {"grudge": {"n1": ["n2"]}}),
        op(8, "fail", 1, "read", {"from": 0, "to": 1}, node="n2", error="not-leader"),
        op(10, "invoke", 0, value={"id": "a2"}, node="n1"),
        op(30, "info", 0, value={"id": "a2"}, node="n1", error="timeout"),
        op(31, "invoke", 2, value={"id": "a3"}, node="n3"),  # process 0's worker, fresh process id
        op(40, "invoke", "nemesis", "stop-partition", None),
        op(41, "info", "nemesis", "stop-partition", None),
        op(50, "invoke", 1, value={"id": "a4"}, node="n2"),  # never completes
        op(60, "ok", 2, value={"id": "a3", "log_index": 2, "term": 1}, node="n3"),
    ]
    folder = write_history(tmp_path / "run", ops)
    witness = {"id": "a3", "append": {"invoke_index": 8, "complete_index": 12, "ack_index": 2}}
    (folder / "results.json").write_text(json.dumps({"valid": False, "checks": {
        "lost": {"valid": False, "count": 1, "witnesses": [witness]},
        "recovered": {"valid": True, "informational": True, "count": 1,
                      "witnesses": [{"append": {"invoke_index": 6}}]}}}))
    return folder


def test_every_client_op_lands_in_one_chunk_with_its_lane_outcome_and_times(small_run):
    data = page_data(write_timeline(small_run))
    rows = chunk_rows(small_run)
    assert data["ops"] == len(rows) == 5
    outcome = {r["i"]: data["types"][r["y"]] for r in rows}
    assert outcome == {0: "ok", 1: "fail", 6: "info", 8: "ok", 11: "open"}
    a4 = next(r for r in rows if r["i"] == 11)
    assert a4["j"] == -1 and a4["b"] == data["end_us"] == 60_000, "an op never completed lasts to the end"
    assert sum(c[2] for c in data["chunks"]) == 5
    assert [data["fs"][r["f"]] for r in rows if r["i"] == 1] == ["read"]
    read = next(r for r in rows if r["i"] == 1)
    assert data["nodes"][read["n"]] == "n2" and "not-leader" in read["v"]


def test_a_fresh_process_takes_the_lane_its_retired_process_left(small_run):
    data = page_data(write_timeline(small_run))
    lanes = {r["p"]: r["l"] for r in chunk_rows(small_run)}
    assert lanes[2] == lanes[0] != lanes[1], "process 2 took the lane of process 0, retired by its info"
    assert [(lane["label"], lane["processes"]) for lane in data["lanes"]] == [("p0", 2), ("p1", 1)]


def test_with_the_runs_concurrency_a_lane_is_a_worker(tmp_path):
    ops = [op(0, "invoke", 4), op(1, "info", 4), op(2, "invoke", 7), op(3, "ok", 7)]
    folder = write_history(tmp_path, ops, concurrency=3)
    data = page_data(write_timeline(folder))
    assert [r["l"] for r in chunk_rows(folder)] == [1, 1]
    assert data["lanes"][1] == {"label": "worker 1", "first": 1, "processes": 2}


def test_faults_nemesis_ops_and_witnesses_are_in_the_page(small_run):
    data = page_data(write_timeline(small_run))
    [fault] = data["faults"]
    assert (fault["label"], fault["start"], fault["end"]) == ("partition", 0.006, 0.041)
    assert [(n[4], n[5]) for n in data["nemesis"]] == [
        ("start-partition", "info"), ("stop-partition", "info")]
    assert data["witnesses"] == [{"check": "lost", "n": 1, "ops": [8, 12], "t": 0.031}], \
        "informational checks are not witnesses"


def test_bins_count_every_op_per_lane_and_widen_to_stay_few(tmp_path):
    ops = []
    for k in range(3000):  # one op a second for 50 minutes: 1 ms bins would need 3 million
        ops += [op(k * 1000, "invoke", k % 2), op(k * 1000 + 2, "fail" if k % 3 == 0 else "ok", k % 2)]
    folder = write_history(tmp_path, ops)
    bins = page_data(write_timeline(folder))["bins"]
    assert bins["count"] <= optimeline.MAX_BINS
    assert bins["count"] * bins["width_us"] >= 2_999_000_000
    ok, fail = (sum(sum(lane[o]) for lane in bins["lanes"]) for o in (0, 1))
    assert (ok, fail) == (2000, 1000)
    assert len(chunk_rows(folder)) == 3000 and len(list((folder / "timeline").iterdir())) == 1


def test_ops_past_one_chunk_spill_into_more_and_old_chunks_go_on_rewrite(tmp_path, monkeypatch):
    ops = [line for k in range(25) for line in (op(k, "invoke", 0), op(k + 0.5, "ok", 0))]
    folder = write_history(tmp_path, ops)
    monkeypatch.setattr(optimeline, "CHUNK_OPS", 10)
    data = page_data(write_timeline(folder))
    assert [c[2] for c in data["chunks"]] == [10, 10, 5]
    assert data["chunks"][1][:2] == [10_000, 19_500], "each chunk says which span of time it covers"
    monkeypatch.setattr(optimeline, "CHUNK_OPS", 100)
    write_timeline(folder)
    assert [p.name for p in (folder / "timeline").iterdir()] == ["chunk-00000.js"]


def test_sparse_samples_bracket_every_history_line(tmp_path, monkeypatch):
    monkeypatch.setattr(optimeline, "MAX_SAMPLES", 8)
    ops = [line for k in range(40) for line in (op(k, "invoke", 0), op(k + 0.5, "ok", 0))]
    samples = page_data(write_timeline(write_history(tmp_path, ops)))["samples"]
    assert len(samples) < 8 and samples[0] == [0, 0]
    indexes = [s[0] for s in samples]
    assert indexes == sorted(indexes) and all(b - a == indexes[1] for a, b in itertools.pairwise(indexes))


def test_a_torn_last_line_is_skipped_and_a_bad_middle_line_is_named(small_run):
    history = small_run / "history.jsonl"
    with history.open("a") as f:
        f.write('{"index": 13, "ti')
    assert page_data(write_timeline(small_run))["lines"] == 13
    lines = history.read_text().splitlines()
    lines[3] = "garbage"
    history.write_text("\n".join(lines) + "\n")
    with pytest.raises(InputError, match=r"history.jsonl line 4: not valid JSON"):
        write_timeline(small_run)


def test_names_are_escaped_and_the_page_needs_nothing_from_the_network(tmp_path):
    folder = write_history(tmp_path, [op(0, "invoke", 0), op(1, "ok", 0)],
                           name="<script>alert(1)</script>")
    html = write_timeline(folder).read_text()
    assert "<script>alert(1)" not in html and "&lt;script&gt;alert(1)" in html
    assert not re.search(r"""(src|href)=["']?(https?:)?//""", html), "no remote script, style or font"
    assert "not checked" in html


def test_witnesses_name_history_lines_anywhere_in_a_witness():
    results = {"checks": {"stale-read": {"witnesses": [
        {"read": {"invoke_index": 9, "complete_index": 12},
         "acked_before": {"invoke_index": 3, "ack_index": 77}},
    ]}, "lost": {"witnesses": []}}}
    assert witnesses(results) == [{"check": "stale-read", "n": 1, "ops": [3, 9, 12]}]
