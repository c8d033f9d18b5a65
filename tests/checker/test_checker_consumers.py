"""The consumer checks (consumed-then-lost, consume-divergence, skipped-offset) on crafted
histories, on generated ones, and on malformed consume lines; Spark and the reference agree."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from typing import Any

import pytest
from cases import CONSUMER_SEEDS, RANDOM_CASES
from histgen import CONSUMER_INJECTIONS

from checkers.checks.check import check_many
from checkers.checks.verdict import BY_NAME, FINAL
from checkers.jsonlines import InputError
from checkers.layout import ResultsDir
from checkers.pages.report import write_report
from checkers.reference import reference_check

pytestmark = pytest.mark.spark
CONSUMER_CHECKS = ("consumed-then-lost", "consume-divergence", "skipped-offset")
NODES = ("n1", "n2", "n3")


class History:
    """A hand-written history: ops are added in order, each line one time step after the last."""

    def __init__(self) -> None:
        self.lines: list[dict[str, Any]] = []

    def line(self, kind: str, process: int, f: str, value: dict[str, Any], node: str, **extra: Any) -> int:
        index = len(self.lines)
        self.lines.append({"index": index, "time": (index + 1) * 1_000_000, "type": kind,
                           "process": process, "f": f, "value": value, "node": node, **extra})
        return index

    def append(self, process: int, ident: str, log_index: int | None, kind: str = "ok") -> None:
        self.line("invoke", process, "append", {"id": ident}, "n1")
        done = {"id": ident, "log_index": log_index, "term": 1} if kind == "ok" else {"id": ident}
        self.line(kind, process, "append", done, "n1", **({} if kind == "ok" else {"error": "timeout"}))

    def consume(self, process: int, consumer: int, start: int, entries: list[list[Any]] | None = None,
                offset: int | None = None, *, kind: str = "ok", node: str = "n1", rewound: bool = False
                ) -> int:
        """An ok consume of `entries` (committing `offset`, by default one past them), or a fail/info
        one; returns the invoke's history index."""
        asked = {"consumer": consumer, "from": start}
        invoke = self.line("invoke", process, "consume", asked, node)
        if kind != "ok":
            self.line(kind, process, "consume", asked, node, error="timeout")
            return invoke
        entries = entries or []
        got = {**asked, "to": start + len(entries) - 1, "entries": entries,
               "offset": start + len(entries) if offset is None else offset}
        if rewound:
            got["rewound"] = True
        self.line("ok", process, "consume", got, node)
        return invoke

    def write(self, folder: Path, final: list[str | None] | None) -> Path:
        """The results folder: this history and, unless `final` is None, every node's final log `final`."""
        folder.mkdir(parents=True)
        (folder / "history.jsonl").write_text("".join(json.dumps(line) + "\n" for line in self.lines))
        (folder / "test.json").write_text(json.dumps({"nodes": list(NODES), "read_mode": "read-index"}))
        if final is not None:
            (folder / "final").mkdir()
            entries = "".join(
                json.dumps({"log_index": i, "term": 1, "id": x}) + "\n" for i, x in enumerate(final)
            )
            for node in NODES:
                (folder / "final" / f"{node}.jsonl").write_text(entries)
        return folder


def _clean() -> tuple[History, list[str | None], dict[str, Any]]:
    """Consumers that consume no-ops, see an empty pull at the log's end, fail and time out (a
    fresh process after the info), and one that rewinds after an offset overflow and consumes
    the same ids again."""
    h = History()
    final = [None, "a1", "a2", None, "a3", "a4"]
    for n, ident in enumerate(("a1", "a2", "a3", "a4")):
        h.append(n, ident, final.index(ident))
    h.consume(10, 0, 0, [[0, None], [1, "a1"], [2, "a2"]])
    h.consume(10, 0, 3, [[3, None], [4, "a3"]], node="n2")
    h.consume(10, 0, 5, kind="fail")
    h.consume(10, 0, 5, [[5, "a4"]])
    h.consume(10, 0, 6)  # nothing new: to = from - 1, offset unchanged
    h.consume(11, 1, 0, [[0, None], [1, "a1"], [2, "a2"], [3, None], [4, "a3"]])
    h.consume(11, 1, 5, kind="info")
    rewind = h.consume(12, 1, 5, [], 3, node="n3", rewound=True)  # n3 lagged: its log ended at 2
    h.consume(12, 1, 3, [[3, None], [4, "a3"], [5, "a4"]])
    return h, final, {"rewind": rewind}


