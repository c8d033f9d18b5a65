"""DLedger's election rules as pure functions and counters (no state changes, no IO).

`judge_vote` is the voter side (docs/dledger.md "Vote handling", checks in order),
`VoteRound` counts a candidate's answers and `parse` decides the round ("Candidate round
and parse results"), `judge_heartbeat` is a follower's answer to a heartbeat
("Heartbeats"). The core applies the side effects each answer implies.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum, IntEnum, StrEnum

from nodes.coverage import hit
from nodes.messages import ResponseCode, VoteRequest, VoteResult


class Role(StrEnum):
    """A node's role; the values are the spellings of events.jsonl."""

    CANDIDATE = "candidate"
    LEADER = "leader"
    FOLLOWER = "follower"


class ParseResult(Enum):
    """DLedger's `VoteResponse.ParseResult`: what a candidate does after a round."""

    WAIT_TO_REVOTE = "wait-to-revote"
    REVOTE_IMMEDIATELY = "revote-immediately"
    PASSED = "passed"
    WAIT_TO_VOTE_NEXT = "wait-to-vote-next"


class Rule(IntEnum):
    """Which rule of `VoteRound.parse` decided a round, first match wins (docs/dledger.md,
    "Candidate round and parse results", whose table numbers them so)."""

    HIGHER_TERM_SEEN = 1  # a reply showed a larger term
    LEADER_KNOWN = 2  # a voter knows a leader
    TOO_FEW_VALID = 3  # the valid answers are not a quorum
    BIGGER_LEDGERS = 4  # the valid answers without bigger ledgers are not a quorum
    QUORUM_ACCEPTED = 5  # passed
    NOT_READY_QUORUM = 6  # accepted plus not-ready answers are a quorum
    OTHERWISE = 7


@dataclass(frozen=True, slots=True)
class VoterView:
    """What a voter knows when it judges a vote request."""

    self_id: str
    members: frozenset[str]
    term: int
    vote_for: str | None
    leader: str | None
    ledger_end_index: int
    ledger_end_term: int
    taking_leadership: bool
    leader_guard: bool


def check_ledger(req: VoteRequest, view: VoterView) -> VoteResult | None:
    """Rules 3-4: refuse a candidate whose log is behind mine (Raft's up-to-date check)."""
    if req.ledger_end_term < view.ledger_end_term:
        return VoteResult.REJECT_EXPIRED_LEDGER_TERM
    if req.ledger_end_term == view.ledger_end_term and req.ledger_end_index < view.ledger_end_index:
        return VoteResult.REJECT_SMALL_LEDGER_END_INDEX
    return None


def judge_vote(req: VoteRequest, view: VoterView, self_vote: bool = False) -> VoteResult:
    """The voter's answer to `req`, checking DLedger's rules 1-10 in order.

    `self_vote` is True when a candidate judges its own request (DLedger sends itself one).

    REJECT_TERM_NOT_READY (rule 7) obliges the caller to become a candidate at
    `req.term` and raise its term at its next round; ACCEPT obliges it to persist
    `vote_for = req.candidate` before the answer goes out.

    `leader_guard` (our addition, only with lease reads enabled) is checked just before
    rule 7: a node that heard from a live leader within the lease does not let a
    higher-term candidate disturb it unless the request is a leadership transfer.
    """
    result, rule = _judge(req, view, self_vote)
    if result is not VoteResult.ACCEPT and not self_vote:
        hit(rule or reject_rule(result))
    return result


def reject_rule(result: VoteResult) -> str:
    """The coverage rule (`nodes.coverage.RULES`) a rejection counts under: its code's own name."""
    return "vote.reject." + result.name.removeprefix("REJECT_").lower().replace("_", "-")


def _judge(req: VoteRequest, view: VoterView, self_vote: bool) -> tuple[VoteResult, str | None]:
    """The answer, and the coverage rule when it is not the result's own."""
    if req.candidate not in view.members:
        return VoteResult.REJECT_UNKNOWN_LEADER, None  # rule 1
    if not self_vote and req.candidate == view.self_id:
        return VoteResult.REJECT_UNEXPECTED_LEADER, None  # rule 2
    ledger = check_ledger(req, view)  # rules 3-4
    if ledger is not None:
        return ledger, None
    if req.term < view.term:
        return VoteResult.REJECT_EXPIRED_VOTE_TERM, None  # rule 5
    if req.term == view.term:  # rule 6
        if view.vote_for is not None and view.vote_for != req.candidate:
            if view.leader is not None:
                return VoteResult.REJECT_ALREADY_HAS_LEADER, None
            return VoteResult.REJECT_ALREADY_VOTED, None
    else:
        if view.leader_guard and not req.transfer:
            return VoteResult.REJECT_ALREADY_HAS_LEADER, "vote.reject.lease-guard"
        return VoteResult.REJECT_TERM_NOT_READY, None  # rule 7
    if req.term < view.ledger_end_term:
        return VoteResult.REJECT_TERM_SMALL_THAN_LEDGER, None  # rule 8
    if view.taking_leadership and not self_vote and not _ahead(req, view):
        return VoteResult.REJECT_TAKING_LEADERSHIP, None  # rule 9
    return VoteResult.ACCEPT, None  # rule 10


