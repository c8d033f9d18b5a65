"""Synthetic results folders: histories of a correct linearizable log, with final logs and events.

`simulate` runs concurrent clients against one log in simulated time: each op takes effect
at one instant between its invoke and its completion, appends may fail (never landing) or
time out (`info`, landing or not, possibly after the timeout), leaders change with a no-op
entry, and the nemesis leaves start/stop lines. With `consumers`, that many consumers pull
the log in order from offset 0 (`f` `consume`), up to `batch` entries a pull, from a node
that sometimes lags (`p_lag`): a pull from past a lagging node's end rewinds the consumer to
it, and it consumes the same entries again. The result is linearizable by construction.
`write_lines` streams a huge history straight to disk. The checker service warms up on
these, the benchmark times them, and the tests break them on purpose (tests/checker/histgen.py).
"""

from __future__ import annotations

import heapq
import json
import random
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

MS = 1_000_000


@dataclass
class Sim:
    """A generated run: history lines, each node's final log, events, test.json fields."""

    history: list[dict[str, Any]]
    log: list[tuple[int, str | None]]  # (term, id) per index; id None for a no-op
    events: dict[str, list[dict[str, Any]]]
    nodes: list[str]
    read_mode: str = "read-index"
    final: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    history_wall_ns: int | None = None  # test.json's, when the events' times are to be placed

    def __post_init__(self) -> None:
        if not self.final:
            entries = [{"log_index": i, "term": t, "id": x} for i, (t, x) in enumerate(self.log)]
            self.final = {n: [dict(e) for e in entries] for n in self.nodes}

    def ops(self, f: str, kind: str | None = None) -> list[tuple[dict[str, Any], dict[str, Any] | None]]:
        """(invoke, completion or None) pairs of client ops of kind `f`, completion type `kind`."""
        open_: dict[Any, dict[str, Any]] = {}
        pairs: list[tuple[dict[str, Any], dict[str, Any] | None]] = []
        for line in self.history:
            if line["process"] == "nemesis":
                continue
            if line["type"] == "invoke":
                open_[line["process"]] = line
            else:
                inv = open_.pop(line["process"])
                if inv["f"] == f and (kind is None or line["type"] == kind):
                    pairs.append((inv, line))
        pairs += [(inv, None) for inv in open_.values() if inv["f"] == f and kind in (None, "info")]
        return pairs

    def write(self, folder: Path, *, stores: bool = False) -> Path:
        """Write the results folder (history, final logs, events, test.json; store files if asked)."""
        folder.mkdir(parents=True, exist_ok=True)
        with (folder / "history.jsonl").open("w") as out:
            for index, line in enumerate(self.history):
                out.write(json.dumps({"index": index, **line}) + "\n")
        (folder / "final").mkdir(exist_ok=True)
        for node, entries in self.final.items():
            (folder / "final" / f"{node}.jsonl").write_text("".join(json.dumps(e) + "\n" for e in entries))
        for node, lines in self.events.items():
            (folder / "nodes" / node).mkdir(parents=True, exist_ok=True)
            (folder / "nodes" / node / "events.jsonl").write_text(
                "".join(json.dumps(e) + "\n" for e in lines)
            )
        test: dict[str, Any] = {"nodes": self.nodes, "read_mode": self.read_mode}
        if self.history_wall_ns is not None:
            test["history_wall_ns"] = self.history_wall_ns
        (folder / "test.json").write_text(json.dumps(test))
        if stores:
            for node, entries in self.final.items():
                write_store(folder / "nodes" / node / "data", entries)
        return folder


def write_store(directory: Path, entries: list[dict[str, Any]]) -> None:
    """A node's store files holding `entries`, written by the node's own MmapStore."""
    from nodes.payload import encode_payload
    from nodes.store.logstore import MAGIC_NOOP, MAGIC_NORMAL, Entry
    from nodes.store.mmapstore import MmapStore

    store = MmapStore(directory, data_segment_size=1 << 16, index_segment_size=32 * 1024,
                      flush_interval_ms=None)
    try:
        store.append(
            [
                Entry(
                    e["log_index"],
                    e["term"],
                    b"" if e["id"] is None else encode_payload(e["id"], 24),
                    MAGIC_NOOP if e["id"] is None else MAGIC_NORMAL,
                )
                for e in entries
            ]
        )
        store.set_committed(len(entries) - 1)
    finally:
        store.close()


@dataclass
class _World:
    rng: random.Random
    nodes: list[str]
    log: list[tuple[int, str | None]] = field(default_factory=list)
    term: int = 0
    events: dict[str, list[dict[str, Any]]] = field(default_factory=dict)

    def elect(self, now: int) -> None:
        """A new leader: next term, every node's vote for it and role line, and its no-op entry;
        the first follower then restarts and recovers its vote (a `start` line)."""
        self.term += 1
        leader = self.rng.choice(self.nodes)
        for node in self.nodes:
            role = "leader" if node == leader else "follower"
            line = {"time_ns": now, "node": node, "term": self.term}
            self.events.setdefault(node, []).extend([
                {**line, "event": "vote", "time_ns": now - 1, "candidate": leader},
                {**line, "event": "role", "role": role, "leader": leader, "end_index": len(self.log) - 1},
            ])
        restarted = next(n for n in self.nodes if n != leader)
        self.events[restarted].append(
            {"event": "start", "time_ns": now + 1, "node": restarted, "term": self.term, "vote": leader,
             "fresh": False}
        )
        self.log.append((self.term, None))