def _lost() -> tuple[History, list[str | None], dict[str, Any]]:
    """c1 is consumed at index 3 past the final log's end (twice); the no-op at 4 is not an anomaly."""
    h = History()
    final = [None, "a1", "a2"]
    h.append(0, "a1", 1)
    h.append(1, "a2", 2)
    h.append(2, "c1", None, kind="info")
    first = h.consume(10, 0, 0, [[0, None], [1, "a1"], [2, "a2"], [3, "c1"], [4, None]], node="n2")
    h.consume(11, 1, 2, [[2, "a2"], [3, "c1"]])
    return h, final, {"first": first}


def _divergence() -> tuple[History, list[str | None], dict[str, Any]]:
    """Index 1: a1 in the final log, a2 consumed; 2: a2 in the final log, a no-op consumed;
    5 (past the end): a3, which the final log holds at 3; 6: two consumers got x6 and x7."""
    h = History()
    final = [None, "a1", "a2", "a3"]
    for n, ident in enumerate(("a1", "a2", "a3")):
        h.append(n, ident, final.index(ident))
    h.consume(10, 0, 0, [[0, None], [1, "a1"], [2, None], [3, "a3"]])
    h.consume(10, 0, 4, [[4, None], [5, "a3"], [6, "x6"]])
    second = h.consume(11, 1, 0, [[0, None], [1, "a2"]], node="n3")
    h.consume(11, 1, 2, [[2, "a2"], [3, "a3"]])
    h.consume(11, 1, 4, [[4, None], [5, "a3"], [6, "x7"]])
    return h, final, {"second": second}


def _skipped() -> tuple[History, list[str | None], dict[str, Any]]:
    """Consumer 0 pulls from 4 after committing 2; consumer 1 gets 0 then 2; consumer 2 commits
    4 after getting 0..1. Consumer 3 rewinds and goes on from the lower offset (allowed), and
    consumer 4 changes process after an info (allowed)."""
    h = History()
    final = [None, "a1", "a2", "a3", "a4", "a5"]
    for n, ident in enumerate(final[1:]):
        h.append(n, ident, final.index(ident))
    log = [[i, x] for i, x in enumerate(final)]
    h.consume(10, 0, 0, log[0:2])
    past = h.consume(10, 0, 4, log[4:6])
    gap = h.consume(11, 1, 0, [log[0], log[2]], 3)
    over = h.consume(12, 2, 0, log[0:2], 4)
    h.consume(13, 3, 0, log[0:4])
    h.consume(13, 3, 4, [], 2, rewound=True)
    h.consume(13, 3, 2, log[2:6])
    h.consume(14, 4, 0, log[0:3])
    h.consume(14, 4, 3, kind="info")
    h.consume(15, 4, 3, log[3:6])
    return h, final, {"past": past, "gap": gap, "over": over}


CRAFTED = {"clean": _clean, "lost": _lost, "divergence": _divergence, "skipped": _skipped}


@pytest.fixture(scope="module")
def crafted(spark, tmp_path_factory):
    """name -> (folder, marks, screened verdict, exact verdict); `clean-no-final` has no final logs."""
    base = tmp_path_factory.mktemp("consumers")
    built = {}
    for name, make in CRAFTED.items():
        h, final, marks = make()
        built[name] = (h.write(base / name, final), marks)
    h, _, marks = _clean()
    built["clean-no-final"] = (h.write(base / "clean-no-final", None), marks)
    dirs = [ResultsDir.open(folder) for folder, _ in built.values()]
    screened = check_many(dirs, spark, witnesses=100)
    exact = check_many(dirs, spark, witnesses=100, exact=True)
    return {name: (folder, marks, s, e)
            for (name, (folder, marks)), s, e in zip(built.items(), screened, exact, strict=True)}


def _counts(result: dict[str, Any]) -> dict[str, int]:
    return {c: v["count"] for c, v in result["checks"].items() if c != "replica-disagreement"}


