"""Which guarded rules fired: one counter per rule of the node, for the simulator's coverage report.

The core, the driver and the store call `hit(rule)` where a rule that guards safety or
liveness decides something (a vote rejected for a reason, a commit held back, a push
repaired, a torn tail cut). The counters cost a dict update; the simulator resets them
per seed and `simulate-many` reports, per rule, how many seeds reached it and how often it
fired, so a rule the random runs never reach shows up as a blind spot.

`RULES` lists every rule with what it guards; `UNREACHABLE` says why a listed rule cannot
fire in the simulator (it is covered by unit tests instead).
"""

from __future__ import annotations

from collections import Counter

RULES: dict[str, str] = {
    "vote.reject.expired-vote-term": "a vote request of an older term (DLedger rule 5)",
    "vote.reject.already-voted": "a second candidate in a term the voter already voted in (rule 6)",
    "vote.reject.already-has-leader": "a candidate in a term whose leader the voter follows (rule 6)",
    "vote.reject.term-not-ready": "a higher-term candidate: the voter first raises its own term (rule 7)",
    "vote.reject.term-small-than-ledger": "a candidate whose term is below the voter's last entry's (rule 8)",
    "vote.reject.expired-ledger-term": "a candidate whose last entry's term is older (rule 3)",
    "vote.reject.small-ledger-end-index": "a candidate with a shorter log of the same last term (rule 4)",
    "vote.reject.taking-leadership": "a candidate while the voter takes leadership by transfer (rule 9)",
    "vote.reject.lease-guard": "a higher-term candidate while the voter's leader lease holds",
    "vote.wait.lease-guard": "a restarted node waits out a lease it may have confirmed before it stands",
    "vote.reject.unknown-leader": "a candidate that is not a member (rule 1)",
    "vote.reject.unexpected-leader": "a request naming the voter itself as candidate (rule 2)",
    "commit.earlier-term-guard": "the quorum index holds an earlier term's entry: not committed by counting",
    "push.compare.match": "a COMPARE found where the logs agree",
    "push.compare.mismatch": "a COMPARE or APPEND at an entry the follower lacks or holds in another term",
    "push.leader.step-back": "the leader steps its compare index back on the follower's hint",
    "push.truncate": "a TRUNCATE cuts the follower's log after the agreed index",
    "push.append.gap": "an APPEND beyond the follower's end (reordered pushes): resent from the match",
    "push.append.conflict-repair": "an APPEND overlapping the follower's log in another term: cut, rewrite",
    "push.append.overlap-skip": "an APPEND that repeats entries the follower holds: skipped",
    "push.resend-timeout": "unacknowledged pushes resent from the match index",
    "push.follower-lost-entries": "a follower acknowledged entries it no longer has: compare again",
    "push.restarted-follower": "a restarted follower no longer knows its match: compare again",
    "lease.expired-step-down": "a leader that lost quorum contact for the lease steps down",
    "lease.read-waits": "a lease read falls back to a read-index round (lease not valid)",
    "read-index.confirmed": "a read-index read served after a heartbeat round confirmed leadership",
    "read-index.timeout": "a read-index read that no round confirmed in time",
    "step-down.higher-term": "a leader or candidate adopts a higher term it heard of",
    "transfer.timeout": "a leadership transfer that did not finish in time",
    "append.timeout": "an append not committed in time (WAIT_QUORUM_ACK_TIMEOUT)",
    "disk-full": "a client append refused with DISK_FULL",
    "recovery.cut-tail": "recovery after a crash cut a torn or unsynced tail of the log",
}

UNREACHABLE: dict[str, str] = {
    "vote.reject.unknown-leader": "the simulator's messages name members only; tests/core covers it",
    "vote.reject.unexpected-leader": "no node sends itself a vote request; tests/core covers it",
    "vote.reject.term-small-than-ledger": (
        "a voter's term is never below its last entry's term (entries come only from leaders of "
        "its own term, and the term is fsynced first); it takes a term file that lost an update, "
        "as DLedger's un-fsynced one can; tests/core covers it"
    ),
}

hits: Counter[str] = Counter()


def hit(rule: str) -> None:
    """Count one firing of `rule` (a key of RULES)."""
    hits[rule] += 1


def take() -> Counter[str]:
    """The counts since the last call, and start again from zero."""
    counts = Counter(hits)
    hits.clear()
    return counts
