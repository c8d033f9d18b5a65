"""Every anomaly class, injected on purpose into a correct history, is found with the right witness.

All cases are checked together in one batch (one Spark job per check), as `check_many` does.
"""

from __future__ import annotations

import random

import pytest
from histgen import INJECTIONS, inject, simulate

from checkers.check import check_many
from checkers.layout import ResultsDir
from checkers.reference import linearizable, reference_check

pytestmark = pytest.mark.spark
CORRECT_SEEDS = range(4)
ALLOWED_UNKNOWN = {"replica-disagreement"}  # no store files in these folders


def _matches(witness: dict, expected: dict) -> bool:
    """Whether every expected field appears somewhere in the witness (at any depth)."""
    def values(node, key=None):
        if isinstance(node, dict):
            for k, v in node.items():
                yield from values(v, k)
        elif isinstance(node, list):
            for v in node:
                yield from values(v, key)
        yield key, node

    found = set()
    for k, v in values(witness):
        if isinstance(v, (str, int)):
            found.add((k, v))
    flat = {v for _, v in found}
    return all((k, v) in found or (k in ("later", "earlier", "read") and v in flat) for k, v in expected.items())


@pytest.fixture(scope="module")
def checked(spark, tmp_path_factory):
    base = tmp_path_factory.mktemp("inject")
    cases = []
    for seed in CORRECT_SEEDS:
        sim = simulate(seed, 80)
        cases.append((None, {}, sim.write(base / f"ok{seed}")))
    for n, name in enumerate(INJECTIONS):
        sim = simulate(100 + n, 120)
        expected = inject(sim, name, random.Random(n))
        cases.append((name, expected, sim.write(base / name)))
    results = check_many([ResultsDir.open(path) for _, _, path in cases], spark, witnesses=1000)
    return [(name, expected, path, result) for (name, expected, path), result in zip(cases, results, strict=True)]


def test_correct_histories_pass_every_check(checked):
    for name, _, path, result in checked:
        if name is None:
            bad = {c: v for c, v in result["checks"].items() if v["valid"] is not True and c not in ALLOWED_UNKNOWN}
            assert not bad, f"{path}: {bad}"
            assert result["valid"] == "unknown", "no store files: replica agreement cannot be decided"


@pytest.mark.parametrize("name", list(INJECTIONS))
def test_injected_anomaly_is_found_with_its_witness(checked, name):
    [(_, expected, path, result)] = [c for c in checked if c[0] == name]
    check = result["checks"][name]
    assert check["valid"] is False and check["count"] >= 1, f"{name} not found in {path}: {check}"
    assert result["valid"] is False
    assert any(_matches(w, expected) for w in check["witnesses"]), (expected, check["witnesses"][:3])


@pytest.mark.parametrize("name", list(INJECTIONS))
def test_reference_checker_and_search_agree_on_injected_histories(checked, name):
    [(_, _, path, result)] = [c for c in checked if c[0] == name]
    ref = reference_check(path)
    assert {c: v["count"] for c, v in ref["checks"].items() if c != "replica-disagreement"} == {
        c: v["count"] for c, v in result["checks"].items() if c != "replica-disagreement"}
    if name != "election-safety" and name not in ("divergence", "hole"):  # those touch one node only
        assert linearizable(path) is False


def test_recovered_info_appends_are_reported_not_invalid(checked):
    recovered = [r["checks"]["recovered"] for name, _, _, r in checked if name is None]
    assert sum(c["count"] for c in recovered) > 0
    assert all(c["valid"] is True for c in recovered)
    assert all(w["append"]["type"] == "info" for c in recovered for w in c["witnesses"])
