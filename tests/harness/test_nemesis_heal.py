"""The runner's heal when the system refuses to start a node on what it holds (etcd on a log that lost
committed entries): the node is recorded as the cluster's state, not as a fault left in force, and
every other node and leftover is still seen to; and what such a node said, from its output."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from harness.chaos.history import History
from harness.chaos.nemesis_runner import NemesisRunner
from harness.ssh.nodes import last_words
from nemesis.base import NodeExited
from nemesis.kill import KILL
from nemesis.process import ProcessFault, each, not_running
from tests.nemesis.recording import RecordingNodes

SAID = "panic: tocommit(108) is out of range [lastIndex(96)]"


class Refusing(RecordingNodes):
    """A cluster whose `refusing` nodes exit each time they start."""

    def __init__(self, refusing: set[str]) -> None:
        super().__init__(count=3)
        self.refusing = refusing

    def start(self, node: str | None = None, wait: float = 20.0) -> None:
        for name in [node] if node else self.names:
            super().start(name, wait)
            if name in self.refusing:
                self.gone.add(name)
                raise NodeExited(name, SAID, "/var/lib/dledger/stdout.log")


def test_a_node_the_system_will_not_start_is_recorded_and_the_rest_healed(tmp_path: Path) -> None:
    nodes = Refusing({"n1"})
    nodes.kill("n1")
    nodes.kill("n3")
    kill = ProcessFault(nodes, ("one",), each(nodes.kill), nodes.start, not_running(nodes))
    stuck = ProcessFault(nodes, ("one",), each(nodes.kill), lambda node: None,
                         lambda node: f"{node}: a rule left" if node == "n1" else None)
    with History(tmp_path / "h.jsonl") as history:
        runner = NemesisRunner({"kill": KILL, "other": KILL}, {"kill": kill, "other": stuck}, [], history,
                               random.Random(1))
        left = runner.heal_all(nodes)
    assert runner.exited == {"n1": SAID}
    assert nodes.running("n3") and not nodes.running("n1")
    assert left == {"other": ["n1: a rule left"]}, "a node down by the system's choice is no leftover"


GO_PANIC = """{"level":"info","msg":"starting an etcd server"}
{"level":"panic","msg":"tocommit(108) is out of range [lastIndex(96)]. Was the raft log corrupted?"}
panic: tocommit(108) is out of range [lastIndex(96)]. Was the raft log corrupted, truncated, or lost?

goroutine 163 [running]:
go.uber.org/zap/zapcore.(*CheckedEntry).Write(0xc00011fe10, {0x0, 0x0, 0x0})
	go.uber.org/zap/sugar.go:287 +0xee
go.etcd.io/etcd/raft.(*raftLog).commitTo(0xc0001fc230, 0x6c)
"""
ZAP_FATAL = ('{"level":"info","msg":"opened backend db"}\n'
             '{"level":"fatal","msg":"discovery failed","error":"walpb: crc mismatch","stacktrace":"go.e"}\n')
PYTHON = """Traceback (most recent call last):
  File "/opt/dledger/nodes/serve.py", line 3, in main
nodes.store.logstore.StoreError: index segment 0 is shorter than its header
"""


@pytest.mark.parametrize("output, words", [
    (GO_PANIC, "panic: tocommit(108) is out of range [lastIndex(96)]. Was the raft log corrupted, "
               "truncated, or lost?"),
    (ZAP_FATAL, "discovery failed: walpb: crc mismatch"),
    (PYTHON, "nodes.store.logstore.StoreError: index segment 0 is shorter than its header"),
    ("starting\nbye\n", "bye"),
    ("", "no output"),
])
def test_a_node_that_exits_at_start_is_known_by_its_last_words(output: str, words: str) -> None:
    assert last_words(output) == words
    assert len(last_words(output * 50, limit=40)) <= 40