def _ahead(req: VoteRequest, view: VoterView) -> bool:
    return (req.ledger_end_term, req.ledger_end_index) > (view.ledger_end_term, view.ledger_end_index)


@dataclass(slots=True)
class VoteRound:
    """A candidate's counters for one round of vote requests (its own vote included)."""

    term: int
    seq: int
    deadline: float
    expected: int
    answered: int = 0
    valid: int = 0
    accepted: int = 0
    not_ready: int = 0
    bigger_ledger: int = 0
    already_has_leader: bool = False
    known_max_term: int = -1
    voters: set[str] = field(default_factory=set)

    def count(self, voter: str, result: VoteResult, term: int) -> None:
        """Add `voter`'s answer (`term` is its term in the reply); a duplicate is ignored."""
        if voter in self.voters:
            return
        self.voters.add(voter)
        self.answered += 1
        if result is not VoteResult.UNKNOWN:
            self.valid += 1
        if result is VoteResult.ACCEPT:
            self.accepted += 1
        elif result is VoteResult.REJECT_ALREADY_HAS_LEADER:
            self.already_has_leader = True
        elif result in (VoteResult.REJECT_EXPIRED_VOTE_TERM, VoteResult.REJECT_TERM_SMALL_THAN_LEDGER):
            self.known_max_term = max(self.known_max_term, term)
        elif result in (VoteResult.REJECT_EXPIRED_LEDGER_TERM, VoteResult.REJECT_SMALL_LEDGER_END_INDEX):
            self.bigger_ledger += 1
        elif result is VoteResult.REJECT_TERM_NOT_READY:
            self.not_ready += 1

    def decided(self, quorum: int) -> bool:
        """True once every member answered or the outcome can no longer improve (DLedger's latch),
        or (we differ) once it can no longer pass nor call for an immediate revote, whatever the
        members still silent answer: DLedger waits for a dead member until the round's deadline."""
        silent = self.expected - self.answered
        return (silent <= 0 or self.accepted >= quorum
                or self.accepted + self.not_ready >= quorum
                or self.accepted + self.not_ready + silent < quorum)

    def parse(self, quorum: int) -> tuple[ParseResult, Rule]:
        """The round's result and the rule that decided it."""
        if self.known_max_term > self.term:
            return ParseResult.WAIT_TO_VOTE_NEXT, Rule.HIGHER_TERM_SEEN
        if self.already_has_leader:
            return ParseResult.WAIT_TO_REVOTE, Rule.LEADER_KNOWN
        if self.valid < quorum:
            return ParseResult.WAIT_TO_REVOTE, Rule.TOO_FEW_VALID
        if self.valid - self.bigger_ledger < quorum:
            return ParseResult.WAIT_TO_REVOTE, Rule.BIGGER_LEDGERS
        if self.accepted >= quorum:
            return ParseResult.PASSED, Rule.QUORUM_ACCEPTED
        if self.accepted + self.not_ready >= quorum:
            return ParseResult.REVOTE_IMMEDIATELY, Rule.NOT_READY_QUORUM
        return ParseResult.WAIT_TO_VOTE_NEXT, Rule.OTHERWISE


def judge_heartbeat(term: int, leader: str, self_id: str, members: frozenset[str],
                    my_term: int, my_leader: str | None) -> ResponseCode:
    """A follower's answer to a heartbeat, in DLedger's order.

    SUCCESS with no known leader obliges the caller to become its follower;
    TERM_NOT_READY obliges it to become a candidate at `term`, raising its term next round.
    """
    if leader not in members:
        return ResponseCode.UNKNOWN_MEMBER
    if leader == self_id:
        return ResponseCode.UNEXPECTED_MEMBER
    if term < my_term:
        return ResponseCode.EXPIRED_TERM
    if term == my_term:
        if my_leader is None or my_leader == leader:
            return ResponseCode.SUCCESS
        return ResponseCode.INCONSISTENT_LEADER
    return ResponseCode.TERM_NOT_READY
