"""The hunt's table: one row per seeded bug, what caught it where, and the totals."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from harness.mutants.e2e import CONTROL_TOO
from harness.mutants.simhunt import DEFAULT_ROTATION

Row = Mapping[str, Any]
HEADER = ("bug", "family", "simulator, default rotation", "simulator, aimed", "default run", "nightly cell")


def markdown(rows: Sequence[Row]) -> str:
    """The rows as a Markdown table, then one line of totals."""
    lines = ["| " + " | ".join(HEADER) + " |", "|" + "---|" * len(HEADER)]
    for row in rows:
        rotation, aimed = _sim_cells(row)
        lines.append("| " + " | ".join([f"`{row['name']}`", row["family"], rotation, aimed,
                                         _run_cell(row.get("default")), _run_cell(row.get("cell"))]) + " |")
    lines.append("")
    lines.append(totals(rows))
    return "\n".join(lines)


def totals(rows: Sequence[Row]) -> str:
    """How many of the rows each way caught, of those it ran on."""
    parts = []
    rotation = [r for r in rows if r.get("sim")]
    if rotation:
        found = sum(1 for r in rotation if r["sim"][0]["violating"])
        anywhere = sum(1 for r in rotation if any(f["violating"] for f in r["sim"]))
        parts.append(f"simulator: {found} of {len(rotation)} in the default rotation, {anywhere} with "
                     f"the aimed flags too")
    for kind, label in (("default", "default run"), ("cell", "nightly cell")):
        ran = [r for r in rows if r.get(kind)]
        if ran:
            caught = sum(1 for r in ran if r[kind]["caught_at"])
            parts.append(f"{label}: {caught} of {len(ran)} ({100 * caught / len(ran):.0f} %)")
    return "; ".join(parts) or "nothing hunted"


def _sim_cells(row: Row) -> tuple[str, str]:
    if "sim" not in row:
        return "not run", "not run"
    findings = row["sim"]
    if not findings:
        return "cannot load (master-slave)", "n/a"
    cells = {f["where"]: _sim_cell(f) for f in findings}
    rotation = cells.pop(DEFAULT_ROTATION)
    aimed = next(iter(cells.items()), None)
    return rotation, f"{aimed[1]} (`{aimed[0]}`)" if aimed else "not needed"


def _sim_cell(finding: Row) -> str:
    if not finding["violating"]:
        return f"none in {finding['seeds']} seeds"
    first = f"first {finding['first_seed']}: {finding['first_kind']}"
    return f"{finding['violating']} of {finding['seeds']} seeds ({first})"


def _run_cell(finding: Row | None) -> str:
    if finding is None:
        return "not run"
    verdicts = finding["verdicts"]
    if finding["caught_at"]:
        return f"invalid at run {finding['caught_at']}"
    if CONTROL_TOO in verdicts:  # runs that prove nothing, shown one by one
        return "; ".join(verdicts)
    if verdicts and verdicts[-1] != "valid":
        return f"{verdicts[-1]} at run {len(verdicts)}"
    return f"valid x{len(verdicts)}"