def _verdict(check: dict[str, Any]) -> dict[str, Any]:
    """A check's entry without the evidence it used."""
    return {k: v for k, v in check.items() if k != "evidence"}


def _found(result: dict[str, Any]) -> dict[str, int]:
    return {c: v["count"] for c, v in result["checks"].items() if v["count"] and c != "recovered"}


def test_clean_consumers_pass_every_check(crafted):
    folder, marks, result, exact = crafted["clean"]
    assert result["stats"]["consume_ops"] == 9
    for name in CONSUMER_CHECKS:
        assert _verdict(result["checks"][name]) == {"valid": True, "count": 0, "witnesses": []}, name
    assert _found(result) == {} and _found(exact) == {}
    assert result["stats"]["screen"] == [], "the screen clears it"
    rewound = json.loads((folder / "history.jsonl").read_text().splitlines()[marks["rewind"] + 1])
    assert rewound["value"]["rewound"] and rewound["value"]["offset"] < rewound["value"]["from"]


def test_consumed_then_lost(crafted):
    _, marks, result, exact = crafted["lost"]
    assert _found(result) == {"consumed-then-lost": 1} == _found(exact)
    check = result["checks"]["consumed-then-lost"]
    assert check["valid"] is False and result["valid"] is False
    [w] = check["witnesses"]
    assert (w["id"], w["log_index"], w["consumes"]) == ("c1", 3, 2)
    first = marks["first"]
    assert (w["consume"]["invoke_index"], w["consume"]["complete_index"]) == (first, first + 1)
    assert (w["consume"]["consumer"], w["consume"]["node"], w["consume"]["from"]) == (0, "n2", 0)
    # c1, consumed past the final log's end, also leaves the divergence by index to its pass
    assert result["stats"]["screen"] == ["consumed-then-lost", "divergence"], "the screen does not clear it"


def test_consume_divergence(crafted):
    _, marks, result, exact = crafted["divergence"]
    # every consumed entry is a statement of the log: the general rules see the same conflicts
    assert _found(result) == {"consume-divergence": 4, "consumed-then-lost": 2, "divergence": 3,
                              "duplicate": 2, "index-mismatch": 2, "phantom": 2} == _found(exact)
    assert result["checks"]["consume-divergence"]["valid"] is False
    by_index = {w["log_index"]: w for w in result["checks"]["consume-divergence"]["witnesses"]}
    assert sorted(by_index) == [1, 2, 5, 6]
    one = by_index[1]
    assert one["in_final_log"] is True and one["final_id"] == "a1"
    consumed = [(c["id"], c["consumes"], c.get("final_index")) for c in one["consumed"]]
    assert consumed == [("a1", 1, 1), ("a2", 1, 2)]
    assert one["consumed"][1]["first"]["invoke_index"] == marks["second"]
    assert one["consumed"][1]["first"]["node"] == "n3"
    assert by_index[2]["final_id"] == "a2" and {c.get("id") for c in by_index[2]["consumed"]} == {None, "a2"}
    five = by_index[5]
    assert five["in_final_log"] is False and "final_id" not in five
    assert [(c["id"], c["consumes"], c["final_index"]) for c in five["consumed"]] == [("a3", 2, 3)]
    assert {c["id"] for c in by_index[6]["consumed"]} == {"x6", "x7"}
    lost = {w["id"] for w in result["checks"]["consumed-then-lost"]["witnesses"]}
    assert lost == {"x6", "x7"}


def test_skipped_offset(crafted):
    _, marks, result, exact = crafted["skipped"]
    # the gap's pull says it got up to index 1 (its `to`), yet holds index 2
    assert _found(result) == {"skipped-offset": 3, "malformed-answer": 1} == _found(exact)
    assert result["checks"]["skipped-offset"]["valid"] is False
    found = {w["consume"]["invoke_index"]: w for w in result["checks"]["skipped-offset"]["witnesses"]}
    assert set(found) == {marks["past"], marks["gap"], marks["over"]}
    past, gap, over = found[marks["past"]], found[marks["gap"]], found[marks["over"]]
    assert (past["consumer"], past["reason"], past["missing_from"], past["missing_to"]) == (
        0, "from-past-offset", 2, 3)
    assert past["previous"]["offset"] == 2 and past["previous"]["invoke_index"] < marks["past"]
    assert (gap["consumer"], gap["reason"], gap["missing_from"], gap["missing_to"]) == (
        1, "entries-not-consecutive", 1, 1)
    assert "previous" not in gap, "its consumer's first ok consume"
    assert (over["consumer"], over["reason"], over["missing_from"], over["missing_to"]) == (
        2, "offset-past-entries", 2, 3)


