"""Raft's classic scenarios and the client API, scripted on a small cluster of real cores."""

from __future__ import annotations

from nodes.core import CoreConfig
from nodes.election import Role
from nodes.logic import Ack
from nodes.messages import (
    AppendResponse,
    HeartbeatRequest,
    HeartbeatResponse,
    PushRequest,
    PushType,
    ReadMode,
    ReadResponse,
    ResponseCode,
    TransferResponse,
    VoteRequest,
    VoteResponse,
    VoteResult,
)
from tests.support.scripted import ScriptedCluster, entries


def test_figure_8_an_earlier_term_entry_is_not_committed_by_counting() -> None:
    # Raft paper, Figure 8: index 1 (term 2) sits on a majority, but only an entry of the
    # leader's own term may be committed by counting replicas.
    logs = {"n1": entries(1, 2), "n2": entries(1, 2), "n3": entries(1), "n4": entries(1), "n5": entries(1, 3)}
    terms = {n: (3, None) for n in logs}
    c = ScriptedCluster(5, logs=logs, terms=terms, down=("n4", "n5"), max_batch_entries=1)
    c.filters.append(lambda _s, _r, m: isinstance(m, PushRequest) and any(e.term > 3 for e in m.entries))
    c.run_until(lambda: c.stores["n3"].end_index >= 1 and c.stores["n3"].term_at(1) == 2)
    c.run(500)
    assert c.stores["n3"].term_at(1) == 2 and len(c.leaders()) == 1
    assert all(core.commit_index == -1 for core in c.cores.values() if core)  # nothing committed yet
    c.filters.clear()
    leader = c.elect()
    c.run(200)
    assert c.core(leader).commit_index == 2
    assert c.stores["n3"].term_at(1) == 2  # the old entry committed with the leader's no-op


def test_partitioned_follower_rejoins_without_disrupting_the_cluster() -> None:
    c = ScriptedCluster(5)
    leader = c.elect()
    term = c.core(leader).term
    follower = next(n for n in c.names if n != leader)
    c.isolate(follower)
    c.run(3000)  # many vote rounds alone
    assert c.core(follower).role is Role.CANDIDATE
    assert c.core(follower).term == term  # an isolated node never inflates its term (parse rule 3)
    c.heal()
    c.run(500)
    assert c.leaders() == [leader] and c.core(leader).term == term
    assert c.core(follower).role is Role.FOLLOWER and c.core(follower).leader == leader


def test_stale_leader_steps_down_and_its_uncommitted_entries_are_replaced() -> None:
    c = ScriptedCluster(5)
    old = c.elect()
    c.isolate(old)
    rid = c.append(old, b"never-committed")
    c.run(c.config.timing.leader_lost_ms + 50)
    assert c.core(old).role is not Role.LEADER  # lost its quorum for heartbeat * leak
    stale = c.responses[rid]
    assert isinstance(stale, AppendResponse) and stale.code is ResponseCode.TERM_CHANGED
    new = c.elect()
    assert new != old
    c.append(new, b"committed")
    c.heal()
    c.run(500)
    assert c.core(old).role is Role.FOLLOWER and c.core(old).leader == new
    bodies = [e.body for e in c.stores[old].entries]
    assert b"never-committed" not in bodies and b"committed" in bodies


def _pushes(c: ScriptedCluster, sender: str, to: str, kind: PushType) -> list[PushRequest]:
    return [m for s, r, m in c.sent
            if s == sender and r == to and isinstance(m, PushRequest) and m.type is kind]