def _events(
    n_ops: int,
    rng: random.Random,
    *,
    concurrency: int,
    nodes: list[str],
    p_read: float,
    p_fail: float,
    p_info: float,
    read_span: int,
    elections: int,
    nemesis: int,
    world: _World,
    consumers: int = 0,
    batch: int = 4,
    p_lag: float = 0.3,
) -> Iterator[dict[str, Any]]:
    """History lines (without index) in time order; `world` ends holding the final log."""
    queue: list[tuple[int, int, str, Any]] = []
    seq = 0

    def at(time: int, what: str, data: Any) -> None:
        nonlocal seq
        seq += 1
        heapq.heappush(queue, (time, seq, what, data))

    processes = list(range(concurrency))
    next_process = concurrency
    for worker in range(concurrency):
        at(rng.randrange(1, 5 * MS), "invoke", worker)
    consumer_process = list(range(next_process, next_process + consumers))
    consumer_offset = [0] * consumers
    next_process += consumers
    for consumer in range(consumers):
        at(rng.randrange(1, 5 * MS), "consume", consumer)
    for k in range(elections):
        at(int((k + 0.5) * n_ops * 2 * MS / max(1, elections) / concurrency), "elect", None)
    for k in range(nemesis):
        at(int((k + 0.3) * n_ops * 2 * MS / max(1, nemesis) / concurrency), "nemesis", k)
    world.elect(0)
    invoked = 0
    counter = 0
    while queue:
        now, _, what, data = heapq.heappop(queue)
        if what == "elect":
            world.elect(now)
        elif what == "nemesis":
            f = ("start-partition", "stop-partition")[data % 2]
            value: dict[str, Any] | None = {"grudge": {"n1": ["n2"]}} if data % 2 == 0 else None
            yield {"time": now, "type": "invoke", "process": "nemesis", "f": f, "value": value}
            yield {"time": now + 1, "type": "info", "process": "nemesis", "f": f, "value": value}
        elif what == "invoke":
            if invoked >= n_ops:
                continue
            invoked += 1
            worker = data
            process = processes[worker]
            node = rng.choice(world.nodes)
            roll = rng.random()
            outcome = "fail" if roll < p_fail else "info" if roll < p_fail + p_info else "ok"
            latency = rng.randrange(1 * MS, 20 * MS)
            if rng.random() < p_read:
                start = max(0, len(world.log) - rng.randrange(0, 2 * read_span + 1))
                value = {"from": start, "to": start + rng.randrange(0, read_span + 1)}
                yield {
                    "time": now,
                    "type": "invoke",
                    "process": process,
                    "f": "read",
                    "value": value,
                    "node": node,
                }
                op = {"f": "read", "value": value, "outcome": outcome, "node": node, "worker": worker}
                lands = outcome == "ok"
            else:
                counter += 1
                ident = f"a{counter}"
                yield {
                    "time": now,
                    "type": "invoke",
                    "process": process,
                    "f": "append",
                    "value": {"id": ident},
                    "node": node,
                }
                op = {
                    "f": "append",
                    "value": {"id": ident},
                    "outcome": outcome,
                    "node": node,
                    "worker": worker,
                }
                lands = outcome == "ok" or (outcome == "info" and rng.random() < 0.5)
            lin = now + rng.randrange(1, latency)
            if lands:
                at(lin if outcome == "ok" else now + rng.randrange(1, 2 * latency), "effect", op)
            at(now + latency, "complete", op)
        elif what == "consume":
            if invoked >= n_ops:
                continue
            node = rng.choice(world.nodes)
            roll = rng.random()
            outcome = "fail" if roll < p_fail else "info" if roll < p_fail + p_info else "ok"
            latency = rng.randrange(1 * MS, 20 * MS)
            value = {"consumer": data, "from": consumer_offset[data]}
            yield {
                "time": now,
                "type": "invoke",
                "process": consumer_process[data],
                "f": "consume",
                "value": value,
                "node": node,
            }
            op = {"f": "consume", "value": value, "outcome": outcome, "node": node, "consumer": data}
            if outcome == "ok":
                at(now + rng.randrange(1, latency), "effect", op)
            at(now + latency, "complete", op)
        elif what == "effect" and data["f"] == "consume":
            start, end = data["value"]["from"], len(world.log)
            if rng.random() < p_lag:
                end = max(0, end - rng.randrange(1, 2 * batch + 1))
            if start > end:  # past the serving node's end: the consumer rewinds to it
                data["result"] = {
                    **data["value"], "to": start - 1, "entries": [], "offset": end, "rewound": True
                }
            else:
                stop = min(start + batch, end)
                entries = [[i, world.log[i][1]] for i in range(start, stop)]
                data["result"] = {**data["value"], "to": stop - 1, "entries": entries, "offset": stop}
        elif what == "complete" and data["f"] == "consume":
            consumer = data["consumer"]
            if data["outcome"] == "ok":
                consumer_offset[consumer] = data["result"]["offset"]
            yield _completion(now, consumer_process[consumer], data)
            if data["outcome"] == "info":
                consumer_process[consumer] = next_process
                next_process += 1
            at(now + rng.randrange(0, 3 * MS), "consume", consumer)
        elif what == "effect":
            if data["f"] == "append":
                world.log.append((world.term, data["value"]["id"]))
                data["result"] = {**data["value"], "log_index": len(world.log) - 1, "term": world.term}
            else:
                lo, hi = data["value"]["from"], data["value"]["to"]
                entries = [[i, world.log[i][1]] for i in range(lo, min(hi, len(world.log) - 1) + 1)]
                data["result"] = {**data["value"], "entries": entries, "commit_index": len(world.log) - 1}
        elif what == "complete":
            worker = data["worker"]
            yield _completion(now, processes[worker], data)
            if data["outcome"] == "info":
                processes[worker] = next_process
                next_process += 1
            at(now + rng.randrange(0, 3 * MS), "invoke", worker)


