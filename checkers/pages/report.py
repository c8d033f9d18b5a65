"""`report.html`: one run's verdict in plain words, the checks with each anomaly's witnesses laid
out, what the faults did and which protocol rules the nodes exercised (with a warning when the
faults did not bite), and the plots, in one self-contained file (checkers/templates/).

It renders a verdict (the one just computed, else results.json) and never re-checks. What it
shows of the history and the nodes' events comes from the run's one pass over them
(`checkers.run.afterrun`: a run's own, else one made here); of the final logs, the entries at the
log indexes witnesses name. It writes `timeline.html` from the same pass.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from jinja2 import ChainableUndefined, Environment, PackageLoader

from checkers.checks.verdict import NOT_APPLICABLE, REGISTRY
from checkers.checks.witnesses import HISTORY_KEYS, final_entries, log_indexes, named, witness_views
from checkers.jsonlines import InputError
from checkers.layout import ResultsDir, read_json_object
from checkers.pages.faultwords import describe
from checkers.pages.plots import draw_plots
from checkers.run.afterrun import AfterRun
from nodes.coverage import RULES

ABOUT = {c.name: c.about for c in REGISTRY}  # what each check looks for
WORDS = {True: "valid", False: "invalid", "unknown": "unknown", NOT_APPLICABLE: "not-applicable"}
ORDER = ("invalid", "unknown", "allowed", "valid", "info", "not-applicable")  # the checks table's order
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


def load_results(run_dir: Path) -> dict[str, Any] | None:
    """results.json of `run_dir`, None when the run was never checked; InputError when malformed."""
    results = read_json_object(run_dir / "results.json")
    if results is None:
        return None
    valid = results.get("valid")
    if not (isinstance(valid, bool) or valid == "unknown") or not isinstance(results.get("checks"), dict):
        raise InputError(f"{run_dir / 'results.json'}: needs `valid` (true, false or \"unknown\"), `checks`")
    return results


def write_report(run_dir: Path, results: dict[str, Any] | None = None, after: AfterRun | None = None) -> Path:
    """Write `report.html`, the plots' PNG files and `timeline.html` into `run_dir`, from `results`
    or else its results.json, and from `after`, the run's readers with both passes done, or else
    a pass made now; returns the report's path. InputError names a missing or malformed input.
    """
    layout = ResultsDir.open(run_dir)
    if results is None:
        results = load_results(layout.path)
    if after is None:
        after = AfterRun(layout.path, read_json_object(layout.path / "test.json") or {})
        after.read_history()
        after.read_events()
    try:
        return _write(layout, results, after)
    finally:
        after.close()


def _write(layout: ResultsDir, results: dict[str, Any] | None, after: AfterRun) -> Path:
    test = after.test
    checks: dict[str, dict[str, Any]] = (results or {}).get("checks", {})
    lookup = after.reader.lookup(named([c.get("witnesses", []) for c in checks.values()], HISTORY_KEYS))
    timeline = after.timeline.timeline
    finals = layout.final_logs()
    wanted = {i for c in checks.values() for w in c.get("witnesses", []) for i in log_indexes(w)}
    entries = final_entries(finals, wanted)
    views = {name: witness_views(name, c.get("witnesses", []), lookup, entries, after.series)
             for name, c in checks.items()}
    html = _environment().get_template("report.html.j2").render(
        test=test,
        run_dir=str(layout.path),
        verdict=_verdict(results, layout.linearizable_reads),
        summary=_summary(test, results),
        notes=(results or {}).get("notes", []),
        checks=_check_rows(checks, views),
        final_nodes=sorted(finals),
        node_names=_node_names(test, finals),
        plots=draw_plots(timeline, after.series, layout.path),
        plot_notes=[after.series_note] if after.series_note else [],
        nemesis_ops=timeline.nemesis_ops,
        fault_log=test.get("fault_log"),
        fault_log_error=test.get("fault_log_error"),
        exercised=_exercised(results),
        bite=(results or {}).get("bite"),
        stats=(results or {}).get("stats", {}),
    )
    out = layout.path / "report.html"
    out.write_text(html, encoding="utf-8")
    after.ops.write_page(test, results or {}, timeline.faults, lookup)  # after the report: it links back
    return out


def _environment() -> Environment:
    # autoescape always: select_autoescape() goes by the name's ending, which is .j2 here
    env = Environment(loader=PackageLoader("checkers"), autoescape=True,
                      undefined=ChainableUndefined, trim_blocks=True, lstrip_blocks=True)
    env.filters["fault_words"] = describe
    return env


def _node_names(test: dict[str, Any], finals: dict[str, Any]) -> list[str]:
    """The cluster's nodes: those with a final log, else n1..nN of test.json's `nodes`."""
    count = test.get("nodes")
    return sorted(finals) or ([f"n{i}" for i in range(1, count + 1)] if isinstance(count, int) else [])


def _verdict(results: dict[str, Any] | None, linearizable: bool) -> dict[str, Any]:
    """What the plain-words verdict at the top of the report says."""
    if results is None:
        return {"css": "unknown", "word": "not checked"}
    checks = results["checks"]
    stats = results.get("stats", {})
    return {
        "css": WORDS[results["valid"]],
        "word": WORDS[results["valid"]],
        "failed": [(n, c["count"]) for n, c in checks.items() if c["valid"] is False],
        "undecided": [(n, c.get("note", "")) for n, c in checks.items() if c["valid"] == "unknown"],
        "not_applicable": [n for n, c in checks.items() if c["valid"] == NOT_APPLICABLE],
        "source": results.get("source"),
        "allowed": [(n, c["count"]) for n, c in checks.items() if _state(c) == "allowed"],
        "appends": stats.get("append_ops"),
        "reads": stats.get("read_ops"),
        "consumes": stats.get("consume_ops"),
        "read_mode": results.get("read_mode"),
        "linearizable": linearizable,
    }


def _exercised(results: dict[str, Any] | None) -> dict[str, Any] | None:
    """results.json's `exercised` with a row per rule that fired: (rule, what it guards, count)."""
    found = (results or {}).get("exercised")
    if not found:
        return None
    return {**found, "rows": [(rule, RULES.get(rule, ""), n) for rule, n in found["rules"].items()],
            "known": len(RULES)}


def _summary(test: dict[str, Any], results: dict[str, Any] | None) -> list[tuple[str, Any]]:
    summary = [(k.replace("_", " "), test[k]) for k in SUMMARY_KEYS if k in test]
    outcomes = ((results or {}).get("stats") or {}).get("outcomes")
    if outcomes:
        summary.append(("client outcomes", outcomes))
    return summary


def _state(check: dict[str, Any]) -> str:
    """invalid, unknown, allowed (by the read mode), info (not an error) or valid."""
    if check.get("informational"):
        return "info"
    if check.get("allowed_by_read_mode") and check.get("count"):
        return "allowed"
    return WORDS[check["valid"]]


def _check_rows(checks: dict[str, dict[str, Any]], views: dict[str, list[Any]]) -> list[dict[str, Any]]:
    rows = [
        {
            "name": name,
            "state": _state(check),
            "count": check.get("count", 0),
            "about": ABOUT.get(name, ""),
            "note": check.get("note"),
            "views": views[name],
        }
        for name, check in checks.items()
    ]
    return sorted(rows, key=lambda r: (ORDER.index(r["state"]), r["name"]))
