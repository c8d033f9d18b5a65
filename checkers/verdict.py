"""The verdict: results.json's format and the short table printed for people.

A check is invalid when it found anomalies, "unknown" when it had nothing to decide on,
valid otherwise.
`recovered` is informational; stale and non-monotonic reads are allowed in the prefix read
modes (`committed`, `follower`, `unsafe`) and reported as such.
"""

from __future__ import annotations

import json
from typing import Any

from checkers.layout import PREFIX_MODES

CHECKS = (
    "lost",
    "divergence",
    "duplicate",
    "phantom",
    "aborted-read",
    "index-mismatch",
    "realtime-reorder",
    "stale-read",
    "future-read",
    "nonmonotonic-read",
    "hole",
    "replica-disagreement",
    "election-safety",
    "recovered",
)
INFORMATIONAL = frozenset({"recovered"})
ALLOWED_IN_PREFIX_MODES = frozenset({"stale-read", "nonmonotonic-read"})

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


def table(result: dict[str, Any]) -> str:
    """A short verdict table: one line per check, the verdict last."""
    lines = [f"{'check':<22} {'verdict':<8} {'count':>8}  first witness"]
    for name, c in result["checks"].items():
        verdict = {True: "ok", False: "INVALID", "unknown": "unknown"}[c["valid"]]
        if c.get("allowed_by_read_mode") and c["count"]:
            verdict = "allowed"
        if c.get("informational"):
            verdict = "info"
        first = json.dumps(c["witnesses"][0], separators=(",", ":")) if c["witnesses"] else ""
        lines.append(f"{name:<22} {verdict:<8} {c['count']:>8}  {first[:100]}")
    lines.append(f"valid: {json.dumps(result['valid'])}  (read mode {result['read_mode']})")
    lines.extend(f"note: {n}" for n in result["notes"])
    return "\n".join(lines)
