"""The consumer's rules, driven by a scripted puller: what it records, where its next pull goes
(failover, the node's suggestion, back to the leader), rewinds, and fresh processes."""

from __future__ import annotations

import json
import random
import threading
from collections.abc import Callable
from pathlib import Path

import pytest

from harness.chaos import consumers
from harness.chaos.consumers import Consumer, Pulled
from harness.chaos.history import History
from nodes.client import DefiniteFailure, IndeterminateFailure


class ScriptedPuller:
    """Answers each pull with the next scripted answer, a function of (offset, node)."""

    def __init__(self, script: list[Callable[[int, str], Pulled]], log: list[tuple[int, str]]) -> None:
        self.script = script
        self.log = log

    def pull(self, offset: int, node: str) -> Pulled:
        self.log.append((offset, node))
        return self.script.pop(0)(offset, node)

    def close(self) -> None:
        pass


def answer(count: int, node: str, leader: str | None = "n1", suggest: str | None = None,
           end: int | None = None) -> Callable[[int, str], Pulled]:
    def make(offset: int, asked: str) -> Pulled:
        assert asked == node, f"pulled from {asked}, the script expects {node}"
        entries = [(offset + i, f"p0-{offset + i}") for i in range(count)]
        return Pulled(entries, offset + count, end, node, leader, suggest)
    return make


def failing(kind: type[Exception]) -> Callable[[int, str], Pulled]:
    def make(offset: int, node: str) -> Pulled:
        raise kind(f"{node} does not answer")
    return make


def run(tmp_path: Path, script: list[Callable[[int, str], Pulled]], names=("n1", "n2", "n3"),
        home: str | None = "n1") -> tuple[list[dict], list[tuple[int, str]], Consumer]:
    history = History(tmp_path / "history.jsonl")
    log: list[tuple[int, str]] = []
    stop = threading.Event()
    consumer = Consumer(0, 4, 5, list(names), history, stop, lambda: ScriptedPuller(script, log),
                        random.Random(1))
    consumer.home = home
    steps = len(script)
    puller = ScriptedPuller(script, log)
    for _ in range(steps):
        node = consumer.target or consumer.home or "n1"
        done, _ = consumer.consume(puller, node)
        if not done:
            consumer.process += consumer.stride
    history.close()
    lines = [json.loads(line) for line in (tmp_path / "history.jsonl").read_text().splitlines()]
    return lines, log, consumer


def test_an_ok_pull_is_recorded_with_its_entries_and_the_committed_offset(tmp_path):
    lines, _, consumer = run(tmp_path, [answer(3, "n1"), answer(0, "n1")])
    invoke, ok = lines[0], lines[1]
    assert invoke == {**invoke, "type": "invoke", "f": "consume", "process": 4, "node": "n1",
                      "value": {"consumer": 0, "from": 0}}
    assert ok["type"] == "ok" and ok["node"] == "n1"
    assert ok["value"] == {"consumer": 0, "from": 0, "to": 2, "offset": 3,
                           "entries": [[0, "p0-0"], [1, "p0-1"], [2, "p0-2"]]}
    assert lines[3]["value"] == {"consumer": 0, "from": 3, "to": 2, "entries": [], "offset": 3}
    assert consumer.offset == 3


def test_a_master_that_does_not_answer_sends_the_consumer_to_another_node_under_a_fresh_process(tmp_path):
    anywhere = lambda o, n: answer(1, n)(o, n)  # noqa: E731
    lines, log, _ = run(tmp_path, [answer(2, "n1"), failing(IndeterminateFailure), anywhere])
    assert [node for _, node in log][:2] == ["n1", "n1"]
    assert log[2][1] != "n1" and log[2][0] == 2  # the same offset, from a slave
    assert [line["type"] for line in lines] == ["invoke", "ok", "invoke", "info", "invoke", "ok"]
    assert lines[3]["error"] == "n1 does not answer"
    assert lines[2]["process"] == 4 and lines[4]["process"] == 9  # info: the next process (stride 5)
    assert lines[5]["value"]["from"] == 2 and lines[5]["node"] == log[2][1]


