"""Every results folder the checker tests need, built once and checked in one batch.

Names: `ok-<seed>` (correct), `inject-<class>` (one anomaly class injected), `random-<seed>`
(random small history, maybe broken, maybe with consumers), `consumers-ok-<seed>` (correct,
with consumers), and edge cases (`empty`, `only-failures`, `cut-off`, `missing-node-log`,
`no-final-logs`, `committed-mode`, `stores`, `stores-disagree`, `relead`, `wiped`).
"""

from __future__ import annotations

import json
import random
import shutil
from dataclasses import dataclass
from pathlib import Path

from histgen import CONSUMER_INJECTIONS, INJECTIONS, MUTATIONS, inject

from checkers.synth import Sim, simulate, write_store

CORRECT_SEEDS = range(4)
CONSUMER_SEEDS = range(3)
RANDOM_CASES = 300


@dataclass
class Case:
    path: Path
    injected: str | None = None
    expected: dict | None = None


def _random(seed: int, folder: Path) -> Case:
    rng = random.Random(seed)
    sim = simulate(
        seed,
        rng.randrange(4, 40),
        concurrency=rng.randrange(1, 6),
        p_read=rng.uniform(0.2, 0.6),
        p_fail=rng.uniform(0, 0.2),
        p_info=rng.uniform(0, 0.3),
        read_span=rng.randrange(0, 5),
        elections=rng.randrange(0, 4),
        read_mode=rng.choice(("read-index", "read-index", "committed")),
        consumers=rng.choice((0, 0, 1, 2, 3)),
        batch=rng.randrange(1, 6),
    )
    name = rng.choice([None, None, *INJECTIONS, *MUTATIONS, *CONSUMER_INJECTIONS])
    if name is not None:
        try:
            inject(sim, name, rng)
        except (ValueError, IndexError, StopIteration):
            name = None  # this history has nothing the injection needs
    return Case(sim.write(folder), name)


def _only_failures(folder: Path) -> Case:
    sim = simulate(7, 30, p_fail=1.0, p_info=0.0)
    return Case(sim.write(folder))


def _cut_off(folder: Path) -> Case:
    sim = simulate(8, 60, concurrency=5)
    del sim.history[-7:]
    folder = sim.write(folder)
    with (folder / "history.jsonl").open("a") as out:
        out.write('{"index": 999, "time": 12')  # the write the crash interrupted
    return Case(folder)


def _missing_node_log(folder: Path) -> Case:
    sim = simulate(9, 60)
    sim.write(folder)
    (folder / "final" / "n3.jsonl").unlink()
    return Case(folder)


def _no_final_logs(folder: Path) -> Case:
    sim = simulate(10, 40)
    sim.write(folder)
    for path in (folder / "final").glob("*.jsonl"):
        path.unlink()
    return Case(folder)


def _committed_mode(folder: Path) -> Case:
    sim = simulate(11, 120, read_mode="committed")
    expected = inject(sim, "stale-read", random.Random(0))
    return Case(sim.write(folder), "stale-read", expected)


def _empty(folder: Path) -> Case:
    folder.mkdir(parents=True)
    (folder / "history.jsonl").write_text("")
    (folder / "test.json").write_text(json.dumps({"nodes": 3}))
    return Case(folder)


def _stores(folder: Path, disagree: bool) -> Case:
    sim = simulate(12, 50)
    sim.write(folder, stores=True)
    if not disagree:
        return Case(folder)
    node = sim.nodes[1]
    entries = [dict(e) for e in sim.final[node]]
    index = next(e["log_index"] for e in entries if e["id"] is not None)
    entries[index]["id"] = "tampered"
    shutil.rmtree(folder / "nodes" / node / "data")
    write_store(folder / "nodes" / node / "data", entries)
    return Case(folder, "replica-disagreement", {"log_index": index})


def _relead(folder: Path) -> Case:
    sim = simulate(13, 60, elections=2)
    expected = inject(sim, "relead", random.Random(0))
    return Case(sim.write(folder), "election-safety", expected)


def _wiped(folder: Path) -> Case:
    """A node whose data was wiped restarts with nothing (a fresh start): not a forgotten vote."""
    sim = simulate(14, 60, elections=2)
    node = sim.nodes[0]
    last = max(e["time_ns"] for e in sim.events[node])
    sim.events[node].append({"event": "start", "time_ns": last + 1, "node": node, "term": 0, "vote": None,
                             "fresh": True})
    return Case(sim.write(folder))


def build(base: Path) -> dict[str, Case]:
    cases: dict[str, Case] = {}
    for seed in CORRECT_SEEDS:
        cases[f"ok-{seed}"] = Case(simulate(seed, 80).write(base / f"ok-{seed}"))
    for n, name in enumerate(INJECTIONS):
        sim: Sim = simulate(100 + n, 120)
        expected = inject(sim, name, random.Random(n))
        cases[f"inject-{name}"] = Case(sim.write(base / f"inject-{name}"), name, expected)
    for n, name in enumerate(CONSUMER_INJECTIONS):
        sim = simulate(200 + n, 120, consumers=2)
        expected = inject(sim, name, random.Random(n))
        cases[f"inject-{name}"] = Case(sim.write(base / f"inject-{name}"), name, expected)
    for seed in CONSUMER_SEEDS:
        sim = simulate(300 + seed, 120, consumers=3, p_lag=0.5)
        cases[f"consumers-ok-{seed}"] = Case(sim.write(base / f"consumers-ok-{seed}"))
    for seed in range(RANDOM_CASES):
        cases[f"random-{seed}"] = _random(seed, base / f"random-{seed}")
    cases["empty"] = _empty(base / "empty")
    cases["only-failures"] = _only_failures(base / "only-failures")
    cases["cut-off"] = _cut_off(base / "cut-off")
    cases["missing-node-log"] = _missing_node_log(base / "missing-node-log")
    cases["no-final-logs"] = _no_final_logs(base / "no-final-logs")
    cases["committed-mode"] = _committed_mode(base / "committed-mode")
    cases["stores"] = _stores(base / "stores", disagree=False)
    cases["stores-disagree"] = _stores(base / "stores-disagree", disagree=True)
    cases["relead"] = _relead(base / "relead")
    cases["wiped"] = _wiped(base / "wiped")
    return cases