def test_log_conflicts_are_repaired_by_compare_and_truncate() -> None:
    logs = {"n1": entries(1, 1, 2, 2), "n2": entries(1, 1, 2, 2), "n3": entries(1, 1, 1, 1, 1, 1, 1, 1)}
    c = ScriptedCluster(3, logs=logs, terms={n: (2, None) for n in logs})
    leader = c.elect()
    assert leader in ("n1", "n2")  # n3's last term is older: rules 3-4 keep it out
    c.run(300)
    assert c.stores["n3"].entries == c.stores[leader].entries
    # the hint skips n3's whole conflicting term, then halving finds the highest match
    assert 1 <= len(_pushes(c, leader, "n3", PushType.COMPARE)) <= 4
    assert [p.index for p in _pushes(c, leader, "n3", PushType.TRUNCATE)] == [1]


def test_a_follower_longer_than_the_leader_is_truncated_after_the_leaders_end() -> None:
    logs = {"n1": entries(1, 1), "n2": entries(1, 1), "n3": entries(1, 1, 1, 1)}
    c = ScriptedCluster(3, logs=logs, terms={"n1": (3, None), "n2": (3, None), "n3": (1, None)},
                        down={"n3"})
    leader = c.elect()
    c.start("n3")
    c.run(300)
    assert c.stores["n3"].entries == c.stores[leader].entries
    assert _pushes(c, leader, "n3", PushType.TRUNCATE)


def test_a_compare_that_steps_back_a_whole_term_never_cuts_entries_that_still_match() -> None:
    """Found by the simulator (seed 807, partition,crash,powerloss,repaircrash): the follower's
    hint steps back over its whole conflicting term, down to its commit index, below entries
    that still agree with the leader's, some of them committed; a TRUNCATE there removed
    committed entries from a majority, and one more crash elected a leader without them."""
    leader_log = entries(1, 1, 2, 2, 2, 2, 4)
    logs = {"n1": leader_log, "n2": list(leader_log), "n3": entries(1, 1, 2, 2, 2, 2, 2, 2)}
    c = ScriptedCluster(3, logs=logs, terms={"n1": (4, None), "n2": (4, None), "n3": (2, None)},
                        down={"n3"})
    leader = c.elect()
    assert leader in ("n1", "n2")
    c.start("n3")
    kept = c.stores["n3"].entries[:6]
    c.run(300)
    assert c.stores["n3"].entries == c.stores[leader].entries
    assert c.stores["n3"].entries[:6] == kept
    assert [p.index for p in _pushes(c, leader, "n3", PushType.TRUNCATE)] == [5]  # the highest match


def test_append_completes_only_once_committed() -> None:
    c = ScriptedCluster(3)
    leader = c.elect()
    followers = [n for n in c.names if n != leader]
    c.isolate(*followers)
    rid = c.append(leader, b"a", b"b")
    c.run(100)
    assert rid not in c.responses
    c.heal()
    c.run_until(lambda: rid in c.responses, 1000)  # resent after the push timeout
    done = c.responses[rid]
    assert isinstance(done, AppendResponse) and done.code is ResponseCode.SUCCESS
    assert done.last_index == done.first_index + 1
    replicated = c.stores[followers[0]].get_range(done.first_index, done.last_index)
    assert [e.body for e in replicated] == [b"a", b"b"]


def test_append_refusals() -> None:
    c = ScriptedCluster(3, max_pending_appends=3, append_timeout_ms=200.0)
    leader = c.elect()
    follower = next(n for n in c.names if n != leader)
    assert c.responses[c.append(follower, b"x")].code is ResponseCode.NOT_LEADER
    assert c.responses[c.append(follower, b"x")].leader == leader  # type: ignore[union-attr]
    c.isolate(leader)
    waiting = c.append(leader, b"1", b"2")
    assert c.responses[c.append(leader, b"3", b"4")].code is ResponseCode.LEADER_PENDING_FULL
    c.run(250)
    assert c.responses[waiting].code in (ResponseCode.WAIT_QUORUM_ACK_TIMEOUT, ResponseCode.TERM_CHANGED)


