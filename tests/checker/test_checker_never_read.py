"""Jepsen's drain count: a run that should have final logs and has none (a cluster that never
came back) leaves `lost` unknown, and says how many acknowledged appends nothing ever read back.

The Spark checker and the reference checker must agree on the count; with final logs present
nothing changes.
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pytest

from checkers.checks.check import check_many
from checkers.checks.verdict import add_never_read, decide, exit_code, table
from checkers.layout import ResultsDir
from checkers.reference import reference_check
from checkers.synth import simulate

pytestmark = pytest.mark.spark
NODES = ["n1", "n2", "n3"]
SHOULD_HAVE_FINAL_LOGS = {"nodes": NODES, "read_mode": "read-index", "inputs": ["history", "final-logs"]}
SIM_SEEDS = range(3)


def _drained_history() -> list[dict[str, Any]]:
    """Six acknowledged appends (a..e, h at 0..5), one failed, one unknown; a read returns a and
    b, a failed read carries c, a consume gets d; e and h are never read back (and no read goes
    past them, so the history alone does not show them lost)."""
    lines: list[dict[str, Any]] = []

    def op(process: int, f: str, asked: dict[str, Any], kind: str = "ok", **got: Any) -> None:
        for line_kind, value in (("invoke", asked), (kind, {**asked, **got})):
            n = len(lines)
            lines.append({"index": n, "time": n * 1000, "type": line_kind, "process": process, "f": f,
                          "value": value})

    for k, x in enumerate("abcde"):
        op(0, "append", {"id": x}, log_index=k)
    op(0, "append", {"id": "f"}, "fail")
    op(0, "append", {"id": "h"}, log_index=5)
    op(0, "append", {"id": "g"}, "info")
    op(1, "read", {"from": 0, "to": 1}, entries=[[0, "a"], [1, "b"]])
    op(1, "read", {"from": 2, "to": 2}, "fail", entries=[[2, "c"]])
    op(2, "consume", {"consumer": 0, "from": 3}, entries=[[3, "d"]], offset=4)
    return lines


def _write(folder: Path, lines: list[dict[str, Any]], final: list[str | None] | None) -> Path:
    folder.mkdir(parents=True)
    (folder / "history.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
    (folder / "test.json").write_text(json.dumps(SHOULD_HAVE_FINAL_LOGS))
    if final is not None:
        (folder / "final").mkdir()
        entries = "".join(json.dumps({"log_index": i, "term": 1, "id": x}) + "\n"
                          for i, x in enumerate(final))
        for node in NODES:
            (folder / "final" / f"{node}.jsonl").write_text(entries)
    return folder


def _simulated(seed: int, folder: Path) -> Path:
    """A correct simulated run whose final logs were never collected."""
    rng = random.Random(seed)
    sim = simulate(seed, rng.randrange(40, 120), p_read=rng.uniform(0.1, 0.4), read_span=rng.randrange(0, 4),
                   p_info=0.2, consumers=rng.choice((0, 2)))
    sim.write(folder)
    for path in (folder / "final").glob("*.jsonl"):
        path.unlink()
    (folder / "test.json").write_text(json.dumps({**SHOULD_HAVE_FINAL_LOGS, "nodes": sim.nodes}))
    return folder


def _expected_never_read(folder: Path) -> int:
    """Ok appends whose id no read or consume completion (ok, fail or info) carried, counted by hand."""
    lines = [json.loads(line) for line in (folder / "history.jsonl").read_text().splitlines()]
    ok = {x["value"]["id"] for x in lines if x["f"] == "append" and x["type"] == "ok"}
    seen = {e[1] for x in lines if x["f"] in ("read", "consume") and x["type"] != "invoke"
            for e in x["value"].get("entries", [])}
    return len(ok - seen)


@pytest.fixture(scope="module")
def verdicts(spark, tmp_path_factory):
    root = tmp_path_factory.mktemp("never-read")
    folders = {
        "drained": _write(root / "drained", _drained_history(), None),
        "kept": _write(root / "kept", _drained_history(), ["a", "b", "c", "d", "e", "h"]),
        **{f"sim-{seed}": _simulated(seed, root / f"sim-{seed}") for seed in SIM_SEEDS},
    }
    results = check_many([ResultsDir.open(p) for p in folders.values()], spark, witnesses=10)
    return {name: (folders[name], result) for name, result in zip(folders, results, strict=True)}


def test_without_final_logs_lost_is_unknown_and_counts_what_was_never_read(verdicts):
    folder, result = verdicts["drained"]
    lost = result["checks"]["lost"]
    assert lost["valid"] == "unknown" and lost["count"] == 0, lost
    assert lost["never_read"] == 2 == _expected_never_read(folder)
    assert lost["note"] == (
        "no final logs (final/<node>.jsonl); 2 acknowledged appends were never read back"
    )
    assert result["valid"] == "unknown" and exit_code(result["valid"]) == 2
    assert {n for n, c in result["checks"].items() if "never_read" in c} == {"lost"}


def test_the_reference_checker_counts_the_same(verdicts):
    for name, (folder, result) in verdicts.items():
        ref = reference_check(folder)["checks"]["lost"]
        assert ref.get("never_read") == result["checks"]["lost"].get("never_read"), name
        assert ref["valid"] == result["checks"]["lost"]["valid"], name
        if "never_read" in ref:
            assert ref["note"] == result["checks"]["lost"]["note"].replace(" (final/<node>.jsonl)", ""), name


def test_simulated_runs_without_final_logs_count_their_unread_appends(verdicts):
    counts = []
    for seed in SIM_SEEDS:
        folder, result = verdicts[f"sim-{seed}"]
        lost = result["checks"]["lost"]
        assert lost["valid"] == "unknown" and result["valid"] == "unknown", (seed, lost)
        assert lost["never_read"] == _expected_never_read(folder), seed
        counts.append(lost["never_read"])
    assert any(counts), "some simulated run leaves acknowledged appends unread"


def test_with_final_logs_nothing_changes(verdicts):
    _, result = verdicts["kept"]
    lost = result["checks"]["lost"]
    assert lost["valid"] is True and "never_read" not in lost and "note" not in lost, lost


def test_the_table_shows_the_unread_count_for_an_unknown_lost(verdicts):
    _, result = verdicts["drained"]
    [line] = [x for x in table(result).splitlines() if x.startswith("lost ")]
    assert line.split()[1:3] == ["unknown", "2"]
    assert "never read back" in line
    _, kept = verdicts["kept"]
    [line] = [x for x in table(kept).splitlines() if x.startswith("lost ")]
    assert line.split()[1:3] == ["ok", "0"]


def test_the_note_reads_right_for_one_and_none_and_leaves_a_decided_lost_alone():
    why = {"lost": "no final logs"}
    one = decide({}, why, "read-index", {}, [])
    add_never_read(one, 1)
    assert one["checks"]["lost"]["note"] == "no final logs; 1 acknowledged append was never read back"
    none = decide({}, why, "read-index", {}, [])
    add_never_read(none, 0)
    assert none["checks"]["lost"]["never_read"] == 0
    assert none["checks"]["lost"]["note"] == "no final logs; every acknowledged append was read back"
    invalid = decide({"lost": (3, [])}, why, "read-index", {}, [])
    add_never_read(invalid, 5)
    assert invalid["checks"]["lost"]["valid"] is False and "never_read" not in invalid["checks"]["lost"]
