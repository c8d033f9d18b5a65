"""Leadership transfer (DLedger's LEADERSHIP_TRANSFER and preferred leader).

The leader checks the request (`refusal`), then refuses appends with LEADER_TRANSFERRING
while the transferee catches up; once the transferee's match index reaches the leader's
end it sends a TransferRequest; the transferee becomes a candidate that raises its term
at once and, while its term is the one handed over (DLedger's isTakingLeadership, with no
deadline), votes with short intervals and refuses rivals whose log is not ahead of its own
(rule 9). The transfer succeeds when the old leader hears from the transferee as leader; it
gives up at its deadline, and a leader still in place then resumes taking appends.
We differ: DLedger takes leadership so (short intervals, rule 9) only on a node listed in
`preferredLeaderIds`; ours does on any transferee.
"""

from __future__ import annotations

from dataclasses import dataclass

from nodes.messages import ResponseCode


@dataclass(slots=True)
class LeaderTransfer:
    """The leader's side of a transfer in progress (`request_id` None: preferred-leader move)."""

    transferee: str
    request_id: int | None
    term: int
    deadline: float
    notified: bool = False

    def expired(self, now: float) -> bool:
        """Whether the transfer ran out of time (the leader then gives up and takes appends again)."""
        return now >= self.deadline


def refusal(transferee: str, self_id: str, members: frozenset[str], busy: bool, leader_end: int,
            transferee_match: int, max_lag: int) -> ResponseCode | None:
    """Why a leader refuses to transfer to `transferee` now, or None when it can start."""
    if transferee not in members:
        return ResponseCode.UNKNOWN_MEMBER
    if transferee == self_id:
        return ResponseCode.UNEXPECTED_ARGUMENT
    if busy:
        return ResponseCode.LEADER_TRANSFERRING
    if leader_end - transferee_match > max_lag:
        return ResponseCode.FALL_BEHIND_TOO_MUCH
    return None