def test_without_final_logs_the_final_log_checks_are_unknown(crafted):
    _, _, result, _ = crafted["clean-no-final"]
    for name in ("consumed-then-lost", "consume-divergence"):
        assert FINAL in (*BY_NAME[name].needs, *BY_NAME[name].uses)
    for name in ("consumed-then-lost", "consume-divergence"):
        assert result["checks"][name]["valid"] == "unknown" and result["checks"][name]["count"] == 0, name
        assert "final" in result["checks"][name]["note"]
    assert result["checks"]["skipped-offset"]["valid"] is True


def test_reference_checker_agrees_on_the_crafted_histories(crafted):
    for name, (folder, _, result, _) in crafted.items():
        ref = reference_check(folder)
        assert _counts(ref) == _counts(result), name
        assert {c: v["valid"] for c, v in ref["checks"].items() if c in CONSUMER_CHECKS} == {
            c: v["valid"] for c, v in result["checks"].items() if c in CONSUMER_CHECKS
        }, name


def test_histories_without_consumes_pass_the_consumer_checks(checked):
    plain = [r for name, (_, r) in checked.items() if name.startswith(("ok-", "inject-"))
             and name.removeprefix("inject-") not in CONSUMER_INJECTIONS]
    assert len(plain) > 10
    for result in plain:
        assert result["stats"]["consume_ops"] == 0
        for name in CONSUMER_CHECKS:
            assert _verdict(result["checks"][name]) == {"valid": True, "count": 0, "witnesses": []}, name


def test_generated_consumers_pass(checked):
    for seed in CONSUMER_SEEDS:
        case, result = checked[f"consumers-ok-{seed}"]
        lines = [json.loads(line) for line in case.path.joinpath("history.jsonl").read_text().splitlines()]
        got = [line["value"] for line in lines if line["f"] == "consume" and line["type"] == "ok"]
        assert result["stats"]["consume_ops"] >= len(got) > 20
        assert any(v.get("rewound") for v in got), "a consumer rewound"
        assert any(e[1] is None for v in got for e in v["entries"]), "no-ops were consumed"
        for name in CONSUMER_CHECKS:
            check = result["checks"][name]
            assert check["count"] == 0 and check["valid"] is True, (seed, name)


@pytest.mark.parametrize("name", list(CONSUMER_INJECTIONS))
def test_injected_consumer_anomaly_is_found_and_the_reference_agrees(checked, name):
    case, result = checked[f"inject-{name}"]
    check = result["checks"][name]
    assert check["valid"] is False and check["count"] >= 1, (case.path, check)
    assert any(all(w.get(k) == v for k, v in case.expected.items()) for w in check["witnesses"]), (
        case.expected, check["witnesses"][:3])
    # a consumed entry is a statement of the log: the general rules see a changed id there too
    # (the injection puts there another id of the log, whose append may come after the consume)
    general = {"divergence", "duplicate", "index-mismatch", "future-read"}
    also = general if name == "consume-divergence" else set()
    assert name in _found(result) and set(_found(result)) <= {name, *also}, _found(result)
    assert _counts(reference_check(case.path)) == _counts(result)


def test_spark_and_reference_agree_on_random_histories_with_consumers(checked):
    with_consumers = [checked[f"random-{seed}"] for seed in range(RANDOM_CASES)
                      if checked[f"random-{seed}"][1]["stats"].get("consume_ops")]
    assert len(with_consumers) > RANDOM_CASES // 3
    broken = {c for _, r in with_consumers for c in CONSUMER_CHECKS if r["checks"][c]["count"]}
    assert broken == set(CONSUMER_CHECKS), "the random histories break each consumer check"
    disagree = [(case.injected, case.path) for case, r in with_consumers
                if _counts(r) != _counts(reference_check(case.path))]
    assert not disagree, disagree[:3]


