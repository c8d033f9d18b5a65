"""Target specs: whom a node fault hits."""

import random

import pytest

from nemesis.targets import TARGETS, choose

NAMES = ["n1", "n2", "n3", "n4", "n5"]


@pytest.mark.parametrize("size", [3, 5, 7, 9])
def test_each_spec_picks_what_it_says(size):
    names = [f"n{i}" for i in range(1, size + 1)]
    for seed in range(30):
        rng = random.Random(seed)
        picked = {t: choose(t, names, "n2", rng) for t in TARGETS}
        assert len(picked["one"]) == 1 and picked["leader"] == ["n2"]
        assert picked["followers"] == sorted(set(names) - {"n2"})
        assert 1 <= len(picked["minority"]) < size / 2 < len(picked["majority"])
        assert picked["all"] == sorted(names) and picked["random-subset"]
        assert all(set(p) <= set(names) and p == sorted(set(p)) for p in picked.values())


def test_leader_specs_without_a_leader_still_pick_a_node():
    assert len(choose("leader", NAMES, None, random.Random(1))) == 1
    assert len(choose("followers", NAMES, None, random.Random(1))) == 4


def test_unknown_spec():
    with pytest.raises(ValueError, match="unknown target 'everyone'"):
        choose("everyone", NAMES, None, random.Random(1))
