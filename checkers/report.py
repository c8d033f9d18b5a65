"""`report.html`: the verdict, anomalies with witnesses, plots and the nemesis timeline of one run."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from jinja2 import Environment, PackageLoader, select_autoescape

from checkers.plots import write_plots
from checkers.timeline import build_timeline

ABOUT = {
    "lost": "an acknowledged append, or an entry an ok read saw, missing from the final log",
    "divergence": "one log index holding different ids",
    "duplicate": "one id at two indexes",
    "phantom": "an id in a log or read that no client appended",
    "aborted-read": "an id seen whose append definitely failed",
    "index-mismatch": "the ack said index i, the final log has the id at j",
    "realtime-reorder": "append A completed before B was invoked, yet A's index is after B's",
    "stale-read": "a read invoked after an append to index i was acknowledged does not see i",
    "future-read": "a read saw an id whose append was invoked after the read returned",
    "nonmonotonic-read": "a later read sees a shorter committed log",
    "hole": "a gap below the highest committed index in a final log",
    "replica-disagreement": "node data files disagree at an index both committed",
    "election-safety": "two leaders in one term",
    "recovered": "indeterminate appends that did land (not an error)",
}
VERDICT = {True: ("valid", "valid"), False: ("invalid", "invalid"), "unknown": ("unknown", "unknown")}
SUMMARY_KEYS = (
    "nodes",
    "time_limit",
    "nemesis",
    "nemesis_interval",
    "concurrency",
    "rate",
    "flush",
    "timing",
    "read_mode",
    "payload_size",
    "seed",
    "git_commit",
    "started",
    "duration_s",
)


def _load(path: Path) -> dict[str, Any]:
    return json.loads(path.read_text(encoding="utf-8")) if path.exists() else {}


def _check_rows(checks: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    rows = []
    for name, check in checks.items():
        css, word = VERDICT.get(check.get("valid"), VERDICT["unknown"])
        if name == "recovered":
            css, word = "valid", "info"
        rows.append(
            {
                "name": name,
                "css": css,
                "word": word,
                "count": check.get("count", 0),
                "about": ABOUT.get(name, ""),
                "note": check.get("note"),
                "witnesses": [json.dumps(w, indent=2, sort_keys=True) for w in check.get("witnesses", [])],
            }
        )
    order = {"invalid": 0, "unknown": 1, "valid": 2}
    return sorted(rows, key=lambda r: (order[r["css"]], r["name"]))


def write_report(run_dir: Path) -> Path:
    """Write `report.html` and its plots into `run_dir`; returns the report's path."""
    test = _load(run_dir / "test.json")
    results = _load(run_dir / "results.json")
    history = run_dir / "history.jsonl"
    timeline = build_timeline(history, test.get("faults")) if history.exists() else None
    plots = write_plots(timeline, run_dir) if timeline else []
    css, word = VERDICT.get(results.get("valid"), VERDICT["unknown"])
    if not results:
        word = "not checked"
    summary = [(k.replace("_", " "), test[k]) for k in SUMMARY_KEYS if k in test]
    outcomes = (results.get("stats") or {}).get("outcomes")
    if outcomes:
        summary.append(("client outcomes", outcomes))
    env = Environment(loader=PackageLoader("checkers"), autoescape=select_autoescape())
    html = env.get_template("report.html.j2").render(
        test=test,
        run_dir=str(run_dir),
        verdict_class=css,
        verdict_word=word,
        summary=summary,
        reproduce=test.get("reproduce"),
        notes=results.get("notes", []),
        checks=_check_rows(results.get("checks", {})),
        plots=plots,
        nemesis_ops=timeline.nemesis_ops if timeline else [],
        fault_log=test.get("fault_log"),
        stats=json.dumps(results.get("stats", {}), indent=2, sort_keys=True),
    )
    out = run_dir / "report.html"
    out.write_text(html, encoding="utf-8")
    return out