def _completion(now: int, process: int, op: dict[str, Any]) -> dict[str, Any]:
    """The history line completing `op` (its result when ok, else its value and an error)."""
    line = {
        "time": now,
        "type": op["outcome"],
        "process": process,
        "f": op["f"],
        "value": op.get("result", op["value"]) if op["outcome"] == "ok" else op["value"],
        "node": op["node"],
    }
    if op["outcome"] != "ok":
        line["error"] = "timeout" if op["outcome"] == "info" else "not-leader"
    return line


def simulate(
    seed: int,
    n_ops: int = 60,
    *,
    concurrency: int = 4,
    nodes: int = 3,
    p_read: float = 0.4,
    p_fail: float = 0.08,
    p_info: float = 0.1,
    read_span: int = 3,
    elections: int = 2,
    nemesis: int = 2,
    read_mode: str = "read-index",
    consumers: int = 0,
    batch: int = 4,
    p_lag: float = 0.3,
) -> Sim:
    """A correct history of `n_ops` client ops (invoke + completion each), and the consumes of
    `consumers` consumers while they run."""
    rng = random.Random(seed)
    world = _World(rng, [f"n{i}" for i in range(1, nodes + 1)])
    lines = list(
        _events(
            n_ops,
            rng,
            concurrency=concurrency,
            nodes=world.nodes,
            p_read=p_read,
            p_fail=p_fail,
            p_info=p_info,
            read_span=read_span,
            elections=elections,
            nemesis=nemesis,
            world=world,
            consumers=consumers,
            batch=batch,
            p_lag=p_lag,
        )
    )
    return Sim(lines, list(world.log), world.events, world.nodes, read_mode)


def write_lines(
    folder: Path, seed: int, n_lines: int, *, concurrency: int = 10, nodes: int = 3, consumers: int = 0
) -> int:
    """Stream a correct history of about `n_lines` client lines into `folder` (for the benchmark),
    and the consumes of `consumers` consumers while they run.

    Memory is the final log, not the history. Returns the number of history lines written.
    """
    rng = random.Random(seed)
    world = _World(rng, [f"n{i}" for i in range(1, nodes + 1)])
    folder.mkdir(parents=True, exist_ok=True)
    dumps = json.JSONEncoder(separators=(",", ":")).encode
    count = 0
    with (folder / "history.jsonl").open("w", buffering=1 << 20) as out:
        for line in _events(
            n_lines // 2,
            rng,
            concurrency=concurrency,
            nodes=world.nodes,
            p_read=0.4,
            p_fail=0.02,
            p_info=0.02,
            read_span=2,
            elections=20,
            nemesis=20,
            world=world,
            consumers=consumers,
            batch=64,
            p_lag=0.01,
        ):
            line["index"] = count
            out.write(dumps(line) + "\n")
            count += 1
    (folder / "final").mkdir(exist_ok=True)
    for node in world.nodes:
        with (folder / "final" / f"{node}.jsonl").open("w", buffering=1 << 20) as out:
            for i, (term, ident) in enumerate(world.log):
                out.write(dumps({"log_index": i, "term": term, "id": ident}) + "\n")
    for node, lines in world.events.items():
        (folder / "nodes" / node).mkdir(parents=True, exist_ok=True)
        (folder / "nodes" / node / "events.jsonl").write_text("".join(dumps(e) + "\n" for e in lines))
    (folder / "test.json").write_text(json.dumps({"nodes": world.nodes, "read_mode": "read-index"}))
    return count
