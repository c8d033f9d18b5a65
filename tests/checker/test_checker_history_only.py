"""The checker on a history alone: hand-made histories, one per rule the history decides.

Each folder holds only history.jsonl (and a test.json saying so, as an importer writes it):
no final logs, events or store files. Appends may be acknowledged without an index, reads
may read the whole log, and consumes are statements like reads. The Spark checker must find
exactly the expected checks, agree with the reference checker, and end a clean history valid.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from checkers.checks.check import check_many
from checkers.checks.verdict import NOT_APPLICABLE
from checkers.layout import ResultsDir
from checkers.reference import reference_check

pytestmark = pytest.mark.spark
HISTORY_ONLY = {"read_mode": "linearizable", "inputs": ["history"]}


class History:
    """A history written line by line: `op` adds an invoke and its completion in one go,
    `invoke`/`complete` interleave them."""

    def __init__(self) -> None:
        self.lines: list[dict[str, Any]] = []

    def invoke(self, process: int, f: str, value: dict[str, Any]) -> None:
        self._line("invoke", process, f, value)

    def complete(self, kind: str, process: int, f: str, value: dict[str, Any]) -> None:
        self._line(kind, process, f, value)

    def op(self, process: int, f: str, asked: dict[str, Any], kind: str = "ok", **got: Any) -> None:
        self.invoke(process, f, asked)
        self.complete(kind, process, f, {**asked, **got})

    def append(self, process: int, ident: str, kind: str = "ok", **got: Any) -> None:
        self.op(process, "append", {"id": ident}, kind, **got)

    def read(self, process: int, entries: list[Any], **asked: Any) -> None:
        self.op(process, "read", asked, entries=[[i, x] for i, x in entries])

    def consume(self, process: int, consumer: int, first: int, ids: list[str | None]) -> None:
        got = [[first + k, x] for k, x in enumerate(ids)]
        asked = {"consumer": consumer, "from": first}
        self.op(process, "consume", asked, entries=got, offset=first + len(ids))

    def _line(self, kind: str, process: int, f: str, value: dict[str, Any]) -> None:
        n = len(self.lines)
        line = {"index": n, "time": n * 1000, "type": kind, "process": process, "f": f, "value": value}
        self.lines.append(line)

    def write(self, folder: Path, test: dict[str, Any] | None = HISTORY_ONLY) -> Path:
        folder.mkdir(parents=True)
        (folder / "history.jsonl").write_text("".join(json.dumps(line) + "\n" for line in self.lines))
        if test is not None:
            (folder / "test.json").write_text(json.dumps(test))
        return folder


def _clean_unindexed() -> History:
    """Appends acknowledged without an index, reads of the whole log that see every one."""
    h = History()
    h.append(0, "a")
    h.read(1, [(0, "a")])
    h.invoke(0, "append", {"id": "b"})
    h.read(1, [(0, "a")])  # b not yet acknowledged: either answer is fine
    h.complete("ok", 0, "append", {"id": "b"})
    h.append(0, "c", "fail")
    h.read(1, [(0, "a"), (1, "b")])
    h.append(0, "d", "info")
    h.read(1, [(0, "a"), (1, "b"), (2, "d")])
    return h


def _clean_indexed() -> History:
    """Acknowledged indexes, reads of ranges, and a consumer, all agreeing."""
    h = History()
    for k, x in enumerate("abc"):
        h.append(0, x, log_index=k)
    h.read(1, [(1, "b"), (2, "c")], **{"from": 1, "to": 5})
    h.consume(2, 0, 0, ["a", "b"])
    h.consume(2, 0, 2, ["c"])
    return h


def _acked_at_1_read_at_3() -> History:
    h = History()
    h.append(0, "a", log_index=1)
    h.read(1, [(3, "a")], **{"from": 3, "to": 3})
    return h


def _consumed_failed_append() -> History:
    h = History()
    h.append(0, "a", "fail")
    h.consume(2, 0, 0, ["a"])
    return h


def _consumed_before_append() -> History:
    h = History()
    h.consume(2, 0, 0, ["a"])
    h.append(0, "a")
    return h


def _whole_read_misses_then_sees() -> History:
    h = History()
    h.append(0, "a")
    h.read(1, [])
    h.read(1, [(0, "a")])
    return h


def _whole_read_misses_for_good() -> History:
    h = History()
    h.append(0, "a")
    h.append(0, "b")
    h.read(1, [(0, "b")])
    return h


def _index_covered_by_another() -> History:
    h = History()
    h.invoke(3, "append", {"id": "b"})
    h.append(0, "a", log_index=2)
    h.complete("info", 3, "append", {"id": "b"})
    h.read(1, [(2, "b")], **{"from": 2, "to": 2})
    return h


def _reordered_acks() -> History:
    h = History()
    h.append(0, "a", log_index=5)
    h.append(0, "b", log_index=3)
    return h


def _answer_against_its_request() -> History:
    h = History()
    h.invoke(0, "append", {"id": "a"})
    h.invoke(3, "append", {"id": "b"})
    h.complete("ok", 0, "append", {"id": "a"})
    h.complete("ok", 3, "append", {"id": "b"})
    h.read(1, [(3, "a"), (1, "b")], **{"from": 3, "to": 1})
    return h


def _consumed_and_read_elsewhere() -> History:
    h = History()
    h.append(0, "x")
    h.consume(2, 0, 1, ["x"])
    h.read(1, [(2, "x")], **{"from": 2, "to": 2})
    return h


def _seen_only_by_a_failed_read() -> History:
    """A pull that jumps over a's index: a skip, not a loss, since a failed read returned a."""
    h = History()
    h.append(0, "a", log_index=0)
    h.append(0, "b", log_index=1)
    h.op(1, "read", {"from": 0, "to": 0}, "fail", entries=[[0, "a"]])
    h.consume(2, 0, 0, ["b"])  # says it got 1 from 0
    h.lines[-1]["value"]["entries"] = [[1, "b"]]
    return h