def test_a_definite_failure_keeps_the_process(tmp_path):
    lines, log, _ = run(tmp_path, [failing(DefiniteFailure), lambda o, n: answer(1, n)(o, n)])
    assert lines[1]["type"] == "fail" and lines[2]["process"] == lines[0]["process"]
    assert log[1][1] != "n1"


def test_master_slave_the_consumer_follows_the_suggestion_away_and_back(tmp_path):
    script = [answer(2, "n1", suggest="n3"),  # lagging: the master sends it to n3
              answer(2, "n3", suggest="n3"),
              answer(2, "n3", suggest="n1"),  # caught up, the master is alive: back
              answer(1, "n1", suggest="n1")]
    _, log, consumer = run(tmp_path, script)
    assert log == [(0, "n1"), (2, "n3"), (4, "n3"), (6, "n1")]
    assert consumer.target is None and consumer.offset == 7


def test_dledger_a_consumer_returns_to_the_leader_the_follower_names(tmp_path, monkeypatch):
    clock = [100.0]
    monkeypatch.setattr(consumers.time, "monotonic", lambda: clock[0])

    def follower(offset: int, node: str) -> Pulled:
        return Pulled([(offset, "x")], offset + 1, None, node, "n2", None)

    script = [failing(DefiniteFailure), follower, follower, answer(1, "n2", leader="n2")]
    history = History(tmp_path / "history.jsonl")
    log: list[tuple[int, str]] = []
    consumer = Consumer(0, 0, 1, ["n1", "n2", "n3"], history, threading.Event(), lambda: None,
                        random.Random(3))
    consumer.home = "n1"
    puller = ScriptedPuller(script, log)
    consumer.consume(puller, "n1")
    away = consumer.target
    assert away in ("n2", "n3")
    consumer.consume(puller, away)
    assert consumer.target == away, "it stays away until RETURN_S passed"
    clock[0] += consumers.RETURN_S
    consumer.consume(puller, away)
    assert consumer.target is None and consumer.home == "n2"
    consumer.consume(puller, consumer.home)
    history.close()
    assert [n for _, n in log] == ["n1", away, away, "n2"]


@pytest.mark.parametrize("served_by, rewinds", [("n1", True), ("n2", False)])
def test_an_offset_past_the_masters_end_rewinds_only_on_the_master(tmp_path, served_by, rewinds):
    def short(offset: int, node: str) -> Pulled:  # the log now ends at index 1 (entries were lost)
        return Pulled([], offset, 1, served_by, "n1", None)

    lines, _, consumer = run(tmp_path, [answer(5, "n1", end=4), short])
    assert consumer.offset == (2 if rewinds else 5)
    last = lines[-1]["value"]
    assert last["offset"] == consumer.offset and last.get("rewound", False) is rewinds


def test_consumers_run_until_stopped_and_take_their_own_processes(tmp_path):
    history = History(tmp_path / "history.jsonl")
    stop = threading.Event()
    pullers: list[Endless] = []

    class Endless(ScriptedPuller):
        def pull(self, offset: int, node: str) -> Pulled:
            self.log.append((offset, node))
            if len(pullers) == 2 and all(len(p.log) > 10 for p in pullers):
                stop.set()
            return Pulled([(offset, "x")], offset + 1, None, node, "n1", None)

    def connect() -> Endless:
        pullers.append(Endless([], []))
        return pullers[-1]

    threads = consumers.start_consumers(2, 3, 5, ["n1", "n2", "n3"], 7, history, stop, connect)
    for t in threads:
        t.join(10)
    history.close()
    assert not any(t.is_alive() for t in threads)
    lines = [json.loads(line) for line in (tmp_path / "history.jsonl").read_text().splitlines()]
    assert {line["process"] for line in lines} == {3, 4}
    for c in (0, 1):
        oks = [line["value"] for line in lines if line["type"] == "ok" and line["value"]["consumer"] == c]
        assert len(oks) > 10 and [v["from"] for v in oks] == list(range(len(oks)))  # in order, from 0
    assert history.consumes["ok"] == len(lines) // 2 and history.counts["ok"] == 0
