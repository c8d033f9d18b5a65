"""The coverage report of `simulate-many`: per guarded rule, the seeds that reached it, the times it fired."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from nodes.coverage import RULES, UNREACHABLE

MIN_SHARE = 0.01  # every reachable rule should fire in at least 1 % of the seeds


@dataclass(frozen=True, slots=True)
class CoverageTable:
    """The rows (for JSON) and the text (for the terminal)."""

    rows: list[dict[str, object]]
    text: str

    @property
    def blind_spots(self) -> list[str]:
        """Reachable rules that fired in fewer than MIN_SHARE of the seeds."""
        return [str(r["rule"]) for r in self.rows if r["below_target"]]


def coverage_table(seeds: int, reached: Counter[str], fired: Counter[str]) -> CoverageTable:
    """One row per rule of `nodes.coverage.RULES` (and any rule fired that it lacks)."""
    rows: list[dict[str, object]] = []
    lines = [f"coverage over {seeds} seeds (rule: seeds that reached it, times fired):"]
    for rule in [*RULES, *sorted(set(fired) - set(RULES))]:
        share = reached[rule] / seeds if seeds else 0.0
        note = UNREACHABLE.get(rule, "")
        below = not note and share < MIN_SHARE
        rows.append({"rule": rule, "seeds": reached[rule], "share": round(share, 4), "fired": fired[rule],
                     "below_target": below, "unreachable": note})
        flag = "  BELOW 1 %" if below else (f"  (not in the simulator: {note})" if note else "")
        lines.append(f"  {rule:38} {reached[rule]:7} seeds {share:7.1%} {fired[rule]:10} fired{flag}")
    return CoverageTable(rows, "\n".join(lines))
