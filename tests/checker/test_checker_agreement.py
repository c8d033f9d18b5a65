"""Random small histories: the Spark checker, the reference checker and the linearizability search agree."""

from __future__ import annotations

import pytest
from cases import RANDOM_CASES

from checkers.reference import linearizable, reference_check

pytestmark = pytest.mark.spark
SINGLE_NODE = {"divergence", "hole"}  # edits of one node's final log, invisible to the search
LINEARIZABILITY = (
    "lost",
    "divergence",
    "duplicate",
    "phantom",
    "aborted-read",
    "index-mismatch",
    "realtime-reorder",
    "stale-read",
    "future-read",
    "nonmonotonic-read",
    "hole",
    "consumed-then-lost",
    "consume-divergence",
    "malformed-answer",
)


def _random(checked):
    return [checked[f"random-{seed}"] for seed in range(RANDOM_CASES)]


def _counts(result):
    return {c: v["count"] for c, v in result["checks"].items() if c != "replica-disagreement"}


def test_spark_and_reference_checkers_agree_on_every_random_history(checked):
    disagree = [
        (case.injected, case.path, _counts(r), _counts(reference_check(case.path)))
        for case, r in _random(checked)
        if _counts(r) != _counts(reference_check(case.path))
    ]
    assert not disagree, disagree[:2]
    verdicts = {r["valid"] for _, r in _random(checked)}
    assert False in verdicts and "unknown" in verdicts, "the batch holds both broken and correct histories"


def test_search_finds_no_linearization_exactly_when_a_check_fails(checked):
    compared = 0
    for case, result in _random(checked):
        if case.injected in SINGLE_NODE:
            continue
        found = any(result["checks"][c]["count"] for c in LINEARIZABILITY)
        verdict = linearizable(case.path)
        if verdict is None:
            continue
        compared += 1
        assert verdict is not found, (
            case.injected,
            case.path,
            {c: result["checks"][c]["count"] for c in LINEARIZABILITY},
        )
    assert compared > RANDOM_CASES * 0.8
