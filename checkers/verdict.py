"""The verdict: the checks, results.json's format and the short table printed for people.

`REGISTRY` is the one list of checks: its order is results.json's, and each `Check` says what
the report says it looks for, whether it needs the final logs to decide, and how its count
counts (informational, or allowed in the prefix read modes). The Spark checker, the
reference checker and the report all read it from here.

A check is invalid when it found anomalies, "unknown" when it had nothing to decide on,
valid otherwise.
`recovered` is informational; stale and non-monotonic reads are allowed in the prefix read
modes (`committed`, `follower`, `unsafe`) and reported as such.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from checkers.layout import PREFIX_MODES


@dataclass(frozen=True)
class Check:
    """One check of the verdict."""

    name: str
    about: str  # what it looks for, in one sentence (the report's "what it looks for")
    needs_final_log: bool = False  # without final logs it is "unknown" (unless it found something)
    informational: bool = False  # counted and shown, never invalid
    allowed_in_prefix_modes: bool = False  # only reported in the prefix read modes


REGISTRY: tuple[Check, ...] = (
    Check("lost", "an acknowledged append, or an entry an ok read saw, missing from the final log",
          needs_final_log=True),
    Check("divergence", "one log index holding different ids"),
    Check("duplicate", "one id at two indexes"),
    Check("phantom", "an id in a log or read that no client appended"),
    Check("aborted-read", "an id seen whose append definitely failed"),
    Check("index-mismatch", "the ack said index i, the final log has the id at j", needs_final_log=True),
    Check("realtime-reorder", "append A completed before B was invoked, yet A's index is after B's",
          needs_final_log=True),
    Check("stale-read", "a read invoked after an append to index i was acknowledged does not see i",
          allowed_in_prefix_modes=True),
    Check("future-read", "a read saw an id whose append was invoked after the read returned"),
    Check("uncommitted-read", "a read returned an entry past the commit index it reported with it "
          "(a read answers with committed entries only)", allowed_in_prefix_modes=True),
    Check("nonmonotonic-read", "a later read sees a shorter committed log", allowed_in_prefix_modes=True),
    Check("hole", "a gap below the highest committed index in a final log", needs_final_log=True),
    Check("replica-disagreement", "node data files disagree at an index both committed"),
    Check("election-safety", "two leaders in one term"),
    Check("consumed-then-lost", "an entry a consumer consumed, missing from the final log",
          needs_final_log=True),
    Check("consume-divergence",
          "a consumed entry that the final log holds at another index (or not at that index), "
          "or two consumes that got different ids at one index",
          needs_final_log=True),
    Check("skipped-offset",
          "a consumer that moved its offset past entries it never consumed: it pulled from beyond "
          "its committed offset, got entries that are not consecutive from where it pulled, or "
          "committed an offset past the entries it got"),
    Check("recovered", "indeterminate appends that did land (not an error)", needs_final_log=True,
          informational=True),
)
BY_NAME = {c.name: c for c in REGISTRY}
CHECKS = tuple(c.name for c in REGISTRY)
INFORMATIONAL = frozenset(c.name for c in REGISTRY if c.informational)
ALLOWED_IN_PREFIX_MODES = frozenset(c.name for c in REGISTRY if c.allowed_in_prefix_modes)
NEEDS_FINAL_LOG = tuple(c.name for c in REGISTRY if c.needs_final_log)

Verdict = bool | str  # True, False or "unknown"


def decide(
    found: dict[str, tuple[int, list[Any]]],
    undecidable: dict[str, str],
    read_mode: str,
    stats: dict[str, Any],
    notes: list[str],
) -> dict[str, Any]:
    """results.json for one history from its anomalies and the checks it could not decide."""
    checks: dict[str, dict[str, Any]] = {}
    for name in CHECKS:
        count, witnesses = found.get(name, (0, []))
        entry: dict[str, Any] = {"valid": True, "count": count, "witnesses": witnesses}
        if name in INFORMATIONAL:
            entry["informational"] = True
        elif name in ALLOWED_IN_PREFIX_MODES and read_mode in PREFIX_MODES:
            entry["allowed_by_read_mode"] = read_mode
        elif count:
            entry["valid"] = False
        elif name in undecidable:
            entry["valid"] = "unknown"
        if name in undecidable:
            entry["note"] = undecidable[name]
        checks[name] = entry
    judged = [c["valid"] for n, c in checks.items() if n not in INFORMATIONAL]
    valid: Verdict = False if False in judged else "unknown" if "unknown" in judged else True
    if read_mode in PREFIX_MODES:
        notes = [
            *notes,
            f"read mode {read_mode}: reads held to the prefix model only; "
            "stale and non-monotonic reads are allowed and reported, not invalid",
        ]
    return {"valid": valid, "read_mode": read_mode, "checks": checks, "stats": stats, "notes": notes}


def exit_code(valid: Verdict) -> int:
    """0 valid, 1 invalid, 2 unknown."""
    return 0 if valid is True else 1 if valid is False else 2


def verdict_line(result: dict[str, Any]) -> str:
    """The verdict and read mode, and that the faults did not bite when results.json's `bite` says so."""
    line = f"valid: {json.dumps(result['valid'])}  (read mode {result['read_mode']})"
    bite = result.get("bite")
    if bite and not bite["bit"]:
        line += f"{', but' if result['valid'] is True else ';'} {bite['note']}"
    return line


def table(result: dict[str, Any]) -> str:
    """A short verdict table: one line per check, what the nodes exercised, the verdict last."""
    lines = [f"{'check':<22} {'verdict':<8} {'count':>8}  first witness"]
    for name, c in result["checks"].items():
        verdict = {True: "ok", False: "INVALID", "unknown": "unknown"}[c["valid"]]
        if c.get("allowed_by_read_mode") and c["count"]:
            verdict = "allowed"
        if c.get("informational"):
            verdict = "info"
        first = json.dumps(c["witnesses"][0], separators=(",", ":")) if c["witnesses"] else ""
        lines.append(f"{name:<22} {verdict:<8} {c['count']:>8}  {first[:100]}")
    if result.get("exercised"):
        lines.append(f"exercised: {result['exercised']['summary']}")
    lines.append(verdict_line(result))
    lines.extend(f"note: {n}" for n in result["notes"])
    return "\n".join(lines)
