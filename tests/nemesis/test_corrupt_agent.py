"""The disk nemesis's corrupt agent against real stores: it changes exactly what it reports,
and reopening the store cuts exactly that damage (data), or rebuilds the index from the data.
Also the disk fault's kill -> agent -> start sequence on a scripted stand-in cluster."""

from __future__ import annotations

import json
import os
import random
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from nemesis.agents import corrupt
from nemesis.base import NodeExited
from nemesis.disk import DiskFault
from nodes.store.logstore import Entry
from nodes.store.mmapstore import MmapStore

ROOT = Path(__file__).resolve().parents[2]
SIZES = {"data_segment_size": 1024, "index_segment_size": 320}  # several files of each kind
COUNT = 60


def open_store(directory: Path) -> MmapStore:
    return MmapStore(directory, flush_interval_ms=None, **SIZES)


@pytest.fixture(scope="module")
def pristine(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[Entry]]:
    """A closed store of COUNT entries over several files; bodies end in zero bytes now and then."""
    directory = tmp_path_factory.mktemp("pristine") / "store"
    with open_store(directory) as store:
        written = [store.append_leader(1 + i // 20, f"entry-{i}-".encode() * (i % 4) + bytes(i % 3))
                   for i in range(COUNT)]
    return directory, written


@pytest.fixture
def store(pristine: tuple[Path, list[Entry]], tmp_path: Path) -> Path:
    directory = tmp_path / "store"
    shutil.copytree(pristine[0], directory)
    return directory


def changed_bytes(before: bytes, after: bytes) -> list[int]:
    """Offsets whose byte differs, a file cut short reading as zeros past its end."""
    after = after + bytes(max(0, len(before) - len(after)))
    return [i for i, (a, b) in enumerate(zip(before, after, strict=True)) if a != b]


@pytest.mark.parametrize("seed", range(5))
@pytest.mark.parametrize("mode", corrupt.MODES)
@pytest.mark.parametrize("file", corrupt.FILES)
def test_damage_is_what_the_agent_reports_and_recovery_cuts_exactly_it(
        pristine: tuple[Path, list[Entry]], store: Path, file: str, mode: str, seed: int) -> None:
    written = pristine[1]
    files = {p: p.read_bytes() for p in store.rglob("*") if p.is_file()}
    report = corrupt.damage(store, file, mode, random.Random(seed))

    assert report["changed"] and report["end_index_before"] == COUNT - 1
    damaged = store / report["path"]
    diff = changed_bytes(files[damaged], damaged.read_bytes())
    assert [p for p, content in files.items() if p != damaged and p.read_bytes() != content] == []
    assert diff and diff[0] == report["first_changed"]
    entry = report["entry"]
    base = int(damaged.name)
    start, size = ((entry["pos"] - base, entry["size"]) if file == "data"
                   else (entry["index"] * 32 - base, 32))
    assert start <= report["first_changed"] < start + size
    if mode == "bitflip":
        assert diff == [report["offset"]]
        assert files[damaged][diff[0]] ^ damaged.read_bytes()[diff[0]] == 1 << report["bit"]
    else:
        assert report["offset"] <= diff[0] and diff[-1] < report["offset"] + report["length"]
        expected_size = report["offset"] if mode == "truncate" else len(files[damaged])
        assert damaged.stat().st_size == report["file_size"]["after"] == expected_size

    with open_store(store) as recovered:
        assert recovered.end_index == report["expect_end_index"]
        assert recovered.get_range(0, COUNT) == written[:report["expect_end_index"] + 1]
        if file == "data":
            assert report["expect_end_index"] == entry["index"] - 1
            assert recovered.recovery.cut_pos in (entry["pos"], None)  # None: zeros from its first byte
        else:
            assert report["expect_end_index"] == COUNT - 1
            assert recovered.recovery.index_slots_rebuilt >= 1


def test_the_script_runs_standalone_and_its_seed_decides(pristine: tuple[Path, list[Entry]],
                                                         store: Path, tmp_path: Path) -> None:
    twin = tmp_path / "twin"
    shutil.copytree(pristine[0], twin)
    script = ROOT / "nemesis/agents/corrupt.py"
    args = ["--dir", str(store), "--file", "data", "--mode", "zero-tail", "--seed", "7"]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    out = subprocess.run([sys.executable, str(script), *args],
                         capture_output=True, text=True, check=True, env=env, cwd="/").stdout
    assert json.loads(out) == corrupt.damage(twin, "data", "zero-tail", random.Random(7))


def test_an_empty_store_is_left_alone(tmp_path: Path) -> None:
    directory = tmp_path / "empty"
    open_store(directory).close()
    before = {p: p.read_bytes() for p in directory.rglob("*") if p.is_file()}
    report = corrupt.damage(directory, "data", "bitflip", random.Random(1))
    assert report["changed"] is False
    assert {p: p.read_bytes() for p in directory.rglob("*") if p.is_file()} == before


RECOVERED = "walked 3 entries from pos 0; cut at pos 96 (entry 2 fails its body CRC)"


class ScriptedNodes:
    """A stand-in cluster that records lifecycle calls and answers the agent with `agent_out`."""

    data_dir = "/var/lib/dledger"

    def __init__(self, agent_out: str | Exception, refuses: str = "") -> None:
        self.names = ["n1", "n2", "n3"]
        self.agent_out = agent_out
        self.refuses = refuses  # what a node says as it exits at start ("": it starts)
        self.calls: list[tuple[str, str]] = []

    def kill(self, node: str) -> None:
        self.calls.append(("kill", node))

    def start(self, node: str) -> None:
        self.calls.append(("start", node))
        if self.refuses:
            raise NodeExited(node, self.refuses, "/var/lib/dledger/stdout.log")

    def leader(self) -> str:
        return "n2"

    def exec(self, node: str, command: str, timeout: float = 10.0) -> str:
        if "corrupt.py" in command or "damage.py" in command:
            self.calls.append(("agent", node))
            if isinstance(self.agent_out, Exception):
                raise self.agent_out
            return self.agent_out
        return f"2026-01-01 {node} INFO nodes.server: store recovered: {RECOVERED}\n"


def test_the_fault_kills_damages_and_starts_the_leader_and_records_both_sides() -> None:
    nodes = ScriptedNodes('{"changed": true, "entry": {"index": 2}}')
    value = DiskFault(nodes, ("leader",), ("zero-tail",), ("data",)).start(random.Random(1))
    assert nodes.calls == [("kill", "n2"), ("agent", "n2"), ("start", "n2")]
    assert value == {"target": "leader", "targets": ["n2"], "mode": "zero-tail", "file": "data",
                     "damage": {"n2": {"changed": True, "entry": {"index": 2}}},
                     "recovery": {"n2": RECOVERED}}


def test_a_failing_agent_still_leaves_the_node_started() -> None:
    nodes = ScriptedNodes(RuntimeError("agent crashed"))
    with pytest.raises(RuntimeError, match="agent crashed"):
        DiskFault(nodes, ("one",), ("bitflip",), ("index",)).start(random.Random(1))
    assert [call[0] for call in nodes.calls] == ["kill", "agent", "start"]


def test_a_node_that_will_not_start_on_the_damage_is_the_faults_outcome_not_its_error() -> None:
    said = "panic: tocommit(108) is out of range [lastIndex(96)]"
    nodes = ScriptedNodes('{"changed": true, "path": "etcd/member/wal/0.wal"}', refuses=said)
    value = DiskFault(nodes, ("one",), ("truncate",), ("wal",)).start(random.Random(1))
    victim = value["targets"][0]
    assert nodes.calls == [("kill", victim), ("agent", victim), ("start", victim)]
    assert value["damage"] == {victim: {"changed": True, "path": "etcd/member/wal/0.wal"}}
    assert value["recovery"] == {
        victim: "did not start again: panic: tocommit(108) is out of range [lastIndex(96)]"}
