"""Leadership transfers as the simulator reports them: the terms handed over, and who led them."""

from __future__ import annotations

import argparse
import dataclasses
import json
from collections import Counter
from pathlib import Path

import pytest

from nodes.sim import many
from nodes.sim.cli import flush_policy
from nodes.sim.cluster import TAKE_VOTE_MS, TRANSFER_TIMEOUTS, run_seed
from nodes.sim.config import SimConfig
from nodes.sim.faults import parse_faults
from nodes.sim.handoffs import handoff_line, handoff_outcomes, handoffs_in


def test_each_handed_over_term_counts_under_who_led_it() -> None:
    handed = {(4, "n2"), (5, "n3"), (6, "n1"), (6, "n2")}
    leaders = {3: "n1", 4: "n2", 5: "n1", 7: "n3"}
    assert handoff_outcomes(handed, leaders) == Counter(
        {"handoff-transferee": 1, "handoff-other": 1, "handoff-none": 2}
    )
    assert handoff_outcomes(set(), leaders) == Counter()
    stats = handoff_outcomes(handed, leaders) + Counter({"elections": 5})
    assert handoffs_in(stats) == Counter({"transferee": 1, "other": 1, "none": 2})


def test_the_line_gives_the_shares() -> None:
    counts = Counter({"transferee": 3, "other": 1})
    assert handoff_line(counts) == (
        "leadership transfers: 4 terms handed over, led by: transferee 75.0%, other 25.0%, none 0.0%"
    )
    assert handoff_line(Counter()) == "leadership transfers: no term handed over"


def _handoffs(config: SimConfig) -> Counter[str]:
    result = run_seed(config)
    assert result.violation is None, result.summary()
    return handoffs_in(result.stats)


def test_transfer_runs_hand_over_terms_and_others_do_not() -> None:
    handed = Counter[str]()
    for seed in range(6):
        handed += _handoffs(SimConfig(seed=seed, nodes=(3, 5)[seed % 2], steps=2000, faults=("transfer",)))
        quiet = SimConfig(seed=seed, nodes=3, steps=2000, faults=parse_faults("partition,crash"))
        assert not _handoffs(quiet)
    assert handed["transferee"] > 0 and handed.total() >= 12, handed


@pytest.mark.parametrize(
    "field, draws", [("transfer_timeout_ms", TRANSFER_TIMEOUTS), ("take_vote_ms", TAKE_VOTE_MS)]
)
def test_a_pinned_transfer_timing_replaces_only_its_own_draw(field: str, draws: tuple[object, ...]) -> None:
    """Pinning the value a seed draws changes nothing in its run; pinning the other changes it."""
    base = SimConfig(seed=0, nodes=3, steps=2000, faults=("transfer",))  # one where both timings matter
    drawn = run_seed(base).summary()
    pinned = [run_seed(dataclasses.replace(base, **{field: value})).summary() for value in draws]
    assert pinned.count(drawn) == 1, f"pinning {field} to each of {draws}"


def test_simulate_many_reports_who_led_the_handed_over_terms(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "sim.json"
    args = argparse.Namespace(
        budget=60.0, seeds=4, start=0, nodes="3,5", mixes="transfer", jobs=1, json=out, show=1,
        steps=2000, flush="sync", profile="fast", clients=3, engine="interpreted",
    )
    assert many.run(args) == 0
    expected = Counter[str]()
    for config in many.configs(0, 4, [3, 5], ["transfer"], 2000, flush_policy("sync"), "fast", 3):
        expected += _handoffs(config)
    assert handoff_line(expected) in capsys.readouterr().out.splitlines()
    figures = json.loads(out.read_text())["handoffs"]
    assert {k: v for k, v in figures.items() if v} == dict(expected) and expected