def _edit(folder: Path, f: str, kind: str, edit) -> int:
    """Apply `edit` to the value of the first `f` line of type `kind`; its line number (from 1)."""
    lines = folder.joinpath("history.jsonl").read_text().splitlines()
    records = [json.loads(line) for line in lines]
    n = next(i for i, r in enumerate(records) if r["f"] == f and r["type"] == kind)
    record = records[n]
    edit(record["value"])
    lines[n] = json.dumps(record)
    folder.joinpath("history.jsonl").write_text("\n".join(lines) + "\n")
    return n + 1


@pytest.mark.parametrize(
    ("kind", "edit", "message"),
    [
        ("ok", lambda v: v.update(entries="12..14"), "an ok consume needs a list value.entries"),
        ("ok", lambda v: v.update(entries=[[12]]), r"consume entry \[12\] is not \[log_index, id\]"),
        ("ok", lambda v: v.pop("offset"), "an ok consume needs an integer value.offset"),
        ("ok", lambda v: v.update(rewound="yes"), "an ok consume.s value.rewound must be true or false"),
        ("invoke", lambda v: v.pop("consumer"), "a consume invoke needs integer value.consumer"),
        ("invoke", lambda v: v.update({"from": "3"}), "a consume invoke needs integer value.consumer and"),
    ],
)
def test_malformed_consume_line_is_named(spark, checked, tmp_path, kind, edit, message):
    folder = shutil.copytree(checked["consumers-ok-0"][0].path, tmp_path / "run")
    line = _edit(folder, "consume", kind, edit)
    with pytest.raises(InputError, match=rf"history.jsonl line {line}: {message}"):
        check_many([ResultsDir.open(folder)], spark)
    with pytest.raises(InputError, match=rf"history.jsonl line {line}: {message}"):
        reference_check(folder)


def _witness_text(html: str, anchor: str) -> str:
    """The headline of the witness `anchor`, tags and line breaks taken out."""
    found = re.search(rf'<div class="witness[^"]*" id="{anchor}">\n<p>(.*?)</p>', html, re.S)
    assert found, f"no witness {anchor}"
    return " ".join(re.sub(r"<[^>]+>", "", found[1]).split())


def test_the_report_says_what_each_consumer_anomaly_is(crafted):
    folder, marks, result, _ = crafted["lost"]
    html = write_report(folder, result).read_text()
    first = marks["first"]
    assert "In 3 appends, 0 reads and 2 consumes the checker found" in html
    assert _witness_text(html, "witness-consumed-then-lost-1").startswith(
        f"#1 c1 was consumed at index 3 by consumer 0 (history index {first}, node n2) (and 1 more consume), "
        "yet the final log does not hold it.")
    assert "<td>consume</td><td>ok</td><td>consumer 0 from offset 0: got" in html, "the consume op's row"
    assert BY_NAME["consumed-then-lost"].about in html

    folder, marks, result, _ = crafted["divergence"]
    html = write_report(folder, result).read_text()
    texts = [_witness_text(html, f"witness-consume-divergence-{n}") for n in range(1, 5)]
    assert texts[0].startswith(
        f"#1 At index 1 the final log holds a1, but consumes got a1 (1 consume, first by consumer 0 "
        f"(history index 6, node n1)); a2 (1 consume, first by consumer 1 (history index {marks['second']}, "
        "node n3); the final log holds it at index 2).")
    assert texts[2].startswith("#3 At index 5 the final log holds nothing, but consumes got a3 (2 consumes")
    assert "the final log holds it at index 3" in texts[2]

    folder, marks, result, _ = crafted["skipped"]
    html = write_report(folder, result).read_text()
    texts = [_witness_text(html, f"witness-skipped-offset-{n}") for n in range(1, 4)]
    assert texts[0].startswith(
        f"#1 Consumer 0 never consumed indexes 2–3: it pulled from 4 (history index {marks['past']}), "
        "past the offset 2 it committed at its previous pull")
    assert texts[1].startswith("#2 Consumer 1 never consumed index 1: its pull from 0")
    assert "not consecutive" in texts[1]
    assert texts[2].startswith("#3 Consumer 2 never consumed indexes 2–3: after its pull from 0")
    assert "it committed offset 4, past the entries it got" in texts[2]
