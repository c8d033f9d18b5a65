"""Seeds replay as they did: a change that leaves the simulator's runs alone keeps every digest
(tests/sim/replay.py says what one covers; `python -m tests.sim.replay` rewrites them)."""

from __future__ import annotations

import json

from tests.sim.replay import SAVED, digests


def test_every_seed_replays_to_its_saved_digest() -> None:
    saved = json.loads(SAVED.read_text())
    now = digests()
    changed = [k for k in saved if now.get(k) != saved[k]]
    assert now.keys() == saved.keys()
    assert not changed, f"{len(changed)} of {len(saved)} seeds ran otherwise, e.g. {changed[:10]}"
