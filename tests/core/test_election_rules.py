"""Election rules one by one (docs/dledger.md "Vote handling", "Candidate round", "Heartbeats")."""

from __future__ import annotations

import dataclasses

import pytest

from nodes.election import ParseResult, Rule, VoteRound, VoterView, judge_heartbeat, judge_vote
from nodes.messages import ResponseCode, VoteRequest, VoteResult

MEMBERS = frozenset({"n1", "n2", "n3"})
VOTER = VoterView(self_id="n1", members=MEMBERS, term=5, vote_for=None, leader=None,
                  ledger_end_index=10, ledger_end_term=4, taking_leadership=False, leader_guard=False)


def request(**changes: object) -> VoteRequest:
    base = VoteRequest(term=5, candidate="n2", ledger_end_index=10, ledger_end_term=4, seq=1, transfer=False)
    return dataclasses.replace(base, **changes)


def voter(**changes: object) -> VoterView:
    return dataclasses.replace(VOTER, **changes)


@pytest.mark.parametrize(("req", "view", "expected"), [
    # rule 1: the candidate is not a member
    (request(candidate="x9"), VOTER, VoteResult.REJECT_UNKNOWN_LEADER),
    # rule 2: a request from outside naming me as candidate
    (request(candidate="n1"), VOTER, VoteResult.REJECT_UNEXPECTED_LEADER),
    # rule 3: the candidate's last term is older, even at a higher vote term
    (request(term=9, ledger_end_term=3, ledger_end_index=50), VOTER, VoteResult.REJECT_EXPIRED_LEDGER_TERM),
    # rule 4: same last term, shorter log
    (request(ledger_end_index=9), VOTER, VoteResult.REJECT_SMALL_LEDGER_END_INDEX),
    # rule 5: an older vote term
    (request(term=4), VOTER, VoteResult.REJECT_EXPIRED_VOTE_TERM),
    # rule 6: voted for someone else this term, leader known / not known
    (request(), voter(vote_for="n3", leader="n3"), VoteResult.REJECT_ALREADY_HAS_LEADER),
    (request(), voter(vote_for="n3"), VoteResult.REJECT_ALREADY_VOTED),
    # rule 6: voted for this very candidate: go on (and accept)
    (request(), voter(vote_for="n2"), VoteResult.ACCEPT),
    # rule 7: a higher term is never adopted and granted in one step
    (request(term=6), VOTER, VoteResult.REJECT_TERM_NOT_READY),
    # rule 8: the vote term is below my last entry's term
    (request(term=5, ledger_end_term=6), voter(ledger_end_term=6, ledger_end_index=10),
     VoteResult.REJECT_TERM_SMALL_THAN_LEDGER),
    # rule 9: I am taking leadership and the candidate is not ahead of me
    (request(), voter(taking_leadership=True), VoteResult.REJECT_TAKING_LEADERSHIP),
    (request(ledger_end_index=11), voter(taking_leadership=True), VoteResult.ACCEPT),
    # rule 10
    (request(), VOTER, VoteResult.ACCEPT),
    # our lease guard: a loyal follower turns a higher-term candidate away, unless it is a transfer
    (request(term=6), voter(leader_guard=True), VoteResult.REJECT_ALREADY_HAS_LEADER),
    (request(term=6, transfer=True), voter(leader_guard=True), VoteResult.REJECT_TERM_NOT_READY),
])
def test_vote_rules_in_order(req: VoteRequest, view: VoterView, expected: VoteResult) -> None:
    assert judge_vote(req, view) is expected


def test_self_vote_passes_rule_2_and_rule_9() -> None:
    own = request(candidate="n1")
    assert judge_vote(own, voter(taking_leadership=True), self_vote=True) is VoteResult.ACCEPT


def test_ledger_check_comes_before_the_term_check() -> None:
    # rules 3-4 before 5-7: a stale log at a higher term does not even unsettle the voter
    assert judge_vote(request(term=50, ledger_end_index=3), VOTER) is VoteResult.REJECT_SMALL_LEDGER_END_INDEX


def tally(*answers: tuple[VoteResult, int], expected: int = 5, term: int = 5) -> VoteRound:
    rnd = VoteRound(term=term, seq=1, deadline=0.0, expected=expected)
    for i, (result, answer_term) in enumerate(answers):
        rnd.count(f"n{i + 1}", result, answer_term)
    return rnd


