"""Break one guard at a time (a switch in the test, never in the product) and require the
simulator to find the damage within a bounded number of seeds; and with the guards intact,
the same seeds stay clean."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from nodes import core, election
from nodes.messages import VoteResult
from tests.support.simsearch import SEEDS, first_violation


def _accept_instead_of(reject: set[VoteResult]) -> Callable[..., tuple[VoteResult, str | None]]:
    real = election._judge

    def judge(*args: object) -> tuple[VoteResult, str | None]:
        result, rule = real(*args)  # type: ignore[arg-type]
        return (VoteResult.ACCEPT, None) if result in reject else (result, rule)

    return judge


BROKEN: dict[str, tuple[str, Callable[[pytest.MonkeyPatch], None], set[str]]] = {
    "vote.reject.already-voted": (
        "a voter grants a second candidate in a term it already voted in",
        lambda mp: mp.setattr(election, "_judge", _accept_instead_of({VoteResult.REJECT_ALREADY_VOTED})),
        {"election safety"},
    ),
    "vote.reject.expired-ledger-term": (
        "a voter grants candidates whose log is behind its own (rules 3-4, Raft's up-to-date check)",
        lambda mp: mp.setattr(election, "check_ledger", lambda req, view: None),
        {"leader completeness", "state machine safety", "committed entry lost", "acknowledged append"},
    ),
    "leads-a-term-once": (
        "a leader that stepped down campaigns again in the term it led",
        lambda mp: mp.setattr(core.Core, "_never_lead_this_term_again", lambda self: None),
        {"election safety"},
    ),
}


@pytest.mark.parametrize("rule", sorted(BROKEN))
def test_the_simulator_finds_a_broken_guard(rule: str, monkeypatch: pytest.MonkeyPatch) -> None:
    what, breaks, kinds = BROKEN[rule]
    breaks(monkeypatch)
    result = first_violation(SEEDS)
    assert result is not None, f"no violation in {SEEDS} seeds with the guard broken: {what}"
    assert result.violation is not None and result.violation.kind in kinds, result.summary()


def test_with_every_guard_in_place_the_same_seeds_are_clean() -> None:
    result = first_violation(SEEDS)
    assert result is None, result.summary() if result else ""
