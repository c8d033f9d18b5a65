"""Which seeded bugs their nightly cell has caught end to end, as measured (`python -m harness mutants
hunt`): the nightly sweep fails when one of these comes back valid (the harness lost its teeth), and
only reports it for the others. Add a mutant here with where it was measured once its cell caught it.
"""

from __future__ import annotations

CAUGHT_BY_CELL: dict[str, str] = {
    "vote-without-log-check": "invalid at seed 4242, 411d3ca (`hunt vote-without-log-check --runs cell "
                              "--run-seeds 1 --start 4242`)",
    "read-index-unconfirmed": "invalid at seed 34002 (8 stale reads), after the client's discovery fix and "
                              "--stale-leader-ms (`hunt read-index-unconfirmed --runs cell --run-seeds 1 "
                              "--start 34002`)",
    **{name: f"invalid at seed 1215888288, aae1583, the unmodified node valid (`hunt {name} --sim-seeds 0 "
             f"--runs cell --run-seeds 1 --start 1215888288`)"
       for name in ("ack-before-quorum", "ack-before-fsync", "follower-acks-unflushed", "vote-twice-in-term",
                    "read-beyond-commit")},
    **{name: f"invalid at seed 291446987, 72210cb (forgotten-vote, and two leaders of term 1), the "
             f"unmodified node valid (`hunt {name} --sim-seeds 0 --runs cell --run-seeds 1 "
             f"--start 291446987`)"
       for name in ("vote-not-persisted", "vote-saved-only-on-term-change")},
    "commit-quorum-off-by-one": "invalid at seed 579535017, 2b0b633, the unmodified node valid (valid at "
                                "1215888288; `hunt commit-quorum-off-by-one --sim-seeds 0 --runs cell "
                                "--run-seeds 1 --start 579535017`)",
}