def test_read_index_confirms_leadership_first() -> None:
    c = ScriptedCluster(3, read_timeout_ms=200.0)
    leader = c.elect()
    c.append(leader, b"a")
    c.run(50)
    ok = c.responses[c.request(leader, "client_read", 0, 10, ReadMode.READ_INDEX)]
    assert isinstance(ok, ReadResponse) and ok.code is ResponseCode.SUCCESS
    assert [e.body for e in ok.entries] == [b"", b"a"]
    c.isolate(leader)
    rid = c.request(leader, "client_read", 0, 10, ReadMode.READ_INDEX)
    assert rid not in c.responses  # no quorum round, no answer
    c.run(150)
    late = c.responses.get(rid)
    assert late is None or late.code is not ResponseCode.SUCCESS


def test_committed_mode_serves_a_stale_read_from_a_partitioned_old_leader() -> None:
    c = ScriptedCluster(5, heartbeat_ms=100.0, heartbeat_leak=20)  # a long leak: 2 s
    old = c.elect()
    c.isolate(old)
    others = [n for n in c.names if n != old]
    for n in others:  # the majority gives up on the old leader quickly
        c.core(n)._follower_timeout = 0.0
    c.run_until(lambda: any(c.core(n).role is Role.LEADER for n in others))
    new = next(n for n in others if c.core(n).role is Role.LEADER)
    acked = c.responses[c.append(new, b"fresh")]
    c.run(50)
    assert acked.code is ResponseCode.SUCCESS
    assert c.core(old).role is Role.LEADER  # cut off, it does not know yet
    stale = c.responses[c.request(old, "client_read", 0, 100, ReadMode.COMMITTED)]
    assert isinstance(stale, ReadResponse) and stale.code is ResponseCode.SUCCESS
    assert b"fresh" not in [e.body for e in stale.entries]
    linear = c.request(old, "client_read", 0, 100, ReadMode.READ_INDEX)
    c.run(50)
    assert linear not in c.responses or c.responses[linear].code is not ResponseCode.SUCCESS


def test_unsafe_read_sees_uncommitted_entries_and_lease_needs_the_guard() -> None:
    c = ScriptedCluster(3)
    leader = c.elect()
    c.isolate(leader)
    c.append(leader, b"pending")
    unsafe = c.responses[c.request(leader, "client_read", 0, 10, ReadMode.UNSAFE)]
    assert b"pending" in [e.body for e in unsafe.entries]  # type: ignore[union-attr]
    committed = c.responses[c.request(leader, "client_read", 0, 10, ReadMode.COMMITTED)]
    assert b"pending" not in [e.body for e in committed.entries]  # type: ignore[union-attr]
    lease = c.responses[c.request(leader, "client_read", 0, 10, ReadMode.LEASE)]
    assert lease.code is ResponseCode.UNSUPPORTED


def test_lease_read_is_served_without_a_round_while_the_lease_holds() -> None:
    c = ScriptedCluster(3, config=CoreConfig(lease_guard=True))
    leader = c.elect()
    c.run(50)
    rounds = len(c.sent)
    ok = c.responses[c.request(leader, "client_read", 0, 10, ReadMode.LEASE)]
    assert ok.code is ResponseCode.SUCCESS and len(c.sent) == rounds  # no message needed


def test_a_leader_serves_lease_reads_only_with_the_guard_and_until_its_lease_runs_out() -> None:
    c = ScriptedCluster(3, config=CoreConfig(lease_guard=True))
    leader = c.elect()
    c.run(50)
    assert c.core(leader).serves_lease_reads(c.now)
    assert not any(c.core(n).serves_lease_reads(c.now) for n in c.names if n != leader)
    c.isolate(leader)
    c.run(c.config.timing.leader_lost_ms * 0.95)
    assert not c.core(leader).serves_lease_reads(c.now)  # its last quorum round is too old
    plain = ScriptedCluster(3)
    assert not plain.core(plain.elect()).serves_lease_reads(plain.now)