A, NR, OLD = VoteResult.ACCEPT, VoteResult.REJECT_TERM_NOT_READY, VoteResult.REJECT_EXPIRED_LEDGER_TERM


@pytest.mark.parametrize(("answers", "expected"), [
    # 1: someone knows a higher term
    ([(A, 5), (A, 5), (VoteResult.REJECT_EXPIRED_VOTE_TERM, 8)],
     (ParseResult.WAIT_TO_VOTE_NEXT, Rule.HIGHER_TERM_SEEN)),
    ([(A, 5), (VoteResult.REJECT_TERM_SMALL_THAN_LEDGER, 7)],
     (ParseResult.WAIT_TO_VOTE_NEXT, Rule.HIGHER_TERM_SEEN)),
    # 2: someone already has a leader
    ([(A, 5), (A, 5), (A, 5), (VoteResult.REJECT_ALREADY_HAS_LEADER, 5)],
     (ParseResult.WAIT_TO_REVOTE, Rule.LEADER_KNOWN)),
    # 3: too few valid answers (an isolated node keeps its term)
    ([(A, 5), (VoteResult.UNKNOWN, 5), (VoteResult.UNKNOWN, 5)],
     (ParseResult.WAIT_TO_REVOTE, Rule.TOO_FEW_VALID)),
    # 4: the valid answers without bigger ledgers are not a quorum
    ([(A, 5), (OLD, 5), (OLD, 5), (A, 5), (VoteResult.UNKNOWN, 5)],
     (ParseResult.WAIT_TO_REVOTE, Rule.BIGGER_LEDGERS)),
    # 5: passed
    ([(A, 5), (A, 5), (A, 5), (VoteResult.REJECT_ALREADY_VOTED, 5)],
     (ParseResult.PASSED, Rule.QUORUM_ACCEPTED)),
    # 6: accepted plus not-ready make a quorum
    ([(A, 5), (A, 5), (NR, 4), (VoteResult.REJECT_ALREADY_VOTED, 5)],
     (ParseResult.REVOTE_IMMEDIATELY, Rule.NOT_READY_QUORUM)),
    # 7: otherwise
    ([(A, 5), (VoteResult.REJECT_ALREADY_VOTED, 5), (VoteResult.REJECT_ALREADY_VOTED, 5)],
     (ParseResult.WAIT_TO_VOTE_NEXT, Rule.OTHERWISE)),
])
def test_parse_results(answers: list[tuple[VoteResult, int]], expected: tuple[ParseResult, int]) -> None:
    assert tally(*answers).parse(quorum=3) == expected


def test_a_duplicated_answer_counts_once() -> None:
    rnd = VoteRound(term=5, seq=1, deadline=0.0, expected=5)
    rnd.count("n1", A, 5)
    rnd.count("n2", A, 5)
    rnd.count("n2", A, 5)
    assert rnd.accepted == 2
    assert rnd.parse(quorum=3) == (ParseResult.WAIT_TO_REVOTE, Rule.TOO_FEW_VALID)


def test_round_decides_early_like_dledgers_latch() -> None:
    assert tally((A, 5), (A, 5), (A, 5)).decided(quorum=3)
    assert tally((A, 5), (NR, 4), (NR, 4)).decided(quorum=3)
    assert not tally((A, 5), (VoteResult.REJECT_ALREADY_VOTED, 5)).decided(quorum=3)


@pytest.mark.parametrize(("term", "leader", "my_term", "my_leader", "code"), [
    (5, "x9", 5, None, ResponseCode.UNKNOWN_MEMBER),
    (5, "n1", 5, None, ResponseCode.UNEXPECTED_MEMBER),
    (4, "n2", 5, "n2", ResponseCode.EXPIRED_TERM),
    (5, "n2", 5, "n2", ResponseCode.SUCCESS),
    (5, "n2", 5, None, ResponseCode.SUCCESS),  # caller becomes its follower
    (5, "n2", 5, "n3", ResponseCode.INCONSISTENT_LEADER),
    (6, "n2", 5, "n3", ResponseCode.TERM_NOT_READY),  # caller becomes candidate
])
def test_heartbeat_codes_in_order(term: int, leader: str, my_term: int, my_leader: str | None,
                                  code: ResponseCode) -> None:
    assert judge_heartbeat(term, leader, "n1", MEMBERS, my_term, my_leader) is code
