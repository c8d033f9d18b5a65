"""What a sweep's runs concluded: one row per run from its results folder, and the sweep's
`summary.json` and `summary.html` (template `harness/templates/summary.html.j2`).

A row says the cell, seed and mode, the verdict expected and the one the checker reached, its
**outcome** (`pass`: the expected verdict; `fail`: another, or no verdict at all; `known-risk`:
another verdict in a cell that warns it may come; `interrupted`; `skipped`: not started, as the
hosts of `nightly --hosts` cannot run the cell, `skipped_row`), the anomalies (the invalid
checks and their counts), the faults that bit (hit the leader, changed it, or failed or timed
out client ops while in force), the throughput, how long the run took and how long its verdict
took after the final reads, and the report's path.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from jinja2 import Environment, PackageLoader

from harness.chaos.results import write_json
from harness.sweeps.matrix import Cell
from nodes.cliparse import EXIT_INTERNAL

VERDICT_WORDS = {True: "valid", False: "invalid", "unknown": "unknown"}
BEFORE_VERDICT = ("workload", "heal", "catch-up", "final-reads")  # the phases up to the final reads


@dataclass
class Row:
    """One run of the sweep; see the module doc."""

    cell: str
    seed: int
    mode: str
    expected: str
    verdict: str  # valid | invalid | unknown | error | interrupted | skipped
    outcome: str  # pass | fail | known-risk | interrupted | skipped
    control: bool
    why: str
    known_risk: str | None
    message: str | None  # why the outcome is not a pass
    duration_s: float
    run_dir: str | None  # None: skipped
    report: str | None = None  # report.html, relative to the summary
    anomalies: dict[str, int] = field(default_factory=dict)
    faults: list[dict[str, Any]] = field(default_factory=list)
    throughput: float | None = None
    to_verdict_s: float | None = None
    reproduce: str | None = None


def row_of(cell: Cell, seed: int, run_dir: Path, code: int, duration_s: float, summary_dir: Path, *,
           error: str | None = None, interrupted: bool = False) -> Row:
    """The row of one finished (or interrupted) run of `cell`: `code` is its exit code, `error` what
    broke it when it raised instead."""
    test = _json(run_dir / "test.json") or {}
    results = _json(run_dir / "results.json")
    report = run_dir / "report.html"
    if interrupted or test.get("interrupted"):
        verdict = "interrupted"
    elif results is not None:
        verdict = VERDICT_WORDS.get(results.get("valid"), "unknown")
    else:
        verdict = "error" if code == EXIT_INTERNAL else "unknown"
    checks = (results or {}).get("checks", {})
    anomalies = {name: c.get("count", 0) for name, c in checks.items() if c.get("valid") is False}
    outcome, message = judge(cell, verdict, anomalies, report if report.exists() else run_dir / "harness.log",
                             error or test.get("error"),
                             [n for n, c in checks.items() if c.get("valid") == "unknown"])
    return Row(
        cell=cell.name, seed=seed, mode=cell.mode, expected=cell.expect, verdict=verdict, outcome=outcome,
        control=cell.control, why=cell.why, known_risk=cell.known_risk, message=message,
        duration_s=round(duration_s, 1), run_dir=str(run_dir),
        report=str(report.relative_to(summary_dir)) if report.exists() else None,
        anomalies=anomalies, faults=faults_that_bit(test), throughput=test.get("achieved_rate"),
        to_verdict_s=_to_verdict_s(test, run_dir / "results.json"), reproduce=test.get("reproduce"))


def skipped_row(cell: Cell, seed: int, reason: str) -> Row:
    """The row of a run of `cell` the sweep did not start: its hosts cannot run it, for `reason`."""
    return Row(cell=cell.name, seed=seed, mode=cell.mode, expected=cell.expect, verdict="skipped",
               outcome="skipped", control=cell.control, why=cell.why, known_risk=cell.known_risk,
               message=f"{cell.name}: {reason}", duration_s=0.0, run_dir=None)


def judge(cell: Cell, verdict: str, anomalies: dict[str, int], where: Path, error: str | None = None,
          undecided: list[str] | None = None) -> tuple[str, str | None]:
    """The outcome of a run of `cell` that reached `verdict`, and the message saying why it is not a
    pass (None for a pass). `where`: the report, or the log when there is none."""
    if verdict == cell.expect:
        return "pass", None
    if verdict == "interrupted":
        return "interrupted", f"{cell.name}: interrupted before its verdict; see {where}"
    if cell.control and verdict == "valid":
        return "fail", (f"control {cell.name} came back valid: the harness lost its teeth ({cell.why}); "
                        f"{where}")
    found = ", ".join(f"{name} {count}" for name, count in anomalies.items())
    got = {"invalid": f"invalid ({found})",
           "unknown": f"unknown ({', '.join(undecided or []) or 'no verdict'} undecided)",
           "error": f"no verdict: the run failed ({error or 'see its harness.log'})"}.get(verdict, verdict)
    text = f"{cell.name}: expected {cell.expect}, got {got}; {where}"
    if cell.known_risk and verdict in ("valid", "invalid"):
        return "known-risk", f"{text} (known risk: {cell.known_risk})"
    return "fail", text


def faults_that_bit(test: dict[str, Any]) -> list[dict[str, Any]]:
    """Per fault family of test.json's fault log: how many faults, how many bit, leader hits and
    changes, and errors."""
    families: dict[str, dict[str, Any]] = {}
    for fault in (test.get("fault_log") or {}).get("faults", []):
        entry = families.setdefault(fault["family"], {"family": fault["family"], "faults": 0, "bit": 0,
                                                      "leader_hit": 0, "leader_changes": 0, "errors": 0})
        ops = fault.get("ops", {})
        changes = fault.get("leader_changes") or 0
        entry["faults"] += 1
        entry["bit"] += bool(fault.get("leader_hit") or changes or ops.get("fail") or ops.get("info"))
        entry["leader_hit"] += bool(fault.get("leader_hit"))
        entry["leader_changes"] += changes
        entry["errors"] += bool(fault.get("error") or fault.get("stop_error"))
    return list(families.values())


def _to_verdict_s(test: dict[str, Any], results: Path) -> float | None:
    """Seconds from the end of the final reads to results.json (None when either is unknown)."""
    phases = test.get("phases", {})
    wall = test.get("history_wall_ns")
    if not results.exists() or not isinstance(wall, int) or any(p not in phases for p in BEFORE_VERDICT):
        return None
    reads_done = wall / 1e9 + sum(phases[p] for p in BEFORE_VERDICT)
    return round(results.stat().st_mtime - reads_done, 1)


def _json(path: Path) -> dict[str, Any] | None:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def counts(rows: list[Row]) -> dict[str, int]:
    """How many rows had each outcome."""
    found = {outcome: 0 for outcome in ("pass", "fail", "known-risk", "interrupted", "skipped")}
    for row in rows:
        found[row.outcome] += 1
    return found


def write_summary(summary_dir: Path, rows: list[Row], sweep: dict[str, Any]) -> tuple[Path, Path]:
    """Write summary.json (`sweep`, the outcome counts, the rows) and summary.html; their paths."""
    data = {**sweep, "counts": counts(rows), "rows": [asdict(row) for row in rows]}
    write_json(summary_dir / "summary.json", data)
    env = Environment(loader=PackageLoader("harness", "templates"), autoescape=True, trim_blocks=True,
                      lstrip_blocks=True)
    html = env.get_template("summary.html.j2").render(sweep=data, rows=rows)
    (summary_dir / "summary.html").write_text(html, encoding="utf-8")
    return summary_dir / "summary.json", summary_dir / "summary.html"
