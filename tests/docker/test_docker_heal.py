"""Healing leaves nothing behind: every family's fault started at once on a live cluster, then
the run's heal (NemesisRunner.heal_all), and no iptables rule, qdisc, relay, paused process,
clock offset, preferred leader, dead node or unmounted power-loss file system is left."""

from __future__ import annotations

import random

import pytest

from harness.chaos.history import History
from harness.chaos.nemesis_runner import NemesisRunner
from harness.containers.db import Db
from nemesis import catalogue

pytestmark = pytest.mark.docker


def test_every_family_started_then_healed_leaves_nothing(node_image: str, tmp_path) -> None:
    names = list(catalogue.FAMILIES)
    families = {name: catalogue.FAMILIES[name] for name in names}
    with Db(5, image=node_image, serve_args=["--segment-mb", "1"], fuse=True) as db, \
            History(tmp_path / "history.jsonl") as history:
        db.start()
        db.wait_for_leader()
        faults = catalogue.build(names, db)
        runner = NemesisRunner(families, faults, [], history, random.Random(1))
        for name in names:
            runner.inject(name)
        assert runner.errors == []
        in_force = {name: fault.leftovers() for name, fault in faults.items()}
        assert any(in_force.values()), "the faults took effect"
        assert runner.heal_all(db) == {}
        assert all(db.running(node) and db.state(node) != "T" for node in db.names)
        db.wait_for_leader()