def _failed_read_elsewhere() -> History:
    h = History()
    h.append(0, "a", log_index=0)
    h.append(0, "x", "fail")
    h.op(1, "read", {"from": 3, "to": 4}, "info", entries=[[3, "a"], [4, "x"]])
    return h


def _read_of_nobodys_id() -> History:
    h = History()
    h.append(0, "a")
    h.read(1, [(0, "a"), (1, "ghost")])
    return h


def _read_with_a_gap() -> History:
    h = History()
    for k, x in enumerate("abc"):
        h.append(0, x, log_index=k)
    h.read(1, [(0, "a"), (2, "c")], **{"from": 0, "to": 2})
    return h


def _later_read_sees_less() -> History:
    h = History()
    h.invoke(0, "append", {"id": "a"})
    h.invoke(3, "append", {"id": "b"})
    h.read(1, [(0, "a"), (1, "b")])
    h.read(1, [(0, "a")])  # invoked after the first returned, and sees a shorter log
    h.complete("info", 0, "append", {"id": "a"})
    h.complete("info", 3, "append", {"id": "b"})
    return h


CASES: dict[str, tuple[Any, set[str]]] = {
    "clean-unindexed": (_clean_unindexed, set()),
    "clean-indexed": (_clean_indexed, set()),
    "acked-at-1-read-at-3": (_acked_at_1_read_at_3, {"index-mismatch"}),
    "consumed-failed-append": (_consumed_failed_append, {"aborted-read"}),
    "consumed-before-append": (_consumed_before_append, {"future-read"}),
    "whole-read-misses-then-sees": (_whole_read_misses_then_sees, {"stale-read"}),
    "whole-read-misses-for-good": (_whole_read_misses_for_good, {"stale-read", "lost"}),
    "index-covered-by-another": (_index_covered_by_another, {"divergence", "lost"}),
    "reordered-acks": (_reordered_acks, {"realtime-reorder"}),
    "answer-against-its-request": (_answer_against_its_request, {"malformed-answer"}),
    "consumed-and-read-elsewhere": (_consumed_and_read_elsewhere, {"duplicate"}),
    "seen-only-by-a-failed-read": (_seen_only_by_a_failed_read, {"skipped-offset"}),
    "failed-read-elsewhere": (_failed_read_elsewhere, {"index-mismatch"}),
    "read-of-nobodys-id": (_read_of_nobodys_id, {"phantom"}),
    "read-with-a-gap": (_read_with_a_gap, {"hole", "lost"}),  # it went past b, which nothing returned
    "later-read-sees-less": (_later_read_sees_less, {"nonmonotonic-read"}),
}


