"""`timeline.html`: every client op of a run in its process lane over time, with fault bands and witnesses.

`OpTimeline` listens to the run's one pass over `history.jsonl` (`checkers.run.reader`; memory
flat in the history's length) and writes:

* `timeline/chunk-NNNNN.js`: the ops, `CHUNK_OPS` completed ops a file, in columns; each
  file calls `TL.chunk(k, columns)`, so the page loads them with `<script src>` on demand,
  which also works opened from disk (file://), where fetch() is blocked;
* `timeline.html`: the page, with an aggregate inlined: op counts per time bin per lane per
  outcome (at most `MAX_BINS` bins), fault periods, nemesis ops, witness ops and a sparse
  history index -> time table that finds the ops of `#op=<index>`.

The page draws the aggregate on a canvas and loads the chunks of the window in view once it
holds few enough ops to draw one by one; `#t=<seconds>` and `#op=<index>` zoom there.
"""

from __future__ import annotations

import json
from array import array
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

from jinja2 import Environment, PackageLoader

from checkers.checks.witnesses import HISTORY_KEYS, HistoryLookup, named
from checkers.jsonlines import NEMESIS
from checkers.layout import read_json_object
from checkers.run.faultperiods import FaultPairing, FaultPeriod
from checkers.run.reader import Line, RunReader

CHUNK_OPS = 4000
MAX_BINS = 2048
FIRST_BIN_US = 1000
MAX_SAMPLES = 4096
TYPES = ("ok", "fail", "info", "open")  # open: invoked, never completed
CHUNK_DIR = "timeline"


class _Codes:
    """Small integer codes for repeated strings (f names, nodes), in order of first use."""

    def __init__(self) -> None:
        self.names: list[str] = []
        self.codes: dict[str, int] = {}

    def __call__(self, name: str | None) -> int:
        if name is None:
            return -1
        if name not in self.codes:
            self.codes[name] = len(self.names)
            self.names.append(name)
        return self.codes[name]


class _Lanes:
    """Which lane each client process is drawn in.

    With the run's concurrency known, lane = process mod concurrency (the harness gives a
    worker processes `w, w + n, w + 2n, ...`). Otherwise a new process takes the lowest lane
    whose process retired (completed `info`), else a new lane.
    """

    def __init__(self, concurrency: int | None) -> None:
        self.concurrency = concurrency
        self.first: list[int] = []  # first process of each lane
        self.count: list[int] = []  # processes seen per lane
        self.active: dict[int, int] = {}
        self.free: list[int] = []

    def lane(self, process: int) -> int:
        if self.concurrency:
            lane = process % self.concurrency
            while len(self.first) <= lane:
                self.first.append(len(self.first))
                self.count.append(1)
            return lane
        if process not in self.active:
            if self.free:
                lane = min(self.free)
                self.free.remove(lane)
                self.count[lane] += 1
            else:
                lane = len(self.first)
                self.first.append(process)
                self.count.append(1)
            self.active[process] = lane
        return self.active[process]

    def retire(self, process: int) -> None:
        """`process` completed `info`: its worker goes on under a fresh process id."""
        if self.concurrency:
            self.count[process % self.concurrency] += 1
        elif process in self.active:
            self.free.append(self.active.pop(process))

    def labels(self) -> list[dict[str, Any]]:
        name = "worker {}" if self.concurrency else "p{}"
        return [{"label": name.format(p), "first": p, "processes": n}
                for p, n in zip(self.first, self.count, strict=True)]