def test_leadership_transfer_hands_over_to_a_caught_up_peer() -> None:
    c = ScriptedCluster(3)
    old = c.elect()
    term = c.core(old).term
    to = next(n for n in c.names if n != old)
    rid = c.request(old, "client_transfer", to)
    assert c.responses.get(rid) is None or c.responses[rid].code is ResponseCode.SUCCESS
    c.run_until(lambda: rid in c.responses, 2000)
    done = c.responses[rid]
    assert isinstance(done, TransferResponse) and done.code is ResponseCode.SUCCESS
    assert c.leaders() == [to] and c.core(to).term > term


def test_transfer_to_an_unreachable_peer_gives_up_and_the_leader_resumes() -> None:
    c = ScriptedCluster(3, transfer_timeout_ms=300.0)
    leader = c.elect()
    to = next(n for n in c.names if n != leader)
    c.isolate(to)
    c.append(leader, b"x")  # the transferee falls behind
    rid = c.request(leader, "client_transfer", to)
    assert c.responses[c.append(leader, b"y")].code is ResponseCode.LEADER_TRANSFERRING
    c.run(350)
    assert c.responses[rid].code is ResponseCode.TIMEOUT
    assert c.leaders() == [leader]
    appended = c.append(leader, b"z")
    c.run(50)
    assert c.responses[appended].code is ResponseCode.SUCCESS


def test_a_leader_whose_transferee_was_told_to_campaign_serves_no_more_lease_reads() -> None:
    # the transferee's votes carry the transfer flag, which the lease guard lets through: it
    # may still win after the old leader gave up, so that leader's lease means nothing now
    c = ScriptedCluster(3, config=CoreConfig(lease_guard=True), transfer_timeout_ms=200.0)
    leader = c.elect()
    to = next(n for n in c.names if n != leader)
    c.filters.append(lambda sender, _r, _m: sender == to)  # its campaign is not heard
    rid = c.request(leader, "client_transfer", to)
    c.run_until(lambda: rid in c.responses, 1000)
    assert c.responses[rid].code is ResponseCode.TIMEOUT and c.leaders() == [leader]
    assert c.core(to).term > c.core(leader).term  # campaigning still
    rounds = len(c.sent)
    read = c.request(leader, "client_read", 0, 10, ReadMode.LEASE)
    c.run_until(lambda: read in c.responses, 200)
    assert c.responses[read].code is ResponseCode.SUCCESS
    assert len(c.sent) > rounds  # only after a heartbeat round, as a read-index read


def test_a_transferee_carries_the_transfer_flag_only_in_the_term_it_was_handed() -> None:
    # the flag passes the lease guard; in a later term another node may lead by now, with a
    # lease its followers' guards protect, so a later round asks like any candidate
    c = ScriptedCluster(3, config=CoreConfig(lease_guard=True), transfer_timeout_ms=2000.0)
    leader = c.elect()
    to, other = (n for n in c.names if n != leader)
    handed = c.core(leader).term + 1
    c.filters.append(lambda sender, _r, _m: sender == to)  # its campaign is not heard

    def asked() -> list[VoteRequest]:
        return [m for s, _p, m in c.sent if s == to and isinstance(m, VoteRequest)]

    c.request(leader, "client_transfer", to)
    c.run_until(lambda: any(m.term == handed for m in asked()), 1000)
    x = c.core(to)
    x.receive(other, VoteRequest(handed + 3, other, x.log.end_index, x.log.end_term, 1, True), c.now)
    c.drain(to)  # a higher term reached it: its next round is in a later term
    c.run_until(lambda: any(m.term > handed for m in asked()), 1000)
    assert {m.transfer for m in asked() if m.term == handed} == {True}
    assert {m.transfer for m in asked() if m.term > handed} == {False}


