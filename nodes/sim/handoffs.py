"""Leadership transfers as a run lived them: each term a leader handed over, and who led it.

A transferee campaigns for the term after its leader's (DLedger's `termToTakeLeadership`);
the transfer did what it was asked when the transferee led that term. Another node may
lead it instead (the old leader, stepping down on seeing the term, or a node whose timer
fired), or nobody (split votes): DLedger allows both, so these are rates, not violations.
"""

from __future__ import annotations

from collections import Counter

OUTCOMES = ("transferee", "other", "none")  # who led a handed-over term
PREFIX = "handoff-"  # a run's stats count each outcome as `handoff-<outcome>`


def handoff_outcomes(handed: set[tuple[int, str]], leaders: dict[int, str]) -> Counter[str]:
    """`handoff-<outcome>` counts for the (term, transferee) pairs of a run, given who led each term."""
    counts: Counter[str] = Counter()
    for term, transferee in handed:
        leader = leaders.get(term)
        outcome = "none" if leader is None else "transferee" if leader == transferee else "other"
        counts[PREFIX + outcome] += 1
    return counts


def handoffs_in(stats: Counter[str]) -> Counter[str]:
    """The handed-over terms counted in a run's `stats`, by outcome."""
    return Counter({o: stats[PREFIX + o] for o in OUTCOMES if stats[PREFIX + o]})


def handoff_line(counts: Counter[str]) -> str:
    """One line for a batch of runs (`counts` by outcome): how many terms were handed over, and
    who led them."""
    total = sum(counts[o] for o in OUTCOMES)
    if not total:
        return "leadership transfers: no term handed over"
    share = ", ".join(f"{o} {counts[o] / total:.1%}" for o in OUTCOMES)
    return f"leadership transfers: {total} terms handed over, led by: {share}"
