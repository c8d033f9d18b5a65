"""`python -m harness faults`: every fault family and named mix, with their history names and options."""

from __future__ import annotations

import argparse

from nemesis import catalogue


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """No arguments."""


def describe() -> str:
    """The catalogue as text: one block per family, then the mixes."""
    lines = []
    for family in catalogue.FAMILIES.values():
        ops = family.start_f + (f" / {family.stop_f}" if family.stop_f else " (instant)")
        lines.append(f"{family.name}: {family.help}")
        lines.append(f"    history: {ops}; weight {family.weight:g}"
                     + (f"; needs {', '.join(sorted(family.needs))}" if family.needs else ""))
        for option in family.options:
            lines.append(f"    --{option.name} (default {option.default}): {option.help}")
    lines.append("mixes:")
    for name, members in catalogue.mixes().items():
        lines.append(f"    {name}: {', '.join(members)}")
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    print(describe())
    return 0