def test_a_transferee_refuses_equal_rivals_in_the_handed_term_only_even_past_the_timeout() -> None:
    # DLedger's isTakingLeadership holds while the node's term is the one handed over, with
    # no deadline: rule 9 still refuses there after the leader gave up; a later term grants
    c = ScriptedCluster(3, transfer_timeout_ms=100.0, take_leadership_min_vote_ms=1000.0,
                        take_leadership_max_vote_ms=1000.0)
    leader = c.elect()
    to, rival = (n for n in c.names if n != leader)
    handed = c.core(leader).term + 1
    c.request(leader, "client_transfer", to)
    c.run_until(lambda: c.core(to).term == handed, 500)
    c.isolate(to)  # it waits out its vote interval unheard, having voted for nobody
    c.run(300)
    x = c.core(to)
    assert x.vote_for is None and x.role is Role.CANDIDATE

    def answer(term: int) -> VoteResult:
        x.receive(rival, VoteRequest(term, rival, x.log.end_index, x.log.end_term, term, False), c.now)
        c.drain(to)
        return next(m.result for s, p, m in reversed(c.sent) if s == to and isinstance(m, VoteResponse))

    assert answer(handed) is VoteResult.REJECT_TAKING_LEADERSHIP
    assert answer(handed + 1) is VoteResult.REJECT_TERM_NOT_READY
    c.run(c.tick_ms)  # it raises its term to the rival's
    assert x.term == handed + 1 and answer(handed + 1) is VoteResult.ACCEPT


def test_a_transfer_that_gave_up_before_the_transferee_heard_of_it_keeps_the_lease() -> None:
    c = ScriptedCluster(3, config=CoreConfig(lease_guard=True), transfer_timeout_ms=200.0)
    leader = c.elect()
    to = next(n for n in c.names if n != leader)
    c.isolate(to)
    c.append(leader, b"x")  # the transferee falls behind, so it is never told to campaign
    rid = c.request(leader, "client_transfer", to)
    c.run_until(lambda: rid in c.responses, 1000)
    assert c.responses[rid].code is ResponseCode.TIMEOUT
    c.run(50)
    rounds = len(c.sent)
    ok = c.responses[c.request(leader, "client_read", 0, 10, ReadMode.LEASE)]
    assert ok.code is ResponseCode.SUCCESS and len(c.sent) == rounds


def test_transfer_refusals() -> None:
    c = ScriptedCluster(3)
    leader = c.elect()
    follower = next(n for n in c.names if n != leader)
    assert c.responses[c.request(leader, "client_transfer", "x9")].code is ResponseCode.UNKNOWN_MEMBER
    assert c.responses[c.request(follower, "client_transfer", leader)].code is ResponseCode.NOT_LEADER


def test_preferred_leader_takes_over_when_caught_up() -> None:
    c = ScriptedCluster(3, config=CoreConfig(preferred_leader="n3"))
    c.run_until(lambda: c.leaders() == ["n3"], 5000)


def test_sync_flush_leader_counts_only_its_flushed_entries() -> None:
    c = ScriptedCluster(1)
    leader = c.elect()
    c.auto_flush[leader] = False
    rid = c.append(leader, b"a")
    c.run(50)
    assert rid not in c.responses and c.core(leader).commit_index < c.stores[leader].end_index
    c.flush(leader)
    assert c.responses[rid].code is ResponseCode.SUCCESS


def test_sync_flush_followers_ack_only_flushed_entries() -> None:
    c = ScriptedCluster(3)
    leader = c.elect()
    for n in c.names:
        if n != leader:
            c.auto_flush[n] = False
    rid = c.append(leader, b"a")
    c.run(50)
    assert rid not in c.responses
    follower = next(n for n in c.names if n != leader)
    c.flush(follower)
    c.deliver()
    assert c.responses[rid].code is ResponseCode.SUCCESS


def test_async_flush_acks_before_any_flush() -> None:
    c = ScriptedCluster(3, config=CoreConfig(ack=Ack.WRITTEN))
    leader = c.elect()
    for n in c.names:
        c.auto_flush[n] = False
    rid = c.append(leader, b"a")
    c.run(20)
    assert c.responses[rid].code is ResponseCode.SUCCESS
    assert all(s.flushed_index < s.end_index for s in c.stores.values())


