"""Where things are in a results folder (the results contract, docs/formats.md) and what test.json says."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from checkers.jsonlines import InputError
from nodes.messages import ReadMode

MIXED = "mixed"  # a run of our node whose reads are each read-index or lease, drawn at random
LINEARIZABLE = "linearizable"  # another system's linearizable reads (etcd's default range read)
LINEARIZABLE_MODES = (MIXED, *(m.label for m in ReadMode if m.linearizable), LINEARIZABLE)
PREFIX_MODES = tuple(m.label for m in ReadMode if not m.linearizable)
# What a results folder may hold as evidence; a check needs some of it (`verdict.Check`).
INPUTS = ("history", "final-logs", "events", "stores")
DEFAULT_READ_MODE = "read-index"


@dataclass(frozen=True)
class ResultsDir:
    """One results folder: its files, node names and read mode."""

    path: Path
    read_mode: str = DEFAULT_READ_MODE
    declared_nodes: tuple[str, ...] = ()
    node_count: int | None = None
    notes: tuple[str, ...] = field(default=())
    fault_log: dict[str, Any] | None = None  # test.json's record of what each fault did
    inputs: frozenset[str] = frozenset(INPUTS)  # the evidence the folder holds by design
    source: dict[str, Any] | None = None  # test.json's `source`: where an imported history came from
    history_wall_ns: int | None = None  # test.json's: the machine's wall clock at history time 0

    @classmethod
    def open(cls, path: Path | str) -> ResultsDir:
        """Open and validate `path`; InputError names what is missing or malformed."""
        path = Path(path)
        if not path.is_dir():
            raise InputError(f"{path}: not a directory (pass a results folder holding history.jsonl)")
        if not (path / "history.jsonl").is_file():
            raise InputError(f"{path / 'history.jsonl'}: missing; is {path} a results folder?")
        test = read_json_object(path / "test.json")
        notes: list[str] = []
        if test is None:
            notes.append(f"no test.json: read mode taken as {DEFAULT_READ_MODE}")
            test = {}
        mode = test.get("read_mode", DEFAULT_READ_MODE)
        if mode not in LINEARIZABLE_MODES + PREFIX_MODES:
            modes = ", ".join(LINEARIZABLE_MODES + PREFIX_MODES)
            raise InputError(f"{path / 'test.json'}: read_mode {mode!r} is not one of {modes}")
        names, count = _declared_nodes(test)
        inputs = _inputs(path, test, names or count)
        source = test.get("source") if isinstance(test.get("source"), dict) else None
        wall = test.get("history_wall_ns")
        wall = wall if isinstance(wall, int) and not isinstance(wall, bool) else None
        return cls(path, mode, names, count, tuple(notes), test.get("fault_log"), inputs, source, wall)

    @property
    def history(self) -> Path:
        return self.path / "history.jsonl"

    @property
    def linearizable_reads(self) -> bool:
        return self.read_mode in LINEARIZABLE_MODES

    def final_logs(self) -> dict[str, Path]:
        """node -> final/<node>.jsonl, for the nodes that have one."""
        folder = self.path / "final"
        return {p.stem: p for p in sorted(folder.glob("*.jsonl"))} if folder.is_dir() else {}

    def event_logs(self) -> dict[str, Path]:
        """node -> nodes/<node>/events.jsonl, for the nodes that have one."""
        return {p.parent.name: p for p in sorted((self.path / "nodes").glob("*/events.jsonl"))}

    def store_dirs(self) -> dict[str, Path]:
        """node -> nodes/<node>/data, the collected copy of its store files."""
        return {p.parent.name: p for p in sorted((self.path / "nodes").glob("*/data")) if p.is_dir()}

    def nodes(self) -> list[str]:
        """The nodes known by name: test.json's list, else every node any file names."""
        if self.declared_nodes:
            return list(self.declared_nodes)
        found = set(self.final_logs()) | {p.name for p in (self.path / "nodes").glob("*") if p.is_dir()}
        return sorted(found)

    def cluster_size(self) -> int:
        """How many nodes the run had (test.json's `nodes`, else the nodes found)."""
        return self.node_count or len(self.nodes())

    def missing_final_logs(self) -> list[str]:
        """Nodes without a final log (named when known, else `?` per missing node)."""
        have = self.final_logs()
        missing = [n for n in self.nodes() if n not in have]
        unnamed = self.cluster_size() - len(have) - len(missing)
        return missing + ["?"] * max(0, unnamed)


def read_json_object(path: Path) -> dict[str, Any] | None:
    """The object a JSON file of the folder holds (test.json, results.json); None when the file
    is missing, InputError when it is not one JSON object."""
    if not path.is_file():
        return None
    try:
        found = json.loads(path.read_text())
    except ValueError as e:
        raise InputError(f"{path}: not valid JSON ({e})") from None
    if not isinstance(found, dict):
        raise InputError(f"{path}: must hold a JSON object")
    return found


def _inputs(path: Path, test: dict[str, Any], cluster: Any) -> frozenset[str]:
    """The evidence the folder holds by design: test.json's `inputs`; else every kind for a
    cluster's run (test.json names its nodes), else the history and whatever else is there.

    A check whose inputs are absent by design is "not applicable"; one whose inputs should be
    there and are not is "unknown".
    """
    declared = test.get("inputs")
    if declared is not None:
        if not (isinstance(declared, list) and set(declared) <= set(INPUTS) and "history" in declared):
            raise InputError(
                f"{path / 'test.json'}: inputs must be a list of {', '.join(INPUTS)} holding history"
            )
        return frozenset(declared)
    if cluster:
        return frozenset(INPUTS)
    present = {
        "final-logs": (path / "final").is_dir(),
        "events": any((path / "nodes").glob("*/events.jsonl")),
        "stores": any(p.is_dir() for p in (path / "nodes").glob("*/data")),
    }
    return frozenset(["history", *(name for name, there in present.items() if there)])


def _declared_nodes(test: dict[str, Any]) -> tuple[tuple[str, ...], int | None]:
    """test.json's `nodes`: a list of names, or a count."""
    nodes = test.get("nodes")
    if isinstance(nodes, list) and all(isinstance(n, str) for n in nodes):
        return tuple(nodes), len(nodes)
    if isinstance(nodes, int) and not isinstance(nodes, bool) and nodes > 0:
        return (), nodes
    return (), None
