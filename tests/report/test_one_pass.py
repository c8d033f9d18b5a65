"""One pass over a run: after a run each of its files is opened once, by one reader whose listeners
are the fault log, the report's plots and series, the timeline and the witness lookup."""

from __future__ import annotations

import builtins
import io
import json
import random
from collections import Counter
from pathlib import Path

import pytest

import checkers.run.reader
from checkers.checks.verdict import decide
from checkers.checks.witnesses import HistoryLookup
from checkers.pages.report import write_report
from checkers.run.afterrun import AfterRun
from checkers.run.faultlog import fault_log
from checkers.run.reader import RunReader
from tests.browser.conftest import lost_witness
from tests.report.synthrun import WALL, build_run

FILES = ("history.jsonl", "events.jsonl", "results.json", "test.json")


@pytest.fixture
def opens(monkeypatch: pytest.MonkeyPatch) -> Counter[str]:
    """Opens of each results-folder file (history.jsonl, nodes/<node>/events.jsonl, ...) from now on."""
    counted: Counter[str] = Counter()
    real = io.open

    def counting(file, *args, **kwargs):  # type: ignore[no-untyped-def]
        path = Path(file) if isinstance(file, str | Path) else None
        if path is not None and path.name in FILES:
            counted[path.name if path.name != "events.jsonl" else f"{path.parent.name}/events.jsonl"] += 1
        return real(file, *args, **kwargs)

    monkeypatch.setattr(io, "open", counting)
    monkeypatch.setattr(builtins, "open", counting)
    return counted


def invalid_run(folder: Path) -> tuple[Path, dict]:
    """A synthetic run that lost its last acknowledged append, with the verdict that says so."""
    build_run(folder, lose=True)
    history = [json.loads(line) for line in (folder / "history.jsonl").read_text().splitlines()]
    results = decide({"lost": (1, [lost_witness(history)])}, {}, "read-index", {}, [])
    (folder / "results.json").write_text(json.dumps(results))
    return folder, results


def test_a_full_report_opens_the_history_and_each_nodes_events_once(tmp_path, opens):
    folder, _ = invalid_run(tmp_path / "run")
    opens.clear()
    html = write_report(folder).read_text()
    nodes = sorted(p.parent.name for p in (folder / "nodes").glob("*/events.jsonl"))
    assert len(nodes) == 3
    # test.json twice: ResultsDir.open validates it, the report reads it (a run hands over its own)
    assert opens == {"history.jsonl": 1, "results.json": 1, "test.json": 2,
                     **{f"{node}/events.jsonl": 1 for node in nodes}}
    assert 'id="witness-lost-1"' in html and (folder / "timeline.html").exists()


def test_a_run_feeds_the_fault_log_and_the_report_from_one_pass(tmp_path, opens):
    """As harness/chaos/run.py does: the history's pass before the check, the events' once collected, the
    fault log for test.json; the report after the check, with the verdict in hand."""
    folder, results = invalid_run(tmp_path / "run")
    test = json.loads((folder / "test.json").read_text())
    collected = (folder / "nodes").rename(tmp_path / "nodes")  # a run collects them after its history
    opens.clear()
    after = AfterRun(folder, test, for_fault_log=True)
    after.read_history()
    collected.rename(folder / "nodes")
    after.read_events()
    log = after.fault_log()
    html = write_report(folder, results, after).read_text()
    assert opens == {"history.jsonl": 1, "test.json": 1, **{f"n{i}/events.jsonl": 1 for i in (1, 2, 3)}}
    assert log == test["fault_log"], "the pass's fault log is the fault log of the same lines"
    append = results["checks"]["lost"]["witnesses"][0]["append"]
    assert f"<td>{append['process']}</td>" in html, "the witness's op, fetched after the check, not re-read"


def test_the_lookup_after_the_pass_finds_what_watching_the_whole_history_finds(tmp_path, monkeypatch):
    monkeypatch.setattr(checkers.run.reader, "STRIDE", 5)  # the fetch crosses many remembered offsets
    folder = build_run(tmp_path / "run")
    lines = [json.loads(line) for line in (folder / "history.jsonl").read_text().splitlines()]
    wanted = set(random.Random(3).sample(range(len(lines)), 40)) | {0, len(lines) - 1, len(lines) + 5}
    watched = HistoryLookup(wanted)
    for _ in watched.watch(lines):
        pass
    reader = RunReader(folder)
    reader.history([])
    fetched = reader.lookup(wanted)
    reader.close()
    assert fetched.ops == watched.ops and len(fetched.ops) > 40


def test_the_fault_log_of_the_pass_is_the_pure_fault_log(tmp_path):
    folder = build_run(tmp_path / "run")
    test = json.loads((folder / "test.json").read_text())
    after = AfterRun(folder, test, for_fault_log=True)
    after.read_history()
    after.read_events()
    after.close()
    history = [json.loads(line) for line in (folder / "history.jsonl").read_text().splitlines()]
    events = [json.loads(line) for path in sorted((folder / "nodes").glob("*/events.jsonl"))
              for line in path.read_text().splitlines()]
    assert after.fault_log() == fault_log(history, test["faults"], events, WALL)
    assert after.timeline.timeline.faults == after.faults.periods, "the report's bands are the log's faults"