def test_restart_keeps_term_and_vote_and_does_not_lead_its_old_term_again() -> None:
    c = ScriptedCluster(3)
    leader = c.elect()
    term = c.core(leader).term
    assert c.persisted[leader] == (term, leader)
    c.crash(leader)
    c.start(leader)
    c.run(100)
    assert c.core(leader).term >= term
    c.run_until(lambda: len(c.leaders()) == 1)
    assert c.core(c.leaders()[0]).term > term


def test_leader_steps_down_on_any_reply_with_a_higher_term() -> None:
    # DLedger master (issues #247/#325): older versions ignored it and stayed stuck
    c = ScriptedCluster(3)
    leader = c.elect()
    core = c.core(leader)
    term = core.term
    follower = next(n for n in c.names if n != leader)
    core.receive(follower, HeartbeatResponse(term + 3, ResponseCode.EXPIRED_TERM, 1), c.now)
    c.drain(leader)
    assert core.role is Role.CANDIDATE
    c.run(10)
    assert core.term == term + 3  # adopted at its next round, without campaigning yet
    assert c.persisted[leader] == (term + 3, None)


def test_leader_hearing_of_another_leader_in_its_term_becomes_candidate() -> None:
    c = ScriptedCluster(3)
    leader = c.elect()
    core = c.core(leader)
    others = [n for n in c.names if n != leader]
    c.isolate(leader)  # only the forged answers below reach it
    c.run(c.config.timing.heartbeat_ms)
    seq = core._confirm.last_seq
    for n in others:
        core.receive(n, HeartbeatResponse(core.term, ResponseCode.INCONSISTENT_LEADER, seq), c.now)
    assert core.role is Role.CANDIDATE and core.term == c.persisted[leader][0]


def test_leader_resends_heartbeats_at_once_when_followers_are_not_ready() -> None:
    c = ScriptedCluster(3)
    leader = c.elect()
    core = c.core(leader)
    c.isolate(leader)
    c.run(c.config.timing.heartbeat_ms)
    seq = core._confirm.last_seq
    for n in c.names:
        if n != leader:
            core.receive(n, HeartbeatResponse(core.term, ResponseCode.TERM_NOT_READY, seq), c.now)
    c.drain(leader)
    before = len(c.sent)
    c.run(c.tick_ms)
    assert any(isinstance(m, HeartbeatRequest) for _s, _r, m in c.sent[before:])
    assert core.role is Role.LEADER


def test_isolated_candidate_keeps_its_term_across_many_rounds() -> None:
    c = ScriptedCluster(3, down=("n2", "n3"))
    c.run(5000)
    core = c.core("n1")
    assert core.role is Role.CANDIDATE and core.term == 0  # parse rule 3: never bumped


def test_a_restarted_node_never_leads_again_a_term_it_may_have_led() -> None:
    """Found by the simulator's election-safety check (seed 1403, 7 nodes): a candidate that
    had voted for another node won its term on the others' votes alone; restarted with that
    vote it campaigned in the same term, got the same votes and led it a second time. Now a
    round passes only with the candidate's own vote, so n1 (voted for n2 in term 5, which
    n2 and n3 granted it) must lead a later term, not term 5."""
    c = ScriptedCluster(3, terms={"n1": (5, "n2"), "n2": (5, "n1"), "n3": (5, "n1")})
    leader = c.elect()
    assert c.core(leader).term > 5


def test_a_restarted_node_that_voted_for_itself_campaigns_only_in_a_later_term() -> None:
    c = ScriptedCluster(3, terms={"n1": (5, "n1"), "n2": (5, None), "n3": (5, None)}, down=("n2", "n3"))
    c.run(1000)  # alone: n1 campaigns, and must not ask for votes in term 5
    asked = {m.term for s, _, m in c.sent if s == "n1" and isinstance(m, VoteRequest)}
    assert asked and min(asked) > 5