@pytest.fixture(scope="module")
def verdicts(spark, tmp_path_factory):
    root = tmp_path_factory.mktemp("history-only")
    folders = {name: build().write(root / name) for name, (build, _) in CASES.items()}
    folders["bare"] = _clean_indexed().write(root / "bare", test=None)
    results = check_many([ResultsDir.open(p) for p in folders.values()], spark, witnesses=100)
    return {name: (folders[name], result) for name, result in zip(folders, results, strict=True)}


def _invalid(result: dict[str, Any]) -> set[str]:
    return {name for name, c in result["checks"].items() if c["valid"] is False}


@pytest.mark.parametrize("name", list(CASES))
def test_each_rule_is_decided_from_the_history_alone(verdicts, name):
    folder, result = verdicts[name]
    expected = CASES[name][1]
    assert _invalid(result) == expected, json.dumps(result["checks"], indent=1)[:3000]
    assert result["valid"] is (not expected)
    ref = reference_check(folder)
    assert {c: v["count"] for c, v in ref["checks"].items()} == {
        c: v["count"] for c, v in result["checks"].items()
    }


def test_a_clean_history_on_its_own_ends_valid_and_says_what_did_not_apply(verdicts):
    for name in ("clean-unindexed", "clean-indexed", "bare"):
        _, result = verdicts[name]
        assert result["valid"] is True, (name, result["checks"])
        not_applicable = {n for n, c in result["checks"].items() if c["valid"] == NOT_APPLICABLE}
        assert not_applicable == {
            "replica-disagreement", "election-safety", "stale-leader-read", "leader-completeness",
            "forgotten-vote", "consumed-then-lost", "recovered"
        }
        assert all(result["checks"][n]["note"] for n in not_applicable)
        assert result["checks"]["lost"]["evidence"] == ["history"]
        assert any(note.startswith("not applicable here:") for note in result["notes"])


def test_history_lost_says_where_the_lost_entries_sit(verdicts):
    _, result = verdicts["whole-read-misses-for-good"]
    lost = result["checks"]["lost"]
    assert lost["where"] == {"prefix": 1, "middle": 0, "postfix": 0}
    assert lost["witnesses"][0]["id"] == "a" and lost["witnesses"][0]["covered_by"] is not None


def test_a_check_says_what_it_is_doing(spark, verdicts):
    heard: list[str] = []
    folders = [ResultsDir.open(verdicts[name][0]) for name in ("clean-indexed", "reordered-acks")]
    check_many(folders, spark, progress=heard.append)
    stages = [m for m in heard if " tasks of " not in m]  # Spark's task counts come in between
    counts = [m for m in heard if m not in stages]
    assert all(m.rsplit(": ", 1)[0] in stages and m.endswith(" Spark stage(s)") for m in counts)
    heard = stages
    assert heard[0] == "loading the history and final logs"
    assert heard[1].startswith("screening ") and heard[1].endswith(" history lines")
    assert heard[2].startswith("exact checks (the screen left: ") and "no final logs" in heard[2]


def test_witnesses_name_what_the_rule_saw(verdicts):
    _, result = verdicts["acked-at-1-read-at-3"]
    (w,) = result["checks"]["index-mismatch"]["witnesses"]
    assert (w["ack_index"], w["seen_at"]) == (1, [3])
    _, result = verdicts["whole-read-misses-then-sees"]
    (w,) = result["checks"]["stale-read"]["witnesses"]
    assert w["not_seen"]["id"] == "a"
    _, result = verdicts["consumed-before-append"]
    (w,) = result["checks"]["future-read"]["witnesses"]
    assert w["consume"]["consumer"] == 0 and w["append_invoked_after"]["id"] == "a"
