"""Generator: concurrency syntax, unique ids, read ranges, pacing and the fault schedule."""

import random

import pytest

from harness.generator import Mix, nemesis_schedule, pacing_delay, parse_concurrency, worker_rng
from nodes.payload import payload_id


@pytest.mark.parametrize(
    ("text", "nodes", "want"), [("10", 5, 10), ("2n", 5, 10), ("3n", 3, 9), (" 1 ", 7, 1)]
)
def test_concurrency_forms(text, nodes, want):
    assert parse_concurrency(text, nodes) == want


@pytest.mark.parametrize("text", ["", "n", "0", "-2", "2x", "1.5n"])
def test_bad_concurrency_is_explained(text):
    with pytest.raises(ValueError, match="positive number of workers"):
        parse_concurrency(text, 5)


def test_appends_carry_unique_ids_in_their_bodies():
    mix = Mix(payload_size=64, read_fraction=0.0)
    rng = worker_rng(7, 0)
    ops = [mix.next_op(rng, process, seq, -1) for process in range(3) for seq in range(50)]
    ids = [op.value["id"] for op in ops]
    assert len(set(ids)) == len(ids)
    assert all(len(op.body) == 64 and payload_id(op.body) == op.value["id"] for op in ops)


def test_reads_reach_just_past_the_acknowledged_end():
    mix = Mix(read_fraction=1.0, max_read_span=5)
    rng = random.Random(1)
    reads = [mix.next_op(rng, 0, i, 40) for i in range(500)]
    assert all(op.f == "read" for op in reads)
    assert all(0 <= op.value["from"] <= op.value["to"] <= 45 for op in reads)
    tail = sum(1 for op in reads if op.value["to"] > 40)
    assert 150 < tail < 350, "about half the reads look past the acknowledged end"
    assert all(op.value["to"] - op.value["from"] <= 5 for op in reads)
    assert any(op.value["from"] == op.value["to"] for op in reads)
    assert any(op.value["from"] < op.value["to"] for op in reads)


def test_nothing_to_read_before_the_first_acknowledgement():
    mix = Mix(read_fraction=1.0)
    assert mix.next_op(random.Random(0), 0, 0, -1).f == "append"


def test_pacing_averages_to_the_rate():
    rng = random.Random(3)
    delays = [pacing_delay(rng, rate=500, workers=10) for _ in range(20000)]
    assert abs(sum(delays) / len(delays) - 10 / 500) < 0.001
    assert pacing_delay(rng, rate=0, workers=10) == 0.0


def test_schedule_alternates_and_heals_before_the_end():
    steps = nemesis_schedule(seed=5, faults=["kill", "partition"], interval=10, time_limit=60)
    assert [s.at for s in steps] == [10, 20, 30, 40]
    assert [s.action for s in steps] == ["start", "stop"] * 2
    assert all(a.fault == b.fault for a, b in zip(steps[::2], steps[1::2], strict=True))
    assert steps == nemesis_schedule(seed=5, faults=["kill", "partition"], interval=10, time_limit=60)
    many = {tuple(s.fault for s in nemesis_schedule(s, ["kill", "partition"], 1, 100)) for s in range(5)}
    assert len(many) > 1, "different seeds choose different faults"
    for seed in range(20):  # every requested fault runs before any runs again
        steps = nemesis_schedule(seed, ["kill", "partition", "pause"], 1, 13)
        kinds = [s.fault for s in steps if s.action == "start"]
        assert len(kinds) == 6 and set(kinds[:3]) == set(kinds[3:]) == {"kill", "partition", "pause"}
    assert nemesis_schedule(1, [], 10, 60) == []