def test_a_restarted_node_does_not_stand_while_the_lease_it_confirmed_may_hold() -> None:
    """Found by the simulator (seed 1128, 3 nodes, issue 33): n2 acknowledged the leader's
    heartbeat (keeping its lease alive), crashed, restarted having voted for itself in the
    leader's term, campaigned at once in the next term and won with the vote of a node cut
    off from the leader (its guard had run out), while the old leader still served lease
    reads. A restarted node keeps out of elections, its own included, for one lease period."""
    c = ScriptedCluster(3, config=CoreConfig(lease_guard=True))
    leader = c.elect()
    restarted, other = (n for n in c.names if n != leader)
    c.blocked |= {(leader, other), (other, leader)}
    c.run(c.config.timing.leader_lost_ms * 2)  # `other`'s guard runs out; `restarted` confirms the lease
    term, old = c.core(leader).term, c.core(leader)
    c.crash(restarted)
    c.append(leader, b"tail")  # the leader's log is longer: it does not vote for `restarted`
    c.persisted[restarted] = (term, restarted)  # it had stood in the leader's term and lost
    c.start(restarted)
    lease_until = c.now
    while old.serves_lease_reads(lease_until):  # asks only; changes nothing
        lease_until += 1.0
    assert lease_until > c.now + 50
    while c.now < lease_until:
        c.run(c.tick_ms)
        assert c.leaders() in ([], [leader]), f"{c.describe()} before {leader}'s lease ends at {lease_until}"


def test_a_follower_within_its_leaders_lease_refuses_a_higher_term_candidate() -> None:
    """The voters' lease guard: n1 lost its election, restarts cut off from the leader, waits
    out its own guard and stands in the next term; the follower that still hears the leader
    must refuse it while the leader's lease holds (granting, it would let n1 lead beside a
    lease). The simulator reaches this state about once in 300 seeds (tests/sim/test_guards.py)."""
    c = ScriptedCluster(3, config=CoreConfig(lease_guard=True))
    leader = c.elect()
    restarted = next(n for n in c.names if n != leader)
    term = c.core(leader).term
    c.crash(restarted)
    c.blocked |= {(leader, restarted), (restarted, leader)}
    c.persisted[restarted] = (term, restarted)
    c.start(restarted)
    c.run_until(lambda: c.core(restarted).term > term, 2000)  # it stands once its own guard ran out
    c.run(c.config.timing.leader_lost_ms * 2)
    assert c.leaders() == [leader] and c.core(leader).serves_lease_reads(c.now), c.describe()


def test_a_vote_granted_in_another_term_is_not_counted_even_with_the_rounds_seq() -> None:
    """Found by the simulator (seed 13755440, 3 nodes, issue 33's 20,000-seed sweep): n1 asked
    n3 for its vote in term 5, restarted (its request numbers start again), and in term 7 sent
    a round that reused the number; n3, paused, woke and granted the term-5 request, and n1
    counted that grant for term 7 and led it beside n2. A grant counts only in its own term."""
    c = ScriptedCluster(3, down=("n2", "n3"))
    c.run(1000)
    candidate = c.core("n1")
    round_term = candidate.term
    asked = [m for s, _, m in c.sent if s == "n1" and isinstance(m, VoteRequest) and m.term == round_term]
    seq = max(m.seq for m in asked)
    candidate.receive("n2", VoteResponse(round_term - 1, VoteResult.ACCEPT, seq), c.now)
    c.drain("n1")
    assert candidate.role is Role.CANDIDATE
    candidate.receive("n2", VoteResponse(round_term, VoteResult.ACCEPT, seq), c.now)
    c.drain("n1")
    assert candidate.role is Role.LEADER  # the same grant in the round's own term counts
