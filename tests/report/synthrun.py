"""Synthetic results folders shaped like a real run's: a correct history with partitions, the
nodes' events on the wall clock (role changes, elections, commit advances, one node lagging
and catching up), test.json with the fault vocabulary and the fault log."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from checkers.run.faultlog import fault_log
from checkers.synth import Sim, simulate
from nemesis import catalogue

MS = 1_000_000
WALL = 1_700_000_000_000_000_000
TARGETS = ["n1", "n2"]


def _leader_at(sim: Sim, t: int) -> dict[str, Any] | None:
    """The sim's last `leader` line at or before time `t`, if any."""
    return max((e for lines in sim.events.values() for e in lines
                if e.get("role") == "leader" and e["time_ns"] <= t), key=lambda e: e["time_ns"], default=None)


def _events(sim: Sim, end_ns: int) -> dict[str, list[dict[str, Any]]]:
    """The sim's role lines with a candidacy before each election and commit lines; the last
    node commits nothing in the middle third of the run, then catches up."""
    acks = sorted((done["time"], done["value"]["log_index"]) for _, done in sim.ops("append", "ok"))

    def term_at(t: int) -> int:  # the term a commit at `t` was learned in: the last election's
        leader = _leader_at(sim, t)
        return 0 if leader is None else leader["term"]

    lagging = sim.nodes[-1]
    events: dict[str, list[dict[str, Any]]] = {}
    for node in sim.nodes:
        lines = []
        for line in sim.events[node]:
            if line.get("role") == "leader":
                stood = max(0, line["time_ns"] - MS)
                lines.append({**line, "role": "candidate", "leader": None, "time_ns": stood})
            lines.append(line)
        for t, index in acks:
            if node == lagging and end_ns // 3 < t < 2 * end_ns // 3:
                continue
            lines.append({"event": "commit", "time_ns": t, "node": node, "term": term_at(t),
                          "commit_index": index})
        lines.append({"event": "commit", "time_ns": end_ns, "node": node, "term": term_at(end_ns),
                      "commit_index": len(sim.log) - 1})
        placed = [{**e, "real_ns": WALL + e["time_ns"]} for e in lines]
        events[node] = sorted(placed, key=lambda e: e["real_ns"])
    return events


def _answered_by_the_leader(sim: Sim) -> None:
    """Every read is answered by the node that led when it completed (a read-index read is)."""
    for _, done in sim.ops("read"):
        if done is not None:
            leader = _leader_at(sim, done["time"])
            done["node"] = None if leader is None else leader["node"]


def build_run(folder: Path, *, seed: int = 5, lose: bool = False, stores: bool = False) -> Path:
    """A results folder; with `lose`, the last acknowledged append is cut from every final log;
    with `stores`, the nodes' store files too (without them replica-disagreement is unknown)."""
    sim = simulate(seed, n_ops=400, concurrency=4, elections=3, nemesis=4)
    for line in sim.history:
        if line["process"] == "nemesis" and line["f"] == "start-partition" and line["type"] != "invoke":
            line["value"] = {**line["value"], "targets": TARGETS}
    end_ns = sim.history[-1]["time"]
    _answered_by_the_leader(sim)
    sim.events = _events(sim, end_ns)
    if lose:
        victim = max(done["value"]["log_index"] for _, done in sim.ops("append", "ok"))
        for entries in sim.final.values():
            del entries[victim:]
    sim.write(folder, stores=stores)
    vocabulary = catalogue.vocabulary(["partition"])
    history = [json.loads(line) for line in (folder / "history.jsonl").read_text().splitlines()]
    everything = [e for lines in sim.events.values() for e in lines]
    test = {"name": "report-demo", "nodes": sim.nodes, "read_mode": "read-index", "seed": seed,
            "concurrency": 4, "faults": vocabulary, "history_wall_ns": WALL,
            "fault_log": fault_log(history, vocabulary, everything, WALL)}
    (folder / "test.json").write_text(json.dumps(test))
    return folder
