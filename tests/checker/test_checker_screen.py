"""The screen clears correct histories without the exact checks and never clears a broken one;
pairing ops across bucket edges gives the same verdicts as pairing them inside one bucket.
"""

from __future__ import annotations

import pytest

import checkers.checks.history
from checkers.checks.check import check_many
from checkers.checks.verdict import INFORMATIONAL
from checkers.layout import ResultsDir

pytestmark = pytest.mark.spark


def _counts(result):
    return {c: (v["valid"], v["count"]) for c, v in result["checks"].items()}


def _broken(result) -> list[str]:
    return [c for c, v in result["checks"].items() if v["valid"] is False and c not in INFORMATIONAL]


def _correct(checked) -> dict:
    """The folders with final logs in which the exact checks found nothing at all (but recoveries)."""
    return {
        name: (case, result)
        for name, (case, result) in checked.items()
        if result["stats"]["final_log_ends"]
        and not any(v["count"] for c, v in result["checks"].items() if c not in INFORMATIONAL)
    }


def test_the_screen_never_clears_a_history_the_exact_checks_find_broken(checked):
    broken = {name: _broken(result) for name, (_, result) in checked.items() if _broken(result)}
    assert len(broken) > 20, "the batch holds every anomaly class"
    cleared = [(name, found) for name, found in broken.items() if not checked[name][1]["stats"]["screen"]]
    assert not cleared, cleared


def test_the_screen_alone_decides_correct_histories_with_the_same_verdicts(spark, checked):
    correct = _correct(checked)
    assert {f"ok-{s}" for s in range(3)} <= set(correct), sorted(correct)
    assert sum(name.startswith("random-") for name in correct) >= 5
    results = check_many([ResultsDir.open(case.path) for case, _ in correct.values()], spark, witnesses=1000)
    for (name, (_, exact)), result in zip(correct.items(), results, strict=True):
        assert result["stats"]["exact_checks"] is False, name
        assert result["stats"]["screen"] == [], name
        assert _counts(result) == _counts(exact), name
        assert result["checks"]["recovered"]["witnesses"] == exact["checks"]["recovered"]["witnesses"], name


def test_the_passes_the_screen_leaves_decide_every_history_as_all_the_exact_passes(spark, checked):
    names = list(checked)
    dirs = [ResultsDir.open(checked[n][0].path) for n in names]
    exact = check_many(dirs, spark, witnesses=1000, exact=True)
    differ, partly = [], []
    for name, every in zip(names, exact, strict=True):
        screened = checked[name][1]
        mine, theirs = screened["checks"], every["checks"]
        if (screened["valid"], mine) != (every["valid"], theirs):
            differ.append((name, {c: (mine[c], theirs[c]) for c in mine if mine[c] != theirs[c]}))
        decided = set(screened["stats"]["exact_decided"])
        if decided and decided < set(every["stats"]["exact_decided"]):
            partly.append(name)
    assert not differ, differ[:2]
    assert len(partly) > 20, "the batch runs some histories' passes only"


def test_lost_appends_are_counted_placed_and_witnessed_by_the_screen(checked):
    _, result = checked["inject-lost"]
    lost = result["checks"]["lost"]
    assert lost["valid"] is False and lost["count"] >= 1 and sum(lost["where"].values()) >= 1
    assert "lost" in result["stats"]["screen"] and "lost" not in result["stats"]["exact_decided"]
    assert not {"realtime-reorder", "future-read", "index-mismatch"} & set(result["stats"]["exact_decided"])


def test_tiny_buckets_pair_ops_across_their_edges_with_the_same_verdicts(spark, checked, monkeypatch):
    monkeypatch.setattr(checkers.checks.history, "BUCKET_LINES", 3)
    names = list(checked)
    results = check_many([ResultsDir.open(checked[n][0].path) for n in names], spark, witnesses=1000)
    differ = [
        (n, _counts(r)) for n, r in zip(names, results, strict=True) if _counts(r) != _counts(checked[n][1])
    ]
    assert not differ, differ[:2]
    correct = _correct(checked)
    results = check_many([ResultsDir.open(case.path) for case, _ in correct.values()], spark)
    assert all(r["stats"]["screen"] == [] for r in results)