class _Bins:
    """Client ops per time bin (by invoke time) per lane per outcome; bins double in width to stay few."""

    def __init__(self) -> None:
        self.width = FIRST_BIN_US
        self.lanes: list[list[array]] = []  # per lane: ok, fail, info (open ops count as info)
        self.used = 0

    def add(self, lane: int, us: int, outcome: int) -> None:
        b = us // self.width
        while b >= MAX_BINS:
            self._halve()
            b = us // self.width
        while len(self.lanes) <= lane:
            self.lanes.append([array("q", bytes(8 * MAX_BINS)) for _ in range(3)])
        self.lanes[lane][min(outcome, 2)][b] += 1
        self.used = max(self.used, b + 1)

    def _halve(self) -> None:
        self.width *= 2
        for counts in self.lanes:
            for a in counts:
                a[: MAX_BINS // 2] = array("q", (a[2 * i] + a[2 * i + 1] for i in range(MAX_BINS // 2)))
                a[MAX_BINS // 2:] = array("q", bytes(8 * (MAX_BINS - MAX_BINS // 2)))
        self.used = (self.used + 1) // 2

    def data(self) -> dict[str, Any]:
        n = self.used
        return {"width_us": self.width, "count": n,
                "lanes": [[a[:n].tolist() for a in counts] for counts in self.lanes]}


class _Chunks:
    """Completed ops in columns, written `CHUNK_OPS` at a time as `chunk-NNNNN.js` files."""

    COLUMNS = ("i", "j", "l", "p", "f", "y", "a", "b", "n", "v")

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        folder.mkdir(exist_ok=True)
        for old in folder.glob("chunk-*.js"):
            old.unlink()
        self.columns: dict[str, list[Any]] = {c: [] for c in self.COLUMNS}
        self.index: list[list[int]] = []  # [first invoke us, last completion us, ops] per chunk

    def add(self, *row: Any) -> None:
        for column, value in zip(self.COLUMNS, row, strict=True):
            self.columns[column].append(value)
        if len(self.columns["i"]) >= CHUNK_OPS:
            self.flush()

    def flush(self) -> None:
        cols = self.columns
        if not cols["i"]:
            return
        k = len(self.index)
        self.index.append([min(cols["a"]), max(cols["b"]), len(cols["i"])])
        body = json.dumps(cols, separators=(",", ":"))
        (self.folder / f"chunk-{k:05d}.js").write_text(f"TL.chunk({k},{body});\n", encoding="utf-8")
        self.columns = {c: [] for c in self.COLUMNS}


@dataclass
class _Samples:
    """Every `stride`-th history line's (index, time µs): brackets the time of any line for `#op=`."""

    stride: int = 1
    rows: list[list[int]] = field(default_factory=list)

    def add(self, index: int, us: int) -> None:
        if index % self.stride:
            return
        self.rows.append([index, us])
        if len(self.rows) >= MAX_SAMPLES:
            self.stride *= 2
            self.rows = [r for r in self.rows if r[0] % self.stride == 0]


def witnesses(results: dict[str, Any]) -> list[dict[str, Any]]:
    """The witnesses of results.json's checks (informational ones left out) with the history lines they name.

    `n` counts from 1 within a check, as the report numbers them.
    """
    found = []
    for check, entry in (results.get("checks") or {}).items():
        if not isinstance(entry, dict) or entry.get("informational"):
            continue
        for n, witness in enumerate(entry.get("witnesses") or [], 1):
            found.append({"check": check, "n": n, "ops": sorted(named(witness, HISTORY_KEYS))})
    return found


def _summary(f: str, invoked: Any, done: Line | None) -> str:
    """A short text for an op: what it asked, what it got, why it failed."""
    value = done.get("value") if done and done["type"] == "ok" else invoked
    if f == "append" and isinstance(value, dict):
        text = str(value.get("id"))
        if "log_index" in value:
            text += f" @{value['log_index']} t{value.get('term')}"
    elif f == "read" and isinstance(value, dict):
        text = f"{value.get('from')}..{value.get('to')}"
        if isinstance(value.get("entries"), list):
            text += f": {len(value['entries'])} entries, commit {value.get('commit_index')}"
    elif f == "consume" and isinstance(value, dict):
        text = f"consumer {value.get('consumer')} from {value.get('from')}"
        if isinstance(value.get("entries"), list):
            text += f": {len(value['entries'])} entries, offset {value.get('offset')}"
            if value.get("rewound"):
                text += " (rewound)"
    else:
        text = json.dumps(value, separators=(",", ":"))
    if done and done.get("error"):
        text += f" ({done['error']})"
    return text[:120]


class OpTimeline:
    """The pass's part of the page: pairs feed lanes, bins, chunks (written as they fill) and samples."""

    def __init__(self, folder: Path, test: dict[str, Any]) -> None:
        self.folder = folder
        concurrency = test.get("concurrency")
        self.lanes = _Lanes(concurrency if isinstance(concurrency, int) and concurrency > 0 else None)
        self.bins = _Bins()
        self.chunks = _Chunks(folder / CHUNK_DIR)
        self.samples = _Samples()
        self.fs, self.nodes = _Codes(), _Codes()
        self.nemesis: list[list[Any]] = []
        self.lines = self.ops = self.end = 0

    def on_op(self, op: Line, invoke: Line | None) -> None:
        index, us = op["index"], op["time"] // 1000
        self.lines += 1
        self.end = max(self.end, us)
        self.samples.add(index, us)
        if invoke is not None:
            self._done(invoke, op, index, us)

    def done(self, pending: list[Line]) -> None:
        """Ops never completed last until the end of the history."""
        for invoke in pending:
            self._done(invoke, None, -1, self.end)
        self.chunks.flush()

    def _done(self, started: Line, op: Line | None, index: int, us: int) -> None:
        process, began = started["process"], started["time"] // 1000
        outcome = TYPES.index(op["type"]) if op else TYPES.index("open")
        text = _summary(started["f"], started.get("value"), op)
        if process == NEMESIS:
            self.nemesis.append([started["index"], index, began, us, started["f"], TYPES[outcome], text])
            return
        lane = self.lanes.lane(process)
        self.ops += 1
        self.bins.add(lane, began, outcome)
        node = (op or {}).get("node") or started.get("node")
        self.chunks.add(started["index"], index, lane, process, self.fs(started["f"]), outcome,
                        began, us, self.nodes(node), text)
        if op and op["type"] == "info":
            self.lanes.retire(process)

    def write_page(self, test: dict[str, Any], results: dict[str, Any], faults: list[FaultPeriod],
                   lookup: HistoryLookup) -> Path:
        """Write `timeline.html` once the pass is done: `results`' witnesses (their ops in `lookup`)
        and `faults` with it. It links report.html when that is there already, so write the report first."""
        found = witnesses(results)
        for w in found:
            times = [t for i in w["ops"] if (t := _time_of(lookup, i)) is not None]
            w["t"] = min(times, default=None)
        data = {
            "name": test.get("name") or self.folder.name,
            "report": (self.folder / "report.html").exists(),
            "end_us": self.end,
            "lines": self.lines,
            "ops": self.ops,
            "types": TYPES,
            "fs": self.fs.names,
            "nodes": self.nodes.names,
            "lanes": self.lanes.labels(),
            "bins": self.bins.data(),
            "chunk_dir": CHUNK_DIR,
            "chunks": self.chunks.index,
            "nemesis": self.nemesis,
            "faults": [{"label": p.fault, "start": p.start, "end": p.end,
                        "value": json.dumps(p.value, separators=(",", ":"))[:200]} for p in faults],
            "witnesses": found,
            "samples": self.samples.rows,
        }
        env = Environment(loader=PackageLoader("checkers"), autoescape=True)
        script = resources.files("checkers").joinpath("templates/timeline.js").read_text(encoding="utf-8")
        verdicts: dict[bool | None, str] = {True: "valid", False: "invalid"}
        verdict = verdicts.get(results.get("valid"), "unknown")
        if not results:
            verdict = "not checked"
        html = env.get_template("timeline.html.j2").render(data=data, verdict=verdict, script=script)
        out = self.folder / "timeline.html"
        out.write_text(html, encoding="utf-8")
        return out


def _time_of(lookup: HistoryLookup, index: int) -> float | None:
    """The time (s) of history line `index`, when `lookup` holds its op."""
    op = lookup.ops.get(index)
    if op is None:
        return None
    return op.time if op.index == index else op.completed


def write_timeline(folder: Path) -> Path:
    """Write `timeline.html` and `timeline/` into the results folder `folder` in a pass of its own
    (a report writes them from the run's pass); returns the page's path.

    The page links report.html when it is there already, so write the report first.
    InputError when history.jsonl is missing or malformed (a torn last line is fine), or when
    test.json or results.json is not one JSON object.
    """
    folder = Path(folder)
    test = read_json_object(folder / "test.json") or {}
    results = read_json_object(folder / "results.json") or {}
    faults, ops = FaultPairing.of(test.get("faults")), OpTimeline(folder, test)
    reader = RunReader(folder)
    try:
        reader.history([faults, ops])
        wanted = {i for w in witnesses(results) for i in w["ops"]}
        return ops.write_page(test, results, faults.periods, reader.lookup(wanted))
    finally:
        reader.close()
